/* Suite "stream", page cache residency: what streamed writes and reads
 * leave in the backing page cache (cachestat), and pages resident before
 * dcfs touched them are kept (the fallback's promise). */
#include "stream.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/quota.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <dirent.h>
#include <sched.h>
#include <unistd.h>

/* ---- residency after streamed writes and reads ---------------------------------- */
START_TEST(stream_write_residency)
{
	st_begin();
	unsigned char *src = big_pattern(1000 + g_sk);
	const size_t sizes[] = { 4096, 65536, 1 << 20 };
	char msg[4096] = "";
	for (int i = 0; i < 3; i++) {
		size_t rs = sizes[i];
		char rel[64];
		snprintf(rel, sizeof rel, "w-%zu.mkv", rs);
		long long w0 = stats_get(g_sm.mnt, "dontcache", dc_counter(1));
		int fd = open(SM("%s", rel), O_CREAT | O_TRUNC | O_WRONLY, 0644);
		ck_assert_msg(fd >= 0, "create %s: %s", rel, strerror(errno));
		write_all_chunks(fd, src, BIG, rs);
		ck_assert_int_eq(close(fd), 0);
		long long w1 = stats_get(g_sm.mnt, "dontcache", dc_counter(1));
		ck_assert_msg(w1 - w0 >= (long long)BIG,
			      "%s: dontcache.%s grew by %lld, expected >= %u", rel, dc_counter(1),
			      w1 - w0, BIG);
		long long left = wait_resident_le(SE("%s", rel), max_left(), 10);
		if (left > max_left() || left < 0)
			snprintf(
				msg + strlen(msg), sizeof msg - strlen(msg),
				"\n  %s: %lld backing pages resident 10s after a 64M write in %zu-byte write() calls from a malloc'd buffer (allowed %lld)",
				rel, left, rs, max_left());
		/* read back through the mount, uncached */
		drop_caches();
		read_compare(SM("%s", rel), src, BIG, 1 << 20);
		left = wait_resident_le(SE("%s", rel), max_left(), 10);
		if (left > max_left() || left < 0)
			snprintf(
				msg + strlen(msg), sizeof msg - strlen(msg),
				"\n  %s: %lld backing pages resident 10s after reading it back in 1M read() calls (allowed %lld)",
				rel, left, max_left());
		unlink(SE("%s", rel));
	}
	/* the probe result for this backing fs */
	char *st = xattr_str(g_sm.mnt, "user.dcfs.stats");
	ck_assert_ptr_nonnull(st);
	char want[128];
	snprintf(want, sizeof want, "\"fstype\":\"%s\",\"read\":\"%s\",\"write\":\"%s\"",
		 sk_names[g_sk], g_sk == SK_BTRFS ? "no" : "yes", g_sk == SK_BTRFS ? "no" : "yes");
	ck_assert_msg(strstr(st, want), "stats probes lack %s: %s", want, st);
	free(st);
	free(src);
	ck_assert_msg(!msg[0], "page cache left behind:%s", msg);
}
END_TEST

