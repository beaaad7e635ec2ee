/* Suite "passthrough": kernel FUSE passthrough (fusefs/io/passthrough.c).
 *
 * TCases: pt-ext4 and pt-xfs (passthrough, the default where the kernel
 * offers it), fwd-ext4 (-o nopassthrough: the same tests on today's
 * forwarded path), unpriv-daemon (a daemon without CAP_SYS_ADMIN falls back
 * cleanly).  One file is opened at once by a passthrough handle, a
 * streaming handle and an auto handle through hard links in directories
 * of different policies, in both orders; data is compared with a model
 * through every handle, on the backing file and after a remount.  Also:
 * shared mmap writes through every class, truncate/fallocate/
 * copy_file_range while passthrough opens exist, attribute freshness after
 * passthrough writes, the caller's credentials for passthrough writes
 * (set-id clearing, root's reserved blocks) including a writer that meets
 * an id registered by another user, an fsx-style exerciser with mmap on a
 * streamed file, no backing id leak over 100 000 open/close cycles (the
 * daemon's counters, its fds, and the kernel's id table), and a kernel log
 * free of "fuse:" warnings.
 */
#include "own_mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char PT_CONF[] = "[global]\n"
			      "default = cache\n"
			      "min_size = 0\n"
			      "auto_threshold = 1M\n"
			      "readahead = 256K\n"
			      "\n"
			      "[class video]\n"
			      "extensions = mkv\n"
			      "policy = dontcache\n"
			      "\n"
			      "[dir /auto]\n"
			      "policy = auto\n"
			      "\n"
			      "[process ptstream]\n"
			      "policy = dontcache\n"
			      "\n"
			      "[process ptauto]\n"
			      "policy = auto\n";

enum ptkind {
	PK_EXT4,
	PK_XFS,
	PK_FWD
};
static const char *const pk_names[] = { "pt-ext4", "pt-xfs", "fwd-ext4" };
static enum ptkind g_pk;
static struct own_mount g_pm;
static char g_pm_root[PATH_MAX];
static int g_kmsg = -1;

static int pt_expected(void)
{
	return g_pk != PK_FWD;
}

static const char *g_tag; /* of the mount in g_pm */

static void pk_start(void)
{
	own_mount_start_opts(&g_pm, g_pm_root, g_tag, PT_CONF,
			     g_pk == PK_FWD ? "nopassthrough" : NULL);
}

/*
 * A test that remounts runs on a mount of its own (tests run in forked
 * children: the fixture's mount must survive them); g_pm points to it
 * until private_mount_end().
 */
static struct own_mount g_fixture_mount;
static char g_private_tag[64];

static void private_mount_begin(void)
{
	g_fixture_mount = g_pm;
	snprintf(g_private_tag, sizeof g_private_tag, "%s-own", pk_names[g_pk]);
	g_tag = g_private_tag;
	pk_start();
	ck_assert_msg(!g_pm.err[0], "mount: %s", g_pm.err);
}

static void private_mount_end(void)
{
	char err[2048];
	ck_assert_msg(own_mount_stop(&g_pm, err, sizeof err) == 0, "unmount: %s", err);
	g_pm = g_fixture_mount;
	g_tag = pk_names[g_pk];
}

static void pk_setup(enum ptkind k)
{
	char err[512];
	const char *root;

	g_pk = k;
	g_tag = pk_names[k];
	memset(&g_pm, 0, sizeof g_pm);
	root = backing_root(k == PK_XFS ? FS_XFS : FS_EXT4, err, sizeof err);
	if (!root) {
		snprintf(g_pm.err, sizeof g_pm.err, "backing fs: %s", err);
		return;
	}
	snprintf(g_pm_root, sizeof g_pm_root, "%s", root);
	/* From here on the kernel log must stay free of FUSE warnings. */
	g_kmsg = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (g_kmsg >= 0)
		lseek(g_kmsg, 0, SEEK_END);
	pk_start();
}
static void pk_setup_ext4(void)
{
	pk_setup(PK_EXT4);
}
static void pk_setup_xfs(void)
{
	pk_setup(PK_XFS);
}
static void pk_setup_fwd(void)
{
	pk_setup(PK_FWD);
}

static void pk_teardown(void)
{
	own_mount_kill(&g_pm);
	if (g_kmsg >= 0)
		close(g_kmsg);
	g_kmsg = -1;
}

static void pk_begin(const char *name)
{
	ck_assert_msg(!g_pm.err[0], "setup failed: %s", g_pm.err);
	ck_assert_msg(is_mounted(g_pm.mnt, NULL, 0), "%s is not mounted (daemon died?)", g_pm.mnt);
	ck_assert_msg(kill(g_pm.d.pid, 0) == 0, "dcfs daemon died in an earlier test");
	int lfd = open(g_pm.d.log, O_WRONLY | O_APPEND);
	if (lfd >= 0) {
		dprintf(lfd, "=== dcfs-tests: begin %s (%s)\n", name, pk_names[g_pk]);
		close(lfd);
	}
	umask(022);
}
#define PK_BEGIN() pk_begin(__func__)

/* Through the mount, and in the exported backing dir. */
#define PMNT(...) path_at(g_pm.mnt, __VA_ARGS__)
#define PEXP(...) path_at(g_pm.exp, __VA_ARGS__)

static long long ptstat(const char *key)
{
	return stats_get(g_pm.mnt, "passthrough", key);
}

static void mkdirs(void)
{
	mkdir(PEXP("c"), 0777);
	mkdir(PEXP("s"), 0777);
	mkdir(PEXP("auto"), 0777);
	chmod(PEXP("c"), 0777);
	chmod(PEXP("s"), 0777);
	chmod(PEXP("auto"), 0777);
}

/*
 * One inode opened in three classes: the class follows the inode's path and
 * the calling process ([process] rules), so the test renames itself around
 * the opens of the streaming and the auto handle.
 */
