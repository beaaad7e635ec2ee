/* Suite "policy": dcfs.conf matching, min_size, [process] rules, auto
 * switching, SIGHUP reload, the user.dcfs.* xattrs, `dcfs --check-config`
 * for every message class of config.c, and mounting with a bad config.
 *
 * The suite runs its own daemon (on the harness's ext4 backing fs) with a
 * config file it rewrites, so it does not use the harness's per-config
 * fixtures.
 */
#include "own_mount.h"

#include <dcfs_sys.h>
#include <fcntl.h>
#include <stdbool.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

/* ---- the suite's mount ---------------------------------------------------- */
static const char POL_CONF[] = "# policy suite\n"
			       "[global]\n"
			       "default = auto\n"
			       "min_size = 0\n"
			       "auto_threshold = 1M\n"
			       "window = 64K\n"
			       "readahead = 64K\n"
			       "\n"
			       "[class video]\n"
			       "extensions = mkv, .MP4\n"
			       "policy = dontcache\n"
			       "\n"
			       "[class audio]\n"
			       "extensions = flac\n"
			       "policy = dontcache-read\n"
			       "\n"
			       "[class doc]\n"
			       "extensions = txt\n"
			       "\n"
			       "[dir /P]\n"
			       "policy = dontcache-write\n"
			       "\n"
			       "[dir /P/deep]\n"
			       "video = cache\n"
			       "Doc = dontcache\n"
			       "\n"
			       "[dir /P/deep/silent]\n"
			       "\n"
			       "[dir /Q]\n"
			       "min_size = 1M\n"
			       "\n"
			       "[dir /Q/zero]\n"
			       "min_size = 0\n"
			       "\n"
			       "[dir /C]\n"
			       "policy = cache\n"
			       "\n"
			       "[process rsync]\n"
			       "policy = cache\n"
			       "\n"
			       "[process pol-writer]\n"
			       "policy = dontcache-write\n";

static struct own_mount g_pol;

static void pol_setup(void)
{
	char err[512];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	if (!root) {
		memset(&g_pol, 0, sizeof g_pol);
		snprintf(g_pol.err, sizeof g_pol.err, "backing fs: %s", err);
		return;
	}
	own_mount_start(&g_pol, root, "policy", POL_CONF);
}

static void pol_teardown(void)
{
	own_mount_kill(&g_pol);
}

/* Test start: mount alive, config = conf (reloaded if it differs). */
#define pol_begin(conf) pol_begin_(conf, __func__)
static void pol_begin_(const char *conf, const char *name)
{
	ck_assert_msg(!g_pol.err[0], "setup failed: %s", g_pol.err);
	ck_assert_msg(is_mounted(g_pol.mnt, NULL, 0), "%s is not mounted (daemon died?)",
		      g_pol.mnt);
	ck_assert_msg(kill(g_pol.d.pid, 0) == 0, "dcfs daemon died in an earlier test");
	/* mark the log so reports can be attributed (see log_report) */
	int lfd = open(g_pol.d.log, O_WRONLY | O_APPEND);
	if (lfd >= 0) {
		dprintf(lfd, "=== dcfs-tests: begin %s (policy)\n", name);
		close(lfd);
	}
	char *cur = read_file_str(g_pol.conf);
	int same = strcmp(cur, conf) == 0;
	free(cur);
	if (!same)
		ck_assert_msg(own_reload(&g_pol, conf) == 1, "reload of the suite's config failed");
	umask(022);
}

/* Through the mount, and in the exported backing dir. */
#define MP(...) path_at(g_pol.mnt, __VA_ARGS__)
#define EP(...) path_at(g_pol.exp, __VA_ARGS__)

/* mkdir -p of rel's parent dirs and create rel with size bytes, in the
 * exported backing dir (no dcfs open involved). */
static void mk_backing(const char *rel, size_t size)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s", EP("%s", rel));
	for (char *s = p + strlen(g_pol.exp) + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		mkdir(p, 0755);
		*s = '/';
	}
	char *buf = calloc(1, size ? size : 1);
	fill_pattern(buf, size, (unsigned)size);
	ck_assert_msg(write_file(p, buf, size, 0644) == 0, "create %s: %s", p, strerror(errno));
	free(buf);
}

/*
 * The classes that stream writes add how a write open would be served
 * ("; writes by the kernel ..." or "; writes by the daemon engine: why"):
 * test_stream.c checks that part; here it only has to be there.
 */
static void expect_policy(const char *rel, const char *want)
{
	char *v = xattr_str(MP("%s", rel), "user.dcfs.policy");
	char *mode;
	ck_assert_msg(v, "getxattr user.dcfs.policy %s: %s", rel, strerror(errno));
	mode = strstr(v, "; writes by ");
	bool writes = !strncmp(want, "dontcache (", 11) || !strncmp(want, "dontcache-write (", 17);
	ck_assert_msg(!writes || mode,
		      "%s: user.dcfs.policy '%s' does not say how writes are served", rel, v);
	if (writes)
		*mode = 0;
	ck_assert_msg(strcmp(v, want) == 0, "%s: user.dcfs.policy is '%s', expected '%s'", rel, v,
		      want);
	free(v);
}

/* Open rel through the mount and check the open was counted for class
 * cls, and that MAP_SHARED works exactly for non-FOPEN_DIRECT_IO classes. */
static void expect_open_class(const char *rel, int flags, const char *cls)
{
	long long before = stats_get(g_pol.mnt, cls, "opened");
	ck_assert_msg(before >= 0, "stats: no class %s", cls);
	int fd = open(MP("%s", rel), flags);
	ck_assert_msg(fd >= 0, "open %s: %s", rel, strerror(errno));
	long long after = stats_get(g_pol.mnt, cls, "opened");
	ck_assert_msg(after == before + 1, "open of %s: %s.opened went %lld -> %lld (expected +1)",
		      rel, cls, before, after);
	struct stat st;
	fstat(fd, &st);
	if (st.st_size > 0) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
		int e = errno;
		int streaming = strcmp(cls, "cache") && strcmp(cls, "auto") &&
				!stream_mmap_allowed(g_pol.mnt);
		if (streaming)
			ck_assert_msg(p == MAP_FAILED && e == ENODEV,
				      "%s (%s): MAP_SHARED should fail with ENODEV, got %s", rel,
				      cls, p == MAP_FAILED ? strerror(e) : "success");
		else
			ck_assert_msg(p != MAP_FAILED, "%s (%s): MAP_SHARED failed: %s", rel, cls,
				      strerror(e));
		if (p != MAP_FAILED)
			munmap(p, (size_t)st.st_size);
	}
	close(fd);
}

static int L(const char *line)
{
	int n = line_of(POL_CONF, line);
	ck_assert_msg(n > 0, "line '%s' not in config", line);
	return n;
}

static const char *fmt_s(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *fmt_s(const char *fmt, ...)
{
	static char b[8][512];
	static int i;
	char *s = b[i++ % 8];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s, 512, fmt, ap);
	va_end(ap);
	return s;
}

