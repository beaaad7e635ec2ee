/* The "uring" suite: FUSE over io_uring (Linux >= 6.14), dcfs's default
 * transport, on real mounts.  Two TCases on ext4, each with its own daemon
 * started with default options: every file
 * uncached (all I/O through the daemon's streaming engine, so every
 * READ/WRITE goes through the rings) and the default cache class (kernel
 * passthrough, so the rings carry the metadata and open/release traffic).
 * A data-integrity workload (4 KiB, 64 KiB and 1 MiB writes, read back,
 * fsync, rename, unlink, two threads reading and writing at once) must give
 * the same bytes as the backing files.  Where the kernel can do FUSE over
 * io_uring (the fuse module has enable_uring) the stats must show requests
 * served by the rings; elsewhere only that assertion is skipped: the mount
 * must then work through /dev/fuse as always.  uring_opt_out: -o nouring
 * and -s serve through /dev/fuse only. */
#include "harness.h"
#include "own_mount.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define UR_PARAM "/sys/module/fuse/parameters/enable_uring"

enum {
	UK_DONTCACHE,
	UK_CACHE,
	UK_COUNT
};
static const char *const uk_names[UK_COUNT] = { "uring-dontcache", "uring-cache" };
static const char *const uk_confs[UK_COUNT] = {
	"[global]\ndefault = dontcache\nmin_size = 0\n",
	"[global]\ndefault = cache\n",
};

static struct own_mount g_um;
static int g_uk;

static void ur_setup(int k)
{
	char err[512];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	g_uk = k;
	memset(&g_um, 0, sizeof g_um);
	if (!root) {
		snprintf(g_um.err, sizeof g_um.err, "backing fs: %s", err);
		return;
	}
	own_mount_start_opts(&g_um, root, uk_names[k], uk_confs[k], NULL);
}

static void ur_setup_dontcache(void)
{
	ur_setup(UK_DONTCACHE);
}
static void ur_setup_cache(void)
{
	ur_setup(UK_CACHE);
}

static void ur_teardown(void)
{
	if (g_um.up)
		own_mount_kill(&g_um);
}

#define NEED_MOUNT() ck_assert_msg(g_um.up, "setup failed: %s", g_um.err)

/* The kernel can serve this mount over io_uring: the module parameter exists
 * (the daemon, running as root, sets it). */
static int kernel_has_uring(void)
{
	return access(UR_PARAM, F_OK) == 0;
}

static long long uring_requests(void)
{
	return stats_get(g_um.mnt, "uring", "requests");
}

static void fill(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
}

/* Writes size bytes to path in bs-sized writes; returns the content hash. */
static uint64_t ur_write(const char *path, size_t size, size_t bs, uint64_t seed, int do_fsync)
{
	unsigned char *all = malloc(size);
	ck_assert_ptr_nonnull(all);
	fill(all, size, seed);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_msg(fd >= 0, "create %s: %s", path, strerror(errno));
	for (size_t off = 0; off < size; off += bs) {
		size_t n = size - off < bs ? size - off : bs;
		ssize_t w = write(fd, all + off, n);
		ck_assert_msg(w == (ssize_t)n, "write %s at %zu: %zd (%s)", path, off, w,
			      strerror(errno));
	}
	if (do_fsync)
		ck_assert_msg(fsync(fd) == 0, "fsync %s: %s", path, strerror(errno));
	ck_assert_msg(close(fd) == 0, "close %s: %s", path, strerror(errno));
	uint64_t h = hash64(all, size);
	free(all);
	return h;
}

/* Reads path in bs-sized reads; returns the hash, checks the size. */
static uint64_t ur_read(const char *path, size_t size, size_t bs)
{
	unsigned char *all = malloc(size + 1);
	ck_assert_ptr_nonnull(all);
	int fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	size_t got = 0;
	for (;;) {
		size_t want = size + 1 - got < bs ? size + 1 - got : bs;
		ssize_t r = read(fd, all + got, want);
		ck_assert_msg(r >= 0, "read %s at %zu: %s", path, got, strerror(errno));
		if (r == 0 || got + (size_t)r > size) {
			got += (size_t)r;
			break;
		}
		got += (size_t)r;
	}
	close(fd);
	ck_assert_msg(got == size, "%s: read %zu bytes, want %zu", path, got, size);
	uint64_t h = hash64(all, size);
	free(all);
	return h;
}