/* Poll counter cls.key until it is >= want; returns the last value seen. */
START_TEST(stream_read_residency)
{
	st_begin();
	unsigned char *src = big_pattern(2000 + g_sk);
	/* written natively, then read through dcfs */
	ck_assert_int_eq(write_file(SE("r.mkv"), src, BIG, 0644), 0);
	ck_assert_int_eq(write_file(SE("r.flac"), src, BIG / 4, 0644), 0);
	const size_t sizes[] = { 4096, 65536, 1 << 20 };
	char msg[4096] = "";
	for (int i = 0; i < 4; i++) {
		const char *rel = i < 3 ? "r.mkv" : "r.flac";
		size_t len = i < 3 ? BIG : BIG / 4;
		size_t rs = sizes[i % 3];
		drop_caches();
		const char *cls = i < 3 ? "dontcache" : "dontcache-read";
		long long r0 = stats_get(g_sm.mnt, cls, dc_counter(0));
		long long p0 = stats_get(g_sm.mnt, cls, "opened_passthrough");
		long long d0 = stats_get(g_sm.mnt, cls, "dropped_behind");
		read_compare(SM("%s", rel), src, len, rs);
		long long r1 = stats_get(g_sm.mnt, cls, dc_counter(0));
		long long p1 = stats_get(g_sm.mnt, cls, "opened_passthrough");
		/* Read by the kernel (passthrough_reads) and dropped behind, or
		 * by the daemon uncached: either way every byte is accounted.
		 * What the release drops is counted when RELEASE arrives, after
		 * close(2) returned. */
		long long d1 = p1 > p0 ? stats_wait_ge(g_sm.mnt, cls, "dropped_behind",
						       d0 + (long long)len / 2, 10)
				       : d0;
		if (p1 > p0)
			ck_assert_msg(
				d1 - d0 >= (long long)len / 2,
				"%s: passthrough reader, dropped_behind grew by %lld, expected >= %zu",
				rel, d1 - d0, len / 2);
		else
			ck_assert_msg(r1 - r0 >= (long long)len,
				      "%s: %s grew by %lld, expected >= %zu", rel, dc_counter(0),
				      r1 - r0, len);
		long long left = wait_resident_le(SE("%s", rel), max_left(), 10);
		if (left > max_left() || left < 0)
			snprintf(
				msg + strlen(msg), sizeof msg - strlen(msg),
				"\n  %s: %lld backing pages resident 10s after reading %zu bytes in %zu-byte requests (allowed %lld)",
				rel, left, len, rs, max_left());
		/* FOPEN_DIRECT_IO: nothing in the mount's page cache either */
		int fd = open(SM("%s", rel), O_RDONLY);
		ck_assert_int_ge(fd, 0);
		long long fm = resident_pages(fd);
		close(fd);
		if (fm != 0)
			snprintf(msg + strlen(msg), sizeof msg - strlen(msg),
				 "\n  %s: %lld pages in the FUSE page cache after an uncached read",
				 rel, fm);
	}
	unlink(SE("r.mkv"));
	unlink(SE("r.flac"));
	free(src);
	ck_assert_msg(!msg[0], "page cache left behind:%s", msg);
}
END_TEST

/* Pages that were resident before dcfs touched the file stay resident
 * (the fallback's promise, fallback.c; btrfs only).
 *
 * Anything else on the machine that drops caches (drop_caches in a
 * concurrent test run, memory pressure) would make this fail spuriously:
 * a canary file, made resident natively at the same time and never touched
 * through dcfs, tells; a disturbed attempt is repeated (up to 5 times). */
#define KEEP_LEN (32u << 20)
#define KEEP_LO (12u << 20)
#define KEEP_HL (8u << 20)

/* drop_caches so far (/proc/vmstat drop_pagecache), -1 if unknown */
static long long drops_so_far(void)
{
	char *v = read_file_str("/proc/vmstat");
	char *p = strstr(v, "drop_pagecache ");
	long long n = p ? strtoll(p + 15, NULL, 10) : -1;
	free(v);
	return n;
}