enum how {
	AS_CACHE,
	AS_STREAM,
	AS_AUTO
};
static int open_as(const char *path, int flags, enum how how)
{
	char saved[16] = "";
	prctl(PR_GET_NAME, saved, 0, 0, 0);
	if (how != AS_CACHE)
		prctl(PR_SET_NAME, how == AS_STREAM ? "ptstream" : "ptauto", 0, 0, 0);
	int fd = open(path, flags);
	int e = errno;
	prctl(PR_SET_NAME, saved, 0, 0, 0);
	ck_assert_msg(fd >= 0, "open %s: %s (a mode conflict must never fail an open)", path,
		      strerror(e));
	return fd;
}

static void make_file(const char *base, size_t len, unsigned seed)
{
	unsigned char *b = malloc(len);
	fill_pattern(b, len, seed);
	ck_assert_int_eq(write_file(PEXP("c/%s.dat", base), b, len, 0666), 0);
	ck_assert_int_eq(chmod(PEXP("c/%s.dat", base), 0666), 0);
	free(b);
}

static void read_expect(int fd, const unsigned char *model, size_t off, size_t len, const char *who)
{
	unsigned char *b = malloc(len);
	ssize_t n = pread(fd, b, len, (off_t)off);
	ck_assert_msg(n == (ssize_t)len, "%s: pread %zu at %zu: %zd (%s)", who, len, off, n,
		      strerror(errno));
	if (memcmp(b, model + off, len) != 0) {
		size_t i = 0;
		while (b[i] == model[off + i])
			i++;
		ck_abort_msg("%s: stale or wrong data at byte %zu", who, off + i);
	}
	free(b);
}

static void write_model(int fd, unsigned char *model, size_t off, size_t len, unsigned seed,
			const char *who)
{
	unsigned char *b = malloc(len);
	fill_pattern(b, len, seed);
	ssize_t n = pwrite(fd, b, len, (off_t)off);
	ck_assert_msg(n == (ssize_t)len, "%s: pwrite %zu at %zu: %zd (%s)", who, len, off, n,
		      strerror(errno));
	memcpy(model + off, b, len);
	free(b);
}

static void whole_file_is(const char *path, const unsigned char *model, size_t len)
{
	size_t n;
	unsigned char *b = slurp(path, &n);
	ck_assert_msg(b, "read %s: %s", path, strerror(errno));
	ck_assert_msg(n == len, "%s: %zu bytes, expected %zu", path, n, len);
	ck_assert_msg(memcmp(b, model, len) == 0, "%s: content differs from the model", path);
	free(b);
}

static void remount(void)
{
	char err[2048];
	ck_assert_msg(own_mount_stop(&g_pm, err, sizeof err) == 0, "unmount: %s", err);
	drop_caches();
	pk_start();
	ck_assert_msg(!g_pm.err[0], "remount: %s", g_pm.err);
}

/* ---- which mode a file gets ------------------------------------------------------ */
START_TEST(pt_mode_reported)
{
	PK_BEGIN();
	mkdirs();
	size_t len = 8u << 20;
	unsigned char *m = malloc(len);
	fill_pattern(m, len, 1);
	ck_assert_int_eq(write_file(PEXP("c/mode.dat"), m, len, 0644), 0);
	char *pol = xattr_str(PMNT("c/mode.dat"), "user.dcfs.policy");
	ck_assert_ptr_nonnull(pol);
	if (pt_expected())
		ck_assert_msg(strcmp(pol, "cache (passthrough; rule [global] default)") == 0,
			      "policy '%s'", pol);
	else
		ck_assert_msg(
			strcmp(pol, "cache (forwarded: -o nopassthrough; rule [global] default)") ==
				0,
			"policy '%s'", pol);
	free(pol);
	long long rc0 = stats_get(g_pm.mnt, "cache", "read_cached");
	long long k0 = ptstat("opens_kernel_io");
	whole_file_is(PMNT("c/mode.dat"), m, len);
	long long rc1 = stats_get(g_pm.mnt, "cache", "read_cached");
	if (pt_expected()) {
		/* the kernel read the backing file: the daemon saw no READ */
		ck_assert_msg(rc1 == rc0, "daemon served %lld bytes of a passthrough file",
			      rc1 - rc0);
		ck_assert_int_eq(ptstat("opens_kernel_io"), k0 + 1);
	} else {
		ck_assert_msg(rc1 >= rc0 + (long long)len, "forwarded reads not counted");
	}
	char *st = xattr_str(g_pm.mnt, "user.dcfs.stats");
	ck_assert_ptr_nonnull(st);
	ck_assert_msg(strstr(st, pt_expected() ? "\"state\":\"on\"" : "\"state\":\"off\""),
		      "stats: %s", st);
	/* uncached passthrough: only a kernel with kernel-patches/0022 offers it */
	ck_assert_msg(strstr(st, "\"uncached\":true") || strstr(st, "\"uncached\":false"),
		      "stats: %s", st);
	free(st);
	char *log = read_file_str(g_pm.d.log);
	ck_assert_msg(strstr(log, pt_expected() ? "passthrough: on"
						: "passthrough: off (-o nopassthrough)"),
		      "mount log lacks the passthrough line: %s", log);
	free(log);
	free(m);
}
END_TEST

/* ---- mixed opens of one inode, both orders -------------------------------------------- */
static void mixed_ops(int fc, int fs, int fu, unsigned char *model, size_t len)
{
	/* every handle sees what every other one wrote, at once */
	write_model(fs, model, 0, 1u << 20, 11, "stream write");
	read_expect(fc, model, 0, 1u << 20, "cache handle after stream write");
	read_expect(fu, model, 4096, 65536, "auto handle after stream write");
	/* the stream reader's read-ahead must not hide a passthrough write */
	read_expect(fs, model, 1u << 20, 4096, "stream read (fills read-ahead)");
	write_model(fc, model, (1u << 20) + 8192, 100000, 12, "cache write");
	read_expect(fs, model, (1u << 20) + 4096, 131072, "stream read after cache write");
	read_expect(fu, model, 1u << 20, 262144, "auto read after cache write");
	write_model(fu, model, len - 300000, 300000, 13, "auto write");
	read_expect(fc, model, len - 400000, 400000, "cache read after auto write");
	read_expect(fs, model, len - 400000, 400000, "stream read after auto write");
	/* a long sequential auto read switches it to uncached mid-way */
	for (size_t off = 0; off + 65536 <= len; off += 65536)
		read_expect(fu, model, off, 65536, "auto sequential");
	write_model(fs, model, 3u << 20, 65536, 14, "stream write 2");
	read_expect(fc, model, 3u << 20, 65536, "cache read 2");
}