static void path_in(char *out, size_t len, const char *dir, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

START_TEST(uring_integrity)
{
	NEED_MOUNT();
	static const size_t bss[] = { 4096, 65536, 1 << 20 };
	long long before = uring_requests();
	char p[PATH_MAX], q[PATH_MAX], e[PATH_MAX];
	for (int i = 0; i < 3; i++) {
		char name[64];
		size_t size = (8u << 20) + (size_t)i * 4097; /* an odd tail too */
		snprintf(name, sizeof name, "int-%zu", bss[i]);
		path_in(p, sizeof p, g_um.mnt, name);
		uint64_t h = ur_write(p, size, bss[i], (uint64_t)i + 1, i != 1);
		ck_assert_msg(ur_read(p, size, bss[i]) == h, "%s differs through the mount", name);
		path_in(e, sizeof e, g_um.exp, name);
		ck_assert_msg(ur_read(e, size, 1 << 20) == h, "%s differs in the backing file",
			      name);
		/* rename, stat, unlink through the mount */
		snprintf(name, sizeof name, "int-%zu.renamed", bss[i]);
		path_in(q, sizeof q, g_um.mnt, name);
		ck_assert_msg(rename(p, q) == 0, "rename: %s", strerror(errno));
		struct stat st;
		ck_assert_msg(stat(q, &st) == 0 && st.st_size == (off_t)size, "stat after rename");
		ck_assert_msg(stat(p, &st) < 0 && errno == ENOENT, "old name still there");
		ck_assert_msg(ur_read(q, size, 65536) == h, "renamed file differs");
		ck_assert_msg(unlink(q) == 0, "unlink: %s", strerror(errno));
		path_in(e, sizeof e, g_um.exp, name);
		ck_assert_msg(access(e, F_OK) < 0 && errno == ENOENT, "backing file still there");
	}
	long long after = uring_requests();
	if (!kernel_has_uring()) {
		fprintf(stderr,
			"  %s: the kernel has no FUSE over io_uring: requests through /dev/fuse\n",
			uk_names[g_uk]);
		return;
	}
	ck_assert_msg(before >= 0 && after > before,
		      "no requests through io_uring (before %lld, after %lld): %s", before, after,
		      xattr_str(g_um.mnt, "user.dcfs.stats"));
}
END_TEST

struct worker_arg {
	char path[PATH_MAX];
	size_t size, bs;
	uint64_t seed;
	int rounds;
	int fail;
	char why[256];
};

/* Writes, then reads back, the same file several times. */
static void *rw_worker(void *p)
{
	struct worker_arg *a = p;
	unsigned char *buf = malloc(a->size), *got = malloc(a->size);
	for (int r = 0; r < a->rounds && !a->fail && buf && got; r++) {
		fill(buf, a->size, a->seed + (uint64_t)r);
		int fd = open(a->path, O_CREAT | O_TRUNC | O_RDWR, 0644);
		if (fd < 0) {
			a->fail = 1;
			snprintf(a->why, sizeof a->why, "open: %s", strerror(errno));
			break;
		}
		for (size_t off = 0; off < a->size; off += a->bs)
			if (pwrite(fd, buf + off, a->bs, (off_t)off) != (ssize_t)a->bs) {
				a->fail = 1;
				snprintf(a->why, sizeof a->why, "pwrite at %zu: %s", off,
					 strerror(errno));
				break;
			}
		if (!a->fail && fdatasync(fd) != 0) {
			a->fail = 1;
			snprintf(a->why, sizeof a->why, "fdatasync: %s", strerror(errno));
		}
		for (size_t off = 0; !a->fail && off < a->size; off += a->bs)
			if (pread(fd, got + off, a->bs, (off_t)off) != (ssize_t)a->bs) {
				a->fail = 1;
				snprintf(a->why, sizeof a->why, "pread at %zu: %s", off,
					 strerror(errno));
			}
		close(fd);
		if (!a->fail && memcmp(buf, got, a->size) != 0) {
			a->fail = 1;
			snprintf(a->why, sizeof a->why, "round %d: data read back differs", r);
		}
	}
	free(buf);
	free(got);
	return NULL;
}

/* Reads a file that does not change, again and again. */
static void *ro_worker(void *p)
{
	struct worker_arg *a = p;
	unsigned char *buf = malloc(a->bs);
	for (int r = 0; r < a->rounds && !a->fail && buf; r++) {
		int fd = open(a->path, O_RDONLY);
		uint64_t h = 1469598103934665603ull;
		size_t total = 0;
		ssize_t n;
		if (fd < 0) {
			a->fail = 1;
			snprintf(a->why, sizeof a->why, "open: %s", strerror(errno));
			break;
		}
		unsigned char *all = malloc(a->size);
		while (all && (n = read(fd, buf, a->bs)) > 0 && total + (size_t)n <= a->size) {
			memcpy(all + total, buf, (size_t)n);
			total += (size_t)n;
		}
		close(fd);
		if (all)
			h = hash64(all, total);
		free(all);
		if (total != a->size || h != a->seed) {
			a->fail = 1;
			snprintf(a->why, sizeof a->why, "round %d: %zu bytes, hash differs", r,
				 total);
		}
	}
	free(buf);
	return NULL;
}

START_TEST(uring_concurrent)
{
	NEED_MOUNT();
	char ro[PATH_MAX];
	path_in(ro, sizeof ro, g_um.mnt, "conc-ro");
	size_t ro_size = 4u << 20;
	uint64_t h = ur_write(ro, ro_size, 1 << 20, 99, 1);
	struct worker_arg a[3];
	memset(a, 0, sizeof a);
	for (int i = 0; i < 2; i++) {
		snprintf(a[i].path, sizeof a[i].path, "%s/conc-rw-%d", g_um.mnt, i);
		a[i].size = 2u << 20;
		a[i].bs = i ? 65536 : 4096;
		a[i].seed = 1000 + (uint64_t)i * 77;
		a[i].rounds = 4;
	}
	snprintf(a[2].path, sizeof a[2].path, "%s", ro);
	a[2].size = ro_size;
	a[2].bs = 16384;
	a[2].seed = h;
	a[2].rounds = 6;
	pthread_t t[3];
	ck_assert_int_eq(pthread_create(&t[0], NULL, rw_worker, &a[0]), 0);
	ck_assert_int_eq(pthread_create(&t[1], NULL, rw_worker, &a[1]), 0);
	ck_assert_int_eq(pthread_create(&t[2], NULL, ro_worker, &a[2]), 0);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 3; i++)
		ck_assert_msg(!a[i].fail, "%s: %s", a[i].path, a[i].why);
	for (int i = 0; i < 2; i++)
		ck_assert_msg(unlink(a[i].path) == 0, "unlink %s: %s", a[i].path, strerror(errno));
	ck_assert_msg(unlink(ro) == 0, "unlink %s: %s", ro, strerror(errno));
}
END_TEST