/* 0 passed, 1 failed (msg), 2 disturbed */
static int keep_attempt(const unsigned char *src, char *msg, size_t msglen)
{
	long long want = KEEP_HL / 4096;
	int ret = 0;
	long long drops0 = drops_so_far();
	msg[0] = 0;
	ck_assert_int_eq(write_file(SE("keep.mkv"), src, KEEP_LEN, 0644), 0);
	ck_assert_int_eq(write_file(SE("canary.bin"), src, KEEP_HL, 0644), 0);
	int bfd = open(SE("keep.mkv"), O_RDONLY), cfd = open(SE("canary.bin"), O_RDONLY);
	ck_assert(bfd >= 0 && cfd >= 0);
	fdatasync(bfd);
	fdatasync(cfd);
	posix_fadvise(bfd, 0, 0, POSIX_FADV_DONTNEED);
	char *tmp = malloc(KEEP_HL);
	/* someone else reads the middle natively (and the canary) */
	ck_assert_int_eq(pread(cfd, tmp, KEEP_HL, 0), (ssize_t)KEEP_HL);
	ck_assert_int_eq(pread(bfd, tmp, KEEP_HL, KEEP_LO), (ssize_t)KEEP_HL);
	long long mid = resident_range(bfd, KEEP_LO, KEEP_HL);
	/* (with what the kernel read ahead of it) */
	long long pre = resident_pages(bfd);
	if (mid != want || resident_pages(cfd) != want) {
		snprintf(msg, msglen, "before streaming: mid %lld, canary %lld of %lld", mid,
			 resident_pages(cfd), want);
		ret = 2;
		goto out;
	}
	/* stream the whole file through dcfs: read */
	read_compare(SM("keep.mkv"), src, KEEP_LEN, 1 << 20);
	long long all = wait_resident_le(SE("keep.mkv"), pre + max_left(), 5);
	mid = resident_range(bfd, KEEP_LO, KEEP_HL);
	if (resident_pages(cfd) != want) {
		snprintf(msg, msglen, "after the streamed read: mid %lld, canary %lld of %lld", mid,
			 resident_pages(cfd), want);
		ret = 2;
		goto out;
	}
	if (mid != want)
		snprintf(msg + strlen(msg), msglen - strlen(msg),
			 "\n  after a streamed read: %lld of %lld pre-resident pages left", mid,
			 want);
	if (all > pre + max_left())
		snprintf(
			msg + strlen(msg), msglen - strlen(msg),
			"\n  after a streamed read (1M read() calls): %lld pages resident (%lld before, allowed +%lld)",
			all, pre, max_left());
	/* and a streamed overwrite of the whole file */
	int fd = open(SM("keep.mkv"), O_WRONLY);
	ck_assert_int_ge(fd, 0);
	write_all_chunks(fd, src + 1234, KEEP_LEN, 1 << 20);
	ck_assert_int_eq(close(fd), 0);
	long long before_w = all;
	all = wait_resident_le(SE("keep.mkv"), before_w + max_left(), 5);
	mid = resident_range(bfd, KEEP_LO, KEEP_HL);
	if (resident_pages(cfd) != want) {
		snprintf(msg, msglen, "after the streamed write: mid %lld, canary %lld of %lld",
			 mid, resident_pages(cfd), want);
		ret = 2;
		goto out;
	}
	if (mid != want)
		snprintf(msg + strlen(msg), msglen - strlen(msg),
			 "\n  after a streamed write: %lld of %lld pre-resident pages left", mid,
			 want);
	if (all > before_w + max_left())
		snprintf(
			msg + strlen(msg), msglen - strlen(msg),
			"\n  after a streamed write (1M write() calls): %lld pages resident (%lld before, allowed +%lld)",
			all, before_w, max_left());
	/* the resident pages hold the new data */
	ck_assert_int_eq(pread(bfd, tmp, KEEP_HL, KEEP_LO), (ssize_t)KEEP_HL);
	ck_assert_msg(memcmp(tmp, src + 1234 + KEEP_LO, KEEP_HL) == 0,
		      "pre-resident range has stale data");
	read_compare(SM("keep.mkv"), src + 1234, KEEP_LEN, 1 << 20);
	ret = msg[0] ? 1 : 0;
out:
	if (ret == 2 && drops0 >= 0)
		snprintf(msg + strlen(msg), msglen - strlen(msg),
			 " (drop_caches ran %lld times meanwhile)", drops_so_far() - drops0);
	close(bfd);
	close(cfd);
	free(tmp);
	unlink(SE("keep.mkv"));
	unlink(SE("canary.bin"));
	return ret;
}

START_TEST(stream_keeps_resident)
{
	st_begin();
	unsigned char *src = big_pattern(3000 + g_sk);
	char msg[2048], why[2048] = "";
	int r = 2;
	for (int attempt = 0; attempt < 5 && r == 2; attempt++) {
		if (attempt)
			sleep_ms(2000);
		r = keep_attempt(src, msg, sizeof msg);
		if (r == 2)
			snprintf(why + strlen(why), sizeof why - strlen(why), "\n  attempt %d: %s",
				 attempt + 1, msg);
	}
	free(src);
	ck_assert_msg(r != 2,
		      "5 attempts disturbed: the page cache was dropped by someone else "
		      "(a canary file lost its pages; is another test run or benchmark running?)%s",
		      why);
	/* KNOWN_FAILURES.md #8 (fixed): gating again */
	ck_assert_msg(r == 0, "btrfs fallback:%s", msg);
}
END_TEST

/* ---- writes served by the kernel, written behind (passthrough_writes) -------------- */
/* The window the suite allows a kernel-served write stream (dcfs.conf(5),
 * "Writes by the kernel"): 24 MiB before the writer is held, plus what it
 * adds between two looks of the daemon's thread. */
