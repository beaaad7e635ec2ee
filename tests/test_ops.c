/* Operating dcfs: the systemd units, the graceful stop on SIGTERM, and the
 * live counters of `dcfs stat` (--watch, --prometheus against --json,
 * --files as root and as an unprivileged user).
 *
 * Each test mounts a dcfs of its own (own_mount.h) over
 * <ext4>/export-ops-<test> with -o allow_other. */
#include "harness.h"
#include "own_mount.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct own_mount g_o;

/* Through the mount, and in the exported backing dir. */
#define OM(...) path_at(g_o.mnt, __VA_ARGS__)
#define OE(rel) path_at(g_o.exp, "%s", rel)

/* On ext4, the export emptied first. */
static void ops_mount(const char *tag, const char *conf, const char *opts)
{
	own_mount_ck_with(&g_o, tag, conf, &(struct own_mount_how){ .opts = opts, .fresh = true });
}

/* The daemon exited by itself: status 0, unmounted, clean log. */
static void expect_exited_clean(double timeout_s, const char *what)
{
	int st = daemon_wait_exit(&g_o.d, timeout_s);
	char *log = read_file_str(g_o.d.log);
	if (st == -1)
		daemon_kill(&g_o.d);
	ck_assert_msg(st != -1, "%s: daemon still running after %.0f s; log: %.1500s", what,
		      timeout_s, log);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: daemon status %#x; log: %.1500s",
		      what, st, log);
	const char *rep = log_report(log);
	ck_assert_msg(!rep, "%s: %s", what, rep);
	free(log);
	daemon_kill(&g_o.d);
	ck_assert_msg(!is_mounted(g_o.mnt, NULL, 0), "%s: still mounted after the daemon exited",
		      what);
	g_o.up = 0;
}

static int log_has(const char *needle)
{
	char *log = read_file_str(g_o.d.log);
	int r = strstr(log, needle) != NULL;
	free(log);
	return r;
}

static void fail_with_log(const char *msg)
{
	char *log = read_file_str(g_o.d.log);
	ck_abort_msg("%s; daemon log:\n%.2000s", msg, log);
}

/* ---- systemd units --------------------------------------------------------- */

static const char *unit_dir(void)
{
	const char *d = getenv("DCFS_UNIT_DIR");
	ck_assert_msg(d && *d, "DCFS_UNIT_DIR not set (make check sets it)");
	return d;
}

/* The template as `make install` writes it (with the verify copy's paths). */
START_TEST(ops_units_verified)
{
	char out[8192];
	const char *dir = unit_dir();
	int rc = run_cmd(out, sizeof out,
			 "cd '%s' && systemd-analyze verify --man=no dcfs@.service mnt-media.mount "
			 "dcfs-textfile@.service dcfs-textfile@.timer 2>&1",
			 dir);
	ck_assert_msg(rc == 0 && !out[0], "systemd-analyze verify: %d: %s", rc, out);
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/dcfs@.service", dir);
	char *u = read_file_str(path);
	const char *want[] = { "Type=forking",	     "KillMode=mixed",
			       "KillSignal=SIGTERM", "ExecReload=/bin/kill -HUP $MAINPID",
			       "Restart=on-failure", "LimitNOFILE=1048576",
			       "ExecStart=",	     " %f\n" };
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		ck_assert_msg(strstr(u, want[i]), "dcfs@.service lacks %s", want[i]);
	/* systemd must wait longer than dcfs's default stop_timeout (30 s). */
	const char *t = strstr(u, "\nTimeoutStopSec=");
	ck_assert_msg(t && atoi(t + 16) > 30, "TimeoutStopSec must exceed 30 s");
	/* the check itself is effective: a misspelt key fails it */
	char bad[PATH_MAX];
	snprintf(bad, sizeof bad, "%s/units-bad", g_tmpdir);
	rm_rf(bad);
	OK(mkdir(bad, 0755));
	char *k = strstr(u, "KillMode=");
	ck_assert_ptr_nonnull(k);
	k[4] = 'X'; /* KillXode= */
	char bpath[PATH_MAX + 32];
	snprintf(bpath, sizeof bpath, "%s/dcfs@.service", bad);
	OK(write_file(bpath, u, strlen(u), 0644));
	free(u);
	run_cmd(out, sizeof out, "cd '%s' && systemd-analyze verify --man=no dcfs@.service 2>&1",
		bad);
	ck_assert_msg(strstr(out, "KillXode"), "verify did not report a bad key: %s", out);
	rm_rf(bad);
}
END_TEST

