/* dcfs test harness: loop-device backed filesystems, daemon spawning,
 * comparison helpers and (signal-safe) cleanup. */
#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const struct config *g_cfg;
const struct config *g_adding_cfg;
char g_mnt[PATH_MAX];
char g_exp[PATH_MAX];
char g_ref[PATH_MAX];
char g_setup_err[1024];
int g_sanitized;
const char *g_dcfs_bin;
const char *g_mount_dcfs_bin;
char g_tmpdir[PATH_MAX];
int SIDE;
char ROOTS[2][PATH_MAX];
char EROOT[PATH_MAX];

static pid_t g_main_pid;

#undef _tcase_add_test
void dcfs_tcase_add_test(TCase *tc, const TTest *t, int sig, int exitv, int s, int e)
{
	const char *only = getenv("DCFS_TEST_ONLY");
	if (only && *only && strncmp(t->name, "zz_", 3) != 0) {
		char list[1024], key[256];
		snprintf(list, sizeof list, ",%s,", only);
		snprintf(key, sizeof key, ",%s,", t->name);
		if (!strstr(list, key))
			return;
	}
	_tcase_add_test(tc, t, sig, exitv, s, e);
}

/* ---- cleanup registry (fixed arrays so the signal handler can use it) --- */
#define MAXREG 64
static char reg_mounts[MAXREG][PATH_MAX]; /* unmounted in reverse order */
static volatile int reg_nmounts;
static char reg_loops[8][64];
static volatile int reg_nloops;
static char reg_imgs[8][PATH_MAX];
static volatile int reg_nimgs;
static volatile pid_t reg_pids[MAXREG];
static int created_sbin_link;

void track_mount(const char *p)
{
	for (int i = 0; i < reg_nmounts; i++)
		if (strcmp(reg_mounts[i], p) == 0)
			return;
	if (reg_nmounts < MAXREG) {
		snprintf(reg_mounts[reg_nmounts], PATH_MAX, "%s", p);
		reg_nmounts++;
	}
}

static void reg_pid(pid_t p)
{
	for (int i = 0; i < MAXREG; i++)
		if (reg_pids[i] == 0) {
			reg_pids[i] = p;
			return;
		}
}

static void unreg_pid(pid_t p)
{
	for (int i = 0; i < MAXREG; i++)
		if (reg_pids[i] == p)
			reg_pids[i] = 0;
}

/* ---- small helpers ------------------------------------------------------- */
double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

double deadline_scale(void)
{
	return g_sanitized ? 4.0 : 1.0;
}

