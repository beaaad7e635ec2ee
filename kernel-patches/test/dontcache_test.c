// SPDX-License-Identifier: GPL-2.0
/*
 * RWF_DONTCACHE on F2FS: functional test run inside the UML guest.
 *
 *   dontcache_test control MNT        unpatched kernel: expect EOPNOTSUPP
 *   dontcache_test run MNT DEV SYSFS HOSTDIR
 *                                     patched kernel: the full test
 *   dontcache_test stream FILE MIB write|read|both [BACKING]
 *                                     write FILE (plain writes, 1 MiB
 *                                     requests) and/or read it back/verify;
 *                                     BACKING: wait for 0 resident pages in
 *                                     it before closing FILE
 *   dontcache_test resident FILE SECS wait until FILE has 0 resident pages
 *   dontcache_test quick MNT          the write/read/append residency checks
 *                                     only (no remount, no sysfs knobs)
 *   dontcache_test race MNT DEV ROUNDS
 *                                     uncached writes racing unlink,
 *                                     truncate and umount (for KASAN and
 *                                     lockdep; passes if nothing fails and
 *                                     the kernel log stays clean)
 *   dontcache_test nowaitblock MNT    B4: RWF_NOWAIT uncached writes while
 *                                     another writeback holds F2FS's
 *                                     writepages mutex (slow null_blk)
 *   dontcache_test gcwork MNT DEV ROUNDS
 *                                     write, delete, checkpoint and
 *                                     foreground-GC workload (F2FS), with a
 *                                     remount and a data check per round
 *
 * MNT is an F2FS mount of DEV (mounted by the caller); SYSFS is the
 * /sys/fs/f2fs/<dev> directory of that mount.
 *
 * "run" first switches the periodic writeback flusher off for the test's
 * lifetime (dirty_writeback_centisecs = 0, dirty_expire_centisecs and the
 * background threshold raised) and checks that plain buffered writes then
 * stay dirty.  Every "0 pages resident" check after an RWF_DONTCACHE write
 * therefore only passes if the write itself started the writeback (the
 * kick in generic_write_sync()) and its completion dropped the folios.  Output is one line per check
 * and a closing "N passed, N failed" line; the exit status is 0 only if
 * nothing failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <pthread.h>

#include "kt_common.h"

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif
#ifndef FS_COMPR_FL
#define FS_COMPR_FL 0x00000004
#endif

#define KIB 1024UL
#define MIB (1024UL * 1024UL)
#define FILE_SIZE (8 * MIB)
#define PAGE 4096UL

static const char *mnt;
static const char *fstype = "f2fs";	/* for verify_after_remount() */

/* deterministic content: 8-byte words derived from seed and file offset */
static void fill(unsigned char *buf, size_t len, uint64_t off, uint64_t seed)
{
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t v = mix64(seed * 0x100000001b3ULL ^ ((off + i) / 8));

		memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
	}
}

static uint64_t fnv(const unsigned char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (len--)
		h = (h ^ *p++) * 0x100000001b3ULL;
	return h;
}

static int cachestat(int fd, struct cs_stat *cs)
{
	return cachestat_range(fd, 0, 0, cs);
}

static uint64_t resident(int fd)
{
	struct cs_stat cs;

	if (cachestat(fd, &cs))
		die("cachestat");
	return cs.nr_cache;
}

/*
 * One more uncached request on the file system of @fd: a 4 KiB
 * RWF_DONTCACHE write to a file of its own next to it.  Each uncached
 * write asks the flusher for one pass sized by the dirty drop-behind
 * count (patch 26, as upstream); older inodes can use such a pass up (a
 * buffer_head file system's metadata in the block device inode, redirtied
 * by every append), and then what the last request left waits for the
 * next request or for periodic writeback.
 */
static void one_more_request(int fd)
{
	static unsigned char b[4096] __attribute__((aligned(4096)));
	char link[64], dir[4096], p[4200];
	struct iovec iov = { b, sizeof(b) };
	ssize_t n;
	int nfd;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, dir, sizeof(dir) - 1);
	if (n <= 0)
		return;
	dir[n] = 0;
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = 0;
	snprintf(p, sizeof(p), "%s/.one-more-request", dir);
	nfd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (nfd < 0)
		return;
	if (pwritev2(nfd, &iov, 1, 0, RWF_DONTCACHE) < 0)
		perror("one more request");
	close(nfd);
	unlink(p);
}

/*
 * Dropping is asynchronous (writeback completion): poll with a deadline.
 * Dirty pages still there at the deadline are what the last request's
 * flusher pass left (see one_more_request()): they get one more uncached
 * request and as long again, and a note says so.  (With periodic
 * writeback on, kupdate would also write them, dirty_expire_centisecs
 * after they were dirtied.)
 */
static int wait_resident(int fd, uint64_t want, double timeout, double *took,
			 struct cs_stat *last)
{
	double t0 = now();
	int asked = 0;

	for (;;) {
		if (cachestat(fd, last))
			die("cachestat");
		if (last->nr_cache == want) {
			*took = now() - t0;
			if (asked)
				printf("note: written back after one more uncached request\n");
			return 1;
		}
		if (now() - t0 > timeout * (asked + 1)) {
			if (asked || want || !last->nr_dirty)
				return 0;
			printf("note: %llu dirty pages left after %.0f s: one more uncached request\n",
			       (unsigned long long)last->nr_dirty, timeout);
			one_more_request(fd);
			asked = 1;
		}
		usleep(20000);
	}
}

static char *path(const char *name)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf), "%s/%s", mnt, name);
	return buf;
}

static ssize_t rw2(int fd, void *buf, size_t len, off_t off, int flags,
		   int write)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	return write ? pwritev2(fd, &iov, 1, off, flags) :
		       preadv2(fd, &iov, 1, off, flags);
}

/* write model[off, off+len) with requests of reqsz bytes */
static int do_write(int fd, const unsigned char *model, size_t off, size_t len,
		    size_t reqsz, int flags)
{
	size_t done;

	for (done = 0; done < len; done += reqsz) {
		size_t n = len - done < reqsz ? len - done : reqsz;
		ssize_t r = rw2(fd, (void *)(model + off + done), n,
				off + done, flags, 1);

		if (r != (ssize_t)n) {
			printf("  pwritev2(off=%zu, len=%zu, flags=%#x) = %zd: %s\n",
			       off + done, n, flags, r, strerror(errno));
			return 0;
		}
	}
	return 1;
}

