/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Kernel interfaces newer than Debian 12's headers, spelled out here with
 * the values of the running ABI.  RWF_DONTCACHE is 0x80 since Linux 6.14;
 * older headers or tools may carry other values for that name (0x40 is
 * RWF_ATOMIC), so dcfs never takes it from a library.
 */
#ifndef DCFS_SYS_H
#define DCFS_SYS_H

#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define DCFS_RWF_DONTCACHE 0x00000080
#define DCFS_NR_CACHESTAT 451

struct dcfs_cachestat_range {
	uint64_t off;
	uint64_t len; /* 0: to the end of the file */
};

struct dcfs_cachestat {
	uint64_t nr_cache;
	uint64_t nr_dirty;
	uint64_t nr_writeback;
	uint64_t nr_evicted;
	uint64_t nr_recently_evicted;
};

/* Resident pages of [off, off + len) of fd, or -errno. */
static inline long dcfs_cachestat(int fd, uint64_t off, uint64_t len, struct dcfs_cachestat *cs)
{
	struct dcfs_cachestat_range r = { off, len };
	long ret = syscall(DCFS_NR_CACHESTAT, fd, &r, cs, 0);

	return ret < 0 ? -errno : 0;
}

#endif