int run_cmd(char *out, size_t outlen, const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		dup2(nul, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	size_t n = 0;
	char buf[4096];
	ssize_t r;
	while ((r = read(pfd[0], buf, sizeof buf)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (out && n + 1 < outlen) {
			size_t c = (size_t)r < outlen - 1 - n ? (size_t)r : outlen - 1 - n;
			memcpy(out + n, buf, c);
			n += c;
		}
	}
	if (out && outlen)
		out[n] = 0;
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

/* mountinfo field 5 is the mount point (octal escaped), fstype after " - " */
int is_mounted(const char *mnt, char *fstype, size_t fstypelen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return 0;
	char *line = NULL;
	size_t cap = 0;
	int found = 0;
	while (getline(&line, &cap, f) > 0) {
		char mp[PATH_MAX];
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		if (strcmp(mp, mnt) != 0)
			continue;
		found = 1;
		char *sep = strstr(line, " - ");
		if (sep && fstype) {
			char fs[256] = "";
			sscanf(sep + 3, "%255s", fs);
			snprintf(fstype, fstypelen, "%s", fs);
		}
	}
	free(line);
	fclose(f);
	return found;
}

static int rm_rf_at(int dfd, const char *name, dev_t dev)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (S_ISDIR(st.st_mode)) {
		if (st.st_dev != dev)
			return -1; /* never cross into another mount */
		int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		if (fd < 0)
			return -1;
		DIR *d = fdopendir(fd);
		if (!d) {
			close(fd);
			return -1;
		}
		struct dirent *de;
		int rc = 0;
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (rm_rf_at(dirfd(d), de->d_name, dev) < 0)
				rc = -1;
		}
		closedir(d);
		if (unlinkat(dfd, name, AT_REMOVEDIR) < 0)
			rc = -1;
		return rc;
	}
	return unlinkat(dfd, name, 0);
}

int rm_rf(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -1;
	return rm_rf_at(AT_FDCWD, path, st.st_dev);
}

char *read_file_str(const char *path)
{
	size_t len = 0;
	char *s = slurp(path, &len);
	if (!s)
		return strdup("");
	char *t = realloc(s, len + 1);
	if (!t) {
		free(s);
		return strdup("");
	}
	t[len] = 0;
	return t;
}

const char *log_problem(const char *log)
{
	static const char *bad[] = {
		"ERROR: AddressSanitizer",
		"runtime error:",
		"LeakSanitizer",
		"ERROR: ThreadSanitizer",
		"Assertion",
		"Segmentation fault",
		"stack smashing",
		"double free",
		"corrupted",
		/* libfuse complaining about the daemon's replies */
		"bad error value",
		"writing device",
		"unknown operation",
		"fuse_reply_",
		/* the daemon's own lines for what must never happen */
		"BUG:",
		"not where expected",
		"got no reply",
		"malformed request",
		"do not combine with passthrough",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (strstr(log, bad[i]))
			return bad[i];
	return NULL;
}

#define TEST_MARK "=== dcfs-tests: begin "

/* Describe a problem in a daemon log: which test was running (from the
 * markers test_begin() appends) and the report itself. Static buffer. */
const char *log_report(const char *log)
{
	static char out[6144];
	const char *p = log_problem(log);
	if (!p)
		return NULL;
	const char *at = strstr(log, p);
	/* the test that was running */
	char test[128] = "";
	for (const char *m = log; (m = strstr(m, TEST_MARK)) && m < at; m += strlen(TEST_MARK)) {
		const char *nm = m + strlen(TEST_MARK);
		size_t l = strcspn(nm, " \n");
		snprintf(test, sizeof test, " during %.*s", (int)(l < 100 ? l : 100), nm);
	}
	/* start of the report: the "=====" line or the line of the match */
	const char *start = at;
	const char *eq = NULL;
	for (const char *q = log; (q = strstr(q, "=================")) && q < at; q++)
		eq = q;
	if (eq && at - eq < 400)
		start = eq;
	while (start > log && start[-1] != '\n')
		start--;
	snprintf(out, sizeof out, "daemon log contains '%s'%s:\n%.5000s", p, test, start);
	return out;
}

/* ---- rotating path buffers: the suites' one path joiner ------------------- */
static char pbuf[64][PATH_MAX];
static int pidx;

const char *vpath_at(const char *root, const char *fmt, va_list ap)
{
	char rel[PATH_MAX];
	vsnprintf(rel, sizeof rel, fmt, ap);
	char *b = pbuf[pidx++ % 64];
	if (rel[0])
		snprintf(b, PATH_MAX, "%s/%s", root, rel);
	else
		snprintf(b, PATH_MAX, "%s", root);
	return b;
}

const char *path_at(const char *root, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	const char *r = vpath_at(root, fmt, ap);
	va_end(ap);
	return r;
}

#define PATHFN(name, root)                               \
	const char *name(const char *fmt, ...)           \
	{                                                \
		va_list ap;                              \
		va_start(ap, fmt);                       \
		const char *r = vpath_at(root, fmt, ap); \
		va_end(ap);                              \
		return r;                                \
	}
PATHFN(P, ROOTS[SIDE])
PATHFN(PR, ROOTS[0])
PATHFN(PM, ROOTS[1])
PATHFN(PE, EROOT)

const char *res_str(struct res r)
{
	static char b[8][128];
	static int i;
	char *s = b[i++ % 8];
	if (r.ret < 0)
		snprintf(s, 128, "%ld errno=%d (%s)", r.ret, r.err, strerror(r.err));
	else
		snprintf(s, 128, "%ld", r.ret);
	return s;
}

void close_fdp(struct fdp p)
{
	if (p.fd[0] >= 0)
		close(p.fd[0]);
	if (p.fd[1] >= 0)
		close(p.fd[1]);
}

/* ---- stat comparisons ---------------------------------------------------- */
void cmp_stat_portable(const char *what, const struct stat *a, const struct stat *b)
{
	ck_assert_msg(a->st_mode == b->st_mode, "%s: st_mode backing 0%o dcfs 0%o", what,
		      a->st_mode, b->st_mode);
	ck_assert_msg(a->st_nlink == b->st_nlink, "%s: st_nlink backing %lu dcfs %lu", what,
		      (unsigned long)a->st_nlink, (unsigned long)b->st_nlink);
	ck_assert_msg(a->st_uid == b->st_uid, "%s: st_uid backing %u dcfs %u", what, a->st_uid,
		      b->st_uid);
	ck_assert_msg(a->st_gid == b->st_gid, "%s: st_gid backing %u dcfs %u", what, a->st_gid,
		      b->st_gid);
	if (!S_ISDIR(a->st_mode))
		ck_assert_msg(a->st_size == b->st_size, "%s: st_size backing %lld dcfs %lld", what,
			      (long long)a->st_size, (long long)b->st_size);
	ck_assert_msg(a->st_rdev == b->st_rdev, "%s: st_rdev backing %#llx dcfs %#llx", what,
		      (unsigned long long)a->st_rdev, (unsigned long long)b->st_rdev);
}

void cmp_stat_identity(const char *what, const struct stat *m, const struct stat *b)
{
	ck_assert_msg(m->st_ino == b->st_ino, "%s: st_ino dcfs %llu backing %llu", what,
		      (unsigned long long)m->st_ino, (unsigned long long)b->st_ino);
	ck_assert_msg(m->st_mode == b->st_mode, "%s: st_mode dcfs 0%o backing 0%o", what,
		      m->st_mode, b->st_mode);
	ck_assert_msg(m->st_nlink == b->st_nlink, "%s: st_nlink dcfs %lu backing %lu", what,
		      (unsigned long)m->st_nlink, (unsigned long)b->st_nlink);
	ck_assert_msg(m->st_uid == b->st_uid && m->st_gid == b->st_gid,
		      "%s: owner dcfs %u:%u backing %u:%u", what, m->st_uid, m->st_gid, b->st_uid,
		      b->st_gid);
	ck_assert_msg(m->st_size == b->st_size, "%s: st_size dcfs %lld backing %lld", what,
		      (long long)m->st_size, (long long)b->st_size);
	ck_assert_msg(m->st_rdev == b->st_rdev, "%s: st_rdev dcfs %#llx backing %#llx", what,
		      (unsigned long long)m->st_rdev, (unsigned long long)b->st_rdev);
	ck_assert_msg(m->st_blocks == b->st_blocks, "%s: st_blocks dcfs %lld backing %lld", what,
		      (long long)m->st_blocks, (long long)b->st_blocks);
	ck_assert_msg(
		m->st_mtim.tv_sec == b->st_mtim.tv_sec && m->st_mtim.tv_nsec == b->st_mtim.tv_nsec,
		"%s: mtime dcfs %lld.%09ld backing %lld.%09ld", what, (long long)m->st_mtim.tv_sec,
		m->st_mtim.tv_nsec, (long long)b->st_mtim.tv_sec, b->st_mtim.tv_nsec);
	ck_assert_msg(
		m->st_ctim.tv_sec == b->st_ctim.tv_sec && m->st_ctim.tv_nsec == b->st_ctim.tv_nsec,
		"%s: ctime dcfs %lld.%09ld backing %lld.%09ld", what, (long long)m->st_ctim.tv_sec,
		m->st_ctim.tv_nsec, (long long)b->st_ctim.tv_sec, b->st_ctim.tv_nsec);
}

void check_identity(const char *rel)
{
	struct stat m, b;
	ck_assert_msg(lstat(PM("%s", rel), &m) == 0, "lstat dcfs %s: %s", rel, strerror(errno));
	ck_assert_msg(lstat(PE("%s", rel), &b) == 0, "lstat backing %s: %s", rel, strerror(errno));
	cmp_stat_identity(rel, &m, &b);
}

void check_dual_stat(const char *rel)
{
	struct stat r, m;
	ck_assert_msg(lstat(PR("%s", rel), &r) == 0, "lstat ref %s: %s", rel, strerror(errno));
	ck_assert_msg(lstat(PM("%s", rel), &m) == 0, "lstat dcfs %s: %s", rel, strerror(errno));
	cmp_stat_portable(rel, &r, &m);
}

void fill_pattern(void *buf, size_t len, unsigned seed)
{
	unsigned char *p = buf;
	unsigned x = seed * 2654435761u + 1;
	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (unsigned char)(x >> 16);
	}
}

int write_file(const char *path, const void *buf, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0)
		return -1;
	const char *p = buf;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w <= 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return close(fd);
}