#define KW_WINDOW_PAGES ((64 << 20) / 4096)

struct peak_sampler {
	char path[PATH_MAX];
	atomic_int stop;
	long long peak, samples;
};

static void *peak_main(void *a)
{
	struct peak_sampler *s = a;
	int fd = -1;
	while (!atomic_load(&s->stop)) {
		if (fd < 0)
			fd = open(s->path, O_RDONLY);
		long long n = fd >= 0 ? resident_pages(fd) : -1;
		if (n > s->peak)
			s->peak = n;
		s->samples++;
		usleep(500);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* Threads of process pid running SCHED_FIFO (the write-behind looks). */
static int fifo_threads(pid_t pid)
{
	char dir[64];
	snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && sched_getscheduler(atoi(e->d_name)) == SCHED_FIFO)
			n++;
	closedir(d);
	return n;
}

static void expect_write_mode(const char *mnt, const char *rel, const char *want)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", mnt, rel);
	char *v = xattr_str(path, "user.dcfs.policy");
	ck_assert_msg(v, "getxattr user.dcfs.policy %s: %s", rel, strerror(errno));
	ck_assert_msg(strstr(v, want), "%s: user.dcfs.policy '%s' lacks '%s'", rel, v, want);
	free(v);
}

/*
 * A write stream on ext4 and xfs is written by the kernel: no byte through
 * the daemon, at most KW_WINDOW_PAGES of it in the page cache at any
 * moment (sampled every 0.5 ms), nothing after the close, the data intact;
 * the reason is in user.dcfs.policy.  A file with cached pages at open
 * (someone else's) and btrfs keep the daemon's engine, and say so.
 */