/* ---- graceful stop ----------------------------------------------------------- */

#define W_CHUNK (1 << 20)
#define W_CHUNKS 24

struct writer {
	pid_t pid;
	int ready;  /* read end: one byte after the first chunk */
	int result; /* read end: hash64 of the data, after close */
};

/* Child: writes W_CHUNKS MiB to path, pausing between chunks; exit 0 only
 * if every write and the close succeeded. */
static void writer_start(struct writer *w, const char *path, int pause_ms)
{
	int rp[2], hp[2];
	ck_assert_int_eq(pipe(rp), 0);
	ck_assert_int_eq(pipe(hp), 0);
	fflush(NULL);
	w->pid = fork();
	ck_assert_int_ge(w->pid, 0);
	if (w->pid == 0) {
		close(rp[0]);
		close(hp[0]);
		char *buf = malloc((size_t)W_CHUNK * W_CHUNKS);
		if (!buf)
			_exit(2);
		fill_pattern(buf, (size_t)W_CHUNK * W_CHUNKS, 14);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			_exit(3);
		for (int i = 0; i < W_CHUNKS; i++) {
			if (write(fd, buf + (size_t)i * W_CHUNK, W_CHUNK) != W_CHUNK)
				_exit(10 + (errno & 0x3f));
			if (i == 0 && write(rp[1], "x", 1) != 1)
				_exit(4);
			usleep((useconds_t)pause_ms * 1000);
		}
		if (close(fd) < 0)
			_exit(5);
		uint64_t h = hash64(buf, (size_t)W_CHUNK * W_CHUNKS);
		if (write(hp[1], &h, sizeof h) != sizeof h)
			_exit(6);
		_exit(0);
	}
	close(rp[1]);
	close(hp[1]);
	w->ready = rp[0];
	w->result = hp[0];
	char c;
	ck_assert_msg(read(w->ready, &c, 1) == 1, "writer did not start");
}

static int errno_of_open(const char *path, int flags)
{
	int fd = open(path, flags, 0644);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno;
}

/* SIGTERM with a writer mid-file: new opens get EBUSY, the writer finishes
 * its file intact, then dcfs unmounts and exits 0 by itself. */
START_TEST(ops_sigterm_drains_writer)
{
	ops_mount("ops-drain", "[global]\ndefault = dontcache\nmin_size = 0\n", "stop_timeout=30");
	OK(write_file(OE("other"), "x", 1, 0644));
	struct writer w;
	double t0 = now_s();
	writer_start(&w, OM("film.ts"), 60);
	OK(kill(g_o.d.pid, SIGTERM));
	sleep_ms(300);
	if (!is_mounted(g_o.mnt, NULL, 0))
		fail_with_log("unmounted right after SIGTERM with a writer running");
	int e = errno_of_open(OM("other"), O_RDONLY);
	ck_assert_msg(e == EBUSY, "open while stopping: %s, expected EBUSY", strerror(e));
	e = errno_of_open(OM("new-file"), O_WRONLY | O_CREAT);
	ck_assert_msg(e == EBUSY, "create while stopping: %s, expected EBUSY", strerror(e));
	ck_assert_msg(access(OE("new-file"), F_OK) < 0, "refused create left a file behind");
	/* existing handles still work for everything else: stat, readdir */
	struct stat st;
	OK(stat(OM("other"), &st));
	int wst;
	ck_assert_int_eq(waitpid(w.pid, &wst, 0), w.pid);
	double wrote = now_s() - t0;
	ck_assert_msg(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
		      "writer failed during the stop: status %#x (10+errno %d)", wst,
		      WIFEXITED(wst) ? WEXITSTATUS(wst) - 10 : -1);
	uint64_t want;
	ck_assert_int_eq(read(w.result, &want, sizeof want), (ssize_t)sizeof want);
	close(w.ready);
	close(w.result);
	expect_exited_clean(10, "after the writer closed");
	size_t len;
	void *got = slurp(OE("film.ts"), &len);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(len, (size_t)W_CHUNK * W_CHUNKS);
	ck_assert_msg(hash64(got, len) == want, "the file written during the stop differs");
	free(got);
	ck_assert_msg(
		log_has("SIGTERM: stopping: refusing new opens, waiting up to 30 s for 1 open file"),
		"no stop log line");
	ck_assert_msg(log_has("stopping: refused open of /other") &&
			      log_has("stopping: refused create of /new-file"),
		      "refusals not logged");
	ck_assert_msg(log_has("all files closed after"), "no drain-complete line");
	/* and the capability line of startup */
	ck_assert_msg(log_has("backing ext4 ") && log_has("RWF_DONTCACHE read yes, write yes"),
		      "no capability line for the backing ext4");
	fprintf(stderr, "ops_sigterm_drains_writer: writer ran %.1f s, 24 MiB intact\n", wrote);
}
END_TEST