mode_t mode_only(const char *path)
{
	struct statx sx;
	ck_assert_msg(statx(AT_FDCWD, path, 0, STATX_MODE, &sx) == 0, "statx %s: %s", path,
		      strerror(errno));
	return sx.stx_mode & 07777;
}

void *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	size_t cap = 65536, n = 0;
	char *b = malloc(cap);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			b = realloc(b, cap);
		}
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			free(b);
			close(fd);
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	*len = n;
	return b;
}

struct res run_as(uid_t uid, gid_t gid, long (*fn)(void *), void *arg)
{
	struct res r = { -1, EIO };
	int pfd[2];
	if (pipe(pfd) < 0)
		return r;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		struct res c = { -1, 0 };
		if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
		    setresuid(uid, uid, uid) < 0) {
			c.err = errno;
			c.ret = -1000;
		} else {
			umask(022);
			errno = 0;
			c.ret = fn(arg);
			c.err = c.ret < 0 ? errno : 0;
		}
		if (write(pfd[1], &c, sizeof c) != sizeof c)
			_exit(2);
		_exit(0);
	}
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		return r;
	}
	struct res c;
	ssize_t n;
	while ((n = read(pfd[0], &c, sizeof c)) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	int st;
	waitpid(pid, &st, 0);
	if (n == sizeof c)
		r = c;
	ck_assert_msg(r.ret != -1000, "run_as: could not switch to %u:%u: %s", uid, gid,
		      strerror(r.err));
	return r;
}

struct dual_as_arg {
	long (*fn)(struct as_ctx *);
	struct as_ctx ctx;
};

static long dual_as_tramp(void *a)
{
	struct dual_as_arg *d = a;
	return d->fn(&d->ctx);
}

struct res dual_as(const char *what, uid_t uid, gid_t gid, long (*fn)(struct as_ctx *), void *arg)
{
	struct dual_as_arg d = { fn, { ROOTS[0], arg } };
	struct res r0 = run_as(uid, gid, dual_as_tramp, &d);
	d.ctx.root = ROOTS[1];
	struct res r1 = run_as(uid, gid, dual_as_tramp, &d);
	ck_assert_msg(r0.ret == r1.ret && r0.err == r1.err,
		      "%s as uid %u: backing gave %s, dcfs gave %s", what, uid, res_str(r0),
		      res_str(r1));
	return r1;
}

/* ---- loop devices / backing filesystems ---------------------------------- */
struct backing {
	int ready;
	int failed;
	char img[PATH_MAX];
	char loop[64];
	char root[PATH_MAX];
	char err[512];
};
static struct backing g_back[FS_COUNT];

static const char *fs_name(enum fs_kind fs)
{
	return fs == FS_EXT4 ? "ext4" : "xfs";
}

const char *backing_root(enum fs_kind fs, char *err, size_t errlen)
{
	struct backing *b = &g_back[fs];
	if (b->ready)
		return b->root;
	if (b->failed) {
		snprintf(err, errlen, "%s", b->err);
		return NULL;
	}
	char out[4096];
	char berr[512];
	snprintf(b->img, sizeof b->img, "%s/%s.img", g_tmpdir, fs_name(fs));
	snprintf(b->root, sizeof b->root, "%s/%s", g_tmpdir, fs_name(fs));
	int fd = open(b->img, O_CREAT | O_RDWR | O_TRUNC, 0600);
	/*
	 * Sparse, and shared by every suite, whose test directories stay until
	 * the run ends: at 512 MiB the stream suite's xfs had ~140 MiB left,
	 * close to where the write engine stops pipelining (64 MiB + in flight);
	 * at 1 GiB the ext4 had nothing left for the hotset suite, the last
	 * (48 MiB hot, 256 MiB streamed).
	 */
	if (fd < 0 || ftruncate(fd, 2LL << 30) < 0) {
		snprintf(berr, sizeof berr, "create %s: %s", b->img, strerror(errno));
		goto fail;
	}
	close(fd);
	int rc = run_cmd(out, sizeof out, "losetup --direct-io=on -f --show '%s'", b->img);
	if (rc != 0) {
		snprintf(berr, sizeof berr, "losetup failed (%d): %s", rc, out);
		goto fail;
	}
	out[strcspn(out, "\n")] = 0;
	snprintf(b->loop, sizeof b->loop, "%s", out);
	if (reg_nloops < 8) {
		snprintf(reg_loops[reg_nloops], 64, "%s", b->loop);
		reg_nloops++;
	}
	if (reg_nimgs < 8) {
		snprintf(reg_imgs[reg_nimgs], PATH_MAX, "%s", b->img);
		reg_nimgs++;
	}
	if (fs == FS_EXT4)
		rc = run_cmd(out, sizeof out, "mkfs.ext4 -q -F '%s'", b->loop);
	else
		rc = run_cmd(out, sizeof out, "mkfs.xfs -q -f '%s'", b->loop);
	if (rc != 0) {
		snprintf(berr, sizeof berr, "mkfs.%s failed (%d): %s", fs_name(fs), rc, out);
		goto fail;
	}
	if (mkdir(b->root, 0755) < 0 && errno != EEXIST) {
		snprintf(berr, sizeof berr, "mkdir %s: %s", b->root, strerror(errno));
		goto fail;
	}
	track_mount(b->root);
	if (mount(b->loop, b->root, fs_name(fs), 0, NULL) < 0) {
		snprintf(berr, sizeof berr, "mount %s on %s: %s", b->loop, b->root,
			 strerror(errno));
		goto fail;
	}
	chmod(b->root, 0755);
	b->ready = 1;
	return b->root;
fail:
	b->failed = 1;
	memcpy(b->err, berr, sizeof b->err);
	snprintf(err, errlen, "%s", berr);
	return NULL;
}

/* ---- daemon ---------------------------------------------------------------- */
/*
 * Without config= dcfs reads /etc/dcfs.conf where it exists (installed by
 * make install or the package): mounts that name none get config=none, so
 * a machine's own config does not change what the tests see.
 */
static int has_config(char *const argv[])
{
	for (int i = 1; argv[i]; i++)
		if (strstr(argv[i], "config="))
			return 1;
	return 0;
}

