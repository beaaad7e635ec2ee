/* dcfs integration test harness.
 *
 * Backing filesystems (ext4, xfs) live on loop devices whose image files sit
 * in a private temp dir under /var/tmp. Each Check TCase is bound to one
 * "config" (filesystem + mount method); an unchecked fixture mounts dcfs
 * once for the whole TCase and the last test of the TCase unmounts it and
 * verifies the daemon exited 0 with a clean log.
 *
 * Tests compare every result and errno of a syscall made through the dcfs
 * mount with the same syscall made on a reference directory that lives on
 * the same backing filesystem (outside the exported tree), and compare
 * identity (st_ino, contents, lseek data/hole map, ...) of files seen through
 * the mount with the same file seen directly in the exported backing tree.
 */
#ifndef DCFS_TESTS_HARNESS_H
#define DCFS_TESTS_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* paths are bounded by PATH_MAX everywhere; truncation is not a concern */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif

/*
 * DCFS_TEST_ONLY=name[,name...]: register only these tests (plus every
 * TCase's zz_unmount_and_check_daemon), to run one test while working on it.
 */
void dcfs_tcase_add_test(TCase *tc, const TTest *t, int sig, int exitv, int s, int e);
#define _tcase_add_test dcfs_tcase_add_test

enum fs_kind {
	FS_EXT4 = 0,
	FS_XFS = 1,
	FS_COUNT
};
enum mount_method {
	MM_DAEMON,
	MM_HELPER,
	MM_BIND
};

struct config {
	const char *name; /* e.g. "ext4-dcfs" */
	enum fs_kind fs;
	enum mount_method mm;
	const char *conf; /* dcfs config file content, or NULL */
	const char *opts; /* more -o options for dcfs, or NULL */
	int inplace;	  /* mounted over its own backing dir (-o nonempty);
				  * the tests reach the backing dir through a bind
				  * mount of it made before */
};

/* Configuration whose TCase is being populated by add_*_tests(): lets
 * expensive tests be registered only where they add coverage. */
extern const struct config *g_adding_cfg;
/* heavy metadata tests: plain dcfs on each fs + the bind self-test */
#define CFG_META_HEAVY()                                                           \
	(!g_adding_cfg || (g_adding_cfg->mm != MM_HELPER && !g_adding_cfg->conf && \
			   !g_adding_cfg->opts && !g_adding_cfg->inplace))
/* heavy data tests: every I/O policy, but only one cached config per fs kind */
#define CFG_DATA_HEAVY()                                                         \
	(!g_adding_cfg || (!g_adding_cfg->inplace &&                             \
			   (g_adding_cfg->mm == MM_BIND || g_adding_cfg->opts || \
			    g_adding_cfg->conf || !strcmp(g_adding_cfg->name, "ext4-dcfs"))))

/* Current configuration (set by the TCase fixture). */
extern const struct config *g_cfg;
extern char g_mnt[PATH_MAX]; /* dcfs mountpoint */
extern char g_exp[PATH_MAX]; /* backing dir exported by dcfs */
extern char g_ref[PATH_MAX]; /* reference dir on the same backing fs */
extern char g_setup_err[1024];
extern int g_sanitized; /* DCFS_SANITIZED=1 */
extern const char *g_dcfs_bin;
extern const char *g_mount_dcfs_bin;
extern char g_tmpdir[PATH_MAX];

/* Per-test dual roots: SIDE 0 = reference dir, SIDE 1 = through the mount. */
extern int SIDE;
extern char ROOTS[2][PATH_MAX];
extern char EROOT[PATH_MAX]; /* the test dir as seen in the exported backing */

/* --- setup / teardown ---------------------------------------------------- */
int harness_init(void);		   /* returns 0 or prints SKIP and 77 */
void harness_cleanup(void);	   /* idempotent, also run atexit */
int harness_verify_clean(void);	   /* 0 if no leftover mounts/loops */
void track_mount(const char *mnt); /* unmount at exit if still mounted */
const char *backing_root(enum fs_kind fs, char *err, size_t errlen);

/* fixture helpers used by main.c */
void fixture_setup(const struct config *cfg);
void fixture_teardown(void);
/* final test of each TCase: unmount and check daemon */
void check_unmount_and_daemon(void);

