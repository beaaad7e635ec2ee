/* Suite "stream", the write engine: odd-sized appends coalesced so that
 * nothing stays resident, their order, one request per unaligned 1 MiB
 * write, and 1 MiB writes written from the request's own memory
 * (adopted), multi-threaded and through a -s, nopassthrough, nouring
 * daemon. */
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
#include <unistd.h>

/* ---- write coalescing: odd-sized appends leave nothing resident ------------------- */
/* RWF_DONTCACHE writes that end inside a page leave pages resident on ext4
 * (2046 of 2048 for 4000-byte appends on 6.18); the engine coalesces them
 * into page-aligned backing writes and drops the pages it has to write
 * partly itself (write_pipe.c). */
static const struct {
	const char *name;
	size_t a, b, total;
} appends[] = {
	{ "1", 1, 1, 64 << 10 },
	{ "100", 100, 100, 2 << 20 },
	{ "4000", 4000, 4000, 16 << 20 },
	{ "10000", 10000, 10000, 16 << 20 },
	{ "split", 1048560, 16, 16 << 20 },
};

/* Sequential writes (mode 0) or O_APPEND writes (mode 1) of one size pattern. */
static void append_case(size_t i, int mode, const unsigned char *src, char *msg, size_t msglen)
{
	char rel[64];
	snprintf(rel, sizeof rel, "%s-%s.mkv", mode ? "oapp" : "app", appends[i].name);
	long long bw0 = stats_get(g_sm.mnt, "dontcache", "backing_writes");
	int fd = open(SM("%s", rel), O_CREAT | O_TRUNC | O_WRONLY | (mode ? O_APPEND : 0), 0644);
	ck_assert_msg(fd >= 0, "create %s: %s", rel, strerror(errno));
	size_t off = 0;
	for (int k = 0; off < appends[i].total; k++) {
		size_t n = k % 2 ? appends[i].b : appends[i].a;
		if (n > appends[i].total - off)
			n = appends[i].total - off;
		ssize_t w = write(fd, src + off, n);
		ck_assert_msg(w == (ssize_t)n, "%s: write %zu at %zu: %zd (%s)", rel, n, off, w,
			      strerror(errno));
		off += n;
	}
	/* while open: only the buffered tail is missing, nothing is resident */
	long long open_left = wait_resident_le(SE("%s", rel), 1, 5);
	ck_assert_int_eq(close(fd), 0);
	long long bw = stats_get(g_sm.mnt, "dontcache", "backing_writes") - bw0;
	long long left = wait_resident_le(SE("%s", rel), 0, 10);
	printf("stream-%s %s of %s bytes: %zu bytes, %lld backing writes, %lld pages resident before close, %lld after\n",
	       sk_names[g_sk], mode ? "O_APPEND writes" : "appends", appends[i].name,
	       appends[i].total, bw, open_left, left);
	fflush(stdout);
	size_t ml = strlen(msg);
	if (left != 0)
		snprintf(
			msg + ml, msglen - ml,
			"\n  %s: %lld backing pages resident 10s after close (appends of %s bytes)",
			rel, left, appends[i].name);
	ml = strlen(msg);
	if (appends[i].a >= 4000 && open_left > 1)
		snprintf(msg + ml, msglen - ml,
			 "\n  %s: %lld backing pages resident while open (appends of %s bytes)",
			 rel, open_left, appends[i].name);
	/* 1 MiB backing writes (a few more where a request crosses the buffer's end) */
	ml = strlen(msg);
	if (g_sk != SK_BTRFS && appends[i].a >= 4000 &&
	    (bw < 1 || bw > (long long)(appends[i].total >> 20) * 2 + 2))
		snprintf(
			msg + ml, msglen - ml,
			"\n  %s: %lld backing writes for %zu bytes in %s-byte appends (not coalesced)",
			rel, bw, appends[i].total, appends[i].name);
	int mfd = open(SM("%s", rel), O_RDONLY);
	ck_assert_int_ge(mfd, 0);
	long long fm = resident_pages(mfd);
	close(mfd);
	ml = strlen(msg);
	if (fm != 0)
		snprintf(msg + ml, msglen - ml, "\n  %s: %lld pages in the FUSE page cache", rel,
			 fm);
	read_compare(SE("%s", rel), src, appends[i].total, 1 << 20);
	unlink(SE("%s", rel));
}