int daemon_spawn(struct daemon *d, const char *tag, char *const argv[])
{
	static int seq;
	snprintf(d->log, sizeof d->log, "%s/logs/%s.%d.log", g_tmpdir, tag, ++seq);
	snprintf(d->statusf, sizeof d->statusf, "%s/logs/%s.%d.status", g_tmpdir, tag, seq);
	unlink(d->statusf);
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	fflush(NULL);
	pid_t sup = fork();
	if (sup < 0)
		return -1;
	if (sup == 0) {
		/* supervisor: record daemon's wait status in statusf */
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		pid_t pid = fork();
		if (pid == 0) {
			int lfd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
			int nul = open("/dev/null", O_RDONLY);
			if (lfd < 0 || nul < 0)
				_exit(126);
			dup2(nul, 0);
			dup2(lfd, 1);
			dup2(lfd, 2);
			setpgid(0, 0);
			char *args[64];
			int n = 0;
			args[n++] = (char *)g_dcfs_bin;
			if (!has_config(argv)) {
				args[n++] = "-o";
				args[n++] = "config=none";
			}
			for (int i = 1; argv[i] && n < 63; i++)
				args[n++] = argv[i];
			args[n] = NULL;
			execv(g_dcfs_bin, args);
			dprintf(2, "exec %s: %s\n", g_dcfs_bin, strerror(errno));
			_exit(127);
		}
		if (write(pfd[1], &pid, sizeof pid) != sizeof pid)
			_exit(1);
		close(pfd[1]);
		int st = -1;
		while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		char tmp[PATH_MAX + 8];
		snprintf(tmp, sizeof tmp, "%s.tmp", d->statusf);
		FILE *f = fopen(tmp, "w");
		if (f) {
			fprintf(f, "%d\n", st);
			fclose(f);
			rename(tmp, d->statusf);
		}
		_exit(0);
	}
	close(pfd[1]);
	d->sup = sup;
	d->pid = -1;
	ssize_t n;
	while ((n = read(pfd[0], &d->pid, sizeof d->pid)) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	reg_pid(sup);
	if (d->pid > 0)
		reg_pid(d->pid);
	return d->pid > 0 ? 0 : -1;
}

static int daemon_status(struct daemon *d)
{
	FILE *f = fopen(d->statusf, "r");
	if (!f)
		return -1;
	int st = -1;
	if (fscanf(f, "%d", &st) != 1)
		st = -1;
	fclose(f);
	return st;
}

static void reap_sup(struct daemon *d)
{
	if (d->sup > 0) {
		int st;
		waitpid(d->sup, &st, WNOHANG);
	}
}

int daemon_wait_mounted(struct daemon *d, char *err, size_t errlen)
{
	double end = now_s() + 10.0 * deadline_scale();
	char fstype[256];
	while (now_s() < end) {
		if (is_mounted(d->mnt, fstype, sizeof fstype)) {
			if (strncmp(fstype, "fuse", 4) == 0)
				return 0;
		}
		int st = daemon_status(d);
		if (st != -1) {
			char *log = read_file_str(d->log);
			snprintf(err, errlen,
				 "daemon exited (status %#x) before mounting; log: %.600s", st,
				 log);
			free(log);
			return -1;
		}
		sleep_ms(20);
	}
	char *log = read_file_str(d->log);
	snprintf(err, errlen, "mount of %s did not appear within deadline; log: %.600s", d->mnt,
		 log);
	free(log);
	return -1;
}

int daemon_wait_exit(struct daemon *d, double timeout_s)
{
	double end = now_s() + timeout_s * deadline_scale();
	for (;;) {
		int st = daemon_status(d);
		if (st != -1) {
			reap_sup(d);
			unreg_pid(d->pid);
			unreg_pid(d->sup);
			return st;
		}
		if (now_s() >= end)
			return -1;
		sleep_ms(20);
	}
}

/* The device of the filesystem mounted at mnt (0 if unknown). */
dev_t mount_dev(const char *mnt)
{
	struct stat st;
	return stat(mnt, &st) == 0 ? st.st_dev : 0;
}

/*
 * A process of another mount namespace that still has a mount of the
 * superblock dev, or 0.  A namespace made while the mount existed (any
 * `unshare -m` on the machine: another session's build, a container)
 * keeps its own copy of it, and the superblock, hence the FUSE
 * connection, lives until that namespace lets go.
 */
static pid_t mount_held_elsewhere(dev_t dev)
{
	char own[64] = "", ns[64], path[64], line[4096], want[32];
	ssize_t n = readlink("/proc/self/ns/mnt", own, sizeof own - 1);
	pid_t found = 0;
	DIR *d = opendir("/proc");
	struct dirent *de;
	if (n <= 0 || !d || !dev) {
		if (d)
			closedir(d);
		return 0;
	}
	snprintf(want, sizeof want, " %u:%u ", major(dev), minor(dev));
	while (!found && (de = readdir(d))) {
		pid_t pid = (pid_t)atoi(de->d_name);
		if (pid <= 0)
			continue;
		snprintf(path, sizeof path, "/proc/%d/ns/mnt", pid);
		ssize_t m = readlink(path, ns, sizeof ns - 1);
		if (m <= 0 || (ns[m] = '\0', strcmp(ns, own) == 0))
			continue;
		snprintf(path, sizeof path, "/proc/%d/mountinfo", pid);
		FILE *f = fopen(path, "r");
		while (f && fgets(line, sizeof line, f))
			if (strstr(line, want)) {
				found = pid;
				break;
			}
		if (f)
			fclose(f);
	}
	closedir(d);
	return found;
}

/*
 * After a lazy unmount: the daemon (d, or the process pid) exits once
 * the superblock dev is gone.  If another mount namespace still holds it,
 * the daemon cannot know the mount is over here: that is reported, and
 * the daemon is stopped with SIGTERM (its graceful stop) instead.
 */
int daemon_wait_unmounted(struct daemon *d, pid_t pid, dev_t dev, double timeout_s)
{
	double end = now_s() + timeout_s * deadline_scale();
	pid_t holder = 0;
	for (;;) {
		if (d) {
			int st = daemon_wait_exit(d, 0);
			if (st != -1)
				return st;
		} else if (kill(pid, 0) < 0) {
			return 0;
		}
		if (now_s() >= end) {
			if (holder || !(holder = mount_held_elsewhere(dev)))
				return -1;
			fprintf(stderr,
				"dcfs-tests: the unmounted superblock %u:%u is still mounted in the mount namespace of pid %d: stopping the daemon with SIGTERM\n",
				major(dev), minor(dev), holder);
			kill(d ? d->pid : pid, SIGTERM);
			end = now_s() + 30 * deadline_scale();
		}
		sleep_ms(20);
	}
}

void daemon_kill(struct daemon *d)
{
	if (d->pid > 0 && daemon_status(d) == -1) {
		kill(d->pid, SIGKILL);
		daemon_wait_exit(d, 5);
	}
	if (d->sup > 0) {
		int st;
		waitpid(d->sup, &st, 0);
		unreg_pid(d->sup);
		d->sup = 0;
	}
}

/* ---- fixtures ---------------------------------------------------------------- */
static struct daemon g_daemon;
static pid_t g_helper_daemon;

pid_t find_daemon_for(const char *mnt)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	struct dirent *de;
	pid_t found = -1;
	while ((de = readdir(d))) {
		pid_t p = atoi(de->d_name);
		if (p <= 0)
			continue;
		char path[64], buf[8192];
		snprintf(path, sizeof path, "/proc/%d/cmdline", p);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		/* argv[0] must not be mount/mount.dcfs; some arg equals mnt */
		const char *a0 = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
		if (strncmp(a0, "mount", 5) == 0)
			continue;
		for (char *s = buf; s < buf + n; s += strlen(s) + 1)
			if (strcmp(s, mnt) == 0)
				found = p;
	}
	closedir(d);
	return found;
}