/* daemon process handling (also used by the CLI suite) */
struct daemon {
	pid_t sup; /* supervisor (our child) */
	pid_t pid; /* dcfs process */
	char log[PATH_MAX];
	char statusf[PATH_MAX];
	char mnt[PATH_MAX];
};
/* Start `DCFS_BIN [args...]` under a supervisor, stdout+stderr to a log
 * file. argv is NULL terminated, argv[0] ignored. */
int daemon_spawn(struct daemon *d, const char *tag, char *const argv[]);
/* Wait until d->mnt is a fuse mount; returns 0, or -1 with err filled
 * (daemon exited or deadline). */
int daemon_wait_mounted(struct daemon *d, char *err, size_t errlen);
/* Wait for daemon exit, returns raw wait status or -1 on timeout. */
int daemon_wait_exit(struct daemon *d, double timeout_s);
dev_t mount_dev(const char *mnt);
int daemon_wait_unmounted(struct daemon *d, pid_t pid, dev_t dev, double timeout_s);
void daemon_kill(struct daemon *d);
/* pid of a running process (not mount*) with mnt as an argument, or -1 */
pid_t find_daemon_for(const char *mnt);
/* mount -t dcfs BACKING MNT -o OPTS (creates /sbin/mount.dcfs if absent) */
int helper_mount(const char *backing, const char *mnt, const char *opts, char *out, size_t outlen);
/* Make sure /sbin/mount.dcfs exists (a link to MOUNT_DCFS_BIN if absent). */
int helper_ensure(char *err, size_t errlen);
/* Read the log; returns malloc'd string (never NULL). */
char *read_file_str(const char *path);
/* Returns NULL if log is clean, else a static description. */
const char *log_problem(const char *log);
/* NULL if clean, else "daemon log contains X (during TEST): report" */
const char *log_report(const char *log);