/* Small metadata operations: each one a round trip through the rings. */
START_TEST(uring_metadata)
{
	NEED_MOUNT();
	char d[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	path_in(d, sizeof d, g_um.mnt, "meta");
	ck_assert_msg(mkdir(d, 0755) == 0, "mkdir: %s", strerror(errno));
	for (int i = 0; i < 200; i++) {
		snprintf(p, sizeof p, "%s/f%03d", d, i);
		int fd = open(p, O_CREAT | O_WRONLY | O_EXCL, 0600);
		ck_assert_msg(fd >= 0, "create %s: %s", p, strerror(errno));
		ck_assert_int_eq(write(fd, p, strlen(p)), (ssize_t)strlen(p));
		close(fd);
	}
	for (int i = 0; i < 200; i += 2) {
		snprintf(p, sizeof p, "%s/f%03d", d, i);
		snprintf(q, sizeof q, "%s/g%03d", d, i);
		ck_assert_msg(rename(p, q) == 0, "rename %s: %s", p, strerror(errno));
	}
	char out[4096];
	ck_assert_int_eq(run_cmd(out, sizeof out, "ls -l '%s' | wc -l", d), 0);
	ck_assert_msg(atoi(out) == 201, "ls -l: %s", out);
	ck_assert_int_eq(run_cmd(out, sizeof out, "rm -r '%s'", d), 0);
	ck_assert_msg(access(d, F_OK) < 0 && errno == ENOENT, "rm -r left %s", d);
}
END_TEST

START_TEST(uring_zz_unmount)
{
	NEED_MOUNT();
	char *s = xattr_str(g_um.mnt, "user.dcfs.stats");
	if (kernel_has_uring())
		ck_assert_msg(s && strstr(s, "\"uring\":{\"state\":\"on\""),
			      "io_uring is not on: %s", s ? s : "(no stats)");
	free(s);
	/* A reply that missed its ring entry is answered EIO and logged. */
	char *log = read_file_str(g_um.d.log);
	ck_assert_msg(!strstr(log, "got no reply") && !strstr(log, "malformed request"),
		      "daemon log: %.3000s", log);
	if (kernel_has_uring())
		ck_assert_msg(strstr(log, "uring: on"), "daemon log: %.3000s", log);
	free(log);
	char err[4096];
	int rc = own_mount_stop(&g_um, err, sizeof err);
	g_um.up = 0;
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert(!is_mounted(g_um.mnt, NULL, 0));
}
END_TEST

/* -o nouring and -s: no rings, the reason in the stats, I/O as usual. */
static void opt_out_case(const char *tag, const char *opts, const char *arg)
{
	char err[4096], path[PATH_MAX];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	struct own_mount m;
	ck_assert_msg(own_mount_start_argv(&m, root, tag, uk_confs[UK_DONTCACHE], opts, arg) == 0,
		      "%s: %s", tag, m.err);
	snprintf(path, sizeof path, "%s/f.bin", m.mnt);
	unsigned char *buf = malloc(1 << 20), *back = malloc(1 << 20);
	ck_assert(buf && back);
	fill(buf, 1 << 20, 7);
	ck_assert_int_eq(write_file(path, (const char *)buf, 1 << 20, 0644), 0);
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, back, 1 << 20, 0), 1 << 20);
	close(fd);
	ck_assert_msg(memcmp(buf, back, 1 << 20) == 0, "%s: data differs", tag);
	char *st = xattr_str(m.mnt, "user.dcfs.stats");
	ck_assert_msg(st && !strstr(st, "\"uring\":{\"state\":\"on\"") &&
			      strstr(st, "not requested"),
		      "%s: %s", tag, st ? st : "(no stats)");
	free(st);
	free(buf);
	free(back);
	int rc = own_mount_stop(&m, err, sizeof err);
	ck_assert_msg(rc == 0, "%s: %s", tag, err);
}

START_TEST(uring_opt_out)
{
	opt_out_case("uring-off", "nouring", NULL);
	opt_out_case("uring-s", NULL, "-s");
}
END_TEST

Suite *uring_suite(void)
{
	Suite *s = suite_create("uring");
	static void (*const setups[UK_COUNT])(void) = { ur_setup_dontcache, ur_setup_cache };
	for (int k = 0; k < UK_COUNT; k++) {
		TCase *tc = tcase_create(uk_names[k]);
		tcase_add_unchecked_fixture(tc, setups[k], ur_teardown);
		tcase_set_timeout(tc, 120 * deadline_scale());
		tcase_add_test(tc, uring_integrity);
		tcase_add_test(tc, uring_concurrent);
		tcase_add_test(tc, uring_metadata);
		tcase_add_test(tc, uring_zz_unmount);
		if (k == UK_DONTCACHE)
			tcase_add_test(tc, uring_opt_out);
		suite_add_tcase(s, tc);
	}
	return s;
}