/* /sbin/mount.dcfs is shared by concurrent test runs (several engineers
 * run `make check` on one machine). Each run registers its pid in
 * HELPER_REG; a link made by any run is marked with HELPER_REG/owned and
 * removed by the last registered run that exits. */
#define HELPER_REG "/run/dcfs-tests-helper"
static char helper_pidfile[64];

static int ensure_sbin_helper(char *err, size_t errlen)
{
	struct stat st;
	mkdir(HELPER_REG, 0700);
	snprintf(helper_pidfile, sizeof helper_pidfile, HELPER_REG "/%d", (int)getpid());
	int fd = open(helper_pidfile, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	if (lstat("/sbin/mount.dcfs", &st) == 0)
		return 0;
	if (symlink(g_mount_dcfs_bin, "/sbin/mount.dcfs") < 0) {
		snprintf(err, errlen, "symlink /sbin/mount.dcfs: %s", strerror(errno));
		return -1;
	}
	fd = open(HELPER_REG "/owned", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	created_sbin_link = 1;
	return 0;
}

/* async-signal-safe: raw getdents64 over HELPER_REG */
static void release_sbin_helper(void)
{
	if (!helper_pidfile[0])
		return;
	unlink(helper_pidfile);
	helper_pidfile[0] = 0;
	int dfd = open(HELPER_REG, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	static char dbuf[8192];
	int others = 0;
	long n;
	while ((n = syscall(SYS_getdents64, dfd, dbuf, sizeof dbuf)) > 0) {
		for (long off = 0; off < n;) {
			/* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name */
			unsigned short reclen;
			memcpy(&reclen, dbuf + off + 16, sizeof reclen);
			const char *name = dbuf + off + 19;
			off += reclen;
			long pid = 0;
			const char *c = name;
			while (*c >= '0' && *c <= '9')
				pid = pid * 10 + (*c++ - '0');
			if (*c || pid <= 0)
				continue;
			if (kill((pid_t)pid, 0) == 0 || errno == EPERM) {
				others = 1;
			} else {
				char stale[64];
				memcpy(stale, HELPER_REG "/", sizeof HELPER_REG);
				size_t l = strlen(name);
				if (l < sizeof stale - sizeof HELPER_REG) {
					memcpy(stale + sizeof HELPER_REG, name, l + 1);
					unlink(stale);
				}
			}
		}
	}
	close(dfd);
	if (!others && unlink(HELPER_REG "/owned") == 0)
		unlink("/sbin/mount.dcfs");
	created_sbin_link = 0;
}

int helper_ensure(char *err, size_t errlen)
{
	return ensure_sbin_helper(err, errlen);
}

int helper_mount(const char *backing, const char *mnt, const char *opts, char *out, size_t outlen)
{
	char err[256];
	if (ensure_sbin_helper(err, sizeof err) < 0) {
		snprintf(out, outlen, "%s", err);
		return -1;
	}
	return run_cmd(out, outlen, "mount -t dcfs '%s' '%s' -o '%s%s'", backing, mnt, opts,
		       strstr(opts, "config=") ? "" : ",config=none");
}

/*
 * mount -t dcfs with a supervisor that outlives the mount command: a child
 * subreaper, so the daemon dcfs leaves running once mounted becomes its
 * child, and it records the daemon's wait status in d->statusf as
 * daemon_spawn()'s does; the daemon logs to d->log (DCFS_LOG_FILE, since
 * it daemonizes).  Returns mount's exit status; d->pid is the daemon.
 */
static int helper_mount_supervised(struct daemon *d, const char *tag, const char *backing,
				   const char *opts, char *out, size_t outlen)
{
	static int seq;
	snprintf(d->log, sizeof d->log, "%s/logs/%s.h%d.log", g_tmpdir, tag, ++seq);
	snprintf(d->statusf, sizeof d->statusf, "%s/logs/%s.h%d.status", g_tmpdir, tag, seq);
	unlink(d->statusf);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	fflush(NULL);
	pid_t sup = fork();
	if (sup < 0)
		return -1;
	if (sup == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		prctl(PR_SET_CHILD_SUBREAPER, 1);
		setenv("DCFS_LOG_FILE", d->log, 1);
		static char o[4096];
		int rc = helper_mount(backing, d->mnt, opts, o, sizeof o);
		pid_t pid = rc == 0 ? find_daemon_for(d->mnt) : -1;
		if (write(p[1], &rc, sizeof rc) != sizeof rc ||
		    write(p[1], &pid, sizeof pid) != sizeof pid ||
		    write(p[1], o, strlen(o) + 1) < 0)
			_exit(1);
		close(p[1]);
		int st = -1, w;
		for (pid_t r; pid > 0;) {
			r = waitpid(-1, &w, 0);
			if (r == pid) {
				st = w;
				break;
			}
			if (r < 0 && errno != EINTR)
				break;
		}
		char tmp[PATH_MAX + 8];
		snprintf(tmp, sizeof tmp, "%s.tmp", d->statusf);
		FILE *f = pid > 0 ? fopen(tmp, "w") : NULL;
		if (f) {
			fprintf(f, "%d\n", st);
			fclose(f);
			rename(tmp, d->statusf);
		}
		while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
			;
		_exit(0);
	}
	close(p[1]);
	int rc = -1;
	d->sup = sup;
	d->pid = -1;
	if (read(p[0], &rc, sizeof rc) != sizeof rc ||
	    read(p[0], &d->pid, sizeof d->pid) != sizeof d->pid)
		rc = -1;
	ssize_t n = read(p[0], out, outlen - 1);
	out[n > 0 ? n : 0] = 0;
	close(p[0]);
	reg_pid(sup);
	if (d->pid > 0)
		reg_pid(d->pid);
	return rc;
}

void fixture_setup(const struct config *cfg)
{
	g_cfg = cfg;
	g_setup_err[0] = 0;
	memset(&g_daemon, 0, sizeof g_daemon);
	g_helper_daemon = 0;
	char err[512];
	const char *root = backing_root(cfg->fs, err, sizeof err);
	if (!root) {
		snprintf(g_setup_err, sizeof g_setup_err, "backing fs: %s", err);
		return;
	}
	snprintf(g_exp, sizeof g_exp, "%s/export-%s", root, cfg->name);
	snprintf(g_ref, sizeof g_ref, "%s/ref-%s", root, cfg->name);
	snprintf(g_mnt, sizeof g_mnt, "%s/mnt-%s", g_tmpdir, cfg->name);
	mkdir(g_exp, 0755);
	mkdir(g_ref, 0755);
	chmod(g_exp, 0755);
	chmod(g_ref, 0755);
	char backing[PATH_MAX];
	snprintf(backing, sizeof backing, "%s", g_exp);
	if (cfg->inplace) {
		/* dcfs over the export dir itself; the tests' backing view is a
		 * bind mount of it made before, which dcfs does not cover */
		snprintf(g_mnt, sizeof g_mnt, "%s", backing);
		snprintf(g_exp, sizeof g_exp, "%s/alias-%s", g_tmpdir, cfg->name);
		mkdir(g_exp, 0755);
		if (!is_mounted(g_exp, NULL, 0) && mount(backing, g_exp, NULL, MS_BIND, NULL) < 0) {
			snprintf(g_setup_err, sizeof g_setup_err, "bind mount %s: %s", g_exp,
				 strerror(errno));
			return;
		}
		track_mount(g_exp);
	}
	if (mkdir(g_mnt, 0755) < 0 && errno != EEXIST) {
		snprintf(g_setup_err, sizeof g_setup_err, "mkdir %s: %s", g_mnt, strerror(errno));
		return;
	}
	if (is_mounted(g_mnt, NULL, 0)) {
		snprintf(g_setup_err, sizeof g_setup_err, "%s already mounted", g_mnt);
		return;
	}
	track_mount(g_mnt);
	char out[4096];
	switch (cfg->mm) {
	case MM_BIND:
		if (mount(g_exp, g_mnt, NULL, MS_BIND, NULL) < 0)
			snprintf(g_setup_err, sizeof g_setup_err, "bind mount: %s",
				 strerror(errno));
		break;
	case MM_DAEMON: {
		char opts[PATH_MAX + 64] = "allow_other";
		if (cfg->conf) {
			char cpath[PATH_MAX];
			snprintf(cpath, sizeof cpath, "%s/%s.conf", g_tmpdir, cfg->name);
			if (write_file(cpath, cfg->conf, strlen(cfg->conf), 0644) < 0) {
				snprintf(g_setup_err, sizeof g_setup_err, "write %s: %s", cpath,
					 strerror(errno));
				break;
			}
			snprintf(opts, sizeof opts, "allow_other,config=%s", cpath);
		}
		if (cfg->opts) {
			size_t l = strlen(opts);
			snprintf(opts + l, sizeof opts - l, ",%s", cfg->opts);
		}
		if (cfg->inplace) {
			size_t l = strlen(opts);
			snprintf(opts + l, sizeof opts - l, ",nonempty");
		}
		char *argv[] = { "dcfs", "-f", "-o", opts, backing, g_mnt, NULL };
		snprintf(g_daemon.mnt, sizeof g_daemon.mnt, "%s", g_mnt);
		if (daemon_spawn(&g_daemon, cfg->name, argv) < 0) {
			snprintf(g_setup_err, sizeof g_setup_err, "spawn %s failed", g_dcfs_bin);
			break;
		}
		if (daemon_wait_mounted(&g_daemon, err, sizeof err) < 0) {
			snprintf(g_setup_err, sizeof g_setup_err, "%s", err);
			daemon_kill(&g_daemon);
		}
		break;
	}
	case MM_HELPER: {
		snprintf(g_daemon.mnt, sizeof g_daemon.mnt, "%s", g_mnt);
		int rc = helper_mount_supervised(&g_daemon, cfg->name, g_exp, "allow_other", out,
						 sizeof out);
		char fstype[256] = "";
		if (rc != 0) {
			snprintf(g_setup_err, sizeof g_setup_err,
				 "mount -t dcfs failed (status %d): %.500s", rc, out);
			break;
		}
		if (!is_mounted(g_mnt, fstype, sizeof fstype) || strncmp(fstype, "fuse", 4)) {
			snprintf(g_setup_err, sizeof g_setup_err,
				 "mount -t dcfs returned 0 but %s is not a fuse mount (%s)", g_mnt,
				 fstype);
			break;
		}
		g_helper_daemon = g_daemon.pid;
		if (g_helper_daemon <= 0)
			snprintf(g_setup_err, sizeof g_setup_err,
				 "mount -t dcfs: no daemon process found for %s", g_mnt);
		break;
	}
	}
}

static void lazy_unmount(const char *mnt)
{
	if (is_mounted(mnt, NULL, 0))
		run_cmd(NULL, 0, "fusermount3 -u -z '%s' 2>/dev/null || umount -l '%s'", mnt, mnt);
}

void fixture_teardown(void)
{
	if (!g_cfg)
		return;
	lazy_unmount(g_mnt);
	if (g_cfg->inplace && is_mounted(g_exp, NULL, 0))
		umount2(g_exp, MNT_DETACH);
	if (g_cfg->mm == MM_DAEMON && g_daemon.sup > 0) {
		if (daemon_wait_exit(&g_daemon, 10) == -1)
			daemon_kill(&g_daemon);
		else
			daemon_kill(&g_daemon); /* just reaps supervisor */
	}
	if (g_cfg->mm == MM_HELPER && g_daemon.sup > 0) {
		if (daemon_wait_exit(&g_daemon, 10) == -1)
			daemon_kill(&g_daemon);
		else
			daemon_kill(&g_daemon); /* just reaps the supervisor */
	}
	g_cfg = NULL;
}

void check_unmount_and_daemon(void)
{
	ck_assert_msg(!g_setup_err[0], "setup failed: %s", g_setup_err);
	char out[4096];
	int rc;
	switch (g_cfg->mm) {
	case MM_BIND: ck_assert_msg(umount(g_mnt) == 0, "umount: %s", strerror(errno)); break;
	case MM_DAEMON:
	case MM_HELPER: {
		dev_t dev = mount_dev(g_mnt);
		if (g_cfg->mm == MM_HELPER) {
			rc = run_cmd(out, sizeof out, "umount '%s'", g_mnt);
			ck_assert_msg(rc == 0, "umount failed (%d): %s", rc, out);
		} else {
			rc = run_cmd(out, sizeof out, "fusermount3 -u -z '%s'", g_mnt);
			ck_assert_msg(rc == 0, "fusermount3 -u -z failed (%d): %s", rc, out);
		}
		int st = daemon_wait_unmounted(&g_daemon, 0, dev, 10);
		char *log = read_file_str(g_daemon.log);
		const char *rep = log_report(log);
		ck_assert_msg(!rep, "%s", rep);
		ck_assert_msg(st != -1,
			      "daemon did not exit within deadline after unmount; log: %.800s",
			      log);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "daemon exit status %#x (exited=%d code=%d sig=%d); log: %.1500s", st,
			      WIFEXITED(st), WIFEXITED(st) ? WEXITSTATUS(st) : -1,
			      WIFSIGNALED(st) ? WTERMSIG(st) : 0, log);
		const char *p = log_problem(log);
		ck_assert_msg(!p, "daemon log contains '%s': %.3000s", p, log);
		/* a daemonized one logs to the file too: it must have */
		ck_assert_msg(strstr(log, "mounted "), "the daemon logged nothing: %.300s", log);
		free(log);
		break;
	}
	}
	ck_assert_msg(!is_mounted(g_mnt, NULL, 0), "%s still mounted", g_mnt);
}

/* Does the daemon answer a LOOKUP within the deadline? (a fresh name, so
 * neither the dentry nor the attribute cache can answer it) */
static int probe_alive(const char *mnt, double timeout)
{
	static int seq;
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/.dcfs-tests-probe-%d-%d", mnt, (int)getpid(), ++seq);
	pid_t pid = fork();
	if (pid == 0) {
		struct stat st;
		_exit(lstat(p, &st) < 0 && errno == ENOENT ? 0 : 1);
	}
	if (pid < 0)
		return 0;
	double end = now_s() + timeout;
	int st;
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now_s() > end) {
			kill(pid, SIGKILL);
			return -1;
		}
		sleep_ms(5);
	}
	return 0;
}