static int open_ok(const char *path, int flags)
{
	return open_as(path, flags, AS_CACHE);
}

START_TEST(pt_mixed_opens)
{
	PK_BEGIN();
	private_mount_begin();
	mkdirs();
	const size_t len = 4u << 20;
	unsigned char *ma = malloc(len), *mb = malloc(len);
	fill_pattern(ma, len, 100);
	fill_pattern(mb, len, 200);
	make_file("a", len, 100);
	make_file("b", len, 200);

	/* order 1: passthrough open first, then a stream and an auto handle */
	long long d0 = ptstat("opens_daemon_io"), k0 = ptstat("opens_kernel_io");
	int fc = open_ok(PMNT("c/a.dat"), O_RDWR);
	int fs = open_as(PMNT("c/a.dat"), O_RDWR, AS_STREAM);
	int fu = open_as(PMNT("c/a.dat"), O_RDWR, AS_AUTO);
	if (pt_expected()) {
		ck_assert_int_eq(ptstat("opens_kernel_io"), k0 + 1);
		ck_assert_int_eq(ptstat("opens_daemon_io"), d0 + 2);
		ck_assert_int_eq(ptstat("backing_ids_open"), 1);
	}
	mixed_ops(fc, fs, fu, ma, len);
	/* a second passthrough open shares the inode's one backing id */
	int fc2 = open_ok(PMNT("c/a.dat"), O_RDONLY);
	read_expect(fc2, ma, 0, len, "second cache handle");
	if (pt_expected())
		ck_assert_int_eq(ptstat("backing_ids_open"), 1);
	close(fc2);
	close(fc);
	close(fs);
	close(fu);

	/* order 2: an auto handle first keeps the inode forwarded */
	fu = open_as(PMNT("c/b.dat"), O_RDWR, AS_AUTO);
	char *pol = xattr_str(PMNT("c/b.dat"), "user.dcfs.policy");
	ck_assert_ptr_nonnull(pol);
	ck_assert_msg(strncmp(pol, "cache (forwarded: ", 18) == 0, "policy '%s'", pol);
	free(pol);
	fc = open_ok(PMNT("c/b.dat"), O_RDWR);
	fs = open_as(PMNT("c/b.dat"), O_RDWR, AS_STREAM);
	mixed_ops(fc, fs, fu, mb, len);
	close(fc);
	close(fs);
	close(fu);
	/* the last close resets the inode: the next open may pass through.
	 * RELEASE is sent after close(2) returns (asynchronously): wait until
	 * the daemon has seen the forwarded handles go. */
	for (double t0 = now_s(); pt_expected() && now_s() - t0 < 10 * deadline_scale();) {
		pol = xattr_str(PMNT("c/b.dat"), "user.dcfs.policy");
		int fwd = pol && strncmp(pol, "cache (forwarded: ", 18) == 0;
		free(pol);
		if (!fwd)
			break;
		sleep_ms(10);
	}
	fc = open_ok(PMNT("c/b.dat"), O_RDONLY);
	read_expect(fc, mb, 0, len, "cache handle after the forwarded ones closed");
	if (pt_expected()) {
		pol = xattr_str(PMNT("c/b.dat"), "user.dcfs.policy");
		ck_assert_msg(pol && strncmp(pol, "cache (passthrough; ", 20) == 0, "policy '%s'",
			      pol);
		free(pol);
	}
	close(fc);

	whole_file_is(PEXP("c/a.dat"), ma, len);
	whole_file_is(PEXP("c/b.dat"), mb, len);
	remount();
	whole_file_is(PMNT("c/a.dat"), ma, len);
	whole_file_is(PMNT("c/b.dat"), mb, len);
	unlink(PEXP("c/a.dat"));
	unlink(PEXP("c/b.dat"));
	private_mount_end();
	free(ma);
	free(mb);
}
END_TEST

/* ---- shared writable maps through each class ------------------------------------------ */
static int mmap_shared_expected(void)
{
	/* passthrough maps the backing file; ALLOW_MMAP lets direct I/O map */
	char *st = xattr_str(g_pm.mnt, "user.dcfs.stats");
	int ok = st && (strstr(st, "\"state\":\"on\"") || strstr(st, "\"direct_io_mmap\":true"));
	free(st);
	return ok;
}

START_TEST(pt_mmap_shared)
{
	PK_BEGIN();
	mkdirs();
	const size_t len = 1u << 20;
	unsigned char *model = malloc(len);
	fill_pattern(model, len, 300);
	make_file("m", len, 300);
	const char *names[] = { "cache", "stream", "auto" };
	int shared = mmap_shared_expected();
	for (int i = 0; i < 3; i++) {
		int fd = open_as(PMNT("c/m.dat"), O_RDWR, (enum how)i);
		int other = open_as(PMNT("c/m.dat"), O_RDWR, (enum how)((i + 1) % 3));
		unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (!shared && i == 1) {
			ck_assert_msg(p == MAP_FAILED && errno == ENODEV,
				      "shared map of a stream without ALLOW_MMAP: expected ENODEV");
			close(fd);
			close(other);
			continue;
		}
		ck_assert_msg(p != MAP_FAILED, "%s: MAP_SHARED RW: %s", names[i], strerror(errno));
		ck_assert_msg(memcmp(p, model, len) == 0, "%s: map shows other data", names[i]);
		unsigned char pat[12288];
		fill_pattern(pat, sizeof pat, 310 + (unsigned)i);
		memcpy(p + 4096 * (1 + 4 * i), pat, sizeof pat);
		memcpy(model + 4096 * (1 + 4 * i), pat, sizeof pat);
		ck_assert_int_eq(msync(p, len, MS_SYNC), 0);
		read_expect(other, model, 0, len, "other handle after msync");
		/* and writes through another handle show in the map */
		write_model(other, model, 65536, 4096, 320 + (unsigned)i, "write beside a map");
		ck_assert_msg(memcmp(p + 65536, model + 65536, 4096) == 0,
			      "%s: map does not show a write through another handle", names[i]);
		munmap(p, len);
		close(fd);
		close(other);
	}
	whole_file_is(PEXP("c/m.dat"), model, len);
	free(model);
}
END_TEST

