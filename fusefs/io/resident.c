// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Which pages of a backing file are in the page cache, asked before dcfs
 * drops anything: the fallback (fallback.c) and the switch of auto handles
 * (io_stream.c) leave alone the pages that someone else brought in.
 *
 * cachestat(2) answers for a range without a mapping, but came only in
 * Linux 6.5; on older kernels (Debian 12's 6.1) it is ENOSYS, and without
 * another answer every such page would be taken for the stream's own and
 * dropped (the kernel matrix's shared-pages stage: a film another reader
 * had cached, 0 of 16384 pages left after a stream through dcfs on 6.1).
 * There mincore(2) on a shared read-only mapping of the range answers; the
 * mapping faults nothing in.  It needs a readable descriptor: a write-only
 * handle's fd is reopened read-only through /proc/self/fd, which is the
 * same open file (no name is looked up).  Where no answer can be had, every
 * page counts as resident: keeping someone's pages matters more than
 * dropping the stream's (as mincore itself answers for a file the caller
 * may neither write nor owns).
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"
#include "dcfs_sys.h"

#define PAGE 4096
#define CHUNK_PAGES 4096 /* mincore vector per call: 16 MiB of file */

/* 1: cachestat works, 0: ENOSYS (decided by the first call), -1: unknown */
static _Atomic int have_cachestat = -1;

static bool use_cachestat(int fd, off_t off, off_t len, struct dcfs_cachestat *cs, long *err)
{
	if (atomic_load(&have_cachestat) == 0)
		return false;
	*err = dcfs_cachestat(fd, (uint64_t)off, (uint64_t)len, cs);
	if (*err == -ENOSYS) {
		atomic_store(&have_cachestat, 0);
		return false;
	}
	atomic_store(&have_cachestat, 1);
	return true;
}

/* A shared read-only mapping of [lo, lo + len) of fd (lo page-aligned). */
static void *map_range(int fd, off_t lo, size_t len)
{
	char path[64];
	void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, lo);
	int rfd;

	if (map != MAP_FAILED || (errno != EACCES && errno != EBADF))
		return map;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME);
	if (rfd < 0 && errno == EPERM)
		rfd = open(path, O_RDONLY | O_CLOEXEC);
	if (rfd < 0)
		return MAP_FAILED;
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, rfd, lo);
	close(rfd);
	return map;
}

/*
 * mincore(2) over [lo, hi) (page-aligned): fn for each run of resident
 * pages, or -errno (nothing called) if the range cannot be mapped.
 */
static int mincore_runs(int fd, off_t lo, off_t hi, void (*fn)(void *, off_t, off_t), void *arg,
			long long *count)
{
	unsigned char vec[CHUNK_PAGES];
	size_t len = (size_t)(hi - lo);
	off_t run = -1;
	char *map;

	map = map_range(fd, lo, len);
	if (map == MAP_FAILED)
		return -errno;
	for (size_t at = 0; at < len; at += (size_t)CHUNK_PAGES * PAGE) {
		size_t n = len - at < (size_t)CHUNK_PAGES * PAGE ? len - at
								 : (size_t)CHUNK_PAGES * PAGE;
		size_t pages = n / PAGE;

		if (mincore(map + at, n, vec) < 0)
			memset(vec, 1, pages);
		for (size_t i = 0; i < pages; i++) {
			off_t p = lo + (off_t)(at + i * PAGE);

			if (vec[i] & 1) {
				(*count)++;
				if (run < 0)
					run = p;
			} else if (run >= 0) {
				if (fn)
					fn(arg, run, p);
				run = -1;
			}
		}
	}
	if (run >= 0 && fn)
		fn(arg, run, hi);
	munmap(map, len);
	return 0;
}

static off_t end_of(int fd, off_t off, off_t len)
{
	struct stat st;

	if (len)
		return off + len;
	return fstat(fd, &st) == 0 && st.st_size > off ? st.st_size : off;
}

/* "cachestat" or "mincore": how this kernel is asked (probed once). */
const char *resident_method(void)
{
	struct dcfs_cachestat cs;
	long err;

	if (atomic_load(&have_cachestat) < 0)
		use_cachestat(-1, 0, 0, &cs, &err);
	return atomic_load(&have_cachestat) ? "cachestat" : "mincore";
}

long long resident_count(int fd, off_t off, off_t len)
{
	struct dcfs_cachestat cs;
	long long count = 0;
	off_t lo, hi;
	long err;

	if (use_cachestat(fd, off, len, &cs, &err))
		return err < 0 ? err : (long long)cs.nr_cache;
	lo = off & ~(off_t)(PAGE - 1);
	hi = (end_of(fd, off, len) + PAGE - 1) & ~(off_t)(PAGE - 1);
	if (hi <= lo)
		return 0;
	err = mincore_runs(fd, lo, hi, NULL, NULL, &count);
	return err < 0 ? (hi - lo) / PAGE : count;
}

void resident_runs(int fd, off_t off, off_t len, void (*fn)(void *arg, off_t lo, off_t hi),
		   void *arg)
{
	struct dcfs_cachestat cs;
	long long count = 0;
	off_t lo = off & ~(off_t)(PAGE - 1), hi = (off + len + PAGE - 1) & ~(off_t)(PAGE - 1);
	long err;

	if (len <= 0)
		return;
	if (use_cachestat(fd, lo, hi - lo, &cs, &err)) {
		if (err == 0 && cs.nr_cache == 0)
			return;
		if (err < 0) {
			fn(arg, lo, hi);
			return;
		}
		/* Rare (the file is shared): find the pages one by one. */
		for (off_t p = lo; p < hi; p += PAGE)
			if (dcfs_cachestat(fd, (uint64_t)p, PAGE, &cs) == 0 && cs.nr_cache)
				fn(arg, p, p + PAGE);
		return;
	}
	if (mincore_runs(fd, lo, hi, fn, arg, &count) < 0)
		fn(arg, lo, hi);
}

/*
 * Where the pages of fd past which none are resident (dirty false) or
 * dirty or under writeback (dirty true) end, to step bytes, by bisection
 * with cachestat(2) of [k * step, EOF): the front a stream the kernel
 * serves has reached (dropbehind.c, writebehind.c).  0 where cachestat
 * cannot answer: those callers need it and have checked it at their start.
 */
off_t resident_end(int fd, off_t size, off_t step, bool dirty)
{
	off_t lo = 0, hi = (size + step - 1) / step;

	while (lo < hi) {
		off_t mid = lo + (hi - lo) / 2;
		struct dcfs_cachestat cs;
		uint64_t n = 0;

		if (dcfs_cachestat(fd, (uint64_t)(mid * step), 0, &cs) == 0)
			n = dirty ? cs.nr_dirty + cs.nr_writeback : cs.nr_cache;
		if (n == 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo * step;
}