static void hung_marker(char *buf, size_t len)
{
	snprintf(buf, len, "%s/logs/hung-%s", g_tmpdir, g_cfg->name);
}

void test_begin(const char *name)
{
	char hm[PATH_MAX];
	hung_marker(hm, sizeof hm);
	ck_assert_msg(access(hm, F_OK) != 0,
		      "dcfs daemon stopped answering requests in an earlier test (%s)",
		      g_cfg->name);
	ck_assert_msg(!g_setup_err[0], "setup failed: %s", g_setup_err);
	ck_assert_msg(is_mounted(g_mnt, NULL, 0), "%s is not mounted (daemon died?)", g_mnt);
	if (g_cfg->mm == MM_DAEMON || g_cfg->mm == MM_HELPER) {
		int st = daemon_status(&g_daemon);
		if (st != -1) {
			char *log = read_file_str(g_daemon.log);
			const char *rep = log_report(log);
			ck_abort_msg(
				"dcfs daemon already died in an earlier test (wait status %#x%s)%s%s",
				st, WIFSIGNALED(st) ? ", killed by signal" : "", rep ? ": " : "",
				rep ? rep : "");
		}
		/* mark the log so sanitizer reports can be attributed */
		int lfd = open(g_daemon.log, O_WRONLY | O_APPEND);
		if (lfd >= 0) {
			dprintf(lfd, "%s%s (%s)\n", TEST_MARK, name, g_cfg->name);
			close(lfd);
		}
	}
	if (g_cfg->mm != MM_BIND && probe_alive(g_mnt, 15 * deadline_scale()) < 0) {
		int fd = open(hm, O_CREAT | O_WRONLY, 0644);
		if (fd >= 0)
			close(fd);
		ck_abort_msg("dcfs daemon does not answer a LOOKUP within %.0fs (hung?)",
			     15 * deadline_scale());
	}
	umask(022);
	snprintf(ROOTS[0], PATH_MAX, "%s/%s", g_ref, name);
	snprintf(ROOTS[1], PATH_MAX, "%s/%s", g_mnt, name);
	snprintf(EROOT, PATH_MAX, "%s/%s", g_exp, name);
	rm_rf(ROOTS[0]);
	rm_rf(EROOT);
	ck_assert_msg(mkdir(ROOTS[0], 0755) == 0, "mkdir %s: %s", ROOTS[0], strerror(errno));
	ck_assert_msg(mkdir(ROOTS[1], 0755) == 0, "mkdir %s: %s", ROOTS[1], strerror(errno));
	SIDE = 1;
}