/* ---- truncate, fallocate, copy_file_range beside passthrough opens --------------------------- */
START_TEST(pt_trunc_falloc_cfr)
{
	PK_BEGIN();
	mkdirs();
	size_t len = 2u << 20;
	unsigned char *model = calloc(1, 4u << 20);
	fill_pattern(model, len, 400);
	ck_assert_int_eq(write_file(PEXP("c/t.dat"), model, len, 0644), 0);
	int fa = open_ok(PMNT("c/t.dat"), O_RDWR);
	int fb = open_ok(PMNT("c/t.dat"), O_RDWR);
	read_expect(fa, model, 0, len, "initial");
	/* truncate down through the other handle */
	ck_assert_int_eq(ftruncate(fb, 1536 * 1024), 0);
	len = 1536 * 1024;
	memset(model + len, 0, (4u << 20) - len);
	struct stat st;
	ck_assert_int_eq(fstat(fa, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)len);
	char c;
	ck_assert_int_eq(pread(fa, &c, 1, (off_t)len), 0);
	read_expect(fa, model, len - 65536, 65536, "after truncate");
	/* punch a hole, then extend by fallocate */
	ck_assert_int_eq(fallocate(fb, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 65536, 131072),
			 0);
	memset(model + 65536, 0, 131072);
	read_expect(fa, model, 0, 262144, "after punch");
	ck_assert_int_eq(fallocate(fb, 0, (off_t)len, 524288), 0);
	len += 524288;
	ck_assert_int_eq(fstat(fa, &st), 0);
	ck_assert_int_eq(st.st_size, (off_t)len);
	read_expect(fa, model, len - 600000, 600000, "after fallocate");
	/* copy_file_range within the file and into another passthrough file */
	loff_t in = 262144, out = 1u << 20;
	ssize_t n = copy_file_range(fb, &in, fb, &out, 65536, 0);
	ck_assert_msg(n == 65536, "copy_file_range: %zd (%s)", n, strerror(errno));
	memmove(model + (1u << 20), model + 262144, 65536);
	read_expect(fa, model, (1u << 20) - 4096, 65536 + 8192, "after copy_file_range");
	ck_assert_int_eq(write_file(PEXP("c/u.dat"), "", 0, 0644), 0);
	int fu = open_ok(PMNT("c/u.dat"), O_RDWR);
	in = 0;
	out = 0;
	n = copy_file_range(fa, &in, fu, &out, len, 0);
	ck_assert_msg(n > 0, "copy_file_range to another file: %zd (%s)", n, strerror(errno));
	while ((size_t)out < len) {
		n = copy_file_range(fa, &in, fu, &out, len - (size_t)out, 0);
		ck_assert_int_gt(n, 0);
	}
	read_expect(fu, model, 0, len, "copy in the other file");
	close(fu);
	close(fa);
	close(fb);
	whole_file_is(PEXP("c/t.dat"), model, len);
	whole_file_is(PMNT("c/t.dat"), model, len);
	free(model);
}
END_TEST

/* ---- size and mtime seen through the mount right after passthrough writes ------------------ */
START_TEST(pt_attr_fresh)
{
	PK_BEGIN();
	mkdirs();
	ck_assert_int_eq(write_file(PEXP("c/at.dat"), "x", 1, 0644), 0);
	struct stat m0, m1, b1;
	ck_assert_int_eq(stat(PMNT("c/at.dat"), &m0), 0); /* attributes now cached */
	int fd = open_ok(PMNT("c/at.dat"), O_WRONLY);
	sleep_ms(20);
	char buf[5000];
	memset(buf, 'q', sizeof buf);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(pwrite(fd, buf, sizeof buf, 100000 * (i + 1)),
				 (ssize_t)sizeof buf);
		ck_assert_int_eq(stat(PMNT("c/at.dat"), &m1), 0);
		ck_assert_int_eq(stat(PEXP("c/at.dat"), &b1), 0);
		ck_assert_msg(m1.st_size == 100000 * (i + 1) + (off_t)sizeof buf,
			      "size through the mount %lld after a write up to %d",
			      (long long)m1.st_size, 100000 * (i + 1) + (int)sizeof buf);
		ck_assert_msg(m1.st_mtim.tv_sec == b1.st_mtim.tv_sec &&
				      m1.st_mtim.tv_nsec == b1.st_mtim.tv_nsec,
			      "mtime through the mount is stale after a write");
	}
	ck_assert_msg(m1.st_mtim.tv_sec != m0.st_mtim.tv_sec ||
			      m1.st_mtim.tv_nsec != m0.st_mtim.tv_nsec,
		      "mtime did not change");
	ck_assert_int_eq(ftruncate(fd, 10), 0);
	ck_assert_int_eq(stat(PMNT("c/at.dat"), &m1), 0);
	ck_assert_int_eq(m1.st_size, 10);
	close(fd);
}
END_TEST

/* ---- the caller's credentials for passthrough writes ------------------------------------ */
static const char *g_as_path;

static long write_existing(void *a)
{
	(void)a;
	int fd = open(g_as_path, O_WRONLY);
	if (fd < 0)
		return -1;
	long r = pwrite(fd, "y", 1, 0);
	int e = errno;
	close(fd);
	errno = e;
	return r;
}

