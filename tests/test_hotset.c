/* Suite "hotset": the core promise, as a test.  A hot file is read into a
 * memory cgroup (v1, /sys/fs/cgroup/memory) that is smaller than the hot
 * file and a stream together; the stream is then written and read back
 * through dcfs by a process of the same cgroup, the daemon being in it too
 * (page cache the daemon creates on the backing file is charged to it).
 * The hot file's pages are counted with cachestat before and after: every
 * stream mode must leave at least HOT_SURVIVAL of them resident, or, where
 * someone else dropped the page cache meanwhile, have made reclaim evict
 * at most 1 - HOT_SURVIVAL of them (cachestat's nr_evicted counts the
 * shadow entries reclaim leaves; drop_caches leaves none).
 *
 * Stream modes (one daemon each, on ext4 and on xfs):
 *   kernel      writes by the kernel with write-behind (passthrough_writes,
 *               io/writebehind.c), reads by the kernel with drop-behind
 *               (passthrough_reads, io/dropbehind.c): the defaults
 *   engine      writes and reads by the daemon with RWF_DONTCACHE
 *               (passthrough_writes = no, passthrough_reads = no,
 *               fuse_readahead = no)
 *   engine-fra  the same, reads through the FUSE page cache dropped behind
 *               (fuse_readahead = yes)
 *   control     the stream's files are of the cache class: a stream that
 *               caches.  The test must see the hot set go (at most
 *               CONTROL_MAX of it left), or it could not catch a mode that
 *               caches.
 *   full        the defaults, with a cgroup its hot file fills and the
 *               daemon outside it (shape_of()): the stream is only written.
 *
 * Someone else's drop_caches empties the hot set too (the drop_pagecache
 * count of /proc/vmstat tells), and global reclaim would evict it (a
 * canary file read outside the cgroup tells): the control needs a clean
 * attempt, the stream modes one without global reclaim; such an attempt
 * is repeated (up to 5 attempts).
 */
#include "own_mount.h"

#include <dcfs_sys.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOT_BYTES (48u << 20)
#define STREAM_BYTES (256u << 20)
#define CANARY_BYTES (8u << 20)
#define CG_LIMIT (160u << 20)
#define CHUNK (1u << 20)
#define HOT_SURVIVAL 0.97
#define CONTROL_MAX 0.75
#define HOT_ATTEMPTS 5

enum hot_mode {
	HM_KERNEL,
	HM_ENGINE,
	HM_ENGINE_FRA,
	HM_CONTROL,
	HM_FULL
};
static const char *const mode_names[] = { "kernel", "engine", "engine-fra", "control", "full" };

/*
 * The full cgroup (HM_FULL): the defaults, a writer in a memory cgroup its
 * hot file fills (FULL_HOT read under FULL_LIMIT), the daemon outside it
 * as a service runs.  Any page the stream holds in the writer's cgroup is
 * taken from the hot set at once: HOT_SURVIVAL of it must stay all the same.
 * The stream is only written: what this covers is how its writes are served.
 */
#define FULL_HOT (192u << 20)
#define FULL_LIMIT (128u << 20)

struct hot_shape {
	unsigned int hot_bytes, cg_limit;
	bool daemon_joins, read_back;
};

static struct hot_shape shape_of(enum hot_mode m)
{
	if (m == HM_FULL)
		return (struct hot_shape){ FULL_HOT, FULL_LIMIT, false, false };
	return (struct hot_shape){ HOT_BYTES, CG_LIMIT, true, true };
}

static const char *mode_conf(enum hot_mode m)
{
	switch (m) {
	case HM_KERNEL:
	case HM_FULL:
		return "[global]\ndefault = cache\nmin_size = 0\n"
		       "\n[class video]\nextensions = mkv\npolicy = dontcache\n";
	case HM_ENGINE:
		return "[global]\ndefault = cache\nmin_size = 0\npassthrough_writes = no\n"
		       "passthrough_reads = no\nfuse_readahead = no\n"
		       "\n[class video]\nextensions = mkv\npolicy = dontcache\n";
	case HM_ENGINE_FRA:
		return "[global]\ndefault = cache\nmin_size = 0\npassthrough_writes = no\n"
		       "passthrough_reads = no\nfuse_readahead = yes\n"
		       "\n[class video]\nextensions = mkv\npolicy = dontcache\n";
	default: return "[global]\ndefault = cache\nmin_size = 0\n";
	}
}