START_TEST(stream_kw_window)
{
	st_begin();
	char err[2048], tag[64], msg[4096] = "";
	struct own_mount m;
	unsigned char *src = big_pattern(4600 + g_sk);
	/* 100000: the front is not on a page boundary while it writes */
	const size_t sizes[] = { 4096, 65536, 100000, 1 << 20 };
	bool kernel = g_sk != SK_BTRFS;
	snprintf(tag, sizeof tag, "kw-%s", sk_names[g_sk]);
	ck_assert_msg(own_mount_start(&m, g_sm_root, tag, KW_CONF) == 0, "mount: %s", m.err);
	for (int i = 0; i < 4; i++) {
		char rel[64];
		snprintf(rel, sizeof rel, "kw-%zu.mkv", sizes[i]);
		ck_assert_int_eq(write_file(path_at(m.exp, "%s", rel), "", 0, 0644), 0);
		expect_write_mode(
			m.mnt, rel,
			kernel ? "; writes by the kernel (passthrough), written behind"
			       : "; writes by the daemon engine: kernel-served writes are kept to ext4 and xfs");
		long long wb0 = stats_get(m.mnt, "dontcache", "opened_write_behind");
		long long k0 = stats_get(m.mnt, "dontcache", "written_kernel");
		long long d0 = stats_get(m.mnt, "dontcache", dc_counter(1));
		struct peak_sampler ps = { .peak = 0 };
		snprintf(ps.path, sizeof ps.path, "%s/%s", m.exp, rel);
		pthread_t th;
		ck_assert_int_eq(pthread_create(&th, NULL, peak_main, &ps), 0);
		int fd = open(path_at(m.mnt, "%s", rel), O_CREAT | O_TRUNC | O_WRONLY, 0644);
		ck_assert_msg(fd >= 0, "create %s: %s", rel, strerror(errno));
		write_all_chunks(fd, src, BIG, sizes[i]);
		ck_assert_int_eq(fsync(fd), 0);
		/* The looks run ahead of a busy CPU's other work (writebehind.c). */
		int fifo = fifo_threads(m.d.pid);
		ck_assert_int_eq(close(fd), 0);
		long long left =
			wait_resident_le(path_at(m.exp, "%s", rel), kernel ? 0 : max_left(), 10);
		atomic_store(&ps.stop, 1);
		pthread_join(th, NULL);
		long long wb = stats_get(m.mnt, "dontcache", "opened_write_behind") - wb0;
		long long k = stats_get(m.mnt, "dontcache", "written_kernel") - k0;
		long long d = stats_get(m.mnt, "dontcache", dc_counter(1)) - d0;
		printf("stream-%s kernel-served writes of %zu: peak %lld pages (%lld samples), %lld after close; "
		       "opened_write_behind +%lld, written_kernel +%lld, %s +%lld\n",
		       sk_names[g_sk], sizes[i], ps.peak, ps.samples, left, wb, k, dc_counter(1),
		       d);
		fflush(stdout);
		if (kernel) {
			ck_assert_msg(wb == 1, "%s: opened_write_behind +%lld, expected 1", rel,
				      wb);
			ck_assert_msg(
				fifo >= 1,
				"%s: %d daemon threads at real-time priority while the stream "
				"was open, expected its look thread",
				rel, fifo);
			ck_assert_msg(k >= (long long)BIG && d == 0,
				      "%s: written_kernel +%lld, %s +%lld: the daemon wrote", rel,
				      k, dc_counter(1), d);
			if (ps.peak > KW_WINDOW_PAGES)
				snprintf(msg + strlen(msg), sizeof msg - strlen(msg),
					 "\n  %s: %lld pages resident at once (window %d)", rel,
					 ps.peak, KW_WINDOW_PAGES);
			if (left != 0)
				snprintf(msg + strlen(msg), sizeof msg - strlen(msg),
					 "\n  %s: %lld pages resident 10 s after the close", rel,
					 left);
		} else {
			ck_assert_msg(fifo == 0, "%s: %d daemon threads at real-time priority", rel,
				      fifo);
			ck_assert_msg(wb == 0 && d >= (long long)BIG,
				      "%s: opened_write_behind +%lld, %s +%lld: not the engine",
				      rel, wb, dc_counter(1), d);
		}
		drop_caches();
		read_compare(path_at(m.mnt, "%s", rel), src, BIG, 1 << 20);
		unlink(path_at(m.exp, "%s", rel));
	}
	/* Someone else's pages: a file with cached pages at open keeps the engine. */
	ck_assert_int_eq(write_file(path_at(m.exp, "inuse.mkv"), src, 8 << 20, 0644), 0);
	int nfd = open(path_at(m.exp, "inuse.mkv"), O_RDONLY);
	char *tmp = malloc(8 << 20);
	ck_assert_int_eq(pread(nfd, tmp, 8 << 20, 0), 8 << 20);
	if (kernel)
		expect_write_mode(
			m.mnt, "inuse.mkv",
			"; writes by the daemon engine: the file has cached pages (in use)");
	long long wb0 = stats_get(m.mnt, "dontcache", "opened_write_behind");
	int fd = open(path_at(m.mnt, "inuse.mkv"), O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, src + 100, 1 << 20, 0), 1 << 20);
	ck_assert_int_eq(close(fd), 0);
	ck_assert_msg(stats_get(m.mnt, "dontcache", "opened_write_behind") == wb0,
		      "a file with cached pages at open was served by the kernel");
	close(nfd);
	free(tmp);
	unlink(path_at(m.exp, "inuse.mkv"));
	/* The log says it, once per reason and filesystem. */
	char *log = read_file_str(m.d.log);
	ck_assert_msg(log && strstr(log, kernel ? "by the kernel (passthrough), written behind"
						: "kept to ext4 and xfs"),
		      "the log does not say how write streams are served");
	ck_assert_msg(!strstr(log, "cannot be paced"), "a writer could not be paced: %s",
		      strstr(log, "cannot be paced"));
	free(log);
	ck_assert_msg(own_mount_stop(&m, err, sizeof err) == 0, "unmount: %s", err);
	free(src);
	ck_assert_msg(!msg[0], "kernel-served write streams:%s", msg);
}
END_TEST

/*
 * A disk busy with other work must not widen the window: a look thread that
 * starts writeback itself blocks in that submission (6-17 ms measured on
 * xfs and ext4 with another writer on the disk), and a writer at several
 * GB/s into the page cache fills 50-100 MiB meanwhile.  So a writer of
 * O_DIRECT 64 KiB random writes (BUSY_WRITERS of them) keep the backing
 * filesystem busy while a
 * BUSY_STREAM stream is written in 1 MiB requests: at most
 * BUSY_WINDOW_PAGES of it resident at any moment (sampled every 0.5 ms).
 */