/* Child holding a file open through the mount until told to write once
 * more; exits with the errno of that write (0: it worked). */
struct holder {
	pid_t pid;
	int go; /* write end */
};

static void holder_start(struct holder *h, const char *path)
{
	int gp[2], rp[2];
	ck_assert_int_eq(pipe(gp), 0);
	ck_assert_int_eq(pipe(rp), 0);
	fflush(NULL);
	h->pid = fork();
	ck_assert_int_ge(h->pid, 0);
	if (h->pid == 0) {
		close(gp[1]);
		close(rp[0]);
		int fd = open(path, O_WRONLY | O_CREAT, 0644);
		if (fd < 0 || write(fd, "a", 1) != 1)
			_exit(120);
		if (write(rp[1], "x", 1) != 1)
			_exit(121);
		char c;
		if (read(gp[0], &c, 1) != 1)
			_exit(122);
		if (write(fd, "b", 1) != 1)
			_exit(errno & 0x7f);
		_exit(0);
	}
	close(gp[0]);
	close(rp[1]);
	h->go = gp[1];
	char c;
	ck_assert_msg(read(rp[0], &c, 1) == 1, "holder did not open its file");
	close(rp[0]);
}

static int holder_finish(struct holder *h)
{
	ck_assert_int_eq(write(h->go, "g", 1), 1);
	close(h->go);
	int st;
	ck_assert_int_eq(waitpid(h->pid, &st, 0), h->pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * A forwarded handle gets ENOTCONN once the mount is gone.  A passthrough
 * handle is served by the kernel from the backing file, which outlives the
 * connection: its write succeeds and must be in the backing file.
 */
static void held_write_outcome(int e, const char *when)
{
	if (e == 0) {
		size_t len;
		char *data = slurp(OE("held"), &len);
		ck_assert_msg(data && len == 2 && !memcmp(data, "ab", 2),
			      "write after %s succeeded but the backing file has %zu bytes", when,
			      data ? len : 0);
		free(data);
		return;
	}
	ck_assert_msg(e == ENOTCONN, "write after %s: %s, expected ENOTCONN", when, strerror(e));
}

/* A second SIGTERM unmounts at once, whatever is still open. */
START_TEST(ops_second_sigterm)
{
	ops_mount("ops-second", "[global]\ndefault = cache\n", "stop_timeout=60");
	struct holder h;
	holder_start(&h, OM("held"));
	OK(kill(g_o.d.pid, SIGTERM));
	sleep_ms(500);
	if (!is_mounted(g_o.mnt, NULL, 0))
		fail_with_log("unmounted at the first SIGTERM with a file open");
	double t0 = now_s();
	OK(kill(g_o.d.pid, SIGTERM));
	expect_exited_clean(5, "after the second SIGTERM");
	double secs = now_s() - t0;
	ck_assert_msg(secs < 3 * deadline_scale(), "second SIGTERM took %.1f s to unmount", secs);
	int e = holder_finish(&h);
	held_write_outcome(e, "the forced unmount");
	ck_assert_msg(log_has("second SIGTERM: unmounting now with 1 file open"),
		      "second SIGTERM not logged");
}
END_TEST

/* The timeout unmounts on its own. */
START_TEST(ops_stop_timeout)
{
	ops_mount("ops-timeout", "[global]\ndefault = cache\n", "stop_timeout=1");
	struct holder h;
	holder_start(&h, OM("held"));
	double t0 = now_s();
	OK(kill(g_o.d.pid, SIGTERM));
	expect_exited_clean(8, "after stop_timeout=1");
	double secs = now_s() - t0;
	ck_assert_msg(secs >= 0.9 && secs < 5 * deadline_scale(),
		      "stop with stop_timeout=1 took %.1f s", secs);
	int e = holder_finish(&h);
	held_write_outcome(e, "the timeout");
	ck_assert_msg(log_has("stop timeout of 1 s reached with 1 file still open"),
		      "timeout not logged");
}
END_TEST

/* ---- dcfs stat ----------------------------------------------------------------- */

/* Runs `dcfs stat ARGS...` as uid/gid (0: as root), stdout+stderr to out;
 * returns the exit status (-1: no exit within timeout). */
static int dcfs_stat_as(uid_t uid, gid_t gid, char *out, size_t outlen, double timeout,
			char *const args[])
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/ops-stat.%d.out", g_tmpdir, (int)getpid());
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		if (uid && (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
			    setresuid(uid, uid, uid) < 0))
			_exit(125);
		char *argv[16] = { (char *)g_dcfs_bin, "stat" };
		int n = 2;
		for (int i = 0; args[i] && n < 15; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		execv(g_dcfs_bin, argv);
		_exit(127);
	}
	double end = now_s() + timeout * deadline_scale();
	int st = -1;
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now_s() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			st = -1;
			break;
		}
		sleep_ms(20);
	}
	char *s = read_file_str(path);
	snprintf(out, outlen, "%s", s);
	free(s);
	unlink(path);
	return st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* --watch over a short interval while 32 MiB are written: the rates of the
 * dontcache class add up to what was written (by the daemon's engine, which
 * counts bytes as they pass). */