static enum fs_kind g_fs;
static char g_root[PATH_MAX], g_err[512];

/* In the runner, not in a test's child: the images are made once. */
static void hot_setup(enum fs_kind fs)
{
	const char *root = backing_root(fs, g_err, sizeof g_err);

	g_fs = fs;
	snprintf(g_root, sizeof g_root, "%s", root ? root : "");
}

static void hot_setup_ext4(void)
{
	hot_setup(FS_EXT4);
}

static void hot_setup_xfs(void)
{
	hot_setup(FS_XFS);
}

/* ---- memory cgroups (v1) ----------------------------------------------------------- */

/* The memory cgroup this process is in, as a directory; "" if none. */
static void memcg_self(char *dir, size_t len)
{
	char *cg = read_file_str("/proc/self/cgroup");
	const char *p = cg ? strstr(cg, ":memory:") : NULL;
	size_t n;

	dir[0] = 0;
	if (!p) {
		free(cg);
		return;
	}
	p += strlen(":memory:");
	n = strcspn(p, "\n");
	snprintf(dir, len, "/sys/fs/cgroup/memory%.*s", (int)n, p);
	if (dir[strlen(dir) - 1] == '/')
		dir[strlen(dir) - 1] = 0;
	free(cg);
}

static int put_str(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int put_str(const char *path, const char *fmt, ...)
{
	char buf[64];
	va_list ap;
	int fd = open(path, O_WRONLY), ok;

	if (fd < 0)
		return -1;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ok = write(fd, buf, strlen(buf)) == (ssize_t)strlen(buf);
	close(fd);
	return ok ? 0 : -1;
}

static void memcg_make(char *cg, size_t len, const char *tag, unsigned int limit)
{
	char self[PATH_MAX], f[PATH_MAX + 32];

	memcg_self(self, sizeof self);
	ck_assert_msg(self[0], "no memory cgroup (v1) in /proc/self/cgroup");
	snprintf(cg, len, "%s/dcfs-tests-%d-%s", self, (int)getpid(), tag);
	rmdir(cg);
	ck_assert_msg(mkdir(cg, 0755) == 0, "mkdir %s: %s", cg, strerror(errno));
	snprintf(f, sizeof f, "%s/memory.limit_in_bytes", cg);
	ck_assert_msg(put_str(f, "%u", limit) == 0, "%s: %s", f, strerror(errno));
}

static void memcg_join(const char *cg, pid_t pid)
{
	char f[PATH_MAX + 32];

	snprintf(f, sizeof f, "%s/cgroup.procs", cg);
	ck_assert_msg(put_str(f, "%d\n", (int)pid) == 0, "%s: %s", f, strerror(errno));
}

static long long memcg_peak(const char *cg)
{
	char f[PATH_MAX + 32], *v;
	long long n;

	snprintf(f, sizeof f, "%s/memory.max_usage_in_bytes", cg);
	v = read_file_str(f);
	n = v ? atoll(v) : -1;
	free(v);
	return n;
}

/* Its tasks are gone by now (the children exited, the daemon unmounted). */
static void memcg_remove(const char *cg)
{
	for (int i = 0; i < 50 && rmdir(cg) < 0 && errno == EBUSY; i++)
		sleep_ms(100);
}

/* ---- the work, in a child of the cgroup ------------------------------------------- */

/* Reads path whole; *h hashes it chunk by chunk as write_stream() does. */
static int read_all(const char *path, uint64_t *h)
{
	char *buf = malloc(CHUNK);
	int fd = open(path, O_RDONLY);
	uint64_t acc = 0;
	size_t have = 0;
	ssize_t n = 0;

	if (!buf || fd < 0)
		return -1;
	while ((n = read(fd, buf + have, CHUNK - have)) > 0) {
		have += (size_t)n;
		if (have < CHUNK)
			continue;
		acc = acc * 31 + hash64(buf, CHUNK);
		have = 0;
	}
	if (have)
		acc = acc * 31 + hash64(buf, have);
	close(fd);
	free(buf);
	if (h)
		*h = acc;
	return n < 0 ? -1 : 0;
}

/* -1, saying why on stderr (the child's) with the free space left. */
static int stream_failed(const char *path, const char *what)
{
	int e = errno;
	struct statvfs sv;

	fprintf(stderr, "hotset: %s of %s: %s (%lld MiB free)\n", what, path, strerror(e),
		statvfs(path, &sv) == 0 ? (long long)(sv.f_bavail * sv.f_frsize >> 20) : -1LL);
	return -1;
}

static int write_stream(const char *path, uint64_t *h)
{
	char *buf = malloc(CHUNK);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	uint64_t acc = 0;

	if (!buf || fd < 0)
		return stream_failed(path, "open");
	for (unsigned i = 0; i < STREAM_BYTES / CHUNK; i++) {
		fill_pattern(buf, CHUNK, 7000 + i);
		acc = acc * 31 + hash64(buf, CHUNK);
		if (write(fd, buf, CHUNK) != (ssize_t)CHUNK)
			return stream_failed(path, "write");
	}
	if (fsync(fd) < 0 || close(fd) < 0)
		return stream_failed(path, "fsync or close");
	free(buf);
	*h = acc;
	return 0;
}

/* Runs in a child that joined cg: 0 ok, else a step number. */
static int in_cgroup(const char *cg, int (*fn)(const char *a, const char *b), const char *a,
		     const char *b)
{
	pid_t pid = fork();
	int st;

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char f[PATH_MAX + 32];

		snprintf(f, sizeof f, "%s/cgroup.procs", cg);
		if (put_str(f, "%d\n", (int)getpid()) < 0)
			_exit(90);
		_exit(fn(a, b));
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

static int read_hot(const char *hot, const char *unused)
{
	(void)unused;
	return read_all(hot, NULL) == 0 ? 0 : 1;
}

/* Writes the stream through the mount; back (non-NULL): reads it back there. */
static int stream_through(const char *path, const char *back)
{
	uint64_t w = 0, r = 0;

	if (write_stream(path, &w) < 0)
		return 2;
	if (!back)
		return 0;
	if (read_all(path, &r) < 0)
		return 3;
	return w == r ? 0 : 4;
}

/*
 * What user.dcfs.policy tells the asker about the stream's writes (the
 * asker's memory cgroup decides as the opener's does): 0 if it says want.
 */
static int policy_says(const char *path, const char *want)
{
	char *v = xattr_str(path, "user.dcfs.policy");
	int rc = !v ? 6 : strstr(v, want) ? 0 : 5;

	printf("hotset %s: user.dcfs.policy in the cgroup: %s\n", path, v ? v : "(none)");
	fflush(stdout);
	free(v);
	return rc;
}

/* ---- one measurement --------------------------------------------------------------- */

static long long drops_so_far(void)
{
	char *v = read_file_str("/proc/vmstat");
	char *p = v ? strstr(v, "drop_pagecache ") : NULL;
	long long n = p ? strtoll(p + 15, NULL, 10) : -1;

	free(v);
	return n;
}

/* Pages of path reclaim evicted so far (shadow entries), -1 if unknown. */
static long long evicted_of(const char *path)
{
	struct dcfs_cachestat cs;
	int fd = open(path, O_RDONLY);
	long err;

	if (fd < 0)
		return -1;
	err = dcfs_cachestat(fd, 0, 0, &cs);
	close(fd);
	return err ? -1 : (long long)cs.nr_evicted;
}

static long long pages_of(const char *path)
{
	int fd = open(path, O_RDONLY);
	long long n;

	if (fd < 0)
		return -1;
	n = resident_pages(fd);
	close(fd);
	return n;
}

struct hot_result {
	long long before, after, canary_before, canary_after, stream_left, cg_peak;
	long long evicted, canary_evicted; /* by reclaim, during the stream */
	bool dropped, reclaimed;	   /* someone's drop_caches; global reclaim */
	bool said_full;			   /* the log: written by the engine, cgroup full */
	int policy_rc;			   /* policy_says() in the cgroup, before the stream */
};

static void hot_attempt(enum hot_mode mode, struct hot_result *r)
{
	struct hot_shape sh = shape_of(mode);
	char tag[64], cg[PATH_MAX], hot[PATH_MAX + 16], canary[PATH_MAX + 16],
		stream_m[PATH_MAX + 16], stream_b[PATH_MAX + 16];
	const char *root = g_root;
	struct own_mount m;
	long long drops0;
	void *buf;
	int rc;

	ck_assert_msg(root[0], "backing fs: %s", g_err);
	snprintf(tag, sizeof tag, "hot-%s-%s", g_fs == FS_EXT4 ? "ext4" : "xfs", mode_names[mode]);
	ck_assert_msg(own_mount_start(&m, root, tag, mode_conf(mode)) == 0, "mount: %s", m.err);
	snprintf(hot, sizeof hot, "%s/hot.dat", m.exp);
	snprintf(canary, sizeof canary, "%s/canary.dat", m.exp);
	snprintf(stream_m, sizeof stream_m, "%s/s.mkv", m.mnt);
	snprintf(stream_b, sizeof stream_b, "%s/s.mkv", m.exp);
	/* What a failed attempt left would fill the filesystem for the next. */
	unlink(hot);
	unlink(canary);
	unlink(stream_b);
	buf = malloc(sh.hot_bytes);
	fill_pattern(buf, sh.hot_bytes, 6000);
	ck_assert_msg(write_file(hot, buf, sh.hot_bytes, 0644) == 0 &&
			      write_file(canary, buf, CANARY_BYTES, 0644) == 0,
		      "writing the hot file and the canary: %s", strerror(errno));
	free(buf);
	drop_caches();
	drops0 = drops_so_far();
	memcg_make(cg, sizeof cg, mode_names[mode], sh.cg_limit);
	if (sh.daemon_joins)
		memcg_join(cg, m.d.pid);
	/* The hot file, read natively by a process of the cgroup. */
	ck_assert_int_eq(in_cgroup(cg, read_hot, hot, NULL), 0);
	/* The canary, outside it: global reclaim or a drop_caches empties it. */
	ck_assert_int_eq(read_all(canary, NULL), 0);
	r->before = pages_of(hot);
	r->canary_before = pages_of(canary);
	/* Asked in the cgroup before the open: what the open then decides. */
	ck_assert_int_eq(write_file(stream_b, "", 0, 0644), 0);
	r->policy_rc = mode == HM_KERNEL || mode == HM_FULL
			       ? in_cgroup(cg, policy_says, stream_m,
					   mode == HM_FULL ? "memory cgroup is at its limit"
							   : "written behind")
			       : 0;
	long long ev0 = evicted_of(hot), cev0 = evicted_of(canary);
	rc = in_cgroup(cg, stream_through, stream_m, sh.read_back ? stream_m : NULL);
	ck_assert_msg(
		rc == 0,
		"%s: the stream through the mount failed at step %d (2 write, 3 read, 4 data differ)",
		mode_names[mode], rc);
	r->after = pages_of(hot);
	r->canary_after = pages_of(canary);
	r->evicted = evicted_of(hot) - ev0;
	r->canary_evicted = evicted_of(canary) - cev0;
	r->cg_peak = memcg_peak(cg);
	r->stream_left = mode == HM_CONTROL ? -1 : wait_resident_le(stream_b, 0, 10);
	r->dropped = drops_so_far() != drops0;
	r->reclaimed = r->canary_evicted > 0 || (!r->dropped && r->canary_after < r->canary_before);
	char *log = read_file_str(m.d.log);
	r->said_full = strstr(log, "memory cgroup is at its limit") != NULL;
	free(log);
	unlink(stream_b);
	unlink(hot);
	unlink(canary);
	own_unmount_ck(&m);
	memcg_remove(cg);
}

static void hot_check(enum hot_mode mode)
{
	struct hot_shape sh = shape_of(mode);
	struct hot_result r;
	/* Resident after the read: all of it, or what the cgroup holds. */
	long long want_before = sh.hot_bytes <= sh.cg_limit
					? (long long)sh.hot_bytes / 4096 * 95 / 100
					: (long long)sh.cg_limit / 4096 * 3 / 4;
	long long base;
	char log[3072] = "";
	bool disturbed = true;

	for (int attempt = 0; attempt < HOT_ATTEMPTS && disturbed; attempt++) {
		if (attempt)
			sleep_ms(2000);
		hot_attempt(mode, &r);
		/* The control must see the hot set go by itself. */
		disturbed = r.reclaimed || (mode == HM_CONTROL && r.dropped);
		snprintf(
			log + strlen(log), sizeof log - strlen(log),
			"\n  attempt %d: hot pages %lld -> %lld (%lld evicted by reclaim), canary %lld -> "
			"%lld (%lld evicted), cgroup peak %lld MiB%s%s",
			attempt + 1, r.before, r.after, r.evicted, r.canary_before, r.canary_after,
			r.canary_evicted, r.cg_peak >> 20,
			r.dropped ? " (someone dropped the page cache meanwhile)" : "",
			r.reclaimed ? " (global reclaim: disturbed)" : "");
	}
	printf("hotset %s %s:%s\n", g_fs == FS_EXT4 ? "ext4" : "xfs", mode_names[mode], log);
	fflush(stdout);
	ck_assert_msg(
		!disturbed,
		"%d attempts disturbed (is another test run or benchmark dropping caches?):%s",
		HOT_ATTEMPTS, log);
	ck_assert_msg(r.dropped || r.before >= want_before,
		      "the hot file was not resident after its read:%s", log);
	if (mode == HM_CONTROL) {
		ck_assert_msg(
			r.after <= r.before * CONTROL_MAX &&
				r.evicted >= r.before * (1 - CONTROL_MAX),
			"control: a stream of the cache class left %.0f%% of the hot set (reclaim "
			"evicted %lld pages): the test cannot tell a stream that caches from one "
			"that does not:%s",
			100.0 * (double)r.after / (double)r.before, r.evicted, log);
		return;
	}
	/* Where someone dropped the cache meanwhile, what reclaim took is the measure. */
	base = sh.hot_bytes <= sh.cg_limit ? (long long)sh.hot_bytes / 4096 : r.before;
	if (r.dropped)
		ck_assert_msg(r.evicted <= (long long)((double)base * (1 - HOT_SURVIVAL)),
			      "%s: reclaim evicted %.1f%% of the hot set (want <= %.0f%%):%s",
			      mode_names[mode], 100.0 * (double)r.evicted / (double)base,
			      100 * (1 - HOT_SURVIVAL), log);
	else
		ck_assert_msg(r.after >= r.before * HOT_SURVIVAL,
			      "%s: %.1f%% of the hot set survived (want >= %.0f%%):%s",
			      mode_names[mode], 100.0 * (double)r.after / (double)r.before,
			      100 * HOT_SURVIVAL, log);
	ck_assert_msg(r.stream_left == 0,
		      "%s: %lld pages of the stream resident 10 s after it was closed",
		      mode_names[mode], r.stream_left);
	ck_assert_msg(mode != HM_FULL || r.said_full,
		      "full: the mount log does not say that the writer's memory cgroup decided");
	ck_assert_msg(r.policy_rc == 0,
		      "%s: user.dcfs.policy, asked from the writer's cgroup, does not say how "
		      "its writes would be served (%s)",
		      mode_names[mode], r.policy_rc == 6 ? "no value" : "another reason");
}

START_TEST(hot_kernel)
{
	hot_check(HM_KERNEL);
}
END_TEST

START_TEST(hot_engine)
{
	hot_check(HM_ENGINE);
}
END_TEST

START_TEST(hot_engine_fra)
{
	hot_check(HM_ENGINE_FRA);
}
END_TEST

START_TEST(hot_full)
{
	hot_check(HM_FULL);
}
END_TEST

START_TEST(hot_control)
{
	hot_check(HM_CONTROL);
}
END_TEST

Suite *hotset_suite(void)
{
	Suite *s = suite_create("hotset");
	void (*setups[])(void) = { hot_setup_ext4, hot_setup_xfs };
	const char *names[] = { "hot-ext4", "hot-xfs" };

	for (int i = 0; i < 2; i++) {
		TCase *tc = tcase_create(names[i]);

		tcase_set_timeout(tc, 180 * deadline_scale());
		tcase_add_unchecked_fixture(tc, setups[i], NULL);
		tcase_add_test(tc, hot_control);
		tcase_add_test(tc, hot_kernel);
		tcase_add_test(tc, hot_engine);
		tcase_add_test(tc, hot_engine_fra);
		tcase_add_test(tc, hot_full);
		suite_add_tcase(s, tc);
	}
	return s;
}