#define BUSY_STREAM (1024u << 20)
#define BUSY_WINDOW_PAGES ((64 << 20) / 4096)
#define BUSY_FILE (256 << 20)
#define BUSY_WRITERS 4

/* The other writer: O_DIRECT 64 KiB writes at random offsets, until stop. */
static void busy_disk(const char *path, const _Atomic int *stop)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_DIRECT, 0600);
	void *buf = NULL;
	unsigned seed = 1;

	if (fd < 0 || posix_memalign(&buf, 4096, 65536) || ftruncate(fd, BUSY_FILE) < 0)
		_exit(2);
	memset(buf, 0x5a, 65536);
	while (!atomic_load(stop)) {
		off_t at = (off_t)(rand_r(&seed) % (BUSY_FILE / 65536)) * 65536;

		if (pwrite(fd, buf, 65536, at) != 65536)
			_exit(3);
	}
	close(fd);
	free(buf);
	_exit(0);
}

START_TEST(stream_kw_window_busy_disk)
{
	st_begin();
	char err[2048], rel[] = "kw-busy.mkv", busy[PATH_MAX];
	struct own_mount m;
	unsigned char *src = big_pattern(4700 + g_sk);
	_Atomic int *stop =
		mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ck_assert_ptr_ne(stop, MAP_FAILED);
	*stop = 0;
	ck_assert_msg(own_mount_start(&m, g_sm_root, "kw-busy", KW_CONF) == 0, "mount: %s", m.err);
	snprintf(busy, sizeof busy, "%s/busy.dat", g_sm_root);
	pid_t pids[BUSY_WRITERS];
	for (int i = 0; i < BUSY_WRITERS; i++) {
		char one[PATH_MAX + 16];
		snprintf(one, sizeof one, "%s.%d", busy, i);
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0)
			busy_disk(one, stop);
	}
	sleep_ms(1000);
	long long wb0 = stats_get(m.mnt, "dontcache", "opened_write_behind");
	struct peak_sampler ps = { .peak = 0 };
	snprintf(ps.path, sizeof ps.path, "%s/%s", m.exp, rel);
	pthread_t th;
	ck_assert_int_eq(write_file(ps.path, "", 0, 0644), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, peak_main, &ps), 0);
	int fd = open(path_at(m.mnt, "%s", rel), O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_msg(fd >= 0, "create %s: %s", rel, strerror(errno));
	/* One 1 MiB buffer again and again: a writer as fast as a program's. */
	for (size_t done = 0; done < BUSY_STREAM; done += 1 << 20)
		ck_assert_int_eq(write(fd, src + (done >> 20) % 4 * 4096, 1 << 20), 1 << 20);
	ck_assert_int_eq(fsync(fd), 0);
	ck_assert_int_eq(close(fd), 0);
	long long left = wait_resident_le(ps.path, 0, 10);
	atomic_store(&ps.stop, 1);
	pthread_join(th, NULL);
	atomic_store(stop, 1);
	int st = 0;
	for (int i = 0; i < BUSY_WRITERS; i++) {
		char one[PATH_MAX + 16];
		int st1;
		ck_assert_int_eq(waitpid(pids[i], &st1, 0), pids[i]);
		st |= st1;
		snprintf(one, sizeof one, "%s.%d", busy, i);
		unlink(one);
	}
	long long wb = stats_get(m.mnt, "dontcache", "opened_write_behind") - wb0;
	printf("stream-%s kernel-served writes beside a busy disk: peak %lld pages (%lld samples), "
	       "%lld after close; opened_write_behind +%lld\n",
	       sk_names[g_sk], ps.peak, ps.samples, left, wb);
	fflush(stdout);
	unlink(ps.path);
	ck_assert_msg(own_mount_stop(&m, err, sizeof err) == 0, "unmount: %s", err);
	free(src);
	munmap(stop, 4096);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other writer failed (status %d)",
		      st);
	ck_assert_msg(wb == 1, "opened_write_behind +%lld, expected 1", wb);
	ck_assert_msg(ps.peak <= BUSY_WINDOW_PAGES,
		      "%lld pages of the stream resident at once beside a busy disk (window %d)",
		      ps.peak, BUSY_WINDOW_PAGES);
	ck_assert_msg(left == 0, "%lld pages resident 10 s after the close", left);
}
END_TEST