/* read the whole file with reqsz requests and compare with model */
static int do_read_verify(int fd, const unsigned char *model, size_t size,
			  size_t reqsz, int flags)
{
	unsigned char *buf = malloc(reqsz);
	size_t off;
	int ok = 1;

	if (!buf)
		die("malloc");
	for (off = 0; off < size; off += reqsz) {
		size_t n = size - off < reqsz ? size - off : reqsz;
		ssize_t r = rw2(fd, buf, n, off, flags, 0);

		if (r != (ssize_t)n) {
			printf("  preadv2(off=%zu, len=%zu, flags=%#x) = %zd: %s\n",
			       off, n, flags, r, strerror(errno));
			ok = 0;
			break;
		}
		if (memcmp(buf, model + off, n)) {
			printf("  data mismatch in [%zu, %zu)\n", off, off + n);
			ok = 0;
			break;
		}
	}
	free(buf);
	return ok;
}

struct tfile {
	char name[64];
	unsigned char *model;
	size_t size;
};

static struct tfile files[64];
static int nfiles;

static struct tfile *new_file(const char *name, size_t size)
{
	struct tfile *f = &files[nfiles++];

	snprintf(f->name, sizeof(f->name), "%s", name);
	f->size = size;
	f->model = calloc(1, size);
	if (!f->model)
		die("calloc");
	return f;
}

static int open_file(const char *name, int flags)
{
	int fd = open(path(name), flags, 0644);

	if (fd < 0)
		die(path(name));
	return fd;
}

static int expect_eopnotsupp(int fd, int write, const char *what)
{
	char buf[4096];
	ssize_t r;

	memset(buf, 0x5a, sizeof(buf));
	r = rw2(fd, buf, sizeof(buf), 0, RWF_DONTCACHE, write);
	check(r < 0 && errno == EOPNOTSUPP, "%s %s with RWF_DONTCACHE -> %s",
	      what, write ? "pwritev2" : "preadv2",
	      r < 0 ? strerror(errno) : "success");
	return r < 0 && errno == EOPNOTSUPP;
}

static int control(const char *what)
{
	int fd = open_file("control", O_RDWR | O_CREAT | O_TRUNC);
	char buf[4096] = { 0 };

	if (write(fd, buf, sizeof(buf)) != sizeof(buf))
		die("write");
	expect_eopnotsupp(fd, 1, what);
	expect_eopnotsupp(fd, 0, what);
	close(fd);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* RWF_DONTCACHE write then read of a whole file with one request size */
static void test_size(size_t reqsz)
{
	struct tfile *f;
	struct cs_stat cs;
	double t0, t;
	char name[64];
	int fd, ok;

	snprintf(name, sizeof(name), "w_%zu", reqsz);
	f = new_file(name, FILE_SIZE);
	fill(f->model, f->size, 0, reqsz);
	fd = open_file(name, O_RDWR | O_CREAT | O_TRUNC);

	t0 = now();
	ok = do_write(fd, f->model, 0, f->size, reqsz, RWF_DONTCACHE);
	t = now() - t0;
	check(ok, "%7zu B requests: RWF_DONTCACHE write of %lu MiB (%.2fs)",
	      reqsz, f->size / MIB, t);
	ok = wait_resident(fd, 0, 10, &t, &cs);
	check(ok, "%7zu B requests: 0 pages resident after write+writeback "
	      "(took %.2fs; cache=%llu dirty=%llu wb=%llu)", reqsz,
	      ok ? t : -1.0, (unsigned long long)cs.nr_cache,
	      (unsigned long long)cs.nr_dirty,
	      (unsigned long long)cs.nr_writeback);

	ok = do_read_verify(fd, f->model, f->size, reqsz, RWF_DONTCACHE);
	check(ok, "%7zu B requests: RWF_DONTCACHE read returns the data",
	      reqsz);
	ok = wait_resident(fd, 0, 30, &t, &cs);
	check(ok, "%7zu B requests: 0 pages resident after read "
	      "(cache=%llu)", reqsz, (unsigned long long)cs.nr_cache);
	close(fd);
}

/* pages that were cached before an uncached read must stay cached */
static void test_cached_stay(void)
{
	struct tfile *f = new_file("cached", 4 * MIB);
	size_t pages = f->size / PAGE;
	uint64_t r;
	int fd, ok;

	fill(f->model, f->size, 0, 777);
	fd = open_file(f->name, O_RDWR | O_CREAT | O_TRUNC);
	if (!do_write(fd, f->model, 0, f->size, MIB, 0) || fsync(fd))
		die("cached: write");
	ok = do_read_verify(fd, f->model, f->size, 64 * KIB, 0);
	r = resident(fd);
	check(ok && r == pages, "cached file fully resident before test "
	      "(%llu/%zu pages)", (unsigned long long)r, pages);

	ok = do_read_verify(fd, f->model, f->size, 64 * KIB, RWF_DONTCACHE);
	r = resident(fd);
	check(ok && r == pages, "RWF_DONTCACHE read of a cached file keeps "
	      "it cached (%llu/%zu pages)", (unsigned long long)r, pages);

	/* drop the second half: only the first half must stay */
	posix_fadvise(fd, f->size / 2, f->size / 2, POSIX_FADV_DONTNEED);
	r = resident(fd);
	check(r == pages / 2, "half of the file evicted with "
	      "FADV_DONTNEED (%llu/%zu pages)", (unsigned long long)r, pages);
	ok = do_read_verify(fd, f->model, f->size, 128 * KIB, RWF_DONTCACHE);
	r = resident(fd);
	check(ok && r == pages / 2, "RWF_DONTCACHE read keeps the cached half "
	      "and drops the half it brought in (%llu/%zu pages)",
	      (unsigned long long)r, pages / 2);

	/* a cached read of uncached data keeps what it reads */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	ok = do_read_verify(fd, f->model, f->size, 64 * KIB, 0);
	r = resident(fd);
	check(ok && r == pages, "normal read after eviction caches the file "
	      "again (%llu/%zu pages)", (unsigned long long)r, pages);
	close(fd);
}

/* RWF_DONTCACHE overwrite of a range that is dirty in the page cache */
static void test_overwrite_dirty(void)
{
	struct tfile *f = new_file("dirty", 4 * MIB);
	int fd, ok;

	fill(f->model, f->size, 0, 1001);
	fd = open_file(f->name, O_RDWR | O_CREAT | O_TRUNC);
	if (!do_write(fd, f->model, 0, f->size, MIB, 0))
		die("dirty: write");
	/* pages are dirty now; overwrite the middle, unaligned */
	fill(f->model + MIB + 1000, 2 * MIB, MIB + 1000, 1002);
	ok = do_write(fd, f->model, MIB + 1000, 2 * MIB, 48 * KIB,
		      RWF_DONTCACHE);
	ok = ok && do_read_verify(fd, f->model, f->size, 256 * KIB, 0);
	check(ok, "RWF_DONTCACHE overwrite of dirty pages reads back right");
	ok = do_read_verify(fd, f->model, f->size, 256 * KIB, RWF_DONTCACHE);
	check(ok, "... and through RWF_DONTCACHE reads");
	close(fd);
}

/*
 * Rewrite ranges while their (drop-behind) writeback is in flight, with both
 * uncached and normal writes, so that folios get redirtied around the time
 * their writeback completes.  None of these writes may be lost.
 */
static void test_overwrite_writeback(void)
{
	struct tfile *f = new_file("writeback", 2 * MIB);
	int fd, i, ok = 1;

	fill(f->model, f->size, 0, 2000);
	fd = open_file(f->name, O_RDWR | O_CREAT | O_TRUNC);
	ok = do_write(fd, f->model, 0, f->size, MIB, RWF_DONTCACHE);
	for (i = 0; ok && i < 200; i++) {
		size_t off = (size_t)(mix64(i) % (f->size / PAGE - 64)) * PAGE;
		size_t len = (1 + mix64(i + 7) % 48) * PAGE;
		size_t req = (i % 3 == 0) ? PAGE : 16 * KIB;
		int flags = (i % 4 == 3) ? 0 : RWF_DONTCACHE;

		if (i % 5 == 0)
			off += mix64(i + 3) % PAGE;	/* unaligned */
		if (off + len > f->size)
			len = f->size - off;
		fill(f->model + off, len, off, 3000 + i);
		ok = do_write(fd, f->model, off, len, req, flags);
		/* start writeback of that range now, don't wait */
		if (i % 2)
			sync_file_range(fd, off, len, SYNC_FILE_RANGE_WRITE);
	}
	check(ok, "200 rewrites of ranges under writeback succeed");
	ok = do_read_verify(fd, f->model, f->size, 64 * KIB, 0);
	check(ok, "rewrites under writeback read back right before remount");
	close(fd);
}

/* overwrite in place (IPU) so the in-place-update bio paths are used */
static void test_ipu(const char *sysfs)
{
	char p[512], old[32] = "";
	struct tfile *f = new_file("ipu", 4 * MIB);
	struct cs_stat cs;
	double t;
	int fd, sfd, ok;
	ssize_t n;

	fill(f->model, f->size, 0, 4000);
	fd = open_file(f->name, O_RDWR | O_CREAT | O_TRUNC);
	if (!do_write(fd, f->model, 0, f->size, MIB, 0) || fsync(fd))
		die("ipu: write");
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);

	snprintf(p, sizeof(p), "%s/ipu_policy", sysfs);
	sfd = open(p, O_RDWR);
	if (sfd < 0)
		die(p);
	n = read(sfd, old, sizeof(old) - 1);
	old[n > 0 ? n : 0] = 0;
	/* F2FS_IPU_FORCE: update every overwritten block in place */
	if (pwrite(sfd, "1", 1, 0) != 1)
		die("ipu_policy");

	fill(f->model, f->size, 0, 4001);
	ok = do_write(fd, f->model, 0, f->size, 64 * KIB, RWF_DONTCACHE);
	check(ok, "RWF_DONTCACHE in-place overwrite (ipu_policy=force)");
	ok = wait_resident(fd, 0, 60, &t, &cs);
	check(ok, "0 pages resident after in-place overwrite "
	      "(cache=%llu dirty=%llu wb=%llu)",
	      (unsigned long long)cs.nr_cache, (unsigned long long)cs.nr_dirty,
	      (unsigned long long)cs.nr_writeback);

	if (pwrite(sfd, old, strlen(old), 0) < 0)
		die("ipu_policy restore");
	close(sfd);
	close(fd);
}

