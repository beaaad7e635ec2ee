/* Suite "stream": the streaming engine on ext4 and xfs (RWF_DONTCACHE) and
 * btrfs (no RWF_DONTCACHE: the fallback's write-behind/drop-behind).  This
 * file holds the fixtures, the helpers every mechanism's file uses
 * (stream.h) and the suite, which adds each file's tests in turn.
 *
 * Each TCase runs its own daemon with STREAM_CONF; the btrfs TCase makes a
 * loop-mounted btrfs image in the harness temp dir (mount -o loop, so the
 * loop device goes away with the unmount; the harness sweeps every mount
 * below its temp dir at exit, also on signals).
 */
#include "stream.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

const char *const sk_names[] = { "ext4", "xfs", "btrfs" };
enum skind g_sk;
struct own_mount g_sm;
char g_sm_root[PATH_MAX];
struct own_mount g_one;
static char g_btrfs_dir[PATH_MAX];
static int g_btrfs_ready;

/* ---- btrfs backing --------------------------------------------------------- */
static const char *btrfs_root(char *err, size_t errlen)
{
	if (g_btrfs_ready)
		return g_btrfs_dir;
	char img[PATH_MAX + 16], out[4096];
	snprintf(g_btrfs_dir, sizeof g_btrfs_dir, "%s/btrfs", g_tmpdir);
	snprintf(img, sizeof img, "%s/btrfs.img", g_tmpdir);
	int fd = open(img, O_CREAT | O_RDWR | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 1LL << 30) < 0) {
		snprintf(err, errlen, "create %s: %s", img, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	close(fd);
	int rc = run_cmd(out, sizeof out, "mkfs.btrfs -q -f '%s'", img);
	if (rc != 0) {
		snprintf(err, errlen, "mkfs.btrfs failed (%d): %s", rc, out);
		return NULL;
	}
	mkdir(g_btrfs_dir, 0755);
	track_mount(g_btrfs_dir);
	/* -o loop: the loop device is auto-cleared when unmounted */
	rc = run_cmd(out, sizeof out, "mount -t btrfs -o loop '%s' '%s'", img, g_btrfs_dir);
	if (rc != 0) {
		snprintf(err, errlen, "mount btrfs image failed (%d): %s", rc, out);
		return NULL;
	}
	chmod(g_btrfs_dir, 0755);
	g_btrfs_ready = 1;
	return g_btrfs_dir;
}

static void btrfs_release(void)
{
	if (!g_btrfs_ready)
		return;
	if (umount2(g_btrfs_dir, 0) < 0)
		umount2(g_btrfs_dir, MNT_DETACH);
	g_btrfs_ready = 0;
	char img[PATH_MAX + 16];
	snprintf(img, sizeof img, "%s/btrfs.img", g_tmpdir);
	/* the auto-clear of the loop device is asynchronous */
	for (int i = 0; i < 100; i++) {
		char out[4096] = "";
		run_cmd(out, sizeof out, "losetup -j '%s'", img);
		if (!out[0])
			break;
		sleep_ms(50);
	}
	unlink(img);
}

/* ---- fixtures ------------------------------------------------------------------ */
static void st_setup(enum skind k)
{
	char err[512];
	const char *root;
	g_sk = k;
	memset(&g_sm, 0, sizeof g_sm);
	if (k == SK_BTRFS)
		root = btrfs_root(err, sizeof err);
	else
		root = backing_root(k == SK_EXT4 ? FS_EXT4 : FS_XFS, err, sizeof err);
	if (!root) {
		snprintf(g_sm.err, sizeof g_sm.err, "backing fs: %s", err);
		return;
	}
	snprintf(g_sm_root, sizeof g_sm_root, "%s", root);
	char tag[64];
	snprintf(tag, sizeof tag, "stream-%s", sk_names[k]);
	own_mount_start(&g_sm, root, tag, STREAM_CONF);
}

static void st_setup_ext4(void)
{
	st_setup(SK_EXT4);
}
static void st_setup_xfs(void)
{
	st_setup(SK_XFS);
}
static void st_setup_btrfs(void)
{
	st_setup(SK_BTRFS);
}

static double t_test0;
static const char *t_name;
static void st_report(void)
{
	if (getenv("DCFS_STREAM_TIMES") && t_name)
		fprintf(stderr, "  %s (stream-%s): %.1fs\n", t_name, sk_names[g_sk],
			now_s() - t_test0);
}

static void st_teardown(void)
{
	own_mount_kill(&g_sm);
	if (g_one.up)
		own_mount_kill(&g_one);
	stream_integrity_cleanup();
	stream_errors_cleanup();
	if (g_sk == SK_BTRFS)
		btrfs_release();
}

void st_begin_(const char *name)
{
	t_test0 = now_s();
	t_name = name;
	ck_assert_msg(!g_sm.err[0], "setup failed: %s", g_sm.err);
	ck_assert_msg(is_mounted(g_sm.mnt, NULL, 0), "%s is not mounted (daemon died?)", g_sm.mnt);
	ck_assert_msg(kill(g_sm.d.pid, 0) == 0, "dcfs daemon died in an earlier test");
	int lfd = open(g_sm.d.log, O_WRONLY | O_APPEND);
	if (lfd >= 0) {
		dprintf(lfd, "=== dcfs-tests: begin %s (stream-%s)\n", name, sk_names[g_sk]);
		close(lfd);
	}
	umask(022);
}

uint32_t xs32(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* Resident pages a streamed file may keep after close. */
long long max_left(void)
{
	return g_sk == SK_BTRFS ? WINDOW_PAGES + SLACK_PAGES : 0;
}

const char *dc_counter(int write)
{
	if (g_sk == SK_BTRFS)
		return write ? "written_fallback" : "read_fallback";
	return write ? "written_dontcache" : "read_dontcache";
}

unsigned char *big_pattern(unsigned seed)
{
	unsigned char *b = malloc(BIG);
	ck_assert_ptr_nonnull(b);
	fill_pattern(b, BIG, seed);
	return b;
}

void write_all_chunks(int fd, const unsigned char *buf, size_t len, size_t rs)
{
	for (size_t off = 0; off < len; off += rs) {
		size_t n = len - off < rs ? len - off : rs;
		ssize_t w = write(fd, buf + off, n);
		ck_assert_msg(w == (ssize_t)n, "write %zu at %zu: %zd (%s)", n, off, w,
			      strerror(errno));
	}
}

void read_compare(const char *path, const unsigned char *want, size_t len, size_t rs)
{
	int fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	unsigned char *b = malloc(rs);
	size_t off = 0;
	for (;;) {
		ssize_t r = read(fd, b, rs);
		ck_assert_msg(r >= 0, "read %s at %zu: %s", path, off, strerror(errno));
		if (r == 0)
			break;
		ck_assert_msg(off + (size_t)r <= len, "%s longer than %zu", path, len);
		if (memcmp(b, want + off, (size_t)r) != 0) {
			size_t i = 0;
			while (b[i] == want[off + i])
				i++;
			ck_abort_msg("%s: data differs at byte %zu (read size %zu)", path, off + i,
				     rs);
		}
		off += (size_t)r;
	}
	ck_assert_msg(off == len, "%s: read %zu bytes, expected %zu", path, off, len);
	free(b);
	close(fd);
}

START_TEST(stream_zz_unmount)
{
	ck_assert_msg(!g_sm.err[0], "setup failed: %s", g_sm.err);
	char err[4096];
	int rc = own_mount_stop(&g_sm, err, sizeof err);
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert(!is_mounted(g_sm.mnt, NULL, 0));
}
END_TEST

/* DCFS_STREAM_ONLY=name[,name...] runs only those cases (and the unmount):
 * how a rare failure is chased in a loop without the rest of the case */
int stream_test_wanted(const char *name)
{
	const char *only = getenv("DCFS_STREAM_ONLY");
	if (!only || !*only)
		return 1;
	size_t n = strlen(name);
	for (const char *p = only; (p = strstr(p, name)); p += n)
		if ((p == only || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
			return 1;
	return 0;
}

Suite *stream_suite(void)
{
	Suite *s = suite_create("stream");
	static void (*const setups[])(void) = { st_setup_ext4, st_setup_xfs, st_setup_btrfs };
	static const char *const names[] = { "stream-ext4", "stream-xfs", "stream-btrfs" };
	for (int k = 0; k < 3; k++) {
		TCase *tc = tcase_create(names[k]);
		tcase_add_unchecked_fixture(tc, setups[k], st_teardown);
		tcase_add_checked_fixture(tc, NULL, st_report);
		tcase_set_timeout(tc, 300 * deadline_scale());
		/* The order they always ran in, which each file keeps. */
		stream_residency_tests(tc, k);
		stream_integrity_tests(tc, k);
		stream_coalescing_tests(tc, k);
		stream_space_tests(tc, k);
		stream_request_tests(tc, k);
		stream_reads_tests(tc, k);
		stream_error_tests(tc, k);
		stream_kill9_tests(tc, k);
		tcase_add_test(tc, stream_zz_unmount); /* always */
		suite_add_tcase(s, tc);
	}
	return s;
}
