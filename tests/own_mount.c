/* The helpers of own_mount.h: a dcfs mount with a config file of a suite's
 * own, reload by SIGHUP, the user.dcfs.* xattrs, stats counters, page cache
 * residency, and the source tree the tests read documents from. */
#include "own_mount.h"

#include <dcfs_sys.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

const char *srcdir(void)
{
	const char *s = getenv("DCFS_SRCDIR");
	ck_assert_msg(s && *s, "DCFS_SRCDIR is not set (run through make check)");
	return s;
}

char *src_file(const char *rel)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", srcdir(), rel);
	size_t n;
	char *t = slurp(path, &n);
	ck_assert_msg(t, "read %s: %s", path, strerror(errno));
	return t;
}

int own_write_conf(const char *path, const char *text)
{
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof tmp, "%s.new", path);
	if (write_file(tmp, text, strlen(text), 0644) < 0)
		return -1;
	return rename(tmp, path);
}

int own_mount_start(struct own_mount *m, const char *root, const char *tag, const char *conf_text)
{
	return own_mount_start_opts(m, root, tag, conf_text, NULL);
}

int own_mount_start_opts(struct own_mount *m, const char *root, const char *tag,
			 const char *conf_text, const char *extra_opts)
{
	return own_mount_start_argv(m, root, tag, conf_text, extra_opts, NULL);
}

int own_mount_start_argv(struct own_mount *m, const char *root, const char *tag,
			 const char *conf_text, const char *extra_opts, const char *extra_arg)
{
	memset(m, 0, sizeof *m);
	snprintf(m->exp, sizeof m->exp, "%s/export-%s", root, tag);
	snprintf(m->mnt, sizeof m->mnt, "%s/mnt-%s", g_tmpdir, tag);
	snprintf(m->conf, sizeof m->conf, "%s/%s.conf", g_tmpdir, tag);
	mkdir(m->exp, 0755);
	chmod(m->exp, 0755);
	if (mkdir(m->mnt, 0755) < 0 && errno != EEXIST) {
		snprintf(m->err, sizeof m->err, "mkdir %s: %s", m->mnt, strerror(errno));
		return -1;
	}
	if (is_mounted(m->mnt, NULL, 0)) {
		snprintf(m->err, sizeof m->err, "%s already mounted", m->mnt);
		return -1;
	}
	if (own_write_conf(m->conf, conf_text) < 0) {
		snprintf(m->err, sizeof m->err, "write %s: %s", m->conf, strerror(errno));
		return -1;
	}
	track_mount(m->mnt);
	char opts[PATH_MAX + 256];
	snprintf(opts, sizeof opts, "allow_other,config=%s%s%s", m->conf, extra_opts ? "," : "",
		 extra_opts ? extra_opts : "");
	char *argv[] = { "dcfs", "-f", "-o", opts, m->exp, m->mnt, (char *)extra_arg, NULL };
	snprintf(m->d.mnt, sizeof m->d.mnt, "%s", m->mnt);
	if (daemon_spawn(&m->d, tag, argv) < 0) {
		snprintf(m->err, sizeof m->err, "spawn %s failed", g_dcfs_bin);
		return -1;
	}
	if (daemon_wait_mounted(&m->d, m->err, sizeof m->err) < 0) {
		daemon_kill(&m->d);
		return -1;
	}
	m->up = 1;
	return 0;
}

int own_mount_stop(struct own_mount *m, char *err, size_t errlen)
{
	char out[4096];
	dev_t dev = mount_dev(m->mnt);
	int rc = run_cmd(out, sizeof out, "fusermount3 -u -z '%s'", m->mnt);
	if (rc != 0) {
		snprintf(err, errlen, "fusermount3 -u -z %s failed (%d): %s", m->mnt, rc, out);
		return -1;
	}
	int st = daemon_wait_unmounted(&m->d, 0, dev, 10);
	char *log = read_file_str(m->d.log);
	int ret = 0;
	const char *p;
	if (st == -1) {
		snprintf(err, errlen, "daemon did not exit after unmount; log: %.800s", log);
		ret = -1;
	} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		snprintf(err, errlen, "daemon wait status %#x; log: %.1500s", st, log);
		ret = -1;
	} else if ((p = log_report(log))) {
		snprintf(err, errlen, "%s", p);
		ret = -1;
	}
	free(log);
	if (st != -1) {
		daemon_kill(&m->d); /* reaps the supervisor if it is ours */
		m->up = 0;
	}
	return ret;
}