static long write_4m_sync(void *a)
{
	(void)a;
	int fd = open(g_as_path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	static char buf[1 << 20];
	memset(buf, 'z', sizeof buf);
	long r = 0;
	for (int i = 0; i < 4 && r >= 0; i++)
		r = write(fd, buf, sizeof buf);
	if (r >= 0)
		r = fsync(fd);
	int e = errno;
	close(fd);
	errno = e;
	return r < 0 ? -1 : 0;
}

static void setid_file(const char *rel)
{
	ck_assert_int_eq(write_file(PEXP("%s", rel), "x", 1, 0666), 0);
	ck_assert_int_eq(chmod(PEXP("%s", rel), 06777), 0);
}

START_TEST(pt_creds_setid)
{
	PK_BEGIN();
	mkdirs();
	struct stat st;
	/*
	 * 1: an unprivileged writer of a set-id file is forwarded: the kernel
	 * would not tell that the backing filesystem cleared the bits at its
	 * passthrough write, and the mount would show them until the
	 * attribute timeout (issue 38 #3).  A plain file keeps kernel I/O.
	 */
	setid_file("c/k1.dat");
	ck_assert_int_eq(mode_only(PMNT("c/k1.dat")), 06777);
	g_as_path = PMNT("c/k1.dat");
	long long k0 = ptstat("opens_kernel_io"), f0 = ptstat("opens_forwarded");
	struct res r = run_as(TEST_UID, TEST_GID, write_existing, NULL);
	ck_assert_msg(r.ret == 1, "write as %d: %s", TEST_UID, res_str(r));
	if (pt_expected()) {
		ck_assert_int_eq(ptstat("opens_kernel_io"), k0);
		ck_assert_int_eq(ptstat("opens_forwarded"), f0 + 1);
	}
	ck_assert_int_eq(stat(PEXP("c/k1.dat"), &st), 0);
	ck_assert_msg(!(st.st_mode & (S_ISUID | S_ISGID)),
		      "set-id bits survived a write by another user (0%o)", st.st_mode);
	ck_assert_int_eq(mode_only(PMNT("c/k1.dat")), 0777);
	ck_assert_int_eq(write_file(PEXP("c/k0.dat"), "x", 1, 0666), 0);
	ck_assert_int_eq(chmod(PEXP("c/k0.dat"), 0666), 0);
	g_as_path = PMNT("c/k0.dat");
	r = run_as(TEST_UID, TEST_GID, write_existing, NULL);
	ck_assert_msg(r.ret == 1, "write as %d: %s", TEST_UID, res_str(r));
	if (pt_expected())
		ck_assert_int_eq(ptstat("opens_kernel_io"), k0 + 1);
	/* 2: root's reader holds the id; the user's write must still clear them */
	setid_file("c/k2.dat");
	int ro = open_ok(PMNT("c/k2.dat"), O_RDONLY);
	g_as_path = PMNT("c/k2.dat");
	long long d0 = ptstat("opens_daemon_io");
	r = run_as(TEST_UID, TEST_GID, write_existing, NULL);
	ck_assert_msg(r.ret == 1, "write as %d: %s", TEST_UID, res_str(r));
	if (pt_expected())
		ck_assert_msg(ptstat("opens_daemon_io") == d0 + 1,
			      "a writer of other credentials must not get kernel I/O on root's id");
	ck_assert_int_eq(stat(PEXP("c/k2.dat"), &st), 0);
	ck_assert_msg(!(st.st_mode & (S_ISUID | S_ISGID)),
		      "set-id bits survived a write by another user beside root's open (0%o)",
		      st.st_mode);
	ck_assert_int_eq(mode_only(PMNT("c/k2.dat")), 0777);
	char b;
	ck_assert_int_eq(pread(ro, &b, 1, 0), 1);
	ck_assert_int_eq(b, 'y');
	close(ro);
	/* 3: root's own write keeps them, as natively (forwarded too: see 1) */
	setid_file("c/k3.dat");
	int w = open_ok(PMNT("c/k3.dat"), O_WRONLY);
	ck_assert_int_eq(pwrite(w, "r", 1, 0), 1);
	close(w);
	ck_assert_int_eq(stat(PEXP("c/k3.dat"), &st), 0);
	ck_assert_msg((st.st_mode & 06000) == 06000, "root's write cleared set-id bits (0%o)",
		      st.st_mode);
	ck_assert_int_eq(mode_only(PMNT("c/k3.dat")), 06777);
}
END_TEST

/* ext4 keeps blocks for root: a user's passthrough write must not use them. */
START_TEST(pt_creds_reserved_blocks)
{
	PK_BEGIN();
	mkdirs();
	struct statvfs sv;
	ck_assert_int_eq(statvfs(g_pm.exp, &sv), 0);
	if (sv.f_bfree - sv.f_bavail < 2048)
		return; /* no root reserve on this filesystem */
	char filler[PATH_MAX];
	snprintf(filler, sizeof filler, "%s/pt-filler", g_pm_root);
	int fd = open(filler, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	off_t off = 0;
	for (int i = 0; i < 64; i++) {
		ck_assert_int_eq(statvfs(g_pm.exp, &sv), 0);
		if (sv.f_bavail == 0)
			break;
		off_t l = (off_t)sv.f_bavail * sv.f_frsize;
		while (l >= 4096 && fallocate(fd, 0, off, l) < 0)
			l /= 2;
		if (l < 4096)
			break;
		off += l;
	}
	close(fd);
	ck_assert_int_eq(statvfs(g_pm.exp, &sv), 0);
	int filled = sv.f_bavail == 0 && sv.f_bfree > 1024;
	/* a: the user is the first opener; b: root's reader holds the id */
	g_as_path = PMNT("c/w1.dat");
	struct res ra = run_as(TEST_UID, TEST_GID, write_4m_sync, NULL);
	ck_assert_int_eq(write_file(PEXP("c/w2.dat"), "", 0, 0666), 0);
	ck_assert_int_eq(chmod(PEXP("c/w2.dat"), 0666), 0);
	int ro = open(PMNT("c/w2.dat"), O_RDONLY);
	g_as_path = PMNT("c/w2.dat");
	struct res rb = run_as(TEST_UID, TEST_GID, write_4m_sync, NULL);
	if (ro >= 0)
		close(ro);
	/* c: root may use its reserve through passthrough, as natively */
	g_as_path = PMNT("c/w3.dat");
	struct res rc = run_as(0, 0, write_4m_sync, NULL);
	unlink(filler);
	unlink(PEXP("c/w1.dat"));
	unlink(PEXP("c/w2.dat"));
	unlink(PEXP("c/w3.dat"));
	ck_assert_msg(filled, "could not fill the filesystem up to the reserve");
	ck_assert_msg(ra.ret < 0 && ra.err == ENOSPC,
		      "user's passthrough write into root's reserve: %s", res_str(ra));
	ck_assert_msg(rb.ret < 0 && rb.err == ENOSPC,
		      "user's write beside root's passthrough open went into the reserve: %s",
		      res_str(rb));
	ck_assert_msg(rc.ret == 0, "root's write into its reserve: %s", res_str(rc));
}
END_TEST

/* ---- fsx-style exerciser with mmap on a streamed file ---------------------------------- */
static uint64_t xs;
static uint64_t xr(void)
{
	xs ^= xs >> 12;
	xs ^= xs << 25;
	xs ^= xs >> 27;
	return xs * 2685821657736338717ULL;
}

START_TEST(pt_fsx_mmap_stream)
{
	PK_BEGIN();
	mkdirs();
	const size_t cap = 2u << 20;
	unsigned char *model = calloc(1, cap), *b = malloc(cap);
	size_t size = 0;
	ck_assert_int_eq(write_file(PEXP("s/fsx.mkv"), "", 0, 0644), 0);
	int fd = open_ok(PMNT("s/fsx.mkv"), O_RDWR);
	int shared = mmap_shared_expected();
	xs = 0x9e3779b97f4a7c15ULL ^ (uint64_t)g_pk;
	int ops = g_sanitized ? 1000 : 4000;
	for (int i = 0; i < ops; i++) {
		int op = (int)(xr() % 8);
		size_t off = xr() % cap, len = 1 + xr() % 70000;
		if (off + len > cap)
			len = cap - off;
		if ((op == 4 || op == 5) && !shared)
			op = 0;
		switch (op) {
		case 0:
		case 1: /* write */
			fill_pattern(b, len, (unsigned)i);
			ck_assert_int_eq(pwrite(fd, b, len, (off_t)off), (ssize_t)len);
			memcpy(model + off, b, len);
			if (off + len > size)
				size = off + len;
			break;
		case 2:
		case 3: { /* read */
			ssize_t n = pread(fd, b, len, (off_t)off);
			size_t want = off >= size ? 0 : (size - off < len ? size - off : len);
			ck_assert_msg(n == (ssize_t)want,
				      "op %d: read %zu at %zu: %zd, expected %zu", i, len, off, n,
				      want);
			ck_assert_msg(memcmp(b, model + off, want) == 0,
				      "op %d: read at %zu differs", i, off);
			break;
		}
		case 4:
		case 5: { /* mmap write / mmap read inside the file */
			if (size < 8192)
				break;
			size_t pg = (off % size) & ~(size_t)4095;
			size_t ml = len;
			if (pg + ml > size)
				ml = size - pg;
			unsigned char *p =
				mmap(NULL, ml, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)pg);
			ck_assert_msg(p != MAP_FAILED, "op %d: mmap: %s", i, strerror(errno));
			if (op == 4) {
				fill_pattern(b, ml, (unsigned)i + 7);
				memcpy(p, b, ml);
				memcpy(model + pg, b, ml);
				if (xr() % 2)
					ck_assert_int_eq(msync(p, ml, MS_SYNC), 0);
			} else {
				ck_assert_msg(memcmp(p, model + pg, ml) == 0,
					      "op %d: mapped data at %zu differs", i, pg);
			}
			munmap(p, ml);
			break;
		}
		case 6: /* truncate */
			if (xr() % 3)
				break;
			ck_assert_int_eq(ftruncate(fd, (off_t)off), 0);
			if (off < size)
				memset(model + off, 0, size - off);
			size = off;
			break;
		case 7: /* punch */
			if (off >= size)
				break;
			if (off + len > size)
				len = size - off;
			ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						   (off_t)off, (off_t)len),
					 0);
			memset(model + off, 0, len);
			break;
		}
	}
	close(fd);
	whole_file_is(PMNT("s/fsx.mkv"), model, size);
	whole_file_is(PEXP("s/fsx.mkv"), model, size);
	free(model);
	free(b);
}
END_TEST