/* ---- global init / cleanup --------------------------------------------- */
/* Lazily unmount everything below g_tmpdir, latest first. Only uses
 * async-signal-safe calls (open/read/umount2), so the signal handler can
 * use it too. */
static char sweep_buf[1 << 18];
static void sweep_mounts(void)
{
	if (!g_tmpdir[0])
		return;
	for (int pass = 0; pass < 64; pass++) {
		int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return;
		size_t n = 0;
		ssize_t r;
		while (n < sizeof sweep_buf - 1 &&
		       (r = read(fd, sweep_buf + n, sizeof sweep_buf - 1 - n)) > 0)
			n += (size_t)r;
		close(fd);
		sweep_buf[n] = 0;
		size_t tl = strlen(g_tmpdir);
		char *last = NULL;
		for (char *line = sweep_buf; line && *line;) {
			char *nl = strchr(line, '\n');
			if (nl)
				*nl = 0;
			char *f = line;
			for (int i = 0; i < 4 && f; i++) {
				f = strchr(f, ' ');
				if (f)
					f++;
			}
			if (f) {
				char *e = strchr(f, ' ');
				if (e)
					*e = 0;
				if (strncmp(f, g_tmpdir, tl) == 0 && f[tl] == '/')
					last = f;
			}
			line = nl ? nl + 1 : NULL;
		}
		if (!last)
			return;
		if (umount2(last, 0) < 0)
			umount2(last, MNT_DETACH);
	}
}

