/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The streaming I/O engine: capability probes, the fallback window,
 * FUSE cache invalidation and counters.
 */
#ifndef DCFS_IO_H
#define DCFS_IO_H

#include <stdio.h>
#include <sys/uio.h>

#include "dcfs.h"

enum probe_state { PROBE_UNKNOWN, PROBE_YES, PROBE_NO };

/* What one backing filesystem (st_dev) answered to RWF_DONTCACHE. */
struct probe {
	dev_t dev;
	char fstype[16];
	_Atomic int rd; /* enum probe_state */
	_Atomic int wr;
};

/* probe.c */
struct probe *probe_get(int fd);
struct probe *probe_dir(int dirfd);
ssize_t uncached_pread(struct probe *p, int fd, void *buf, size_t len,
		       off_t off);
ssize_t uncached_pwrite(struct probe *p, int fd, const void *buf, size_t len,
			off_t off);
size_t probe_snapshot(struct probe *out, size_t max);
const char *probe_state_name(int s);

/* fallback.c */
ssize_t fallback_read(struct dcfs_file *f, void *buf, size_t len, off_t off);
ssize_t fallback_write(struct dcfs_file *f, const void *buf, size_t len,
		       off_t off);
void fallback_finish(struct dcfs_file *f);
void drop_written(struct dcfs_file *f, off_t lo, off_t hi);

/* notify.c */
int notify_start(struct fuse_session *se);
void notify_stop(void);
void notify_inval(fuse_ino_t ino, off_t off, off_t len);

/* io_select.c */
void set_uncached_flags(struct dcfs_file *f, int policy);
struct dcfs_decision;
struct dcfs_config;
int policy_for_inode(fuse_req_t req, struct dcfs_inode *inode, int64_t size,
		     bool writable, struct dcfs_decision *d,
		     struct dcfs_config **cfgp);

/* stats.c */
enum stat_kind {
	ST_OPENED,
	ST_READ_DONTCACHE,
	ST_WRITE_DONTCACHE,
	ST_READ_FALLBACK,
	ST_WRITE_FALLBACK,
	ST_READ_CACHED,
	ST_WRITE_CACHED,
	ST_SWITCHED,
	ST_PASSTHROUGH, /* opens whose I/O the kernel does (passthrough.c) */
	ST__COUNT
};
void stats_add(int policy, enum stat_kind k, uint64_t n);
void stats_io(struct dcfs_file *f, enum stat_kind k, uint64_t n);
int stats_file_open(fuse_req_t req, struct dcfs_file *f,
		    const struct dcfs_decision *d);
void stats_file_close(struct dcfs_file *f);
char *stats_json(void);
char *stats_table(void);
char *stats_prometheus(void);
char *stats_files(uid_t who);

/* caps.c */
void caps_log_startup(void);

/* passthrough.c */
void passthrough_json(FILE *out);
void passthrough_table(FILE *out);

#endif