/* ---- backing ids are closed with the last open -------------------------------------------- */
static int count_fds(pid_t pid, int *fuse_fd)
{
	char dir[64], link[PATH_MAX], path[PATH_MAX + 300];
	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		n++;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		ssize_t l = readlink(path, link, sizeof link - 1);
		if (l > 0) {
			link[l] = 0;
			if (fuse_fd && strcmp(link, "/dev/fuse") == 0)
				*fuse_fd = atoi(de->d_name);
		}
	}
	closedir(d);
	return n;
}

START_TEST(pt_no_backing_leak)
{
	PK_BEGIN();
	mkdirs();
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(write_file(PEXP("c/l%d.dat", i), "abcdefgh", 8, 0644), 0);
	for (int i = 0; i < 8; i++) /* looked up once: their O_PATH fds stay */
		close(open_ok(PMNT("c/l%d.dat", i), O_RDONLY));
	int devfd = -1;
	int fds0 = count_fds(g_pm.d.pid, &devfd);
	long long opened0 = ptstat("backing_ids_opened");
	const int cycles = g_sanitized ? 20000 : 100000;
	int keep = open_ok(PMNT("c/l0.dat"), O_RDONLY); /* one inode stays open */
	for (int i = 0; i < cycles; i++) {
		int fd = open(PMNT("c/l%d.dat", i % 8), i % 3 ? O_RDONLY : O_RDWR);
		ck_assert_msg(fd >= 0, "cycle %d: open: %s", i, strerror(errno));
		char c;
		ck_assert_int_eq(pread(fd, &c, 1, i % 8), 1);
		close(fd);
	}
	close(keep);
	/* RELEASE is asynchronous: give the last ones a moment */
	for (int i = 0; i < 100 && ptstat("backing_ids_open") != 0; i++)
		sleep_ms(20);
	ck_assert_int_eq(ptstat("backing_ids_open"), 0);
	ck_assert_int_eq(ptstat("backing_ids_opened"), ptstat("backing_ids_closed"));
	if (pt_expected())
		ck_assert_msg(ptstat("backing_ids_opened") - opened0 >= cycles / 2,
			      "expected a backing id per cycle of a closed inode");
	int fds1 = count_fds(g_pm.d.pid, NULL);
	ck_assert_msg(fds1 <= fds0 + 2, "daemon fds %d before, %d after", fds0, fds1);
	if (!pt_expected())
		return;
	/* The kernel's table: every id the daemon ever had must be gone. */
	ck_assert_int_ge(devfd, 0);
	int pidfd = (int)syscall(SYS_pidfd_open, g_pm.d.pid, 0);
	ck_assert_int_ge(pidfd, 0);
	int dfd = (int)syscall(SYS_pidfd_getfd, pidfd, devfd, 0);
	ck_assert_msg(dfd >= 0, "pidfd_getfd: %s", strerror(errno));
	long long max = ptstat("max_backing_id");
	long long live = 0;
	for (long long id = 1; id <= max; id++) {
		uint32_t arg = (uint32_t)id;
		/* FUSE_DEV_IOC_BACKING_CLOSE: ENOENT for an id not registered */
		if (ioctl(dfd, _IOW(229, 2, uint32_t), &arg) == 0)
			live++;
		else
			ck_assert_msg(errno == ENOENT, "BACKING_CLOSE %lld: %s", id,
				      strerror(errno));
	}
	close(dfd);
	close(pidfd);
	ck_assert_msg(live == 0, "%lld backing ids were still registered in the kernel", live);
}
END_TEST