void own_mount_ck_with(struct own_mount *m, const char *tag, const char *conf,
		       const struct own_mount_how *how)
{
	char err[512], exp[PATH_MAX];
	const char *root = backing_root(how->fs, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	if (how->fresh) {
		snprintf(exp, sizeof exp, "%s/export-%s", root, tag);
		rm_rf(exp);
	}
	ck_assert_msg(own_mount_start_argv(m, root, tag, conf, how->opts, how->arg) == 0,
		      "mount%s%s: %s", how->opts ? " -o " : "", how->opts ? how->opts : "", m->err);
}

void own_mount_ck(struct own_mount *m, enum fs_kind fs, const char *tag, const char *conf)
{
	own_mount_ck_with(m, tag, conf, &(struct own_mount_how){ .fs = fs });
}

void own_unmount_ck(struct own_mount *m)
{
	char err[2048];
	ck_assert_msg(own_mount_stop(m, err, sizeof err) == 0, "unmount: %s", err);
}

void own_mount_kill(struct own_mount *m)
{
	if (is_mounted(m->mnt, NULL, 0))
		run_cmd(NULL, 0, "fusermount3 -u -z '%s' 2>/dev/null || umount -l '%s'", m->mnt,
			m->mnt);
	if (m->d.sup > 0) {
		if (daemon_wait_exit(&m->d, 10) == -1)
			daemon_kill(&m->d);
		else
			daemon_kill(&m->d);
	}
	m->up = 0;
}

int count_str(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

int own_reload(struct own_mount *m, const char *text)
{
	char *log = read_file_str(m->d.log);
	int ok0 = count_str(log, "reloaded "), bad0 = count_str(log, "reload of ");
	free(log);
	if (own_write_conf(m->conf, text) < 0 || kill(m->d.pid, SIGHUP) < 0)
		return -1;
	double end = now_s() + 5 * deadline_scale();
	while (now_s() < end) {
		log = read_file_str(m->d.log);
		int ok = count_str(log, "reloaded "), bad = count_str(log, "reload of ");
		free(log);
		if (ok > ok0)
			return 1;
		if (bad > bad0)
			return 0;
		sleep_ms(20);
	}
	return -1;
}

char *xattr_str(const char *path, const char *name)
{
	char buf[65536];
	ssize_t n = getxattr(path, name, buf, sizeof buf - 1);
	if (n < 0)
		return NULL;
	buf[n] = 0;
	return strdup(buf);
}

int stream_mmap_allowed(const char *mnt)
{
	char *s = xattr_str(mnt, "user.dcfs.stats");
	int ok = s && (strstr(s, "\"passthrough\":{\"state\":\"on\"") ||
		       strstr(s, "\"direct_io_mmap\":true"));
	free(s);
	return ok;
}

long long stats_get(const char *mnt, const char *cls, const char *key)
{
	char *s = xattr_str(mnt, "user.dcfs.stats");
	ck_assert_msg(s, "%s: no user.dcfs.stats: %s", mnt, strerror(errno));
	char pat[128];
	snprintf(pat, sizeof pat, "\"%s\":{", cls);
	long long v = -1;
	char *c = strstr(s, pat);
	if (c) {
		char *e = strchr(c, '}');
		snprintf(pat, sizeof pat, "\"%s\":", key);
		char *k = strstr(c, pat);
		if (k && (!e || k < e))
			v = strtoll(k + strlen(pat), NULL, 10);
	}
	free(s);
	/* The requests class lists the opcodes seen so far: the others are 0. */
	if (v < 0 && !strcmp(cls, "requests"))
		v = 0;
	/* Never -1: "at most N" and "unchanged" checks would take it for success. */
	ck_assert_msg(v >= 0, "%s: no counter %s.%s in user.dcfs.stats", mnt, cls, key);
	return v;
}

long long resident_range(int fd, uint64_t off, uint64_t len)
{
	struct dcfs_cachestat cs;
	/* Never -1: a check "at most N pages" would take it for success. */
	ck_assert_msg(dcfs_cachestat(fd, off, len, &cs) == 0, "cachestat(%d): %s", fd,
		      strerror(errno));
	return (long long)cs.nr_cache;
}

long long resident_pages(int fd)
{
	return resident_range(fd, 0, 0);
}

long long wait_resident_le(const char *path, long long max, double timeout_s)
{
	int fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "open %s to count its pages: %s", path, strerror(errno));
	double end = now_s() + timeout_s * deadline_scale();
	long long n;
	for (;;) {
		n = resident_pages(fd);
		if (n <= max || now_s() >= end)
			break;
		sleep_ms(25);
	}
	close(fd);
	return n;
}

int line_of(const char *conf, const char *line)
{
	int no = 1;
	size_t ll = strlen(line);
	for (const char *p = conf; *p; no++) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		while (len && (*p == ' ' || *p == '\t'))
			p++, len--;
		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '\r'))
			len--;
		if (len == ll && memcmp(p, line, ll) == 0)
			return no;
		if (!nl)
			break;
		p = nl + 1;
	}
	return 0;
}