/* --- generic helpers ------------------------------------------------------ */
int run_cmd(char *out, size_t outlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int is_mounted(const char *mnt, char *fstype, size_t fstypelen);
int rm_rf(const char *path);
double now_s(void);
void sleep_ms(int ms);
double deadline_scale(void);

/* test directory setup: creates ROOTS[0], ROOTS[1] (empty) for this test */
void test_begin(const char *name);
#define T_BEGIN() test_begin(__func__)

/* root/<formatted rel>, or root for "": the one path joiner of the suites,
 * in one of 64 rotating static buffers (several may be in use at once). */
const char *path_at(const char *root, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *vpath_at(const char *root, const char *fmt, va_list ap);
/* Path builders of the dual roots (path_at() of the current test's roots). */
const char *P(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* current SIDE */
const char *PR(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* ref side */
const char *PM(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* mount side */
const char *PE(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* export (backing) */

struct res {
	long ret;
	int err;
};
const char *res_str(struct res r);

/* Evaluate expr on the reference side then on the mount side (SIDE set to
 * 0/1, so P() and F() pick the right path / fd), and assert that the return
 * value and errno are identical. Value: the mount-side return value. */
#define DUAL(expr)                                                                      \
	({                                                                              \
		struct res _r0, _r1;                                                    \
		SIDE = 0;                                                               \
		errno = 0;                                                              \
		_r0.ret = (long)(expr);                                                 \
		_r0.err = _r0.ret < 0 ? errno : 0;                                      \
		SIDE = 1;                                                               \
		errno = 0;                                                              \
		_r1.ret = (long)(expr);                                                 \
		_r1.err = _r1.ret < 0 ? errno : 0;                                      \
		ck_assert_msg(_r0.ret == _r1.ret && _r0.err == _r1.err,                 \
			      "%s: backing gave %s, dcfs gave %s", #expr, res_str(_r0), \
			      res_str(_r1));                                            \
		_r1.ret;                                                                \
	})

/* Like DUAL, but only success/failure and errno must match (for calls that
 * return fds). Value: struct fdp with both results. */
struct fdp {
	int fd[2];
};
#define F(p) ((p).fd[SIDE])
#define DUALFD(expr)                                                                    \
	({                                                                              \
		struct res _r0, _r1;                                                    \
		struct fdp _p;                                                          \
		SIDE = 0;                                                               \
		errno = 0;                                                              \
		_r0.ret = (long)(expr);                                                 \
		_r0.err = _r0.ret < 0 ? errno : 0;                                      \
		SIDE = 1;                                                               \
		errno = 0;                                                              \
		_r1.ret = (long)(expr);                                                 \
		_r1.err = _r1.ret < 0 ? errno : 0;                                      \
		ck_assert_msg((_r0.ret >= 0) == (_r1.ret >= 0) && _r0.err == _r1.err,   \
			      "%s: backing gave %s, dcfs gave %s", #expr, res_str(_r0), \
			      res_str(_r1));                                            \
		_p.fd[0] = (int)_r0.ret;                                                \
		_p.fd[1] = (int)_r1.ret;                                                \
		_p;                                                                     \
	})

/* Expect a specific outcome on both sides: 0/positive value or -errno. */
#define DUAL_EXPECT(expr, want)                                                              \
	({                                                                                   \
		long _v = DUAL(expr);                                                        \
		long _w = (long)(want);                                                      \
		ck_assert_msg(_w < 0 ? (_v == -1 && errno == -_w) : _v == _w,                \
			      "%s: expected %s, got %ld (%s)", #expr,                        \
			      _w < 0 ? strerror((int)-_w) : "success", _v, strerror(errno)); \
		_v;                                                                          \
	})

void close_fdp(struct fdp p);

/* Assert that syscall-ish expression succeeded (>= 0). */
#define OK(expr)                                                                 \
	({                                                                       \
		errno = 0;                                                       \
		long _v = (long)(expr);                                          \
		ck_assert_msg(_v >= 0, "%s failed: %s", #expr, strerror(errno)); \
		_v;                                                              \
	})

/* Compare portable stat fields of two files (mode, nlink, uid, gid, size,
 * rdev). what: description for messages. */
void cmp_stat_portable(const char *what, const struct stat *a, const struct stat *b);
/* Compare everything that must be identical for the same inode seen
 * through dcfs and on the backing fs (incl. st_ino, blocks, times). */
void cmp_stat_identity(const char *what, const struct stat *mnt, const struct stat *bk);
/* lstat both PM(rel) and PE(rel), cmp_stat_identity. */
void check_identity(const char *rel);
/* lstat PR(rel) and PM(rel) and compare portable fields. */
void check_dual_stat(const char *rel);

/* write whole buffer / fill pattern */
void fill_pattern(void *buf, size_t len, unsigned seed);
int write_file(const char *path, const void *buf, size_t len, mode_t mode);
/* read whole file, malloc'd, *len set; NULL on error */
void *slurp(const char *path, size_t *len);
/* Permission bits for the mode alone (statx(STATX_MODE), as `stat -c %A`
 * asks: the kernel refreshes only what it holds stale); fails the test on
 * an error. */
mode_t mode_only(const char *path);

/* Run fn(arg) in a child with credentials uid/gid (no supplementary
 * groups); fn returns a long, errno is transported back. */
struct res run_as(uid_t uid, gid_t gid, long (*fn)(void *), void *arg);

/* Run the same operation as uid/gid on both sides and compare. fn gets the
 * side's root dir in ctx->root. */
struct as_ctx {
	const char *root;
	void *arg;
};
struct res dual_as(const char *what, uid_t uid, gid_t gid, long (*fn)(struct as_ctx *), void *arg);

/* 1 if the dcfs mounted at mnt can map streaming files shared (kernel
 * passthrough, or FUSE_DIRECT_IO_ALLOW_MMAP): from user.dcfs.stats. */
int stream_mmap_allowed(const char *mnt);

/* Suites */
void add_files_tests(TCase *tc);
void add_dirs_tests(TCase *tc);
void add_meta_tests(TCase *tc);
void add_locks_tests(TCase *tc);
void add_perms_tests(TCase *tc);
Suite *cli_suite(void);

#define TEST_UID 65534
#define TEST_GID 65534
#define TEST_UID2 64001
#define TEST_GID2 64001

#endif