/* Processes other than this run's daemons that hold /dev/fuse open. */
static int other_fuse_servers(char *pids, size_t size)
{
	DIR *proc = opendir("/proc");
	struct dirent *de;
	int n = 0;
	if (!proc)
		return 0;
	while ((de = readdir(proc))) {
		int pid = atoi(de->d_name);
		char path[PATH_MAX], cmd[4096];
		if (pid <= 0 || pid == g_pm.d.pid)
			continue;
		int fuse_fd = -1;
		if (count_fds(pid, &fuse_fd) < 0 || fuse_fd < 0)
			continue;
		snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
		int fd = open(path, O_RDONLY);
		ssize_t l = fd < 0 ? -1 : read(fd, cmd, sizeof cmd - 1);
		if (fd >= 0)
			close(fd);
		if (l > 0) {
			cmd[l] = 0;
			for (ssize_t i = 0; i < l; i++)
				if (!cmd[i])
					cmd[i] = ' ';
			if (strstr(cmd, g_tmpdir))
				continue; /* a daemon of this run */
		}
		size_t used = strlen(pids);
		snprintf(pids + used, size - used, " %d", pid);
		n++;
	}
	closedir(proc);
	return n;
}

/* ---- the kernel log stayed clean ------------------------------------------------------- */
START_TEST(pt_kernel_log_clean)
{
	PK_BEGIN();
	if (g_kmsg < 0)
		return;
	char rec[8192];
	int bad = 0;
	char first[512] = "";
	for (;;) {
		ssize_t n = read(g_kmsg, rec, sizeof rec - 1);
		if (n < 0 && errno == EPIPE)
			continue; /* overwritten records */
		if (n <= 0)
			break;
		rec[n] = 0;
		char *msg = strchr(rec, ';');
		if (msg && strstr(msg, "fuse:")) {
			if (!bad++)
				snprintf(first, sizeof first, "%s", msg + 1);
		}
	}
	if (bad) {
		/*
		 * The kernel log is the machine's: a FUSE server of another test
		 * run can fill it too.  Only a log with no other server running
		 * is evidence against this one.
		 */
		char others[256] = "";
		int n = other_fuse_servers(others, sizeof others);
		if (n > 0) {
			fprintf(stderr,
				"note: %d FUSE warnings in the kernel log, first: %s; not "
				"attributed: other FUSE servers run (pids%s)\n",
				bad, first, others);
			return;
		}
	}
	ck_assert_msg(!bad, "%d FUSE warnings in the kernel log during this TCase, first: %s", bad,
		      first);
}
END_TEST

START_TEST(pt_zz_unmount)
{
	char err[2048];
	ck_assert_msg(!g_pm.err[0], "setup failed: %s", g_pm.err);
	ck_assert_msg(own_mount_stop(&g_pm, err, sizeof err) == 0, "%s", err);
}
END_TEST

/* ---- a daemon without CAP_SYS_ADMIN ---------------------------------------------------- */
/*
 * Root of a user namespace: it mounts dcfs there, but has no CAP_SYS_ADMIN
 * where the kernel checks it for backing files (the initial namespace), as
 * in a rootless container.  /dev/fuse is 0600 here, so an unprivileged uid
 * could not run a daemon at all.  The daemon must serve every open
 * forwarded, say why, and exit cleanly.
 */