void drop_caches(void)
{
	sync();
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
	if (fd >= 0) {
		if (write(fd, "3\n", 2) < 0)
			perror("drop_caches");
		close(fd);
	}
}

uint64_t hash64(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint64_t h = 1469598103934665603ULL;
	size_t i = 0;
	/* 8 bytes per step: fast enough for tens of MiB */
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 1099511628211ULL;
		h ^= h >> 29;
	}
	for (; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

/* What the non-blocking fd has now, appended to err (at most len - 1). */
static void read_available(int fd, char *err, size_t *n, size_t len)
{
	ssize_t r;
	char buf[1024];
	while ((r = read(fd, buf, sizeof buf)) > 0) {
		size_t c = (size_t)r < len - 1 - *n ? (size_t)r : len - 1 - *n;
		memcpy(err + *n, buf, c);
		*n += c;
	}
}

int run_capture(const char *bin, char *const argv[], char *err, size_t errlen, double timeout)
{
	int pfd[2];
	ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(pfd[1], 2);
		execv(bin, argv);
		_exit(127);
	}
	close(pfd[1]);
	fcntl(pfd[0], F_SETFL, O_NONBLOCK);
	size_t n = 0;
	double end = now_s() + timeout * deadline_scale();
	int st = -1;
	for (;;) {
		read_available(pfd[0], err, &n, errlen);
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (now_s() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			st = -1;
			break;
		}
		sleep_ms(10);
	}
	read_available(pfd[0], err, &n, errlen);
	err[n] = 0;
	close(pfd[0]);
	return st;
}

static int count_lines(const char *s)
{
	int n = 0;
	size_t len = strlen(s);
	for (size_t i = 0; i < len; i++)
		if (s[i] == '\n')
			n++;
	if (len && s[len - 1] != '\n')
		n++;
	return n;
}

/* Expect: non-zero exit, exactly one non-empty line on stderr, nothing
 * mounted on mnt. */
void expect_cli_error(const char *what, const char *mnt, char *const argv[])
{
	char err[4096] = "";
	int st = run_capture(g_dcfs_bin, argv, err, sizeof err, 10);
	ck_assert_msg(st != -1, "%s: dcfs did not exit within 10s (stderr: %s)", what, err);
	const char *rep = log_report(err);
	ck_assert_msg(!rep, "%s: error path: %s", what, rep);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0,
		      "%s: expected non-zero exit, got status %#x (stderr: %s)", what, st, err);
	ck_assert_msg(err[0] != 0, "%s: no error message on stderr", what);
	ck_assert_msg(count_lines(err) == 1, "%s: expected one line on stderr, got %d:\n%s", what,
		      count_lines(err), err);
	ck_assert_msg(!is_mounted(mnt, NULL, 0), "%s: %s got mounted anyway", what, mnt);
	ck_assert_msg(strlen(err) > 5, "%s: uninformative message '%s'", what, err);
}

long long stats_wait_ge(const char *mnt, const char *cls, const char *key, long long want,
			double timeout_s)
{
	double t0 = now_s();
	long long v;
	while ((v = stats_get(mnt, cls, key)) < want && now_s() - t0 < timeout_s * deadline_scale())
		sleep_ms(20);
	return v;
}