/*
 * A writer that rests and then writes again (a recorder between bursts, a
 * download that stalled) is held to the same window from its first write
 * on: the look thread of a resting stream sleeps up to 50 ms, and before
 * the write woke it (writewatch.c) the writer put up to 216 MiB into the
 * page cache meanwhile (xfs, 1 MiB writes, 3 s rest).  Where a look falls
 * in that sleep is chance, so the writer rests PAUSE_RESTS times, for
 * different lengths, and writes PAUSE_BURST after each.
 */
#define PAUSE_HEAD (8u << 20)
#define PAUSE_RESTS 5
#define PAUSE_MS 1300
#define PAUSE_BURST (96u << 20)

START_TEST(stream_kw_window_pause)
{
	st_begin();
	char err[2048], rel[] = "kw-pause.mkv";
	struct own_mount m;
	unsigned char *src = big_pattern(4800 + g_sk);
	long long rested = -1;

	ck_assert_msg(own_mount_start(&m, g_sm_root, "kw-pause", KW_CONF) == 0, "mount: %s", m.err);
	long long wb0 = stats_get(m.mnt, "dontcache", "opened_write_behind");
	struct peak_sampler ps = { .peak = 0 };
	snprintf(ps.path, sizeof ps.path, "%s/%s", m.exp, rel);
	ck_assert_int_eq(write_file(ps.path, "", 0, 0644), 0);
	int fd = open(path_at(m.mnt, "%s", rel), O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_msg(fd >= 0, "create %s: %s", rel, strerror(errno));
	for (size_t done = 0; done < PAUSE_HEAD; done += 1 << 20)
		ck_assert_int_eq(write(fd, src, 1 << 20), 1 << 20);
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, peak_main, &ps), 0);
	for (int rest = 0; rest < PAUSE_RESTS; rest++) {
		sleep_ms(PAUSE_MS + rest * 337);
		if (rest == 0) { /* all written back and dropped by now */
			int rfd = open(ps.path, O_RDONLY);
			rested = rfd >= 0 ? resident_pages(rfd) : -1;
			if (rfd >= 0)
				close(rfd);
		}
		for (size_t done = 0; done < PAUSE_BURST; done += 1 << 20)
			ck_assert_int_eq(write(fd, src + (done >> 20) % 4 * 4096, 1 << 20),
					 1 << 20);
	}
	ck_assert_int_eq(fsync(fd), 0);
	ck_assert_int_eq(close(fd), 0);
	long long left = wait_resident_le(ps.path, 0, 10);
	atomic_store(&ps.stop, 1);
	pthread_join(th, NULL);
	long long wb = stats_get(m.mnt, "dontcache", "opened_write_behind") - wb0;
	printf("stream-%s kernel-served writes after rests: %lld pages resident at the first rest, "
	       "peak %lld pages (%lld samples), %lld after close; opened_write_behind +%lld\n",
	       sk_names[g_sk], rested, ps.peak, ps.samples, left, wb);
	fflush(stdout);
	unlink(ps.path);
	ck_assert_msg(own_mount_stop(&m, err, sizeof err) == 0, "unmount: %s", err);
	free(src);
	ck_assert_msg(wb == 1, "opened_write_behind +%lld, expected 1", wb);
	ck_assert_msg(rested == 0, "%lld pages of a resting stream resident after %d ms", rested,
		      PAUSE_MS);
	ck_assert_msg(ps.peak <= BUSY_WINDOW_PAGES,
		      "%lld pages of the stream resident at once after a rest (window %d)", ps.peak,
		      BUSY_WINDOW_PAGES);
	ck_assert_msg(left == 0, "%lld pages resident 10 s after the close", left);
}
END_TEST

void stream_residency_tests(TCase *tc, enum skind k)
{
	ADD_STREAM_TEST(tc, stream_write_residency);
	ADD_STREAM_TEST(tc, stream_read_residency);
	if (k == SK_BTRFS) /* the fallback's promise; RWF_DONTCACHE is the kernel's */
		ADD_STREAM_TEST(tc, stream_keeps_resident);
	ADD_STREAM_TEST(tc, stream_kw_window);
	if (k != SK_BTRFS)
		ADD_STREAM_TEST(tc, stream_kw_window_busy_disk);
	if (k != SK_BTRFS)
		ADD_STREAM_TEST(tc, stream_kw_window_pause);
}