/* ---- matching precedence ------------------------------------------------- */
START_TEST(policy_precedence)
{
	pol_begin(POL_CONF);
	const char *files[] = { "top.mkv",
				"top.MP4",
				"A.MKV",
				"top.bin",
				"top.txt",
				"P/a.mkv",
				"P/a.bin",
				"P/deep/a.mkv",
				"P/deep/b.MkV",
				"P/deep/a.txt",
				"P/deep/a.flac",
				"P/deep/silent/a.mkv",
				"P/deep/silent/b.flac",
				"P/deep/silent/c.txt",
				"Pother/a.mkv",
				"P.mkv",
				".mkv",
				"dot.",
				"x.mkv.bak",
				"x.bak.mkv",
				"C/a.mkv",
				"C/a.flac",
				"P/deep2/a.mkv" };
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
		mk_backing(files[i], 4096);
	int lv = L("policy = dontcache"), ldw = L("policy = dontcache-write");
	int lvid = L("video = cache"), ldoc = L("Doc = dontcache"), lc = L("policy = cache");
	char video[256];
	snprintf(video, sizeof video, "dontcache (class video, rule [class video] line %d)", lv);
	/* 4. global default, 3. class policy, case-insensitive extensions */
	expect_policy("top.mkv", video);
	expect_policy("top.MP4", video);
	expect_policy("A.MKV", video);
	expect_policy("x.bak.mkv", video);
	expect_policy("top.bin", "auto (rule [global] default)");
	expect_policy("x.mkv.bak", "auto (rule [global] default)");
	expect_policy(".mkv", "auto (rule [global] default)");
	expect_policy("dot.", "auto (rule [global] default)");
	/* a class without a policy falls through to the default */
	expect_policy("top.txt", "auto (class doc, rule [global] default)");
	/* 2. [dir] policy beats the class policy */
	expect_policy("P/a.mkv",
		      fmt_s("dontcache-write (class video, rule [dir /P] line %d)", ldw));
	expect_policy("P/a.bin", fmt_s("dontcache-write (rule [dir /P] line %d)", ldw));
	/* longest [dir] prefix: its class mapping (class name case-insensitive) */
	expect_policy("P/deep/a.mkv",
		      fmt_s("cache (passthrough; class video, rule [dir /P/deep] line %d)", lvid));
	expect_policy("P/deep/b.MkV",
		      fmt_s("cache (passthrough; class video, rule [dir /P/deep] line %d)", lvid));
	expect_policy("P/deep/a.txt",
		      fmt_s("dontcache (class doc, rule [dir /P/deep] line %d)", ldoc));
	/* [dir /P/deep] says nothing about audio: defers to [dir /P] */
	expect_policy("P/deep/a.flac",
		      fmt_s("dontcache-write (class audio, rule [dir /P] line %d)", ldw));
	/* [dir /P/deep/silent] says nothing at all: defers */
	expect_policy("P/deep/silent/a.mkv",
		      fmt_s("cache (passthrough; class video, rule [dir /P/deep] line %d)", lvid));
	expect_policy("P/deep/silent/b.flac",
		      fmt_s("dontcache-write (class audio, rule [dir /P] line %d)", ldw));
	expect_policy("P/deep/silent/c.txt",
		      fmt_s("dontcache (class doc, rule [dir /P/deep] line %d)", ldoc));
	/* prefixes match whole path components only */
	expect_policy("Pother/a.mkv", video);
	expect_policy("P.mkv", video);
	expect_policy("P/deep2/a.mkv",
		      fmt_s("dontcache-write (class video, rule [dir /P] line %d)", ldw));
	expect_policy("C/a.mkv",
		      fmt_s("cache (passthrough; class video, rule [dir /C] line %d)", lc));
	/* a directory reached through a symlink is matched by its target */
	ck_assert_int_eq(symlink("P/deep", EP("L")), 0);
	expect_policy("L/a.mkv",
		      fmt_s("cache (passthrough; class video, rule [dir /P/deep] line %d)", lvid));
	/* the opens themselves get what the xattr says */
	expect_open_class("top.mkv", O_RDONLY, "dontcache");
	expect_open_class("A.MKV", O_RDONLY, "dontcache");
	expect_open_class("top.bin", O_RDONLY, "auto");
	expect_open_class("P/a.mkv", O_RDONLY, "dontcache-write");
	expect_open_class("P/deep/a.mkv", O_RDONLY, "cache");
	expect_open_class("P/deep/a.txt", O_RDWR, "dontcache");
	expect_open_class("P/deep/silent/b.flac", O_RDONLY, "dontcache-write");
	expect_open_class("C/a.flac", O_RDONLY, "cache");
	expect_open_class("L/a.mkv", O_RDONLY, "cache");
	/* a file created through the mount is classified at create */
	long long b = stats_get(g_pol.mnt, "dontcache", "opened");
	int fd = open(MP("new.mkv"), O_CREAT | O_EXCL | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(stats_get(g_pol.mnt, "dontcache", "opened"), b + 1);
	close(fd);
}
END_TEST

/* ---- min_size -------------------------------------------------------------- */
START_TEST(policy_min_size)
{
	pol_begin(POL_CONF);
	int lv = L("policy = dontcache"), ldr = L("policy = dontcache-read");
	mk_backing("Q/small.mkv", 100 * 1024);
	mk_backing("Q/exact.mkv", 1 << 20);
	mk_backing("Q/below.mkv", (1 << 20) - 1);
	mk_backing("Q/sub/small.flac", 4096);
	mk_backing("Q/zero/small.mkv", 4096);
	mk_backing("Q/empty.mkv", 0);
	expect_policy(
		"Q/small.mkv",
		fmt_s("cache (passthrough; class video, rule [class video] line %d; smaller than min_size 1048576)",
		      lv));
	expect_policy(
		"Q/below.mkv",
		fmt_s("cache (passthrough; class video, rule [class video] line %d; smaller than min_size 1048576)",
		      lv));
	expect_policy(
		"Q/empty.mkv",
		fmt_s("cache (passthrough; class video, rule [class video] line %d; smaller than min_size 1048576)",
		      lv));
	/* exactly min_size is not smaller */
	expect_policy("Q/exact.mkv",
		      fmt_s("dontcache (class video, rule [class video] line %d)", lv));
	/* inherited by subdirectories, overridden by a longer [dir] */
	expect_policy(
		"Q/sub/small.flac",
		fmt_s("cache (passthrough; class audio, rule [class audio] line %d; smaller than min_size 1048576)",
		      ldr));
	expect_policy("Q/zero/small.mkv",
		      fmt_s("dontcache (class video, rule [class video] line %d)", lv));
	/* reads of small files are cached, big ones streamed */
	expect_open_class("Q/small.mkv", O_RDONLY, "cache");
	expect_open_class("Q/exact.mkv", O_RDONLY, "dontcache");
	expect_open_class("Q/zero/small.mkv", O_RDONLY, "dontcache");
	/* a writer of a small file starts cached and switches after min_size */
	long long sw0 = stats_get(g_pol.mnt, "dontcache", "switched");
	long long op0 = stats_get(g_pol.mnt, "dontcache", "opened");
	int fd = open(MP("Q/new.mkv"), O_CREAT | O_RDWR | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(stats_get(g_pol.mnt, "dontcache", "opened"), op0 + 1);
	size_t n = 3 << 20;
	char *buf = malloc(n), *back = malloc(n);
	fill_pattern(buf, n, 99);
	/* deferred writers are not FOPEN_DIRECT_IO: MAP_SHARED works */
	ck_assert_int_eq(pwrite(fd, buf, 4096, 0), 4096);
	void *map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_msg(map != MAP_FAILED, "MAP_SHARED of a deferred writer: %s", strerror(errno));
	munmap(map, 4096);
	ck_assert_int_eq(stats_get(g_pol.mnt, "dontcache", "switched"), sw0);
	for (size_t off = 4096; off < n; off += 128 * 1024) {
		size_t len = n - off < 128 * 1024 ? n - off : 128 * 1024;
		ck_assert_int_eq(pwrite(fd, buf + off, len, (off_t)off), (ssize_t)len);
	}
	ck_assert_msg(stats_get(g_pol.mnt, "dontcache", "switched") == sw0 + 1,
		      "dontcache.switched %lld -> %lld after writing 3M (min_size 1M)", sw0,
		      stats_get(g_pol.mnt, "dontcache", "switched"));
	ck_assert_int_eq(pread(fd, back, n, 0), (ssize_t)n);
	ck_assert(memcmp(buf, back, n) == 0);
	close(fd);
	size_t l;
	char *e = slurp(EP("Q/new.mkv"), &l);
	ck_assert_uint_eq(l, n);
	ck_assert(memcmp(e, buf, n) == 0);
	free(e);
	free(buf);
	free(back);
}
END_TEST

/* ---- process rules ----------------------------------------------------- */
struct proc_res {
	char val[512];
	int err;
	long long opened_delta;
};

static void in_child_named(const char *comm, const char *rel, const char *cls, struct proc_res *out)
{
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct proc_res r;
		memset(&r, 0, sizeof r);
		close(pfd[0]);
		prctl(PR_SET_NAME, comm, 0, 0, 0);
		ssize_t n = getxattr(MP("%s", rel), "user.dcfs.policy", r.val, sizeof r.val - 1);
		if (n < 0)
			r.err = errno;
		else
			r.val[n] = 0;
		long long b = stats_get(g_pol.mnt, cls, "opened");
		int fd = open(MP("%s", rel), O_RDONLY);
		r.opened_delta = stats_get(g_pol.mnt, cls, "opened") - b;
		if (fd >= 0)
			close(fd);
		if (write(pfd[1], &r, sizeof r) != sizeof r)
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	memset(out, 0, sizeof *out);
	ssize_t n = read(pfd[0], out, sizeof *out);
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	ck_assert_msg(n == sizeof *out, "child %s did not report", comm);
}

struct thr_arg {
	const char *path;
	char val[512];
	int err;
};

static void *named_thread(void *a)
{
	struct thr_arg *t = a;
	pthread_setname_np(pthread_self(), "rsync");
	ssize_t n = getxattr(t->path, "user.dcfs.policy", t->val, sizeof t->val - 1);
	if (n < 0)
		t->err = errno;
	else
		t->val[n] = 0;
	return NULL;
}

START_TEST(policy_process_rule)
{
	pol_begin(POL_CONF);
	mk_backing("P/deep/proc.flac", 8192);
	mk_backing("proc.mkv", 8192);
	int lr = L("[process rsync]"), lw = L("[process pol-writer]");
	int ldw = L("policy = dontcache-write");
	struct proc_res r;
	/* the process rule beats [dir] and [class] */
	in_child_named("rsync", "P/deep/proc.flac", "cache", &r);
	ck_assert_msg(r.err == 0, "getxattr as rsync: %s", strerror(r.err));
	ck_assert_str_eq(
		r.val, fmt_s("cache (passthrough; class audio, rule [process rsync] line %d)", lr));
	ck_assert_msg(r.opened_delta == 1, "open as rsync: cache.opened +%lld", r.opened_delta);
	in_child_named("rsync", "proc.mkv", "cache", &r);
	ck_assert_str_eq(
		r.val, fmt_s("cache (passthrough; class video, rule [process rsync] line %d)", lr));
	ck_assert_msg(r.opened_delta == 1, "open as rsync: cache.opened +%lld", r.opened_delta);
	in_child_named("pol-writer", "proc.mkv", "dontcache-write", &r);
	/* the file was just written natively: its pages are in the cache */
	ck_assert_str_eq(
		r.val,
		fmt_s("dontcache-write (class video, rule [process pol-writer] line %d); writes "
		      "by the daemon engine: the file has cached pages (in use)",
		      lw));
	ck_assert_msg(r.opened_delta == 1, "open as pol-writer: +%lld", r.opened_delta);
	/* exact, case-sensitive comparison */
	const char *names[] = { "rsyncd", "rsyn", "RSYNC", "xrsync" };
	for (size_t i = 0; i < 4; i++) {
		in_child_named(names[i], "P/deep/proc.flac", "dontcache-write", &r);
		char *mode = strstr(r.val, "; writes by ");
		if (mode)
			*mode = 0;
		ck_assert_msg(
			mode && strcmp(r.val,
				       fmt_s("dontcache-write (class audio, rule [dir /P] line %d)",
					     ldw)) == 0,
			"as %s: '%s'", names[i], r.val);
		ck_assert_msg(r.opened_delta == 1, "open as %s: dontcache-write.opened +%lld",
			      names[i], r.opened_delta);
	}
	/* a thread goes by its own name */
	struct thr_arg t = { MP("proc.mkv"), "", 0 };
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, named_thread, &t), 0);
	pthread_join(th, NULL);
	ck_assert_msg(t.err == 0, "getxattr in thread: %s", strerror(t.err));
	ck_assert_str_eq(
		t.val, fmt_s("cache (passthrough; class video, rule [process rsync] line %d)", lr));
	/* and the main thread (comm dcfs-tests) is not rsync */
	expect_policy("proc.mkv", fmt_s("dontcache (class video, rule [class video] line %d)",
					L("policy = dontcache")));
}
END_TEST