START_TEST(stream_append_residency)
{
	st_begin();
	unsigned char *src = big_pattern(4000 + g_sk);
	char msg[8192] = "";
	for (int mode = 0; mode < 2; mode++)
		for (size_t i = 0; i < sizeof appends / sizeof appends[0]; i++)
			append_case(i, mode, src, msg, sizeof msg);
	free(src);
	ck_assert_msg(!msg[0], "appends:%s", msg);
}
END_TEST

/* O_APPEND through two handles in turn (and a header written at an offset
 * by a third): each append lands after the previous one, whichever handle
 * made it, nothing is overwritten, and (RWF_DONTCACHE) nothing stays
 * resident. */
START_TEST(stream_append_order)
{
	st_begin();
	const size_t total = 6 << 20;
	unsigned char *src = big_pattern(4100 + g_sk);
	int w = open(SM("order.mkv"), O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(w, 0);
	ck_assert_int_eq(pwrite(w, src, 5000, 0), 5000);
	int a = open(SM("order.mkv"), O_WRONLY | O_APPEND);
	int b = open(SM("order.mkv"), O_WRONLY | O_APPEND);
	ck_assert(a >= 0 && b >= 0);
	uint32_t rng = 4101 + g_sk;
	size_t off = 5000;
	for (int k = 0; off < total; k++) {
		size_t n = 1 + xs32(&rng) % (k % 7 == 0 ? 1100000 : 12000);
		if (n > total - off)
			n = total - off;
		int fd = xs32(&rng) % 3 ? a : b;
		ssize_t got = write(fd, src + off, n);
		ck_assert_msg(got == (ssize_t)n, "append %zu at %zu: %zd (%s)", n, off, got,
			      strerror(errno));
		off += n;
		if (k % 50 == 0) { /* a size check in between: sees every append */
			struct stat st;
			ck_assert_int_eq(fstat(w, &st), 0);
			ck_assert_msg((size_t)st.st_size == off,
				      "size %lld after %zu bytes appended", (long long)st.st_size,
				      off);
		}
	}
	ck_assert_int_eq(close(a), 0);
	ck_assert_int_eq(close(b), 0);
	ck_assert_int_eq(close(w), 0);
	long long left = wait_resident_le(SE("order.mkv"), max_left(), 10);
	printf("stream-%s O_APPEND through two handles: %zu bytes, %lld pages resident after close\n",
	       sk_names[g_sk], total, left);
	fflush(stdout);
	read_compare(SE("order.mkv"), src, total, 1 << 20);
	/* The fallback (btrfs) counts pages another handle left resident as
	 * someone else's and keeps them: only RWF_DONTCACHE promises 0 here. */
	if (g_sk != SK_BTRFS)
		ck_assert_msg(left <= max_left(), "%lld pages resident after close", left);
	unlink(SE("order.mkv"));
	free(src);
}
END_TEST

/* ---- one request per unaligned 1 MiB write ------------------------------------------ */
static long long max_pages_limit(void)
{
	char *v = read_file_str("/proc/sys/fs/fuse/max_pages_limit");
	long long n = v ? strtoll(v, NULL, 10) : -1;
	free(v);
	return n;
}

START_TEST(stream_unaligned_1m)
{
	st_begin();
	const size_t mib = 1 << 20, n = 16;
	unsigned char *mem;
	ck_assert_int_eq(posix_memalign((void **)&mem, 4096, (n + 1) * mib), 0);
	unsigned char *src = mem + 16; /* what malloc gives */
	fill_pattern(src, n * mib + 100, 4100);
	for (int shifted = 0; shifted < 2; shifted++) {
		const char *rel = shifted ? "u1.mkv" : "u0.mkv";
		long long rq0 = stats_get(g_sm.mnt, "dontcache", "write_requests");
		long long bw0 = stats_get(g_sm.mnt, "dontcache", "backing_writes");
		int fd = open(SM("%s", rel), O_CREAT | O_TRUNC | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		size_t off = 0;
		if (shifted) { /* a header, then 1 MiB writes at unaligned file offsets */
			ck_assert_int_eq(write(fd, src, 100), 100);
			off = 100;
		}
		for (size_t k = 0; k < n; k++, off += mib)
			ck_assert_int_eq(write(fd, src + off, mib), (ssize_t)mib);
		ck_assert_int_eq(close(fd), 0);
		long long rq = stats_get(g_sm.mnt, "dontcache", "write_requests") - rq0;
		long long bw = stats_get(g_sm.mnt, "dontcache", "backing_writes") - bw0;
		long long left = wait_resident_le(SE("%s", rel), max_left(), 10);
		printf("stream-%s %zu unaligned 1 MiB writes%s: %lld requests, %lld backing writes, %lld pages resident (max_pages_limit %lld)\n",
		       sk_names[g_sk], n, shifted ? " after a 100-byte header" : "", rq, bw, left,
		       max_pages_limit());
		fflush(stdout);
		ck_assert_msg(left <= max_left(), "%s: %lld pages resident after close", rel, left);
		if (max_pages_limit() > 256)
			ck_assert_msg(rq == (long long)n + shifted,
				      "%s: %zu unaligned 1 MiB writes arrived as %lld requests",
				      rel, n, rq);
		if (g_sk != SK_BTRFS)
			/* one per request, one for the tail at close */
			ck_assert_msg(bw >= 1 && bw <= (long long)n + 1,
				      "%s: %lld backing writes for %zu 1 MiB writes", rel, bw, n);
		read_compare(SE("%s", rel), src, off, 1 << 20);
		unlink(SE("%s", rel));
	}
	free(mem);
}
END_TEST

/* ---- 1 MiB writes written from the request's own memory (adopted) --------------------- */
/*
 * Reads the whole file through fd and compares it with want[0, len).
 */
static void fd_compare(int fd, const unsigned char *want, size_t len, const char *what)
{
	static unsigned char got[1 << 20];
	size_t off = 0;
	for (;;) {
		ssize_t r = pread(fd, got, sizeof got, (off_t)off);
		ck_assert_msg(r >= 0, "%s: read at %zu: %s", what, off, strerror(errno));
		if (r == 0)
			break;
		ck_assert_msg(off + (size_t)r <= len, "%s: longer than %zu", what, len);
		ck_assert_msg(memcmp(got, want + off, (size_t)r) == 0, "%s: differs in [%zu, +%zd)",
			      what, off, r);
		off += (size_t)r;
	}
	ck_assert_msg(off == len, "%s: %zu bytes, expected %zu", what, off, len);
}

/* A read of 64 KiB at off through another handle sees what was written. */
static void peek(int r, const unsigned char *want, size_t off, const char *what)
{
	unsigned char got[65536];
	ck_assert_int_eq(pread(r, got, sizeof got, (off_t)off), (ssize_t)sizeof got);
	ck_assert_msg(memcmp(got, want + off, sizeof got) == 0, "%s: read at %zu differs", what,
		      off);
}

/*
 * Aligned and unaligned 1 MiB writes interleaved with reads of another
 * handle, fsync, truncate and an O_APPEND handle, on mount mnt (backing
 * directory exp): the data is intact and, where RWF_DONTCACHE works, the
 * writes were adopted by the background path.
 */
/* Requests of this mount come through FUSE over io_uring. */
static bool serves_uring(const char *mnt)
{
	char *s = xattr_str(mnt, "user.dcfs.stats");
	bool on = s && strstr(s, "\"uring\":{\"state\":\"on\"");

	free(s);
	return on;
}

/* Free MiB of the filesystem holding dir, once what earlier tests removed
 * is really free (xfs frees unlinked inodes in the background): the write
 * engine writes at once, not adopted, below 64 MiB + what is in flight. */
static long long free_mib_settled(const char *dir, long long want)
{
	struct statfs sf;
	long long mib = -1;
	int fd = open(dir, O_RDONLY | O_DIRECTORY);

	for (double t0 = now_s(); fd >= 0 && now_s() - t0 < 10 * deadline_scale(); sleep_ms(100)) {
		syncfs(fd);
		if (fstatfs(fd, &sf) < 0)
			break;
		mib = (long long)((uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize >> 20);
		if (mib >= want)
			break;
	}
	if (fd >= 0)
		close(fd);
	return mib;
}

/* Under io_uring the kernel fixes each entry's buffer, so a 1 MiB write
 * cannot be adopted: it is copied into a job.  The same data, order and
 * background writes are checked, no adoptions expected. */
static void adopted_case(const char *mnt, const char *exp, const char *label)
{
	bool from_ring = serves_uring(mnt);
	const size_t mib = 1 << 20, total = 24 * mib;
	char path[PATH_MAX], bpath[PATH_MAX];
	unsigned char *mem;
	ck_assert_int_eq(posix_memalign((void **)&mem, 4096, total + 4096), 0);
	unsigned char *src = mem + 16; /* a malloc'd buffer */
	fill_pattern(src, total, 4200 + g_sk);
	snprintf(path, sizeof path, "%s/adopt.mkv", mnt);
	snprintf(bpath, sizeof bpath, "%s/adopt.mkv", exp);
	long long ad0 = stats_get(mnt, "dontcache", "writes_adopted");
	long long bg0 = stats_get(mnt, "dontcache", "background_writes");
	ck_assert_msg(ad0 >= 0 && bg0 >= 0, "%s: no writes_adopted/background_writes counters",
		      label);
	/* 64 MiB the engine keeps free, this file, and what may be in flight */
	long long free_mib = free_mib_settled(exp, 112);
	ck_assert_msg(free_mib >= 112, "%s: the backing filesystem has only %lld MiB free", label,
		      free_mib);
	int w = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	int r = open(path, O_RDONLY);
	ck_assert(w >= 0 && r >= 0);
	size_t off = 0;
	int big = 0;
	/* 8 aligned 1 MiB writes, a read of the last one after each */
	for (int k = 0; k < 8; k++, off += mib, big++) {
		ck_assert_int_eq(pwrite(w, src + off, mib, (off_t)off), (ssize_t)mib);
		peek(r, src, off + mib - 65536, label);
		if (k == 3)
			ck_assert_int_eq(fsync(w), 0);
	}
	/* a 100-byte piece, then 1 MiB writes at unaligned offsets */
	ck_assert_int_eq(pwrite(w, src + off, 100, (off_t)off), 100);
	off += 100;
	for (int k = 0; k < 6; k++, off += mib, big++) {
		ck_assert_int_eq(pwrite(w, src + off, mib, (off_t)off), (ssize_t)mib);
		if (k % 2)
			peek(r, src, off - 65536, label);
	}
	/* truncated below what was written: nothing queued lands after it */
	size_t cut = off - mib / 2 - 5000;
	ck_assert_int_eq(ftruncate(w, (off_t)cut), 0);
	struct stat st;
	ck_assert_int_eq(fstat(r, &st), 0);
	ck_assert_msg((size_t)st.st_size == cut, "%s: size %lld after truncate to %zu", label,
		      (long long)st.st_size, cut);
	off = cut;
	for (int k = 0; k < 3; k++, off += mib, big++)
		ck_assert_int_eq(pwrite(w, src + off, mib, (off_t)off), (ssize_t)mib);
	/* appends of 1 MiB through an O_APPEND handle land at the end */
	int a = open(path, O_WRONLY | O_APPEND);
	ck_assert_int_ge(a, 0);
	for (int k = 0; k < 4; k++, off += mib, big++) {
		ck_assert_int_eq(write(a, src + off, mib), (ssize_t)mib);
		ck_assert_int_eq(fstat(r, &st), 0);
		ck_assert_msg((size_t)st.st_size == off + mib, "%s: size %lld after append at %zu",
			      label, (long long)st.st_size, off);
	}
	peek(r, src, off - 65536, label);
	fd_compare(r, src, off, label);
	ck_assert_int_eq(close(a), 0);
	ck_assert_int_eq(close(w), 0);
	ck_assert_int_eq(close(r), 0);
	long long ad = stats_get(mnt, "dontcache", "writes_adopted") - ad0;
	long long bg = stats_get(mnt, "dontcache", "background_writes") - bg0;
	long long left = wait_resident_le(bpath, max_left(), 10);
	printf("stream-%s %s: %d 1 MiB writes, %lld adopted, %lld background writes, %lld pages resident (%lld MiB free before)\n",
	       sk_names[g_sk], label, big, ad, bg, left, free_mib);
	fflush(stdout);
	/* The fallback (btrfs) keeps what the other handles left resident as
	 * someone else's pages (see stream_append_order). */
	if (g_sk != SK_BTRFS)
		ck_assert_msg(left <= max_left(), "%s: %lld pages resident after close", label,
			      left);
	int bfd = open(bpath, O_RDONLY);
	ck_assert_int_ge(bfd, 0);
	fd_compare(bfd, src, off, label);
	close(bfd);
	if (g_sk == SK_BTRFS) {
		/* the fallback stays synchronous */
		ck_assert_msg(ad == 0 && bg == 0, "%s: %lld adopted, %lld background on btrfs",
			      label, ad, bg);
	} else if (from_ring) {
		ck_assert_msg(ad == 0, "%s: %lld writes adopted under io_uring", label, ad);
		ck_assert_msg(bg >= big - 4, "%s: only %lld background writes for %d 1 MiB writes",
			      label, bg, big);
	} else {
		/* each adopted write is one background write; a few may go through
		 * at once (the first one probes the filesystem) */
		ck_assert_msg(ad >= big - 4, "%s: only %lld of %d 1 MiB writes adopted", label, ad,
			      big);
		ck_assert_msg(bg >= ad, "%s: %lld adopted but %lld background writes", label, ad,
			      bg);
	}
	unlink(bpath);
	free(mem);
}

START_TEST(stream_adopted)
{
	st_begin();
	adopted_case(g_sm.mnt, g_sm.exp, "multi-threaded");
	/* The same through a single-threaded daemon, without passthrough,
	 * with /dev/fuse only: adopted. */
	struct own_mount *one = &g_one;
	char tag[64], err[4096];
	snprintf(tag, sizeof tag, "adopt1-%s", sk_names[g_sk]);
	ck_assert_msg(own_mount_start_argv(one, g_sm_root, tag, STREAM_CONF,
					   "nopassthrough,nouring", "-s") == 0,
		      "%s", one->err);
	ck_assert_msg(!serves_uring(one->mnt), "-o nouring: io_uring on");
	adopted_case(one->mnt, one->exp, "-s, nopassthrough, nouring");
	int rc = own_mount_stop(one, err, sizeof err);
	ck_assert_msg(rc == 0, "%s", err);
}
END_TEST

void stream_coalescing_tests(TCase *tc, enum skind k)
{
	if (k != SK_BTRFS)
		ADD_STREAM_TEST(tc, stream_append_residency);
	ADD_STREAM_TEST(tc, stream_append_order);
}

void stream_request_tests(TCase *tc, enum skind k)
{
	(void)k;
	ADD_STREAM_TEST(tc, stream_unaligned_1m);
	ADD_STREAM_TEST(tc, stream_adopted);
}