START_TEST(ops_watch)
{
	ops_mount("ops-watch",
		  "[global]\ndefault = dontcache\nmin_size = 0\npassthrough_writes = no\n", NULL);
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/ops-watch.out", g_tmpdir);
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(g_dcfs_bin, g_dcfs_bin, "stat", "--watch", "0.5", "--count", "8", g_o.mnt,
		      (char *)NULL);
		_exit(127);
	}
	sleep_ms(700);
	size_t len = 32 << 20;
	char *buf = malloc(len);
	fill_pattern(buf, len, 3);
	OK(write_file(OM("w.bin"), buf, len, 0644));
	free(buf);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	char *out = read_file_str(path);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "dcfs stat --watch: %#x: %s", st, out);
	ck_assert_msg(strstr(out, "class") && strstr(out, "dc_wr") && strstr(out, "opens"),
		      "no header: %s", out);
	/* time class dc_rd dc_wr fb_rd fb_wr c_rd c_wr k_rd k_wr opens swi */
	double mib = 0;
	long opens = 0;
	int samples = 0;
	char *save;
	for (char *l = strtok_r(out + strcspn(out, "\n"), "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		char when[16], cls[32];
		double r[8];
		long o, sw;
		if (strstr(l, "(idle)")) {
			samples++;
			continue;
		}
		if (sscanf(l, "%15s %31s %lf %lf %lf %lf %lf %lf %lf %lf %ld %ld", when, cls, &r[0],
			   &r[1], &r[2], &r[3], &r[4], &r[5], &r[6], &r[7], &o, &sw) != 12)
			continue;
		samples++;
		ck_assert_msg(!strcmp(cls, "dontcache"), "activity in class %s: %s", cls, l);
		mib += r[1] * 0.5;
		opens += o;
	}
	ck_assert_msg(samples == 8, "expected 8 samples, got %d:\n%s", samples, out);
	ck_assert_msg(mib > 32 * 0.75 && mib < 32 * 1.25,
		      "dc_write rates add up to %.1f MiB, 32 MiB were written:\n%s", mib, out);
	ck_assert_msg(opens >= 1, "no open counted:\n%s", out);
	fprintf(stderr, "ops_watch: rates add up to %.1f MiB of 32\n", mib);
	free(out);
	own_unmount_ck(&g_o);
}
END_TEST

/* A strict reading of the Prometheus text exposition format. */
struct prom_sample {
	char name[64];
	char labels[8][2][128]; /* key, value */
	int nlabels;
	double value;
};