/* The node ids a daemon saved at its stop for the next run over a backing
 * dir of this loop device (dcfs(8), FILES): nobody will mount it again. */
static void remove_saved_ids(const char *loop)
{
	struct stat st;
	char prefix[64];
	DIR *d;
	struct dirent *de;

	if (stat(loop, &st) < 0 || !(d = opendir("/run/dcfs")))
		return;
	snprintf(prefix, sizeof prefix, "ids-%u.%u-", major(st.st_rdev), minor(st.st_rdev));
	while ((de = readdir(d)))
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

static void cleanup_impl(int from_signal)
{
	/* kill daemons first so lazy unmounts do not hang on them */
	if (from_signal)
		for (int i = 0; i < MAXREG; i++)
			if (reg_pids[i] > 0)
				kill(reg_pids[i], SIGKILL);
	sweep_mounts();
	for (int i = reg_nmounts - 1; i >= 0; i--) {
		if (!from_signal && !is_mounted(reg_mounts[i], NULL, 0))
			continue;
		if (umount2(reg_mounts[i], 0) < 0)
			umount2(reg_mounts[i], MNT_DETACH);
	}
	if (!from_signal)
		for (int i = 0; i < MAXREG; i++)
			if (reg_pids[i] > 0) {
				kill(reg_pids[i], SIGKILL);
				waitpid(reg_pids[i], NULL, WNOHANG);
				reg_pids[i] = 0;
			}
	for (int i = 0; i < reg_nloops; i++) {
		if (!from_signal)
			remove_saved_ids(reg_loops[i]);
		int fd = open(reg_loops[i], O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ioctl(fd, LOOP_CLR_FD, 0);
			close(fd);
		}
	}
	reg_nloops = 0;
	release_sbin_helper();
	if (g_tmpdir[0]) {
		pid_t p = fork();
		if (p == 0) {
			char *a[] = { "rm", "-rf", "--one-file-system", g_tmpdir, NULL };
			execv("/bin/rm", a);
			_exit(127);
		}
		if (p > 0)
			waitpid(p, NULL, 0);
	}
}

static volatile sig_atomic_t cleaned;

void harness_cleanup(void)
{
	if (getpid() != g_main_pid || cleaned)
		return;
	cleaned = 1;
	cleanup_impl(0);
}

static void on_signal(int sig)
{
	if (getpid() == g_main_pid && !cleaned) {
		cleaned = 1;
		cleanup_impl(1);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

int harness_verify_clean(void)
{
	int bad = 0;
	if (reg_nimgs > 0) {
		char out[8192] = "";
		run_cmd(out, sizeof out, "losetup -l -n -O NAME,BACK-FILE");
		if (strstr(out, g_tmpdir)) {
			fprintf(stderr, "FAIL: leftover loop device(s):\n%s", out);
			bad = 1;
		}
	}
	char out[8192] = "";
	run_cmd(out, sizeof out, "grep -F ' %s/' /proc/self/mountinfo", g_tmpdir);
	if (out[0]) {
		fprintf(stderr, "FAIL: leftover mount(s):\n%s", out);
		bad = 1;
	}
	return bad ? -1 : 0;
}

static int skip(const char *why)
{
	printf("SKIP: %s\n", why);
	fflush(stdout);
	return 77;
}

int harness_init(void)
{
	g_main_pid = getpid();
	umask(022);
	/* failure messages carry daemon log excerpts (sanitizer reports); Check's
	 * default limit of 4 KiB makes the test child exit early instead */
	check_set_max_msg_size(64 * 1024);
	g_sanitized = getenv("DCFS_SANITIZED") && atoi(getenv("DCFS_SANITIZED")) != 0;
	g_dcfs_bin = getenv("DCFS_BIN");
	g_mount_dcfs_bin = getenv("MOUNT_DCFS_BIN");
	if (geteuid() != 0)
		return skip("not running as root");
	if (access("/dev/fuse", R_OK | W_OK) < 0)
		return skip("/dev/fuse not available");
	if (access("/dev/loop-control", R_OK | W_OK) < 0)
		return skip("loop devices not available (/dev/loop-control)");
	if (!g_dcfs_bin || access(g_dcfs_bin, X_OK) < 0) {
		fprintf(stderr, "DCFS_BIN not set or not executable (%s)\n",
			g_dcfs_bin ? g_dcfs_bin : "unset");
		return 2;
	}
	char tmpl[] = "/var/tmp/dcfs-tests.XXXXXX";
	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 2;
	}
	snprintf(g_tmpdir, sizeof g_tmpdir, "%s", tmpl);
	chmod(g_tmpdir, 0755);
	char logs[PATH_MAX + 8];
	snprintf(logs, sizeof logs, "%s/logs", g_tmpdir);
	mkdir(logs, 0755);
	atexit(harness_cleanup);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	if (g_mount_dcfs_bin && access(g_mount_dcfs_bin, X_OK) == 0) {
		char err[256];
		if (ensure_sbin_helper(err, sizeof err) < 0)
			fprintf(stderr, "warning: %s\n", err);
		char real[PATH_MAX], want[PATH_MAX];
		if (realpath("/sbin/mount.dcfs", real) && realpath(g_mount_dcfs_bin, want) &&
		    strcmp(real, want) != 0)
			fprintf(stderr, "warning: /sbin/mount.dcfs is %s, not MOUNT_DCFS_BIN %s\n",
				real, want);
	}
	/* make sure loop devices can actually be set up */
	char err[512];
	if (!backing_root(FS_EXT4, err, sizeof err)) {
		if (strstr(err, "losetup"))
			return skip(err);
		fprintf(stderr, "cannot set up ext4 backing fs: %s\n", err);
		return 2;
	}
	return 0;
}