/* ---- auto switching ------------------------------------------------------ */
START_TEST(policy_auto_switch)
{
	pol_begin(POL_CONF);
	size_t n = 8 << 20;
	char *buf = malloc(n), *back = malloc(n);
	fill_pattern(buf, n, 4242);
	mkdir(EP("autodir"), 0755);
	long long sw_auto0 = stats_get(g_pol.mnt, "auto", "switched");
	long long sw_dc0 = stats_get(g_pol.mnt, "dontcache", "switched");
	long long op0 = stats_get(g_pol.mnt, "auto", "opened");
	/* write: cached until auto_threshold (1M) sequential bytes, then uncached */
	int fd = open(MP("autodir/big.bin"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(stats_get(g_pol.mnt, "auto", "opened"), op0 + 1);
	for (size_t off = 0; off < n; off += 128 * 1024)
		ck_assert_int_eq(write(fd, buf + off, 128 * 1024), 128 * 1024);
	long long sw_auto1 = stats_get(g_pol.mnt, "auto", "switched");
	long long sw_dc1 = stats_get(g_pol.mnt, "dontcache", "switched");
	ck_assert_int_eq(close(fd), 0);
	/* nothing of the stream stays in the backing or the FUSE cache */
	long long rb = wait_resident_le(EP("autodir/big.bin"), 0, 5);
	long long rm = wait_resident_le(MP("autodir/big.bin"), 0, 5);
	/* read back with a fresh handle after dropping caches */
	drop_caches();
	long long sw_auto2 = stats_get(g_pol.mnt, "auto", "switched");
	fd = open(MP("autodir/big.bin"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	size_t got = 0;
	ssize_t r;
	while ((r = read(fd, back + got, 64 * 1024)) > 0)
		got += (size_t)r;
	close(fd);
	ck_assert_uint_eq(got, n);
	ck_assert_msg(memcmp(buf, back, n) == 0, "auto file read back differs");
	long long sw_auto3 = stats_get(g_pol.mnt, "auto", "switched");
	long long rb2 = wait_resident_le(EP("autodir/big.bin"), 0, 5);
	long long rm2 = wait_resident_le(MP("autodir/big.bin"), 0, 5);
	/* data on the backing file */
	size_t l;
	char *e = slurp(EP("autodir/big.bin"), &l);
	ck_assert_uint_eq(l, n);
	ck_assert(memcmp(e, buf, n) == 0);
	free(e);
	free(buf);
	free(back);
	ck_assert_msg(rb == 0 && rm == 0,
		      "after an 8M auto write: %lld backing and %lld FUSE pages still resident", rb,
		      rm);
	ck_assert_msg(rb2 == 0 && rm2 == 0,
		      "after an 8M auto read: %lld backing and %lld FUSE pages still resident", rb2,
		      rm2);
	/* the switch of a handle opened as auto is counted in the auto class */
	ck_assert_msg(sw_auto1 == sw_auto0 + 1 && sw_auto3 == sw_auto2 + 1,
		      "auto.switched: %lld -> %lld (write), %lld -> %lld (read); expected +1 each "
		      "(dontcache.switched went %lld -> %lld)",
		      sw_auto0, sw_auto1, sw_auto2, sw_auto3, sw_dc0, sw_dc1);
}
END_TEST

/* random (non-sequential) access never switches */
START_TEST(policy_auto_random_no_switch)
{
	pol_begin(POL_CONF);
	mk_backing("autodir2/r.bin", 8 << 20);
	long long sw_a = stats_get(g_pol.mnt, "auto", "switched");
	long long sw_d = stats_get(g_pol.mnt, "dontcache", "switched");
	int fd = open(MP("autodir2/r.bin"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	/* backward jumps of more than the stream slack (4M) restart the count */
	char b[4096];
	for (int i = 0; i < 200; i++) {
		off_t off = (i % 2) ? (7 << 20) + (off_t)(i % 64) * 4096 : (off_t)(i % 64) * 4096;
		ck_assert_int_eq(pread(fd, b, sizeof b, off), (ssize_t)sizeof b);
	}
	close(fd);
	ck_assert_int_eq(stats_get(g_pol.mnt, "auto", "switched"), sw_a);
	ck_assert_int_eq(stats_get(g_pol.mnt, "dontcache", "switched"), sw_d);
}
END_TEST

/* ---- SIGHUP reload --------------------------------------------------------- */
START_TEST(policy_reload)
{
	pol_begin(POL_CONF);
	const char *A = "[global]\ndefault = cache\n";
	const char *B = "[global]\ndefault = cache\n\n[class video]\nextensions = mkv\n"
			"policy = dontcache\n";
	const char *C = "[global]\ndefault = cache\n\n[class video]\nextensions = mkv\n"
			"policy = dontcache\nbogus = 1\n";
	mk_backing("reload/a.mkv", 1 << 20);
	ck_assert_int_eq(own_reload(&g_pol, A), 1);
	expect_policy("reload/a.mkv", "cache (passthrough; rule [global] default)");
	char *root = xattr_str(g_pol.mnt, "user.dcfs.policy");
	ck_assert_ptr_nonnull(root);
	ck_assert_msg(strstr(root, "0 classes"), "root xattr after reload A: %s", root);
	free(root);
	/* a handle opened under A */
	int old = open(MP("reload/a.mkv"), O_RDONLY);
	ck_assert_int_ge(old, 0);
	ck_assert_int_eq(own_reload(&g_pol, B), 1);
	expect_policy("reload/a.mkv", "dontcache (class video, rule [class video] line 6)");
	root = xattr_str(g_pol.mnt, "user.dcfs.policy");
	ck_assert_ptr_nonnull(root);
	ck_assert_msg(strstr(root, "1 classes (1 extensions)"), "root xattr after reload B: %s",
		      root);
	free(root);
	expect_open_class("reload/a.mkv", O_RDONLY, "dontcache");
	/* the old handle keeps its class: still cached, MAP_SHARED works */
	void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, old, 0);
	ck_assert_msg(p != MAP_FAILED, "old (cache) handle lost its class after reload: %s",
		      strerror(errno));
	munmap(p, 4096);
	char b[4096];
	ck_assert_int_eq(pread(old, b, sizeof b, 512 * 1024), (ssize_t)sizeof b);
	close(old);
	/* a bad file keeps the old rules and logs FILE:LINE errors */
	ck_assert_int_eq(own_reload(&g_pol, C), 0);
	char *log = read_file_str(g_pol.d.log);
	char want[PATH_MAX + 128];
	char rp[PATH_MAX];
	ck_assert_ptr_nonnull(realpath(g_pol.conf, rp));
	snprintf(want, sizeof want,
		 "%s:7: unknown key 'bogus' in [class video] (expected extensions or policy)", rp);
	ck_assert_msg(strstr(log, want), "daemon log lacks '%s': %.2000s", want, log);
	free(log);
	expect_policy("reload/a.mkv", "dontcache (class video, rule [class video] line 6)");
	expect_open_class("reload/a.mkv", O_RDONLY, "dontcache");
	/* a config file that vanished: old rules kept too */
	ck_assert_int_eq(unlink(g_pol.conf), 0);
	ck_assert_int_eq(kill(g_pol.d.pid, SIGHUP), 0);
	double end = now_s() + 5;
	int seen = 0;
	while (!seen && now_s() < end) {
		log = read_file_str(g_pol.d.log);
		seen = count_str(log, "reload of ") >= 2;
		free(log);
		sleep_ms(20);
	}
	ck_assert_msg(seen, "no 'reload of ... failed' after removing the config");
	expect_policy("reload/a.mkv", "dontcache (class video, rule [class video] line 6)");
	/* back to the suite's config */
	ck_assert_int_eq(own_reload(&g_pol, POL_CONF), 1);
	expect_policy("reload/a.mkv", fmt_s("dontcache (class video, rule [class video] line %d)",
					    L("policy = dontcache")));
}
END_TEST

/* ---- the user.dcfs.* xattrs ------------------------------------------------- */
START_TEST(policy_xattrs)
{
	pol_begin(POL_CONF);
	mk_backing("xa/f.mkv", 4096);
	mkdir(EP("xa/d"), 0755);
	char rp[PATH_MAX];
	ck_assert_ptr_nonnull(realpath(g_pol.conf, rp));
	/* root: config PATH loaded TIME; summary */
	char *v = xattr_str(g_pol.mnt, "user.dcfs.policy");
	ck_assert_msg(v, "getxattr root user.dcfs.policy: %s", strerror(errno));
	char pre[PATH_MAX + 64];
	snprintf(pre, sizeof pre, "config %s loaded ", rp);
	ck_assert_msg(strncmp(v, pre, strlen(pre)) == 0, "root policy xattr: '%s'", v);
	int Y, Mo, D, h, mi, s;
	ck_assert_msg(sscanf(v + strlen(pre), "%4d-%2d-%2dT%2d:%2d:%2dZ; ", &Y, &Mo, &D, &h, &mi,
			     &s) == 6,
		      "no ISO time in '%s'", v);
	char sum[PATH_MAX + 200];
	snprintf(
		sum, sizeof sum,
		"; %s: OK: default auto, min_size 0, auto_threshold 1048576, 3 classes (4 extensions), 6 dir rules, 2 process rules",
		rp);
	ck_assert_msg(strstr(v, sum), "root policy xattr '%s' lacks '%s'", v, sum);
	free(v);
	/* stats on the root: JSON with every class and counter */
	v = xattr_str(g_pol.mnt, "user.dcfs.stats");
	ck_assert_ptr_nonnull(v);
	const char *cls[] = { "cache", "dontcache", "dontcache-read", "dontcache-write", "auto" };
	const char *keys[] = { "opened",	 "read_dontcache",   "written_dontcache",
			       "read_fallback",	 "written_fallback", "read_cached",
			       "written_cached", "switched" };
	for (int i = 0; i < 5; i++)
		for (int k = 0; k < 8; k++)
			ck_assert_msg(stats_get(g_pol.mnt, cls[i], keys[k]) >= 0,
				      "stats lack %s.%s: %s", cls[i], keys[k], v);
	ck_assert_msg(strstr(v, "\"probes\":["), "stats lack probes: %s", v);
	free(v);
	v = xattr_str(g_pol.mnt, "user.dcfs.stats.table");
	ck_assert_ptr_nonnull(v);
	free(v);
	/* dcfs stat / dcfs stat --json */
	char out[16384];
	ck_assert_int_eq(run_cmd(out, sizeof out, "'%s' stat '%s'", g_dcfs_bin, g_pol.mnt), 0);
	ck_assert_msg(strstr(out, "switched") && strstr(out, "dontcache-write"), "dcfs stat: %s",
		      out);
	ck_assert_int_eq(run_cmd(out, sizeof out, "'%s' stat --json '%s'", g_dcfs_bin, g_pol.mnt),
			 0);
	ck_assert_msg(out[0] == '{' && strstr(out, "\"classes\""), "dcfs stat --json: %s", out);
	ck_assert_int_ne(run_cmd(out, sizeof out, "'%s' stat '%s'", g_dcfs_bin, g_tmpdir), 0);
	/* file */
	expect_policy("xa/f.mkv", fmt_s("dontcache (class video, rule [class video] line %d)",
					L("policy = dontcache")));
	/* size query, ERANGE */
	ssize_t need = getxattr(MP("xa/f.mkv"), "user.dcfs.policy", NULL, 0);
	ck_assert_int_gt(need, 10);
	char small[8];
	errno = 0;
	ck_assert_int_eq(getxattr(MP("xa/f.mkv"), "user.dcfs.policy", small, sizeof small), -1);
	ck_assert_int_eq(errno, ERANGE);
	/* stats only on the root; no policy on directories; unknown names */
	errno = 0;
	ck_assert_int_eq(getxattr(MP("xa/f.mkv"), "user.dcfs.stats", out, sizeof out), -1);
	ck_assert_int_eq(errno, ENODATA);
	errno = 0;
	ck_assert_int_eq(getxattr(MP("xa/d"), "user.dcfs.policy", out, sizeof out), -1);
	ck_assert_int_eq(errno, ENODATA);
	errno = 0;
	ck_assert_int_eq(getxattr(MP("xa/f.mkv"), "user.dcfs.nope", out, sizeof out), -1);
	ck_assert_int_eq(errno, ENODATA);
	/* setting or removing them: EPERM, on files and on the root */
	const char *targets[] = { MP("xa/f.mkv"), g_pol.mnt, MP("xa/d") };
	const char *names[] = { "user.dcfs.policy", "user.dcfs.stats", "user.dcfs.other" };
	for (int t = 0; t < 3; t++)
		for (int i = 0; i < 3; i++) {
			errno = 0;
			ck_assert_msg(setxattr(targets[t], names[i], "cache", 5, 0) == -1 &&
					      errno == EPERM,
				      "setxattr %s on %s: %s", names[i], targets[t],
				      strerror(errno));
			errno = 0;
			ck_assert_msg(setxattr(targets[t], names[i], "cache", 5, XATTR_CREATE) ==
						      -1 &&
					      errno == EPERM,
				      "setxattr CREATE %s on %s: %s", names[i], targets[t],
				      strerror(errno));
			errno = 0;
			ck_assert_msg(removexattr(targets[t], names[i]) == -1 && errno == EPERM,
				      "removexattr %s on %s: %s", names[i], targets[t],
				      strerror(errno));
		}
	/* not listed; ordinary user xattrs still are */
	ck_assert_int_eq(setxattr(MP("xa/f.mkv"), "user.mine", "1", 1, 0), 0);
	char list[4096];
	ssize_t ln = listxattr(MP("xa/f.mkv"), list, sizeof list);
	ck_assert_int_ge(ln, 0);
	int mine = 0;
	for (char *q = list; q < list + ln; q += strlen(q) + 1) {
		ck_assert_msg(strncmp(q, "user.dcfs.", 10) != 0, "listxattr shows %s", q);
		mine |= strcmp(q, "user.mine") == 0;
	}
	ck_assert(mine);
	ln = listxattr(g_pol.mnt, list, sizeof list);
	ck_assert_int_ge(ln, 0);
	for (char *q = list; q < list + ln; q += strlen(q) + 1)
		ck_assert_msg(strncmp(q, "user.dcfs.", 10) != 0, "listxattr of root shows %s", q);
	/* never on the backing files */
	const char *bk[] = { EP("xa/f.mkv"), g_pol.exp, EP("xa/d") };
	for (int t = 0; t < 3; t++) {
		ln = listxattr(bk[t], list, sizeof list);
		ck_assert_int_ge(ln, 0);
		for (char *q = list; q < list + ln; q += strlen(q) + 1)
			ck_assert_msg(strncmp(q, "user.dcfs.", 10) != 0, "backing %s has %s", bk[t],
				      q);
		errno = 0;
		ck_assert_int_eq(getxattr(bk[t], "user.dcfs.policy", out, sizeof out), -1);
		ck_assert_int_eq(errno, ENODATA);
	}
}
END_TEST

/* ---- dcfs --check-config -------------------------------------------------- */
struct cc_case {
	const char *name;
	const char *text;
	size_t len; /* 0: strlen(text) */
	int status;
	const char *err; /* expected stderr, '@' = the file name */
};

#define UNKSEC "(expected [global], [class NAME], [dir PATH] or [process NAME])"
#define BADPOL "(expected cache, dontcache, dontcache-read, dontcache-write or auto)"
#define BADSIZE "(a number with an optional K, M, G or T suffix)"
/* a comment line of n characters (without the newline), malloc'd */
static char *long_line_conf(int n, const char *eol, const char *before)
{
	char *s = malloc((size_t)n + 64);
	int k = sprintf(s, "%s", before);
	s[k++] = '#';
	memset(s + k, 'x', (size_t)n - 1);
	k += n - 1;
	strcpy(s + k, eol);
	return s;
}

static const struct cc_case cc_cases[] = {
	{ "unknown section", "[global]\ndefault = cache\n[globl]\nx = 1\n", 0, 1,
	  "@:3: unknown section [globl] " UNKSEC "\n" },
	{ "unknown section (case)", "[Global]\ndefault = cache\n", 0, 1,
	  "@:1: unknown section [Global] " UNKSEC "\n" },
	{ "unknown section (global with argument)", "\n[global x]\n", 0, 1,
	  "@:2: unknown section [global x] " UNKSEC "\n" },
	{ "unknown section (class without name)", "[class]\n", 0, 1,
	  "@:1: unknown section [class] " UNKSEC "\n" },
	{ "unknown key global", "[global]\ndefualt = cache\n", 0, 1,
	  "@:2: unknown key 'defualt' in [global]\n" },
	{ "unknown key class", "[class v]\nextensions = mkv\nmode = cache\n", 0, 1,
	  "@:3: unknown key 'mode' in [class v] (expected extensions or policy)\n" },
	{ "unknown key process", "[process rsync]\npolicy = cache\nnice = 5\n", 0, 1,
	  "@:3: unknown key 'nice' in [process rsync] (expected policy or fuse_readahead)\n" },
	{ "bad fuse_readahead", "[global]\nfuse_readahead = maybe\n", 0, 1,
	  "@:2: fuse_readahead must be yes or no\n" },
	{ "bad fuse_readahead process", "[process smbd]\npolicy = dontcache\nfuse_readahead = 2\n",
	  0, 1, "@:3: fuse_readahead must be yes or no\n" },
	{ "fuse_readahead process",
	  "[global]\nfuse_readahead = yes\n[process smbd]\npolicy = dontcache\nfuse_readahead = no\n",
	  0, 0, "" },
	{ "passthrough_uncached", "[global]\npassthrough_uncached = off\n", 0, 0, "" },
	{ "bad passthrough_uncached", "[global]\npassthrough_uncached = sometimes\n", 0, 1,
	  "@:2: passthrough_uncached must be yes or no\n" },
	{ "unknown class in dir", "[dir /a]\nvidoe = cache\n\n[class video]\nextensions = mkv\n", 0,
	  1, "@:2: unknown key 'vidoe' in [dir /a] (not policy, min_size or a class name)\n" },
	{ "class defined after dir", "[dir /a]\nVideo = cache\n[class video]\nextensions = mkv\n",
	  0, 0, "" },
	{ "bad policy global", "[global]\ndefault = dontcach\n", 0, 1,
	  "@:2: bad policy 'dontcach' " BADPOL "\n" },
	{ "bad policy class", "[class v]\nextensions = mkv\npolicy = fast\n", 0, 1,
	  "@:3: bad policy 'fast' " BADPOL "\n" },
	{ "bad policy dir", "[dir /a]\npolicy = cache;x\n", 0, 1,
	  "@:2: bad policy 'cache;x' " BADPOL "\n" },
	{ "bad policy dir class mapping", "[class v]\nextensions = mkv\n[dir /a]\nV = nocache\n", 0,
	  1, "@:4: bad policy 'nocache' " BADPOL "\n" },
	{ "unknown key dir (misspelt min_size)", "[dir /a]\nmin-size = 16M\n", 0, 1,
	  "@:2: unknown key 'min-size' in [dir /a] (not policy, min_size or a class name)\n" },
	{ "bad policy process", "[process tar]\npolicy = nocache\n", 0, 1,
	  "@:1: [process tar] has no policy\n@:2: bad policy 'nocache' " BADPOL "\n" },
	{ "bad size", "[global]\nmin_size = 12Q\n", 0, 1,
	  "@:2: min_size: bad size '12Q' " BADSIZE "\n" },
	{ "bad size (fraction)", "[global]\nauto_threshold = 1.5M\n", 0, 1,
	  "@:2: auto_threshold: bad size '1.5M' " BADSIZE "\n" },
	{ "bad size (negative)", "[dir /x]\nmin_size = -1\n", 0, 1,
	  "@:2: min_size: bad size '-1' " BADSIZE "\n" },
	{ "bad size (hex)", "[global]\nwindow = 0x100000\n", 0, 1,
	  "@:2: window: bad size '0x100000' " BADSIZE "\n" },
	{ "size too large", "[global]\nmin_size = 8388608T\n", 0, 1,
	  "@:2: min_size: size '8388608T' is too large\n" },
	{ "size too large (digits)", "[global]\nauto_threshold = 99999999999999999999\n", 0, 1,
	  "@:2: auto_threshold: size '99999999999999999999' is too large\n" },
	{ "auto_threshold 0", "[global]\nauto_threshold = 0\n", 0, 1,
	  "@:2: auto_threshold must be greater than 0\n" },
	{ "window too small", "[global]\nwindow = 32K\n", 0, 1,
	  "@:2: window must be between 64K and 1G\n" },
	{ "window too large", "[global]\nwindow = 2G\n", 0, 1,
	  "@:2: window must be between 64K and 1G\n" },
	{ "readahead too large", "[global]\nreadahead = 17M\n", 0, 1,
	  "@:2: readahead must be at most 16M (0 turns it off)\n" },
	{ "bad log_level", "[global]\nlog_level = loud\n", 0, 1,
	  "@:2: bad log_level 'loud' (expected error, warning, info or debug)\n" },
	{ "duplicate section global", "[global]\ndefault = cache\n[global]\n", 0, 1,
	  "@:3: duplicate section [global]\n" },
	{ "duplicate section class", "[class v]\nextensions = mkv\n\n[class V]\nextensions = mp4\n",
	  0, 1, "@:4: duplicate section [class V] (first at line 1)\n" },
	{ "duplicate section dir", "[dir /a]\npolicy = cache\n[dir /a//]\n", 0, 1,
	  "@:3: duplicate section [dir /a] (first at line 1)\n" },
	{ "duplicate section process",
	  "[process rsync]\npolicy = cache\n[process rsync]\npolicy = auto\n", 0, 1,
	  "@:3: duplicate section [process rsync] (first at line 1)\n" },
	{ "duplicate key", "[global]\ndefault = cache\nmin_size = 1M\nDefault = auto\n", 0, 1,
	  "@:4: duplicate key 'Default'\n" },
	{ "duplicate key (alias)", "[global]\ndefault = cache\npolicy = auto\n", 0, 1,
	  "@:3: duplicate key 'policy'\n" },
	{ "duplicate key dir (alias)", "[dir /a]\npolicy = cache\nDEFAULT = auto\n", 0, 1,
	  "@:3: duplicate key 'DEFAULT'\n" },
	{ "duplicate key class", "[class v]\nextensions = mkv\nextensions = mp4\n", 0, 1,
	  "@:3: duplicate key 'extensions'\n" },
	{ "extension in two classes",
	  "[class a]\nextensions = mkv mp4\n\n[class b]\nextensions = avi MKV\n", 0, 1,
	  "@:4: extension 'mkv' of [class b] is already in [class a] (line 1)\n" },
	{ "extension twice in one class", "[class a]\nextensions = mkv .mkv\n", 0, 1,
	  "@:1: extension 'mkv' of [class a] is already in [class a] (line 1)\n" },
	{ "bad dir path (relative)", "[dir relative/x]\n", 0, 1,
	  "@:1: bad directory 'relative/x': must be absolute under the mount root, without . or ..\n" },
	{ "bad dir path (..)", "\n\n[dir /a/../b]\npolicy = cache\n", 0, 1,
	  "@:3: bad directory '/a/../b': must be absolute under the mount root, without . or ..\n" },
	{ "bad dir path (.)", "[dir /a/./b]\n", 0, 1,
	  "@:1: bad directory '/a/./b': must be absolute under the mount root, without . or ..\n" },
	{ "bad process name (16 chars)", "[process abcdefghijklmnop]\npolicy = cache\n", 0, 1,
	  "@:1: bad process name 'abcdefghijklmnop': a command name (comm) of 1 to 15 characters\n" },
	{ "bad process name (slash)", "[process usr/bin]\npolicy = cache\n", 0, 1,
	  "@:1: bad process name 'usr/bin': a command name (comm) of 1 to 15 characters\n" },
	{ "process name of 15 chars", "[process transmission-da]\npolicy = cache\n", 0, 0, "" },
	{ "bad class name", "[class a.b]\nextensions = x\n", 0, 1,
	  "@:1: bad class name 'a.b' (letters, digits, '-', '_')\n" },
	{ "reserved class name", "[class Min_Size]\nextensions = x\n", 0, 1,
	  "@:1: class name 'Min_Size' is a reserved key\n" },
	{ "malformed header (no ])", "[global\ndefault = cache\n", 0, 1,
	  "@:1: malformed section header\n@:2: key outside of any section\n" },
	{ "malformed header (no ], in a section)", "[global]\n[dir /a\npolicy = cache\n", 0, 1,
	  "@:2: malformed section header\n" },
	{ "malformed header (junk after ])", "[global] junk\n", 0, 1,
	  "@:1: malformed section header\n" },
	{ "header with comment", "[global] ; comment\ndefault = auto ; inline\n", 0, 0, "" },
	{ "missing =", "[global]\ndefault cache\n", 0, 1, "@:2: expected 'key = value'\n" },
	{ "colon separator", "[global]\npolicy: cache\n", 0, 1, "@:2: expected 'key = value'\n" },
	{ "key outside section", "default = cache\n[global]\n", 0, 1,
	  "@:1: key outside of any section\n" },
	{ "key with no value", "[global]\ndefault =\n", 0, 1, "@:2: key 'default' has no value\n" },
	{ "class without extensions", "[class v]\npolicy = cache\n", 0, 1,
	  "@:1: [class v] has no extensions\n" },
	{ "bad extension", "[class v]\nextensions = a.b\n", 0, 1,
	  "@:1: [class v] has no extensions\n@:2: bad extension 'a.b'\n" },
	{ "process without policy", "[process rsync]\n", 0, 1,
	  "@:1: [process rsync] has no policy\n" },
	{ "NUL byte", "[global]\nde\0fault = cache\n", 26, 1, "@:2: NUL byte in line\n" },
	{ "BOM is skipped", "\357\273\277[global]\ndefault = auto\n", 0, 0, "" },
	{ "several errors, in line order",
	  "[class a]\nextensions = mkv\n[class b]\nextensions = mkv\npolicy = bogus\n[global]\nwindow = 1K\n",
	  0, 1,
	  "@:3: extension 'mkv' of [class b] is already in [class a] (line 1)\n"
	  "@:5: bad policy 'bogus' " BADPOL "\n@:7: window must be between 64K and 1G\n" },
	{ "empty file", "", 0, 0, "" },
};
#define N_CC (int)(sizeof cc_cases / sizeof cc_cases[0])

static char *subst_at(const char *tmpl, const char *file)
{
	size_t n = strlen(tmpl) + 1;
	for (const char *p = tmpl; *p; p++)
		if (*p == '@')
			n += strlen(file);
	char *s = malloc(n), *w = s;
	for (const char *p = tmpl; *p; p++) {
		if (*p == '@') {
			strcpy(w, file);
			w += strlen(file);
		} else
			*w++ = *p;
	}
	*w = 0;
	return s;
}

static int check_config(const char *file, char *out, size_t outlen, char **err)
{
	char errf[PATH_MAX + 8];
	snprintf(errf, sizeof errf, "%s.stderr", file);
	int rc = run_cmd(out, outlen, "'%s' --check-config '%s' 2>'%s'", g_dcfs_bin, file, errf);
	*err = read_file_str(errf);
	unlink(errf);
	return rc;
}

START_TEST(policy_check_config)
{
	const struct cc_case *c = &cc_cases[_i];
	char file[PATH_MAX];
	snprintf(file, sizeof file, "%s/cc-%d.conf", g_tmpdir, _i);
	size_t len = c->len ? c->len : strlen(c->text);
	int fd = open(file, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, c->text, len), (ssize_t)len);
	close(fd);
	char out[4096], *err;
	int rc = check_config(file, out, sizeof out, &err);
	char *want = subst_at(c->err, file);
	if (c->status == 0) {
		char ok[PATH_MAX + 16];
		snprintf(ok, sizeof ok, "%s: OK: ", file);
		const char *nl = strchr(out, '\n');
		ck_assert_msg(rc == 0 && strncmp(out, ok, strlen(ok)) == 0 && nl && !nl[1] &&
				      !err[0],
			      "[%s] expected valid: status %d, stdout '%s', stderr '%s'", c->name,
			      rc, out, err);
	} else if (!strchr(c->err, '\n')) {
		/* only the FILE:LINE: prefix is fixed */
		ck_assert_msg(rc == 1 && strncmp(err, want, strlen(want)) == 0 && !out[0],
			      "[%s] expected status 1 and stderr starting with '%s': status %d, "
			      "stdout '%s', stderr '%s'",
			      c->name, want, rc, out, err);
	} else {
		ck_assert_msg(
			rc == 1 && strcmp(err, want) == 0 && !out[0],
			"[%s] expected status 1 and stderr\n'%s'\ngot status %d, stdout '%s', "
			"stderr\n'%s'",
			c->name, want, rc, out, err);
	}
	free(want);
	free(err);
	unlink(file);
}
END_TEST

/* Lines up to 4096 characters are accepted (not counting the line end,
 * LF or CR LF); longer ones are reported. Returns "" or a complaint. */
static const char *long_line_case(int n, const char *eol, int want_ok)
{
	static char msg[8][PATH_MAX + 256];
	static int mi;
	char *m = msg[mi++ % 8];
	const char *how = eol[0] == '\r' ? "CRLF" : "LF";
	char *text = long_line_conf(n, eol, eol[0] == '\r' ? "[global]\r\n" : "[global]\n");
	char file[PATH_MAX];
	snprintf(file, sizeof file, "%s/cc-long-%d-%s.conf", g_tmpdir, n, how);
	ck_assert_int_eq(write_file(file, text, strlen(text), 0644), 0);
	free(text);
	char out[4096], *err;
	int rc = check_config(file, out, sizeof out, &err);
	char want[PATH_MAX + 64];
	m[0] = 0;
	if (want_ok) {
		snprintf(want, sizeof want, "%s: OK: ", file);
		if (!(rc == 0 && strncmp(out, want, strlen(want)) == 0 && !err[0]))
			snprintf(
				m, PATH_MAX + 256,
				"\n  line of %d characters + %s: expected valid, got status %d, stderr '%s'",
				n, how, rc, err);
	} else {
		snprintf(want, sizeof want, "%s:2: line longer than 4096 characters\n", file);
		if (!(rc == 1 && strcmp(err, want) == 0))
			snprintf(
				m, PATH_MAX + 256,
				"\n  line of %d characters + %s: expected '%s', got status %d, stderr '%s'",
				n, how, want, rc, err);
	}
	free(err);
	unlink(file);
	return m;
}

START_TEST(policy_check_config_long_lines)
{
	const char *r[] = {
		long_line_case(4095, "\n", 1),	 long_line_case(4096, "\n", 1),
		long_line_case(4097, "\n", 0),	 long_line_case(10000, "\n", 0),
		long_line_case(4095, "\r\n", 1), long_line_case(4096, "\r\n", 1),
		long_line_case(4097, "\r\n", 0),
	};
	char all[8 * (PATH_MAX + 256)] = "";
	for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
		strcat(all, r[i]);
	ck_assert_msg(!all[0], "long lines:%s", all);
}
END_TEST

START_TEST(policy_check_config_files)
{
	char out[4096], *err;
	/* unreadable: missing file, a directory */
	char file[PATH_MAX];
	snprintf(file, sizeof file, "%s/no-such.conf", g_tmpdir);
	int rc = check_config(file, out, sizeof out, &err);
	char want[PATH_MAX + 64];
	snprintf(want, sizeof want, "%s: cannot read: No such file or directory\n", file);
	ck_assert_msg(rc == 1 && strcmp(err, want) == 0 && !out[0],
		      "missing file: status %d stderr '%s' (want '%s')", rc, err, want);
	free(err);
	snprintf(file, sizeof file, "%s/cc-dir.conf", g_tmpdir);
	mkdir(file, 0755);
	rc = check_config(file, out, sizeof out, &err);
	snprintf(want, sizeof want, "%s: ", file);
	ck_assert_msg(rc == 1 && strncmp(err, want, strlen(want)) == 0 && !out[0],
		      "directory as config: status %d stderr '%s'", rc, err);
	free(err);
	rmdir(file);
	/* the shipped example config is valid */
	char src[PATH_MAX];
	snprintf(src, sizeof src, "%s", g_dcfs_bin);
	char *slash = strrchr(src, '/');
	*slash = 0;
	slash = strrchr(src, '/');
	*slash = 0;
	snprintf(file, sizeof file, "%s/dcfs.conf", src);
	if (access(file, R_OK) == 0) {
		rc = check_config(file, out, sizeof out, &err);
		snprintf(
			want, sizeof want,
			"%s: OK: default auto, min_size 16777216, auto_threshold 67108864, 6 classes (",
			file);
		ck_assert_msg(rc == 0 && strncmp(out, want, strlen(want)) == 0 &&
				      strstr(out, "), 2 dir rules, 3 process rules\n") && !err[0],
			      "dcfs.conf: status %d stdout '%s' stderr '%s'", rc, out, err);
		free(err);
	}
	/* usage */
	rc = run_cmd(out, sizeof out, "'%s' --check-config", g_dcfs_bin);
	ck_assert_msg(rc == 2 && strstr(out, "usage"), "no FILE: status %d '%s'", rc, out);
	rc = run_cmd(out, sizeof out, "'%s' --check-config a b", g_dcfs_bin);
	ck_assert_msg(rc == 2, "two FILEs: status %d '%s'", rc, out);
}
END_TEST

/* ---- mounting with an invalid config ---------------------------------------- */
START_TEST(policy_mount_bad_config)
{
	char err[512];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root, "backing: %s", err);
	char exp[PATH_MAX], mnt[PATH_MAX], conf[PATH_MAX];
	snprintf(exp, sizeof exp, "%s/export-badconf", root);
	snprintf(mnt, sizeof mnt, "%s/mnt-badconf", g_tmpdir);
	snprintf(conf, sizeof conf, "%s/badconf.conf", g_tmpdir);
	mkdir(exp, 0755);
	mkdir(mnt, 0755);
	const char *text =
		"[global]\ndefault = auto\n\n[class v]\nextensions = mkv\npolicy = fastest\n"
		"[dir /x]\nmin_size = huge\n";
	ck_assert_int_eq(own_write_conf(conf, text), 0);
	char l1[PATH_MAX + 200], l2[PATH_MAX + 200];
	snprintf(l1, sizeof l1, "%s:6: bad policy 'fastest' " BADPOL, conf);
	snprintf(l2, sizeof l2, "%s:8: min_size: bad size 'huge' " BADSIZE, conf);
	/* foreground */
	struct daemon d;
	memset(&d, 0, sizeof d);
	snprintf(d.mnt, sizeof d.mnt, "%s", mnt);
	char opts[PATH_MAX + 32];
	snprintf(opts, sizeof opts, "config=%s", conf);
	char *argv[] = { "dcfs", "-f", "-o", opts, exp, mnt, NULL };
	track_mount(mnt);
	ck_assert_int_eq(daemon_spawn(&d, "badconf", argv), 0);
	int st = daemon_wait_exit(&d, 10);
	char *log = read_file_str(d.log);
	int mounted = is_mounted(mnt, NULL, 0);
	if (st == -1)
		daemon_kill(&d);
	ck_assert_msg(st != -1, "dcfs -f with a bad config did not exit; log: %s", log);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status %#x, expected 1; log: %s",
		      st, log);
	ck_assert_msg(!mounted, "%s mounted despite a bad config", mnt);
	ck_assert_msg(strstr(log, l1) && strstr(log, l2), "stderr lacks FILE:LINE errors: %s", log);
	free(log);
	/* daemon mode */
	char out[4096];
	int rc = run_cmd(out, sizeof out, "'%s' -o '%s' '%s' '%s'", g_dcfs_bin, opts, exp, mnt);
	ck_assert_msg(rc == 1, "daemon mode: status %d: %s", rc, out);
	ck_assert_msg(strstr(out, l1) && strstr(out, l2), "daemon mode output: %s", out);
	ck_assert(!is_mounted(mnt, NULL, 0));
	/* mount -t dcfs */
	rc = helper_mount(exp, mnt, opts, out, sizeof out);
	ck_assert_msg(rc != 0, "mount -t dcfs with a bad config succeeded: %s", out);
	ck_assert_msg(strstr(out, l1), "mount -t dcfs output: %s", out);
	sleep_ms(100);
	ck_assert(!is_mounted(mnt, NULL, 0));
	/* the same mount point then mounts fine with a valid config */
	ck_assert_int_eq(own_write_conf(conf, "[global]\ndefault = auto\n"), 0);
	memset(&d, 0, sizeof d);
	snprintf(d.mnt, sizeof d.mnt, "%s", mnt);
	ck_assert_int_eq(daemon_spawn(&d, "badconf-fixed", argv), 0);
	int w = daemon_wait_mounted(&d, err, sizeof err);
	ck_assert_msg(w == 0, "valid config did not mount: %s", err);
	ck_assert_int_eq(run_cmd(out, sizeof out, "fusermount3 -u '%s'", mnt), 0);
	st = daemon_wait_exit(&d, 10);
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}
END_TEST

START_TEST(policy_zz_unmount)
{
	ck_assert_msg(!g_pol.err[0], "setup failed: %s", g_pol.err);
	char err[4096];
	int rc = own_mount_stop(&g_pol, err, sizeof err);
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert(!is_mounted(g_pol.mnt, NULL, 0));
}
END_TEST

Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("policy-ext4");
	tcase_add_unchecked_fixture(tc, pol_setup, pol_teardown);
	tcase_set_timeout(tc, 120 * deadline_scale());
	tcase_add_test(tc, policy_precedence);
	tcase_add_test(tc, policy_min_size);
	tcase_add_test(tc, policy_process_rule);
	tcase_add_test(tc, policy_auto_switch);
	tcase_add_test(tc, policy_auto_random_no_switch);
	tcase_add_test(tc, policy_reload);
	tcase_add_test(tc, policy_xattrs);
	tcase_add_test(tc, policy_zz_unmount);
	suite_add_tcase(s, tc);
	TCase *cc = tcase_create("check-config");
	tcase_set_timeout(cc, 60 * deadline_scale());
	tcase_add_loop_test(cc, policy_check_config, 0, N_CC);
	tcase_add_test(cc, policy_check_config_long_lines);
	tcase_add_test(cc, policy_check_config_files);
	tcase_add_test(cc, policy_mount_bad_config);
	suite_add_tcase(s, cc);
	return s;
}