static void write_file_checked(const char *p, const char *val)
{
	char got[64] = "";
	int fd;
	ssize_t n;

	fd = open(p, O_RDWR);
	if (fd < 0)
		die(p);
	if (write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		die(p);
	n = pread(fd, got, sizeof(got) - 1, 0);
	got[n > 0 ? n : 0] = 0;
	close(fd);
	check(atoi(got) == atoi(val), "%s = %s (read back %d)", p, val,
	      atoi(got));
}

static void write_sysctl(const char *name, const char *val)
{
	char p[256];

	snprintf(p, sizeof(p), "/proc/sys/vm/%s", name);
	write_file_checked(p, val);
}

/*
 * Switch the flusher off, so that only the RWF_DONTCACHE kick can write the
 * data back, and prove it: a normal buffered write must stay dirty.
 */
static void flusher_off(void)
{
	struct tfile *f;
	struct cs_stat cs;
	unsigned char *buf;
	int fd;

	struct stat st;
	char p[128];
	const char *wb = getenv("T_WB");

	/* T_WB=default: the kernel's own writeback settings, periodic
	 * writeback on (every stage runs both ways)
	 */
	if (wb && !strcmp(wb, "default")) {
		printf("writeback: kernel defaults (periodic writeback on)\n");
		return;
	}
	write_sysctl("dirty_writeback_centisecs", "0");
	write_sysctl("dirty_expire_centisecs", "360000");
	write_sysctl("dirty_ratio", "90");
	write_sysctl("dirty_background_ratio", "80");
	/*
	 * A freshly mounted device has written nothing yet, so its share of
	 * the background threshold is ~0 and the first dirty pages start
	 * background writeback anyway; a minimum share of 50 % avoids that.
	 */
	if (stat(mnt, &st))
		die(mnt);
	snprintf(p, sizeof(p), "/sys/class/bdi/%u:%u/min_ratio",
		 major(st.st_dev), minor(st.st_dev));
	write_file_checked(p, "50");

	f = new_file("flusher", MIB);
	fill(f->model, f->size, 0, 99);
	fd = open_file(f->name, O_RDWR | O_CREAT | O_TRUNC);
	buf = f->model;
	if (!do_write(fd, buf, 0, f->size, 64 * KIB, 0))
		die("flusher: write");
	sleep(6);
	if (cachestat(fd, &cs))
		die("cachestat");
	check(cs.nr_dirty == f->size / PAGE,
	      "flusher off: a normal 1 MiB write is still dirty after 6 s "
	      "(dirty=%llu of %lu)", (unsigned long long)cs.nr_dirty,
	      f->size / PAGE);
	close(fd);
}

/*
 * Appends that do not end on a page boundary: every write after the first
 * starts inside the page that holds EOF, which the previous write left as a
 * drop-behind folio (often still under writeback).  reqs[] is the request
 * size pattern, repeated until the file is FILE_SIZE bytes long.
 */
static void test_append(const char *name, const size_t *reqs, int nreqs)
{
	struct tfile *f = new_file(name, FILE_SIZE);
	struct cs_stat cs;
	size_t off = 0;
	double t;
	int fd, i = 0, ok = 1;

	fill(f->model, f->size, 0, 5000 + reqs[0]);
	fd = open_file(f->name, O_RDWR | O_CREAT | O_TRUNC);
	while (ok && off < f->size) {
		size_t n = reqs[i++ % nreqs];

		if (n > f->size - off)
			n = f->size - off;
		ok = do_write(fd, f->model, off, n, n, RWF_DONTCACHE);
		off += n;
	}
	check(ok, "%s: RWF_DONTCACHE appends of %lu MiB", name,
	      f->size / MIB);
	ok = wait_resident(fd, 0, 10, &t, &cs);
	check(ok, "%s: 0 of %lu pages resident after the appends "
	      "(took %.2fs; cache=%llu dirty=%llu wb=%llu)", name,
	      f->size / PAGE, ok ? t : -1.0, (unsigned long long)cs.nr_cache,
	      (unsigned long long)cs.nr_dirty,
	      (unsigned long long)cs.nr_writeback);
	ok = do_read_verify(fd, f->model, f->size, 64 * KIB, 0);
	check(ok, "%s: appended data reads back right", name);
	close(fd);
}

static void test_appends(void)
{
	static const size_t a4000[] = { 4000 };
	static const size_t a10000[] = { 10000 };
	/* what FUSE makes of 1 MiB application writes (see README) */
	static const size_t split[] = { 1048560, 16 };

	test_append("app_4000", a4000, 1);
	test_append("app_10000", a10000, 1);
	test_append("app_split", split, 2);
}


static volatile int compact_stop;

static void *compact_fn(void *arg)
{
	int fd = open("/proc/sys/vm/compact_memory", O_WRONLY);

	(void)arg;
	if (fd < 0)
		return NULL;
	while (!compact_stop)
		if (pwrite(fd, "1", 1, 0) != 1)
			break;
	close(fd);
	return NULL;
}

/*
 * Uncached writes while another thread compacts memory all the time, so that
 * page migration runs alongside drop-behind folios (under lockdep etc.).
 * This does not prove that migration keeps the drop-behind mark: with that
 * hunk of patch 1 reverted it still passes, the folios that get migrated are
 * (almost) never drop-behind folios between dirtying and writeback.
 */
static void test_compaction(void)
{
	struct tfile *f = new_file("compact", 32 * MIB);
	long long m0 = vmstat("pgmigrate_success");
	struct cs_stat cs;
	pthread_t th;
	double t;
	int fd, ok, round;

	fill(f->model, f->size, 0, 6000);
	compact_stop = 0;
	if (pthread_create(&th, NULL, compact_fn, NULL))
		die("pthread_create");
	fd = open_file(f->name, O_RDWR | O_CREAT | O_TRUNC);
	ok = 1;
	for (round = 0; ok && round < 4; round++)
		ok = do_write(fd, f->model, 0, f->size, 4 * MIB,
			      RWF_DONTCACHE);
	compact_stop = 1;
	pthread_join(th, NULL);
	check(ok, "compaction: 4 x %lu MiB RWF_DONTCACHE writes while "
	      "compacting (%lld pages migrated)", f->size / MIB,
	      vmstat("pgmigrate_success") - m0);
	ok = wait_resident(fd, 0, 10, &t, &cs);
	check(ok, "compaction: 0 of %lu pages resident (cache=%llu dirty=%llu "
	      "wb=%llu)", f->size / PAGE, (unsigned long long)cs.nr_cache,
	      (unsigned long long)cs.nr_dirty,
	      (unsigned long long)cs.nr_writeback);
	close(fd);
}

static void test_unsupported(const char *hostdir)
{
	char p[4096];
	int fd;

	/* compressed F2FS file: refused, documented in the series */
	fd = open_file("compressed", O_RDWR | O_CREAT | O_TRUNC);
	{
		int fl = 0;

		if (ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0) {
			fl |= FS_COMPR_FL;
			check(ioctl(fd, FS_IOC_SETFLAGS, &fl) == 0,
			      "set FS_COMPR_FL on an empty F2FS file");
		} else {
			check(0, "FS_IOC_GETFLAGS: %s", strerror(errno));
		}
	}
	{
		char buf[65536];

		memset(buf, 'c', sizeof(buf));
		check(pwrite(fd, buf, sizeof(buf), 0) == sizeof(buf),
		      "normal write to the compressed file works");
	}
	expect_eopnotsupp(fd, 1, "compressed f2fs file:");
	expect_eopnotsupp(fd, 0, "compressed f2fs file:");
	close(fd);

	/* a file system that does not opt in (hostfs) */
	snprintf(p, sizeof(p), "%s/hostfs-file", hostdir);
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(p);
	if (write(fd, p, 16) != 16)
		die("hostfs write");
	expect_eopnotsupp(fd, 1, "hostfs (no FOP_DONTCACHE):");
	expect_eopnotsupp(fd, 0, "hostfs (no FOP_DONTCACHE):");
	close(fd);
	unlink(p);
}

#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
#endif

/*
 * One RWF_NOWAIT buffered write: it must write everything, write a prefix
 * (short count) or fail with EAGAIN - never block, never EINVAL or
 * EOPNOTSUPP.  The model is updated with what was written.  Returns the
 * number of bytes written, -1 for EAGAIN, -2 for any other result.
 */
static ssize_t nowait_write(int fd, unsigned char *model, size_t off,
			    size_t len, int extra, uint64_t seed,
			    const char *what)
{
	unsigned char *buf = malloc(len);
	struct stat st;
	ssize_t r;
	int e;

	if (!buf)
		die("malloc");
	fill(buf, len, off, seed);
	/*
	 * A NOWAIT write that would have to update the file times gets
	 * EAGAIN (kiocb_modified()), and then the times stay old: rewrite the
	 * first byte (same data) just before, so that mtime is current unless
	 * a clock tick falls in between.
	 */
	if (fstat(fd, &st))
		die("nowait: fstat");
	if (st.st_size > 0 && pwrite(fd, model, 1, 0) != 1)
		die("nowait: touch");
	r = rw2(fd, buf, len, off, RWF_NOWAIT | extra, 1);
	e = errno;
	if (r > 0)
		memcpy(model + off, buf, r);
	free(buf);
	check((r > 0 && (size_t)r <= len) || (r < 0 && e == EAGAIN),
	      "RWF_NOWAIT%s %s (%zu B at %zu): %s%zd", extra ? "|DONTCACHE" : "",
	      what, len, off, r < 0 ? strerror(e) : "wrote ",
	      r < 0 ? (ssize_t)0 : r);
	if (r < 0)
		return e == EAGAIN ? -1 : -2;
	return r;
}

/* F2FS non-blocking buffered writes: data or EAGAIN, never EINVAL */
static void test_nowait(void)
{
	struct tfile *f = new_file("nowait", 2 * MIB);
	size_t written = 0;
	int eagain = 0, i, fd;
	ssize_t r;

	fill(f->model, f->size, 0, 4242);
	fd = open_file(f->name, O_RDWR | O_CREAT | O_TRUNC);
	if (!do_write(fd, f->model, 0, f->size, MIB, 0) || fsync(fd))
		die("nowait: write");

	/* cached, written back, allocated: the path that can succeed */
	for (i = 0; i < 16; i++) {
		r = nowait_write(fd, f->model, i * 64 * KIB, 64 * KIB,
				 i & 1 ? RWF_DONTCACHE : 0, 100 + i,
				 "overwrite of cached blocks");
		if (r > 0)
			written += r;
		else if (r == -1)
			eagain++;
	}
	r = nowait_write(fd, f->model, 5000, 1000, 0, 7, "unaligned overwrite");
	if (r > 0)
		written += r;
	else if (r == -1)
		eagain++;
	/* not cached: full pages need no read, partial ones do (EAGAIN) */
	posix_fadvise(fd, MIB, MIB, POSIX_FADV_DONTNEED);
	r = nowait_write(fd, f->model, MIB, 64 * KIB, 0, 8,
			 "overwrite of evicted pages");
	if (r > 0)
		written += r;
	else if (r == -1)
		eagain++;
	r = nowait_write(fd, f->model, MIB + 100 * KIB + 10, 100, 0, 9,
			 "partial overwrite of an evicted page");
	if (r > 0)
		written += r;
	else if (r == -1)
		eagain++;
	check(written > 0, "RWF_NOWAIT buffered overwrites wrote %zu bytes "
	      "(%d EAGAIN)", written, eagain);

	/* extending the file or allocating blocks would block: EAGAIN */
	r = nowait_write(fd, f->model, f->size, 4096, 0, 10, "append");
	check(r == -1, "RWF_NOWAIT append returns EAGAIN");
	close(fd);
	{
		struct tfile *g = new_file("nowait_new", 4096);

		fd = open_file(g->name, O_RDWR | O_CREAT | O_TRUNC);
		r = nowait_write(fd, g->model, 0, 4096, 0, 11,
				 "write to a new file");
		check(r == -1, "RWF_NOWAIT write to a new file returns EAGAIN");
		g->size = r > 0 ? (size_t)r : 0;
		close(fd);
	}

	fd = open_file(f->name, O_RDONLY);
	check(do_read_verify(fd, f->model, f->size, 64 * KIB, 0),
	      "RWF_NOWAIT: file holds what was written");
	close(fd);
}

/* after unmount + mount, every file must hold exactly the model data */
static void verify_after_remount(const char *dev)
{
	unsigned char *buf;
	size_t max = 0;
	int i;

	for (i = 0; i < nfiles; i++)
		if (files[i].size > max)
			max = files[i].size;
	buf = malloc(max + PAGE);
	if (!buf)
		die("malloc");
	sync();
	if (umount(mnt))
		die("umount");
	if (mount(dev, mnt, fstype, 0, NULL))
		die("mount");
	for (i = 0; i < nfiles; i++) {
		struct tfile *f = &files[i];
		int fd = open_file(f->name, O_RDONLY);
		ssize_t r = pread(fd, buf, f->size + 1, 0);
		uint64_t want = fnv(f->model, f->size);
		uint64_t got = r >= 0 ? fnv(buf, r) : 0;

		check(r == (ssize_t)f->size && got == want,
		      "after remount %-10s size %zd checksum %016llx "
		      "(expected %zu %016llx)", f->name, r,
		      (unsigned long long)got, f->size,
		      (unsigned long long)want);
		close(fd);
	}
	free(buf);
}

static int wait_file_resident(const char *file, double secs);

/*
 * plain (cached) I/O through some other layer, e.g. a dcfs mount; with
 * BACKING, the residency of that file is checked after the write while FILE
 * is still open (before the layer sees a release)
 */
static int stream(const char *file, size_t mib, const char *what,
		  const char *backing)
{
	size_t size = mib * MIB;
	unsigned char *model = malloc(size);
	int fd, ok;

	if (!model)
		die("malloc");
	fill(model, size, 0, 4242);
	fd = open(file, O_RDWR | O_CREAT | (strcmp(what, "read") ? O_TRUNC : 0),
		  0644);
	if (fd < 0)
		die(file);
	if (strcmp(what, "read")) {
		ok = do_write(fd, model, 0, size, MIB, 0);
		check(ok, "wrote %zu MiB to %s", mib, file);
		if (backing) {
			printf("still open: ");
			wait_file_resident(backing, 15);
		}
	}
	if (strcmp(what, "write")) {
		ok = do_read_verify(fd, model, size, MIB, 0);
		check(ok, "read %zu MiB back from %s", mib, file);
	}
	close(fd);
	free(model);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

static int wait_file_resident(const char *file, double secs)
{
	struct cs_stat cs;
	double t;
	int fd = open(file, O_RDONLY), ok;

	if (fd < 0)
		die(file);
	ok = wait_resident(fd, 0, secs, &t, &cs);
	check(ok, "%s: %llu pages resident (dirty %llu, writeback %llu)",
	      file, (unsigned long long)cs.nr_cache,
	      (unsigned long long)cs.nr_dirty,
	      (unsigned long long)cs.nr_writeback);
	close(fd);
	return ok ? 0 : 1;
}

/* /proc/vmstat counter NAME, or -1 */
static void print_vmstat(const char *when)
{
	printf("vmstat %s: dropbehind_defer %lld dropbehind_defer_fail %lld "
	       "pgmigrate_success %lld compact_migrate_scanned %lld\n", when,
	       vmstat("dropbehind_defer"), vmstat("dropbehind_defer_fail"),
	       vmstat("pgmigrate_success"), vmstat("compact_migrate_scanned"));
}

struct racer {
	int id;
	int round;
	int errors;
};

static int race_write(int fd, size_t off, size_t len, size_t req, int seed)
{
	unsigned char buf[65536];
	size_t done;

	for (done = 0; done < len; done += req) {
		size_t n = len - done < req ? len - done : req;

		fill(buf, n, off + done, seed);
		if (rw2(fd, buf, n, off + done, RWF_DONTCACHE, 1) != (ssize_t)n)
			return 0;
	}
	return 1;
}

/*
 * Three kinds of racers, each on its own files: write + unlink while the
 * writeback is in flight, write + truncate down, and write + fsync + drop
 * the inode from the cache by unlinking it.  Folios whose drop-behind
 * writeback completes may then belong to a truncated or evicted inode.
 */
static void *racer_fn(void *arg)
{
	struct racer *r = arg;
	char name[64];
	int i, fd;

	for (i = 0; i < 16; i++) {
		snprintf(name, sizeof(name), "race_%d_%d_%d", r->id, r->round, i);
		fd = open(path(name), O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			r->errors++;
			continue;
		}
		switch (r->id % 3) {
		case 0:
			if (!race_write(fd, 0, 512 * KIB, 32 * KIB, i))
				r->errors++;
			unlink(path(name));
			break;
		case 1:
			if (!race_write(fd, 0, 256 * KIB, 4000, i) ||
			    ftruncate(fd, (i % 8) * 4096 + 100))
				r->errors++;
			if (!race_write(fd, 4096, 64 * KIB, 16 * KIB, i + 1))
				r->errors++;
			if (i % 2)
				unlink(path(name));
			break;
		default:
			if (!race_write(fd, 0, 128 * KIB, 64 * KIB, i) ||
			    fdatasync(fd))
				r->errors++;
			if (!race_write(fd, 0, 128 * KIB, 8 * KIB, i + 2))
				r->errors++;
			unlink(path(name));
			break;
		}
		close(fd);
	}
	return NULL;
}

static int race(const char *dev, int rounds)
{
	struct racer rs[6];
	pthread_t th[6];
	int round, i, errors = 0;

	print_vmstat("before");
	for (round = 0; round < rounds; round++) {
		for (i = 0; i < 6; i++) {
			rs[i].id = i;
			rs[i].round = round;
			rs[i].errors = 0;
			if (pthread_create(&th[i], NULL, racer_fn, &rs[i]))
				die("pthread_create");
		}
		for (i = 0; i < 6; i++) {
			pthread_join(th[i], NULL);
			errors += rs[i].errors;
		}
		/* unmount right away: writeback and deferred drops in flight */
		if (umount(mnt))
			die("umount");
		if (mount(dev, mnt, "f2fs", 0, NULL))
			die("mount");
	}
	check(errors == 0, "race: %d rounds of 6 writers (write+unlink, "
	      "write+truncate, write+fsync+unlink) and umount: %d I/O errors",
	      rounds, errors);
	print_vmstat("after");
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * Another file system that opts in (ext2, exFAT): the residency checks,
 * cached data staying cached, data intact after a remount.
 */
static int generic_fs(const char *dev)
{
	static const size_t sizes[] = { 4 * KIB, 64 * KIB, 1 * MIB };
	size_t i;

	printf("file system %s on %s\n", fstype, dev);
	flusher_off();
	print_vmstat("before");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		test_size(sizes[i]);
	test_appends();
	test_cached_stay();
	verify_after_remount(dev);
	print_vmstat("after");
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

#define BDEV_REGION (8 * MIB)

/* wait until the block device has @want pages in its page cache */
static int bdev_wait(int fd, uint64_t want, double secs, const char *what)
{
	struct cs_stat cs;
	double t;
	int ok = wait_resident(fd, want, secs, &t, &cs);

	check(ok, "raw device: %s: %llu pages of the device cached (want %llu;"
	      " took %.2fs; dirty=%llu wb=%llu)", what,
	      (unsigned long long)cs.nr_cache, (unsigned long long)want,
	      ok ? t : -1.0, (unsigned long long)cs.nr_dirty,
	      (unsigned long long)cs.nr_writeback);
	return ok;
}

/* write region @i of the raw device with requests of @req bytes */
static void bdev_region(int fd, unsigned char *model, int i, size_t req,
			int flags, const char *what)
{
	size_t off = i * BDEV_REGION;
	int ok;

	fill(model + off, BDEV_REGION, off, 300 + req);
	ok = do_write(fd, model, off, BDEV_REGION, req, flags);
	check(ok, "raw device: %s: %zu B requests, %lu MiB at %zu MiB", what,
	      req, BDEV_REGION / MIB, off / MIB);
}

/*
 * The raw block device: uncached writes and reads leave nothing in the
 * device's page cache, normal writes stay cached, the data is on the disk.
 */
static int bdev(const char *dev)
{
	static const size_t sizes[] = { 4 * KIB, 64 * KIB, 1 * MIB, 4000 };
	const int nreg = sizeof(sizes) / sizeof(sizes[0]);
	unsigned char *model, *buf;
	struct cs_stat cs;
	struct stat st;
	char p[128];
	int fd, i, ok;

	printf("raw block device %s\n", dev);
	fd = open(dev, O_RDWR);
	if (fd < 0 || fstat(fd, &st))
		die(dev);
	model = calloc(nreg + 1, BDEV_REGION);
	buf = malloc(BDEV_REGION);
	if (!model || !buf)
		die("malloc");
	write_sysctl("dirty_writeback_centisecs", "0");
	write_sysctl("dirty_expire_centisecs", "360000");
	write_sysctl("dirty_ratio", "90");
	write_sysctl("dirty_background_ratio", "80");
	snprintf(p, sizeof(p), "/sys/class/bdi/%u:%u/min_ratio",
		 major(st.st_rdev), minor(st.st_rdev));
	write_file_checked(p, "50");
	if (ioctl(fd, BLKFLSBUF, 0))
		die("BLKFLSBUF");
	print_vmstat("before");

	/* control: a normal write stays cached (and dirty: flusher off) */
	bdev_region(fd, model, nreg, 64 * KIB, 0, "normal write");
	sleep(6);
	if (cachestat(fd, &cs))
		die("cachestat");
	check(cs.nr_cache == BDEV_REGION / PAGE &&
	      cs.nr_dirty == BDEV_REGION / PAGE,
	      "raw device: normal write stays cached and dirty after 6 s "
	      "(flusher off): cache=%llu dirty=%llu of %lu",
	      (unsigned long long)cs.nr_cache, (unsigned long long)cs.nr_dirty,
	      BDEV_REGION / PAGE);
	if (fsync(fd) || ioctl(fd, BLKFLSBUF, 0))
		die("fsync/BLKFLSBUF");
	bdev_wait(fd, 0, 10, "after fsync + BLKFLSBUF");

	for (i = 0; i < nreg; i++) {
		char what[64];

		bdev_region(fd, model, i, sizes[i], RWF_DONTCACHE,
			    "RWF_DONTCACHE write");
		snprintf(what, sizeof(what), "after %zu B uncached writes",
			 sizes[i]);
		bdev_wait(fd, 0, 10, what);
	}
	for (i = 0; i < nreg; i++) {
		size_t off = i * BDEV_REGION, done;
		ssize_t r = 0;

		ok = 1;
		for (done = 0; ok && done < BDEV_REGION; done += MIB) {
			r = rw2(fd, buf + done, MIB, off + done, RWF_DONTCACHE,
				0);
			ok = r == (ssize_t)MIB;
		}
		check(ok && !memcmp(buf, model + off, BDEV_REGION),
		      "raw device: RWF_DONTCACHE read of region %d returns "
		      "the data", i);
	}
	/*
	 * The regions read must be gone.  Readahead past the last byte read
	 * (into the next region) may leave its window cached: those folios
	 * were never copied to the reader, so the read did not drop them
	 * (as in mainline); they are reported, not failed.
	 */
	{
		struct cs_range r = { 0, nreg * BDEV_REGION };
		double t0 = now();

		do {
			if (syscall(NR_CACHESTAT, fd, &r, &cs, 0))
				die("cachestat");
		} while (cs.nr_cache && now() - t0 < 30 && !usleep(20000));
		check(cs.nr_cache == 0, "raw device: after uncached reads: "
		      "%llu pages of the %d regions read cached (want 0)",
		      (unsigned long long)cs.nr_cache, nreg);
		if (cachestat(fd, &cs))
			die("cachestat");
		printf("  info: whole device after uncached reads: %llu pages "
		       "cached (readahead beyond the last region read)\n",
		       (unsigned long long)cs.nr_cache);
	}

	/* what is on the disk: drop everything, read normally */
	close(fd);
	fd = open(dev, O_RDWR);
	if (fd < 0 || ioctl(fd, BLKFLSBUF, 0))
		die("reopen/BLKFLSBUF");
	for (i = 0; i <= nreg; i++) {
		size_t off = i * BDEV_REGION;

		ok = pread(fd, buf, BDEV_REGION, off) == (ssize_t)BDEV_REGION;
		check(ok && !memcmp(buf, model + off, BDEV_REGION),
		      "raw device: region %d intact on disk (after BLKFLSBUF)",
		      i);
	}
	close(fd);
	print_vmstat("after");
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/* the residency checks alone, e.g. on a null_blk device */
static int quick(void)
{
	static const size_t sizes[] = { 4 * KIB, 64 * KIB, 1 * MIB };
	size_t i;

	flusher_off();
	print_vmstat("before");
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		test_size(sizes[i]);
	test_appends();
	print_vmstat("after");
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * gcwork: a write/delete/GC workload for F2FS.  Each round writes
 * GC_FILES files of GC_FILE_MIB (more than one 256 MiB section of
 * mkfs.f2fs -s 128; uncached and cached, aligned and unaligned requests),
 * deletes every other one and overwrites a quarter of the rest uncached
 * (invalidating blocks all over the sections the round filled), writes a
 * checkpoint, runs foreground GC (F2FS_IOC_GARBAGE_COLLECT, sync) until it
 * finds no victim or GC_CALLS calls, writes a checkpoint, remounts and
 * checks every surviving file.  Whether a round's GC finds a victim
 * depends on where the writes landed (with 256 MiB sections often not),
 * so only the total over all rounds must be > 0.  With
 * CONFIG_F2FS_CHECK_FS the kernel cross-checks its per-section counters
 * on every block update; fsck.f2fs on the host checks the image
 * afterwards.  Expected contents are regenerated from the seeds, so the
 * guest needs no copy of the data.
 */
#define F2FS_IOC_GARBAGE_COLLECT _IOW(0xf5, 6, uint32_t)
#define F2FS_IOC_WRITE_CHECKPOINT _IO(0xf5, 7)
#define GC_FILES 32
#define GC_FILE_SIZE (12 * MIB)
#define GC_CALLS 16

static long long f2fs_stat(const char *dev, const char *name)
{
	char p[256], buf[64];
	long long v = -1;
	FILE *f;

	snprintf(p, sizeof(p), "/sys/fs/f2fs/%s/%s", dev, name);
	f = fopen(p, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f))
		v = atoll(buf);
	fclose(f);
	return v;
}

/* expected contents of gc file i of round r */
static void gc_model(unsigned char *buf, int r, int i)
{
	fill(buf, GC_FILE_SIZE, 0, 100 * r + i);
	fill(buf + GC_FILE_SIZE / 4, GC_FILE_SIZE / 4, GC_FILE_SIZE / 4,
	     5000 + 100 * r + i);
}

static int gcwork(const char *dev, int rounds)
{
	const char *base = strrchr(dev, '/') ? strrchr(dev, '/') + 1 : dev;
	unsigned char *model = malloc(GC_FILE_SIZE);
	unsigned char *buf = malloc(GC_FILE_SIZE + PAGE);
	int r, i, calls, ok_calls, fd, err, gc_err;
	long long fg_moved = 0;
	char name[32];

	if (!model || !buf)
		die("malloc");
	printf("gcwork on %s: %d rounds of %d x %lu MiB files\n", dev, rounds,
	       GC_FILES, GC_FILE_SIZE / MIB);
	for (r = 0; r < rounds; r++) {
		long long moved0 = f2fs_stat(base, "moved_blocks_foreground");
		long long moved1;

		err = 0;
		for (i = 0; i < GC_FILES; i++) {
			size_t req = (i % 3) ? 64 * KIB : 10000;

			fill(model, GC_FILE_SIZE, 0, 100 * r + i);
			snprintf(name, sizeof(name), "gc%d.%d", r, i);
			fd = open_file(name, O_RDWR | O_CREAT | O_TRUNC);
			if (!do_write(fd, model, 0, GC_FILE_SIZE, req,
				      (i & 1) ? RWF_DONTCACHE : 0))
				err++;
			close(fd);
		}
		check(!err, "gcwork round %d: %d files written", r, GC_FILES);
		/* delete the odd files, rewrite a quarter of the even ones */
		for (i = 0; i < GC_FILES; i++) {
			snprintf(name, sizeof(name), "gc%d.%d", r, i);
			if (i & 1) {
				if (unlink(path(name)))
					err++;
				continue;
			}
			gc_model(model, r, i);
			fd = open_file(name, O_RDWR);
			if (!do_write(fd, model, GC_FILE_SIZE / 4,
				      GC_FILE_SIZE / 4, 32 * KIB,
				      RWF_DONTCACHE))
				err++;
			close(fd);
		}
		check(!err, "gcwork round %d: deletes and overwrites", r);
		sync();
		fd = open(mnt, O_RDONLY | O_DIRECTORY);
		if (fd < 0)
			die("open mnt");
		check(!ioctl(fd, F2FS_IOC_WRITE_CHECKPOINT),
		      "gcwork round %d: checkpoint", r);
		ok_calls = 0;
		gc_err = 0;
		for (calls = 0; calls < GC_CALLS; calls++) {
			uint32_t sync_gc = 1;

			if (ioctl(fd, F2FS_IOC_GARBAGE_COLLECT, &sync_gc)) {
				gc_err = errno;
				if (errno != ENODATA && errno != EAGAIN &&
				    errno != EBUSY)
					check(0, "gcwork round %d: GC: %s", r,
					      strerror(errno));
				break;
			}
			ok_calls++;
		}
		moved1 = f2fs_stat(base, "moved_blocks_foreground");
		printf("info: gcwork round %d: %d foreground GC calls succeeded (then: %s), moved_blocks_foreground %lld -> %lld\n",
		       r, ok_calls, gc_err ? strerror(gc_err) : "-", moved0,
		       moved1);
		if (moved1 > moved0)
			fg_moved += moved1 - moved0;
		check(!ioctl(fd, F2FS_IOC_WRITE_CHECKPOINT),
		      "gcwork round %d: checkpoint after GC", r);
		close(fd);

		/* remount, then every surviving file of every round */
		if (umount(mnt))
			die("umount");
		if (mount(dev, mnt, "f2fs", 0, NULL))
			die("mount");
		err = 0;
		for (int rr = 0; rr <= r; rr++) {
			for (i = 0; i < GC_FILES; i += 2) {
				ssize_t got;

				snprintf(name, sizeof(name), "gc%d.%d", rr, i);
				gc_model(model, rr, i);
				fd = open_file(name, O_RDONLY);
				got = pread(fd, buf, GC_FILE_SIZE + 1, 0);
				if (got != (ssize_t)GC_FILE_SIZE ||
				    memcmp(buf, model, GC_FILE_SIZE)) {
					printf("  %s: size %zd or data wrong\n",
					       name, got);
					err++;
				}
				close(fd);
			}
		}
		check(!err, "gcwork round %d: after remount all %d surviving files intact",
		      r, (r + 1) * GC_FILES / 2);
	}
	/* whether a given round finds a victim depends on the layout */
	check(fg_moved > 0, "gcwork: foreground GC moved %lld blocks over %d rounds",
	      fg_moved, rounds);
	free(model);
	free(buf);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * nowaitblock (B4): an RWF_NOWAIT | RWF_DONTCACHE overwrite must not sleep
 * on the F2FS writepages mutex.  Another thread holds it: the writeback
 * of 16 MiB of buffered dirty data (sync_file_range(WRITE), WB_SYNC_NONE,
 * which F2FS serialises on sbi->writepages) to a slow device (null_blk
 * completing after 20 ms, one request at a time: seconds of submission).
 * The non-blocking uncached write meanwhile must return (written or
 * EAGAIN) in well under that.  A kernel that submits an uncached write's
 * own writeback from the writer (the single-CPU path the series once
 * had) waited for the mutex.
 */
struct syncer {
	int fd;
	double took;
};

static void *syncer_fn(void *arg)
{
	struct syncer *sy = arg;
	double t0 = now();

	if (sync_file_range(sy->fd, 0, 0, SYNC_FILE_RANGE_WRITE))
		perror("sync_file_range");
	sy->took = now() - t0;
	return NULL;
}

static int nowait_block(void)
{
	struct syncer sy;
	pthread_t t;
	unsigned char *b;
	int fd, big, worst_eagain = 0, written = 0;
	double t0, took, worst = 0;
	ssize_t n;
	int i;

	if (posix_memalign((void **)&b, PAGE, MIB))
		die("posix_memalign");
	fill(b, MIB, 0, 7);
	fd = open_file("nowait-target", O_RDWR | O_CREAT | O_TRUNC);
	for (i = 0; i < 4; i++)
		if (pwrite(fd, b, MIB, i * MIB) != (ssize_t)MIB)
			die("nowait-target");
	if (fsync(fd))
		die("fsync");
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	big = open_file("nowait-big", O_RDWR | O_CREAT | O_TRUNC);
	for (i = 0; i < 16; i++)
		if (pwrite(big, b, MIB, i * MIB) != (ssize_t)MIB)
			die("nowait-big");
	sy.fd = big;
	pthread_create(&t, NULL, syncer_fn, &sy);
	usleep(300000);
	/*
	 * 64 KiB overwrites (no allocation, no read): each would kick.  A
	 * non-blocking write that has to update the file times is refused
	 * (kiocb_modified()), so set them to now just before: within the
	 * same clock tick the write finds nothing to update.
	 */
	for (i = 0; i < 8; i++) {
		futimens(fd, NULL);
		t0 = now();
		n = rw2(fd, b, 64 * KIB, i * 64 * KIB, RWF_NOWAIT | RWF_DONTCACHE, 1);
		took = now() - t0;
		if (n < 0 && errno != EAGAIN)
			die("RWF_NOWAIT | RWF_DONTCACHE write");
		written += n > 0;
		if (took > worst) {
			worst = took;
			worst_eagain = n < 0;
		}
	}
	pthread_join(t, NULL);
	printf("nowaitblock: the writeback of 16 MiB took %.2f s; slowest of 8 RWF_NOWAIT|RWF_DONTCACHE 64 KiB writes meanwhile %.3f s (%s)\n",
	       sy.took, worst, worst_eagain ? "EAGAIN" : "written");
	check(sy.took > 1.0, "nowaitblock: the competing writeback held the device for more than 1 s (%.2f s)",
	      sy.took);
	/* all EAGAIN (e.g. dirty throttling) would prove nothing */
	check(written > 0, "nowaitblock: %d of 8 writes were written, not refused",
	      written);
	check(worst < 0.25 * sy.took,
	      "nowaitblock: no RWF_NOWAIT uncached write waited for it (slowest %.3f s of %.2f s)",
	      worst, sy.took);
	close(fd);
	close(big);
	free(b);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = {
		4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB,
		128 * KIB, 256 * KIB, 512 * KIB, 1 * MIB,
	};
	size_t i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "stream"))
		return stream(argv[2], strtoul(argv[3], NULL, 0), argv[4],
			      argc == 6 ? argv[5] : NULL);
	if (argc == 4 && !strcmp(argv[1], "resident"))
		return wait_file_resident(argv[2], atof(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "quick")) {
		mnt = argv[2];
		return quick();
	}
	if (argc == 5 && !strcmp(argv[1], "race")) {
		mnt = argv[2];
		return race(argv[3], atoi(argv[4]));
	}
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "control")) {
		mnt = argv[2];
		return control(argc == 4 ? argv[3] : "f2fs (unpatched kernel)");
	}
	if (argc == 5 && !strcmp(argv[1], "fs")) {
		mnt = argv[2];
		fstype = argv[4];
		return generic_fs(argv[3]);
	}
	if (argc == 5 && !strcmp(argv[1], "gcwork")) {
		mnt = argv[2];
		return gcwork(argv[3], atoi(argv[4]));
	}
	if (argc == 3 && !strcmp(argv[1], "bdev"))
		return bdev(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "nowaitblock")) {
		mnt = argv[2];
		return nowait_block();
	}
	if (argc != 6 || strcmp(argv[1], "run")) {
		fprintf(stderr, "usage: %s control MNT | "
			"run MNT DEV F2FS_SYSFS_DIR HOSTFS_DIR\n", argv[0]);
		return 2;
	}
	mnt = argv[2];

	flusher_off();
	print_vmstat("start");
	test_unsupported(argv[5]);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		test_size(sizes[i]);
	test_appends();
	test_compaction();
	test_cached_stay();
	test_overwrite_dirty();
	test_overwrite_writeback();
	test_ipu(argv[4]);
	test_nowait();
	verify_after_remount(argv[3]);
	print_vmstat("end");

	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