START_TEST(pt_unprivileged_daemon)
{
	char err[512];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root, "backing: %s", err);
	char exp[PATH_MAX], mnt[PATH_MAX], log[PATH_MAX], script[PATH_MAX + 16];
	snprintf(exp, sizeof exp, "%s/export-pt-userns", root);
	snprintf(mnt, sizeof mnt, "%s/mnt-pt-userns", g_tmpdir);
	snprintf(log, sizeof log, "%s/logs/pt-userns.log", g_tmpdir);
	snprintf(script, sizeof script, "%s/pt-userns.sh", g_tmpdir);
	mkdir(exp, 0755);
	mkdir(mnt, 0755);
	static const char sh[] =
		"D=$1 E=$2 M=$3 L=$4\n"
		"\"$D\" -f \"$E\" \"$M\" >\"$L\" 2>&1 &\n"
		"pid=$!\n"
		"for i in $(seq 200); do grep -q \" $M fuse\" /proc/self/mounts && break; sleep 0.05; done\n"
		"head -c 1048576 /dev/urandom >\"$M/u.dat\" || exit 11\n"
		"cmp \"$M/u.dat\" \"$E/u.dat\" || exit 12\n"
		"cat \"$M/u.dat\" >/dev/null || exit 13\n"
		"getfattr --only-values -n user.dcfs.policy \"$M/u.dat\" || exit 14\n"
		"echo\n"
		"umount \"$M\" || exit 15\n"
		"wait $pid; echo \"daemon exit $?\"\n";
	ck_assert_int_eq(write_file(script, sh, strlen(sh), 0755), 0);
	char out[4096];
	int rc = run_cmd(out, sizeof out, "unshare -Urm sh '%s' '%s' '%s' '%s' '%s'", script,
			 g_dcfs_bin, exp, mnt, log);
	char *l = read_file_str(log);
	ck_assert_msg(rc == 0, "script failed (%d): %s; daemon log: %s", rc, out, l);
	ck_assert_msg(
		strstr(out,
		       "cache (forwarded: the kernel refused to register backing files (EPERM); "),
		"policy: %s", out);
	ck_assert_msg(strstr(out, "daemon exit 0"), "daemon: %s; log: %s", out, l);
	ck_assert_msg(
		strstr(l,
		       "passthrough: off (the kernel refused to register backing files (EPERM))"),
		"log lacks the fallback line: %s", l);
	const char *bad = log_problem(l);
	ck_assert_msg(!bad || strstr(bad, "passthrough"), "daemon log: %s", bad);
	free(l);
}
END_TEST

/* ---- counters of what the kernel moves -------------------------------------------- */
static long long wait_stat_ge(const char *cls, const char *key, long long want)
{
	long long v = -1;
	for (int i = 0; i < 100; i++) {
		v = stats_get(g_pm.mnt, cls, key);
		if (v >= want)
			break;
		sleep_ms(50); /* releases are asynchronous */
	}
	return v;
}

/*
 * Bytes the kernel moves without a request to dcfs are counted, estimated
 * (read_kernel, written_kernel): a streamed film read by the kernel by its
 * read-ahead front, up to its size; a cache-class file written through
 * passthrough by its growth from open to close.  On the forwarded path the
 * daemon counts the same bytes exactly, under the other modes.
 */
START_TEST(pt_kernel_counters)
{
	PK_BEGIN();
	mkdirs();
	size_t len = 16u << 20;
	unsigned char *m = malloc(len);
	fill_pattern(m, len, 26);
	const char *wkey = pt_expected() ? "written_kernel" : "written_cached";
	long long w0 = stats_get(g_pm.mnt, "cache", wkey);
	ck_assert_int_ge(w0, 0);
	ck_assert_int_eq(write_file(PMNT("c/k.dat"), m, len, 0644), 0);
	long long w1 = wait_stat_ge("cache", wkey, w0 + (long long)len);
	ck_assert_msg(w1 == w0 + (long long)len, "cache.%s grew by %lld, %zu written", wkey,
		      w1 - w0, len);

	ck_assert_int_eq(write_file(PEXP("s/film.mkv"), m, len, 0644), 0);
	drop_caches(); /* a file with pages cached at open is not dropped behind */
	const char *rkey = pt_expected() ? "read_kernel" : "read_dontcache";
	long long r0 = stats_get(g_pm.mnt, "dontcache", rkey);
	long long c0 = stats_get(g_pm.mnt, "dontcache", "read_cached");
	whole_file_is(PMNT("s/film.mkv"), m, len);
	long long r1 = wait_stat_ge("dontcache", rkey, r0 + (long long)len);
	long long c1 = stats_get(g_pm.mnt, "dontcache", "read_cached");
	if (pt_expected())
		ck_assert_msg(r1 - r0 == (long long)len,
			      "dontcache.read_kernel grew by %lld, %zu read", r1 - r0, len);
	else
		ck_assert_msg(r1 - r0 + c1 - c0 >= (long long)len,
			      "forwarded: dontcache reads grew by %lld + %lld, %zu read", r1 - r0,
			      c1 - c0, len);
	char *t = xattr_str(g_pm.mnt, "user.dcfs.stats.prometheus");
	ck_assert_ptr_nonnull(t);
	ck_assert_msg(strstr(t, "class=\"dontcache\",direction=\"read\",mode=\"kernel\"}"),
		      "no kernel series in --prometheus");
	free(t);
	free(m);
}
END_TEST

Suite *passthrough_suite(void)
{
	Suite *s = suite_create("passthrough");
	void (*setups[])(void) = { pk_setup_ext4, pk_setup_xfs, pk_setup_fwd };
	for (int k = 0; k < 3; k++) {
		TCase *tc = tcase_create(pk_names[k]);
		tcase_add_unchecked_fixture(tc, setups[k], pk_teardown);
		tcase_set_timeout(tc, 240 * deadline_scale());
		tcase_add_test(tc, pt_mode_reported);
		tcase_add_test(tc, pt_mixed_opens);
		tcase_add_test(tc, pt_mmap_shared);
		tcase_add_test(tc, pt_trunc_falloc_cfr);
		tcase_add_test(tc, pt_attr_fresh);
		tcase_add_test(tc, pt_kernel_counters);
		tcase_add_test(tc, pt_creds_setid);
		if (k != PK_XFS)
			tcase_add_test(tc, pt_creds_reserved_blocks);
		tcase_add_test(tc, pt_fsx_mmap_stream);
		if (k != PK_XFS)
			tcase_add_test(tc, pt_no_backing_leak);
		tcase_add_test(tc, pt_kernel_log_clean);
		tcase_add_test(tc, pt_zz_unmount);
		suite_add_tcase(s, tc);
	}
	TCase *tu = tcase_create("unpriv-daemon");
	tcase_set_timeout(tu, 120 * deadline_scale());
	tcase_add_test(tu, pt_unprivileged_daemon);
	suite_add_tcase(s, tu);
	return s;
}