static int prom_parse(char *text, struct prom_sample *out, int max, char *why, size_t whylen)
{
	char types[32][64];
	int ntypes = 0, n = 0;
	char *save;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (l[0] == '#') {
			char name[64], type[16];
			if (!strncmp(l, "# HELP ", 7))
				continue;
			if (sscanf(l, "# TYPE %63s %15s", name, type) != 2 ||
			    (strcmp(type, "counter") && strcmp(type, "gauge"))) {
				snprintf(why, whylen, "bad comment line: %s", l);
				return -1;
			}
			if (ntypes < 32)
				snprintf(types[ntypes++], 64, "%s", name);
			continue;
		}
		if (n == max) {
			snprintf(why, whylen, "too many samples");
			return -1;
		}
		struct prom_sample *s = &out[n];
		memset(s, 0, sizeof *s);
		size_t nl = strspn(
			l, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:0123456789");
		if (nl == 0 || nl >= sizeof s->name || (l[0] >= '0' && l[0] <= '9')) {
			snprintf(why, whylen, "bad metric name: %s", l);
			return -1;
		}
		memcpy(s->name, l, nl);
		const char *p = l + nl;
		if (*p == '{') {
			p++;
			while (*p != '}') {
				size_t kl = strspn(
					p,
					"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
				if (!kl || kl >= 128 || p[kl] != '=' || p[kl + 1] != '"' ||
				    s->nlabels == 8) {
					snprintf(why, whylen, "bad label in: %s", l);
					return -1;
				}
				memcpy(s->labels[s->nlabels][0], p, kl);
				p += kl + 2;
				size_t vl = 0;
				while (*p && *p != '"') {
					char c = *p++;
					if (c == '\\') {
						c = *p++;
						if (c == 'n')
							c = '\n';
						else if (c != '\\' && c != '"') {
							snprintf(why, whylen, "bad escape in: %s",
								 l);
							return -1;
						}
					}
					if (vl < 127)
						s->labels[s->nlabels][1][vl++] = c;
				}
				if (*p != '"') {
					snprintf(why, whylen, "unterminated label in: %s", l);
					return -1;
				}
				p++;
				s->nlabels++;
				if (*p == ',')
					p++;
				else if (*p != '}') {
					snprintf(why, whylen, "bad label list in: %s", l);
					return -1;
				}
			}
			p++;
		}
		char *end;
		if (*p != ' ' || (s->value = strtod(p + 1, &end), end == p + 1 || *end)) {
			snprintf(why, whylen, "bad value in: %s", l);
			return -1;
		}
		int typed = 0;
		for (int i = 0; i < ntypes; i++)
			typed |= !strcmp(types[i], s->name);
		if (!typed) {
			snprintf(why, whylen, "sample without # TYPE: %s", l);
			return -1;
		}
		n++;
	}
	return n;
}

static const char *label(const struct prom_sample *s, const char *k)
{
	for (int i = 0; i < s->nlabels; i++)
		if (!strcmp(s->labels[i][0], k))
			return s->labels[i][1];
	return NULL;
}

/* Value of the sample name{class=cls[,direction=dir,mode=mode]}; -1 if absent. */
static double prom_get(const struct prom_sample *s, int n, const char *name, const char *cls,
		       const char *dir, const char *mode)
{
	for (int i = 0; i < n; i++) {
		if (strcmp(s[i].name, name) || strcmp(label(&s[i], "class") ?: "", cls))
			continue;
		if (dir && strcmp(label(&s[i], "direction") ?: "", dir))
			continue;
		if (mode && strcmp(label(&s[i], "mode") ?: "", mode))
			continue;
		return s[i].value;
	}
	return -1;
}

/* Counters of --json: "classes":{"NAME":{"key":N,...},...} */
static int json_classes(const char *json, char names[8][32], long long vals[8][32],
			char keys[32][32])
{
	const char *p = strstr(json, "\"classes\":{");
	int n = 0;
	ck_assert_ptr_nonnull(p);
	p += 11;
	while (*p == '"' && n < 8) {
		const char *q = strchr(p + 1, '"');
		snprintf(names[n], 32, "%.*s", (int)(q - p - 1), p + 1);
		p = q + 3; /* ":{ */
		int k = 0;
		while (*p == '"' && k < 32) {
			q = strchr(p + 1, '"');
			snprintf(keys[k], 32, "%.*s", (int)(q - p - 1), p + 1);
			vals[n][k++] = strtoll(q + 2, (char **)&p, 10);
			if (*p == ',')
				p++;
		}
		ck_assert_int_eq(*p, '}');
		p++;
		if (*p == ',')
			p++;
		n++;
	}
	return n;
}

START_TEST(ops_prometheus_matches_json)
{
	ops_mount(
		"ops-prom",
		"[global]\ndefault = cache\nmin_size = 0\nauto_threshold = 1M\npassthrough_writes = no\n"
		"[class video]\nextensions = mkv\npolicy = dontcache\n"
		"[class big]\nextensions = bin\npolicy = auto\n",
		NULL);
	size_t len = 4 << 20;
	char *buf = malloc(len);
	fill_pattern(buf, len, 9);
	OK(write_file(OM("a.mkv"), buf, len, 0644));
	OK(write_file(OM("b.txt"), buf, len / 4, 0644));
	OK(write_file(OM("c.bin"), buf, len, 0644));
	size_t l;
	free(slurp(OM("a.mkv"), &l));
	free(slurp(OM("b.txt"), &l));
	free(buf);
	int fd = OK(open(OM("b.txt"), O_RDONLY)); /* one open file during the check */
	sleep_ms(200);				  /* asynchronous releases of the files above */
	char prom[65536], json[8192];
	char *pa[] = { "--prometheus", g_o.mnt, NULL };
	ck_assert_int_eq(dcfs_stat_as(0, 0, prom, sizeof prom, 10, pa), 0);
	char *ja[] = { "--json", g_o.mnt, NULL };
	ck_assert_int_eq(dcfs_stat_as(0, 0, json, sizeof json, 10, ja), 0);
	static struct prom_sample s[256];
	char why[512] = "", copy[65536];
	snprintf(copy, sizeof copy, "%s", prom);
	int n = prom_parse(copy, s, 256, why, sizeof why);
	ck_assert_msg(n > 0, "Prometheus text does not parse: %s\n%s", why, prom);
	for (int i = 0; i < n; i++) {
		ck_assert_msg(!strncmp(s[i].name, "dcfs_", 5), "metric %s lacks the dcfs_ prefix",
			      s[i].name);
		ck_assert_msg(!strcmp(label(&s[i], "mountpoint") ?: "", g_o.mnt),
			      "%s: mountpoint label", s[i].name);
		for (int j = 0; j < i; j++) {
			int same = !strcmp(s[i].name, s[j].name) && s[i].nlabels == s[j].nlabels;
			for (int k = 0; same && k < s[i].nlabels; k++)
				same = !strcmp(s[i].labels[k][1],
					       label(&s[j], s[i].labels[k][0]) ?: "\1");
			ck_assert_msg(!same, "duplicate series %s", s[i].name);
		}
	}
	char names[8][32], keys[32][32] = { { 0 } };
	long long vals[8][32];
	int nc = json_classes(json, names, vals, keys);
	ck_assert_int_eq(nc, 5);
	static const struct {
		const char *key, *metric, *dir, *mode;
	} map[] = {
		{ "opened", "dcfs_opens_total", NULL, NULL },
		{ "switched", "dcfs_switches_total", NULL, NULL },
		{ "opened_passthrough", "dcfs_passthrough_opens_total", NULL, NULL },
		{ "dropped_behind", "dcfs_dropped_behind_bytes_total", NULL, NULL },
		{ "read_dontcache", "dcfs_bytes_total", "read", "dontcache" },
		{ "written_dontcache", "dcfs_bytes_total", "write", "dontcache" },
		{ "read_fallback", "dcfs_bytes_total", "read", "fallback" },
		{ "written_fallback", "dcfs_bytes_total", "write", "fallback" },
		{ "read_cached", "dcfs_bytes_total", "read", "cached" },
		{ "written_cached", "dcfs_bytes_total", "write", "cached" },
		{ "read_kernel", "dcfs_bytes_total", "read", "kernel" },
		{ "written_kernel", "dcfs_bytes_total", "write", "kernel" },
	};
	int compared = 0;
	for (int c = 0; c < nc; c++)
		for (int k = 0; k < 32 && keys[k][0]; k++)
			for (size_t m = 0; m < sizeof map / sizeof map[0]; m++) {
				if (strcmp(keys[k], map[m].key))
					continue;
				double v = prom_get(s, n, map[m].metric, names[c], map[m].dir,
						    map[m].mode);
				ck_assert_msg(v == (double)vals[c][k],
					      "%s.%s: json %lld, prometheus %s = %.0f", names[c],
					      keys[k], vals[c][k], map[m].metric, v);
				compared++;
			}
	ck_assert_int_eq(compared, 5 * (int)(sizeof map / sizeof map[0]));
	/* the traffic shows where it went */
	ck_assert_msg(prom_get(s, n, "dcfs_bytes_total", "dontcache", "write", "dontcache") ==
			      (double)(4 << 20),
		      "a.mkv's 4 MiB not counted as dontcache writes");
	ck_assert_msg(prom_get(s, n, "dcfs_switches_total", "auto", NULL, NULL) == 1,
		      "c.bin did not switch");
	/* gauges: the probe of the ext4 backing, and the open file */
	int probes = 0;
	for (int i = 0; i < n; i++) {
		if (!strcmp(s[i].name, "dcfs_dontcache_supported")) {
			ck_assert_msg(!strcmp(label(&s[i], "fstype") ?: "", "ext4") &&
					      label(&s[i], "dev") && s[i].value == 1,
				      "probe gauge: fstype %s value %.0f", label(&s[i], "fstype"),
				      s[i].value);
			char want[128];
			snprintf(want, sizeof want, "\"dev\":\"%s\",\"fstype\":\"ext4\"",
				 label(&s[i], "dev"));
			ck_assert_msg(strstr(json, want), "probe %s not in --json: %s", want, json);
			probes++;
		}
		if (!strcmp(s[i].name, "dcfs_open_files"))
			ck_assert_msg(s[i].value == 1, "dcfs_open_files %.0f, 1 open", s[i].value);
		if (!strcmp(s[i].name, "dcfs_stopping"))
			ck_assert_msg(s[i].value == 0, "dcfs_stopping %.0f", s[i].value);
	}
	ck_assert_msg(probes == 2, "expected a read and a write probe gauge, got %d", probes);
	/* requests by opcode: the files above were created, so CREATE was counted */
	int creates = 0;
	for (int i = 0; i < n; i++)
		if (!strcmp(s[i].name, "dcfs_requests_total") &&
		    !strcmp(label(&s[i], "opcode") ?: "", "create"))
			creates = (int)s[i].value;
	ck_assert_msg(creates >= 1, "dcfs_requests_total{opcode=\"create\"} %d", creates);
	/* counters are root's: a user gets EACCES, said in one line */
	char out[1024];
	int rc = dcfs_stat_as(TEST_UID, TEST_GID, out, sizeof out, 10, pa);
	ck_assert_msg(rc == 1 && strstr(out, "root only"), "--prometheus as a user: %d: %s", rc,
		      out);
	close(fd);
	own_unmount_ck(&g_o);
}
END_TEST

/* --files: root sees every open handle, a user only their own. */
struct user_open {
	pid_t pid;
	int go;
};

static void user_open_start(struct user_open *u, const char *path, size_t bytes)
{
	int gp[2], rp[2];
	ck_assert_int_eq(pipe(gp), 0);
	ck_assert_int_eq(pipe(rp), 0);
	fflush(NULL);
	u->pid = fork();
	ck_assert_int_ge(u->pid, 0);
	if (u->pid == 0) {
		close(gp[1]);
		close(rp[0]);
		if (setgroups(0, NULL) < 0 || setresgid(TEST_GID, TEST_GID, TEST_GID) < 0 ||
		    setresuid(TEST_UID, TEST_UID, TEST_UID) < 0)
			_exit(100);
		char *buf = calloc(1, bytes);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (!buf || fd < 0 || write(fd, buf, bytes) != (ssize_t)bytes)
			_exit(101);
		if (write(rp[1], "x", 1) != 1)
			_exit(102);
		char c;
		if (read(gp[0], &c, 1) != 1)
			_exit(103);
		_exit(close(fd) < 0 ? 104 : 0);
	}
	close(gp[0]);
	close(rp[1]);
	u->go = gp[1];
	char c;
	ck_assert_msg(read(rp[0], &c, 1) == 1, "the user's writer failed");
	close(rp[0]);
}

/* The row of `dcfs stat --files` output whose path column ends in name. */
static const char *row_of(const char *out, const char *mnt_path, char *row, size_t len)
{
	for (const char *l = out; *l;) {
		size_t n = strcspn(l, "\n");
		snprintf(row, len, "%.*s", (int)n, l);
		char pat[PATH_MAX + 4];
		snprintf(pat, sizeof pat, "  %s  ", mnt_path);
		if (strstr(row, pat))
			return row;
		l += n + (l[n] ? 1 : 0);
	}
	return NULL;
}

START_TEST(ops_files_root_and_user)
{
	ops_mount("ops-files",
		  "[global]\ndefault = cache\nmin_size = 0\n"
		  "[class video]\nextensions = mkv\npolicy = dontcache\n",
		  NULL);
	OK(mkdir(OE("u"), 0755));
	OK(chown(OE("u"), TEST_UID, TEST_GID));
	size_t len = 1 << 20;
	char *buf = calloc(1, len);
	int fd = OK(open(OM("root.mkv"), O_RDWR | O_CREAT | O_TRUNC, 0644));
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	free(buf);
	int fd2 = OK(open(OM("notes.txt"), O_WRONLY | O_CREAT, 0644));
	struct user_open u;
	user_open_start(&u, OM("u/user.mkv"), 512 << 10);
	char out[16384], row[4096];
	char *fa[] = { "--files", g_o.mnt, NULL };
	/*
	 * Both .mkv writers are served by the kernel (passthrough_writes): their
	 * bytes are counted when the write-behind thread next looks (1-50 ms).
	 */
	for (double until = now_s() + 2 * deadline_scale();;) {
		ck_assert_int_eq(dcfs_stat_as(0, 0, out, sizeof out, 10, fa), 0);
		if ((row_of(out, OM("root.mkv"), row, sizeof row) && strstr(row, " 1048576 ") &&
		     row_of(out, OM("u/user.mkv"), row, sizeof row) && strstr(row, " 524288 ")) ||
		    now_s() > until)
			break;
		sleep_ms(20);
	}
	ck_assert_msg(strstr(out, "uid") && strstr(out, "class") && strstr(out, "rule"),
		      "no header: %s", out);
	ck_assert_msg(row_of(out, OM("root.mkv"), row, sizeof row), "root.mkv not listed:\n%s",
		      out);
	ck_assert_msg(!strncmp(row, "0 ", 2) && strstr(row, " dontcache  dontcache ") &&
			      strstr(row, " 1048576 ") && strstr(row, "class video"),
		      "root.mkv row: %s", row);
	ck_assert_msg(row_of(out, OM("notes.txt"), row, sizeof row) && strstr(row, " cache ") &&
			      strstr(row, " cached ") && strstr(row, "[global] default"),
		      "notes.txt row: %s\n%s", row, out);
	char uid[16];
	snprintf(uid, sizeof uid, "%d ", TEST_UID);
	ck_assert_msg(row_of(out, OM("u/user.mkv"), row, sizeof row) &&
			      !strncmp(row, uid, strlen(uid)) && strstr(row, " 524288 "),
		      "the user's file as seen by root: %s\n%s", row, out);
	/* the user sees their own handle only */
	int rc = dcfs_stat_as(TEST_UID, TEST_GID, out, sizeof out, 10, fa);
	ck_assert_msg(rc == 0, "--files as a user: %d: %s", rc, out);
	ck_assert_msg(row_of(out, OM("u/user.mkv"), row, sizeof row) && strstr(row, " 524288 "),
		      "the user does not see their file:\n%s", out);
	ck_assert_msg(!strstr(out, "root.mkv") && !strstr(out, "notes.txt"),
		      "the user sees root's files:\n%s", out);
	/* closed handles leave the listing (RELEASE is asynchronous) */
	ck_assert_int_eq(write(u.go, "g", 1), 1);
	close(u.go);
	int st;
	ck_assert_int_eq(waitpid(u.pid, &st, 0), u.pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "user child %#x", st);
	close(fd);
	close(fd2);
	double end = now_s() + 5;
	do {
		sleep_ms(50);
		ck_assert_int_eq(dcfs_stat_as(0, 0, out, sizeof out, 10, fa), 0);
	} while (strstr(out, g_o.mnt) && now_s() < end);
	ck_assert_msg(!strstr(out, g_o.mnt), "closed files still listed:\n%s", out);
	own_unmount_ck(&g_o);
}
END_TEST

static void ops_teardown(void)
{
	if (g_o.up)
		own_mount_kill(&g_o);
}

Suite *ops_suite(void)
{
	Suite *s = suite_create("ops");
	TCase *tc = tcase_create("ops-ext4");
	tcase_set_timeout(tc, 120 * deadline_scale());
	tcase_add_checked_fixture(tc, NULL, ops_teardown);
	tcase_add_test(tc, ops_units_verified);
	tcase_add_test(tc, ops_sigterm_drains_writer);
	tcase_add_test(tc, ops_second_sigterm);
	tcase_add_test(tc, ops_stop_timeout);
	tcase_add_test(tc, ops_watch);
	tcase_add_test(tc, ops_prometheus_matches_json);
	tcase_add_test(tc, ops_files_root_and_user);
	suite_add_tcase(s, tc);
	return s;
}
