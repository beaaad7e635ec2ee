/* flock() and POSIX fcntl byte-range locks between processes on the mount.
 * Every scenario is run on the reference dir and through dcfs; the outcome
 * transcripts must be identical and match the expected POSIX behaviour. */
#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum act_kind {
	A_SETLK,
	A_SETLKW,
	A_GETLK,
	A_FLOCK,
	A_OFD_SETLK
};

struct act {
	enum act_kind kind;
	short type;
	off_t start, len;
	int flock_op;
};

struct act_res {
	long ret;
	int err;
	struct flock fl;
};

static void do_act(int fd, const struct act *a, struct act_res *r)
{
	struct flock fl = {
		.l_type = a->type, .l_whence = SEEK_SET, .l_start = a->start, .l_len = a->len
	};
	errno = 0;
	switch (a->kind) {
	case A_SETLK: r->ret = fcntl(fd, F_SETLK, &fl); break;
	case A_SETLKW: r->ret = fcntl(fd, F_SETLKW, &fl); break;
	case A_GETLK: r->ret = fcntl(fd, F_GETLK, &fl); break;
	case A_OFD_SETLK:
		fl.l_pid = 0;
		r->ret = fcntl(fd, F_OFD_SETLK, &fl);
		break;
	case A_FLOCK: r->ret = flock(fd, a->flock_op); break;
	}
	r->err = r->ret < 0 ? errno : 0;
	r->fl = fl;
}

/* Run an action in a new process with its own open file description. */
static struct act_res child_act(const char *path, struct act a)
{
	struct act_res r = { -1, EIO, { 0 } };
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(pfd[0]);
		struct act_res c = { -1, 0, { 0 } };
		int fd = open(path, O_RDWR);
		if (fd < 0)
			c.err = errno;
		else
			do_act(fd, &a, &c);
		if (write(pfd[1], &c, sizeof c) != sizeof c)
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	ssize_t n = read(pfd[0], &r, sizeof r);
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	ck_assert_int_eq(n, (ssize_t)sizeof r);
	return r;
}

static void parent_lk(int fd, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
	ck_assert_msg(fcntl(fd, F_SETLK, &fl) == 0, "parent F_SETLK type %d: %s", type,
		      strerror(errno));
}

static const char *fmt_res(struct act_res r)
{
	static char b[128];
	if (r.ret < 0)
		snprintf(b, sizeof b, "-1/%s",
			 (r.err == EAGAIN || r.err == EACCES) ? "EAGAIN" : strerror(r.err));
	else
		snprintf(b, sizeof b, "%ld", r.ret);
	return b;
}

#define LOG(...)                                              \
	do {                                                  \
		size_t _l = strlen(out);                      \
		snprintf(out + _l, outlen - _l, __VA_ARGS__); \
	} while (0)

/* POSIX byte-range lock scenario; returns transcript */
static void posix_scenario(const char *path, char *out, size_t outlen)
{
	out[0] = 0;
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	parent_lk(fd, F_WRLCK, 0, 100);
	LOG("wr-overlap:%s ",
	    fmt_res(child_act(path, (struct act){ A_SETLK, F_WRLCK, 50, 10, 0 })));
	LOG("wr-disjoint:%s ",
	    fmt_res(child_act(path, (struct act){ A_SETLK, F_WRLCK, 200, 100, 0 })));
	LOG("rd-overlap:%s ", fmt_res(child_act(path, (struct act){ A_SETLK, F_RDLCK, 0, 10, 0 })));
	struct act_res g = child_act(path, (struct act){ A_GETLK, F_WRLCK, 0, 100, 0 });
	LOG("getlk:%s type=%s start=%lld len=%lld pidok=%d ", fmt_res(g),
	    g.fl.l_type == F_WRLCK   ? "WR"
	    : g.fl.l_type == F_RDLCK ? "RD"
				     : "UN",
	    (long long)g.fl.l_start, (long long)g.fl.l_len, g.fl.l_pid == getpid());
	g = child_act(path, (struct act){ A_GETLK, F_WRLCK, 500, 10, 0 });
	LOG("getlk-free:%s type=%s ", fmt_res(g), g.fl.l_type == F_UNLCK ? "UN" : "LOCKED");
	/* downgrade to read lock */
	parent_lk(fd, F_RDLCK, 0, 100);
	LOG("rd-shared:%s ", fmt_res(child_act(path, (struct act){ A_SETLK, F_RDLCK, 0, 10, 0 })));
	LOG("wr-vs-rd:%s ", fmt_res(child_act(path, (struct act){ A_SETLK, F_WRLCK, 90, 20, 0 })));
	g = child_act(path, (struct act){ A_GETLK, F_WRLCK, 0, 0, 0 });
	LOG("getlk-rd:%s type=%s pidok=%d ", fmt_res(g),
	    g.fl.l_type == F_RDLCK   ? "RD"
	    : g.fl.l_type == F_WRLCK ? "WR"
				     : "UN",
	    g.fl.l_pid == getpid());
	/* partial unlock splits the lock */
	parent_lk(fd, F_UNLCK, 20, 10);
	LOG("split-hole:%s ",
	    fmt_res(child_act(path, (struct act){ A_SETLK, F_WRLCK, 20, 10, 0 })));
	LOG("split-rest:%s ",
	    fmt_res(child_act(path, (struct act){ A_SETLK, F_WRLCK, 30, 10, 0 })));
	/* release */
	parent_lk(fd, F_UNLCK, 0, 0);
	LOG("after-unlock:%s ",
	    fmt_res(child_act(path, (struct act){ A_SETLK, F_WRLCK, 0, 100, 0 })));
	/* whole-file lock (len 0 = to EOF and beyond) */
	parent_lk(fd, F_WRLCK, 0, 0);
	LOG("eof-range:%s ",
	    fmt_res(child_act(path, (struct act){ A_SETLK, F_RDLCK, 1 << 30, 1, 0 })));
	/* closing ANY fd of the process on the file drops its POSIX locks */
	int fd2 = open(path, O_RDONLY);
	ck_assert_int_ge(fd2, 0);
	close(fd2);
	LOG("after-close-other-fd:%s ",
	    fmt_res(child_act(path, (struct act){ A_SETLK, F_WRLCK, 0, 100, 0 })));
	close(fd);
}

/*
 * Is the child pid blocked in system call nr?  It tells the parent (a
 * byte on ready) right before making the call; then /proc/PID/syscall
 * must show it in that call, and it must still be there 300 ms later (a
 * child that has not reached the call yet, or went through it, is not
 * blocked).
 */
static int blocked_in(pid_t pid, int ready, long nr)
{
	char c, path[64], buf[256];
	if (read(ready, &c, 1) != 1)
		return 0;
	snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
	double end = now_s() + 5 * deadline_scale();
	int seen = 0;
	while (!seen && now_s() < end) {
		int fd = open(path, O_RDONLY);
		ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
		if (fd >= 0)
			close(fd);
		if (n <= 0)
			return 0;
		buf[n] = 0;
		seen = strtol(buf, NULL, 10) == nr && buf[0] != 'r';
		if (!seen)
			sleep_ms(5);
	}
	sleep_ms(300);
	int st;
	return seen && waitpid(pid, &st, WNOHANG) == 0;
}

/* F_SETLKW blocks until the holder releases */
static void posix_blocking(const char *path, char *out, size_t outlen)
{
	out[0] = 0;
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	parent_lk(fd, F_WRLCK, 0, 10);
	int pfd[2], rfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(pipe(rfd), 0);
	pid_t pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		close(rfd[0]);
		int cfd = open(path, O_RDWR);
		struct act_res c = { -1, 0, { 0 } };
		struct act a = { A_SETLKW, F_WRLCK, 5, 1, 0 };
		if (write(rfd[1], "r", 1) != 1)
			_exit(1);
		do_act(cfd, &a, &c);
		if (write(pfd[1], &c, sizeof c) != sizeof c)
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	close(rfd[1]);
	int st;
	LOG("still-blocked:%d ", blocked_in(pid, rfd[0], SYS_fcntl));
	close(rfd[0]);
	parent_lk(fd, F_UNLCK, 0, 10);
	struct act_res c;
	ssize_t n = read(pfd[0], &c, sizeof c); /* child gets lock and exits */
	close(pfd[0]);
	waitpid(pid, &st, 0);
	LOG("acquired:%s ", n == sizeof c ? fmt_res(c) : "no-answer");
	/* deadlock detection: EDEADLK */
	close(fd);
}

static void flock_scenario(const char *path, char *out, size_t outlen)
{
	out[0] = 0;
	int fd = open(path, O_RDWR | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(flock(fd, LOCK_EX), 0);
	LOG("ex-vs-ex:%s ",
	    fmt_res(child_act(path, (struct act){ A_FLOCK, 0, 0, 0, LOCK_EX | LOCK_NB })));
	LOG("sh-vs-ex:%s ",
	    fmt_res(child_act(path, (struct act){ A_FLOCK, 0, 0, 0, LOCK_SH | LOCK_NB })));
	/* flock and POSIX locks do not interact on Linux */
	LOG("posix-vs-flock:%s ",
	    fmt_res(child_act(path, (struct act){ A_SETLK, F_WRLCK, 0, 0, 0 })));
	/* same open file description in a forked child: lock is shared */
	pid_t pid = fork();
	if (pid == 0)
		_exit(flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : 10 + errno % 100);
	int st;
	waitpid(pid, &st, 0);
	LOG("inherited-fd:%d ", WEXITSTATUS(st));
	ck_assert_int_eq(flock(fd, LOCK_SH), 0); /* convert */
	LOG("sh-vs-sh:%s ",
	    fmt_res(child_act(path, (struct act){ A_FLOCK, 0, 0, 0, LOCK_SH | LOCK_NB })));
	LOG("ex-vs-sh:%s ",
	    fmt_res(child_act(path, (struct act){ A_FLOCK, 0, 0, 0, LOCK_EX | LOCK_NB })));
	ck_assert_int_eq(flock(fd, LOCK_UN), 0);
	LOG("after-un:%s ",
	    fmt_res(child_act(path, (struct act){ A_FLOCK, 0, 0, 0, LOCK_EX | LOCK_NB })));
	/* lock released on close of the last fd */
	ck_assert_int_eq(flock(fd, LOCK_EX), 0);
	close(fd);
	/* after the last close: at once natively, a moment later through dcfs
	 * (the release comes in the background, dcfs(8), LOCKS) */
	struct act_res ac;
	double end = now_s() + 2 * deadline_scale();
	do
		ac = child_act(path, (struct act){ A_FLOCK, 0, 0, 0, LOCK_EX | LOCK_NB });
	while (ac.ret < 0 && ac.err == EWOULDBLOCK && now_s() < end && (sleep_ms(5), 1));
	LOG("after-close:%s ", fmt_res(ac));
	/* blocking flock waits for release */
	fd = open(path, O_RDWR);
	ck_assert_int_eq(flock(fd, LOCK_EX), 0);
	int pfd[2], rfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(pipe(rfd), 0);
	pid = fork();
	if (pid == 0) {
		close(rfd[0]);
		int cfd = open(path, O_RDWR);
		if (write(rfd[1], "r", 1) != 1)
			_exit(1);
		char c = flock(cfd, LOCK_EX) == 0 ? 'y' : 'n';
		if (write(pfd[1], &c, 1) != 1)
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	close(rfd[1]);
	LOG("flock-blocked:%d ", blocked_in(pid, rfd[0], SYS_flock));
	close(rfd[0]);
	flock(fd, LOCK_UN);
	char c = '?';
	if (read(pfd[0], &c, 1) != 1)
		c = '!';
	close(pfd[0]);
	waitpid(pid, &st, 0);
	LOG("flock-acquired:%c ", c);
	close(fd);
}

static void ofd_scenario(const char *path, char *out, size_t outlen)
{
	out[0] = 0;
	int a = open(path, O_RDWR | O_CREAT, 0644);
	int b = open(path, O_RDWR);
	ck_assert(a >= 0 && b >= 0);
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
	errno = 0;
	int r = fcntl(a, F_OFD_SETLK, &fl);
	LOG("ofd-a:%d/%d ", r, r < 0 ? errno : 0);
	struct flock f2 = fl;
	errno = 0;
	r = fcntl(b, F_OFD_SETLK, &f2);
	LOG("ofd-b-conflict:%d/%s ", r,
	    r < 0 && (errno == EAGAIN || errno == EACCES) ? "EAGAIN"
	    : r < 0					  ? strerror(errno)
							  : "ok");
	close(a);
	/* Through dcfs the lock goes when the daemon gets the release, which
	 * the kernel sends in the background after the last close (dcfs(8),
	 * LOCKS): a moment later.  Natively at once. */
	double end = now_s() + 2 * deadline_scale();
	do {
		errno = 0;
		r = fcntl(b, F_OFD_SETLK, &f2);
	} while (r < 0 && (errno == EAGAIN || errno == EACCES) && now_s() < end &&
		 (sleep_ms(5), 1));
	LOG("ofd-b-after-close:%d/%d ", r, r < 0 ? errno : 0);
	close(b);
}

typedef void (*scenario_fn)(const char *, char *, size_t);

static void run_scenario(scenario_fn fn, const char *name, const char *expect)
{
	char r[2048], m[2048];
	fn(PR("%s", name), r, sizeof r);
	fn(PM("%s", name), m, sizeof m);
	ck_assert_msg(strcmp(r, m) == 0, "%s lock transcript differs:\nbacking: %s\ndcfs:    %s",
		      name, r, m);
	if (expect)
		ck_assert_msg(strcmp(m, expect) == 0,
			      "%s: unexpected transcript:\n got: %s\nwant: %s", name, m, expect);
}

START_TEST(locks_posix)
{
	T_BEGIN();
	run_scenario(posix_scenario, "posix",
		     "wr-overlap:-1/EAGAIN wr-disjoint:0 rd-overlap:-1/EAGAIN "
		     "getlk:0 type=WR start=0 len=100 pidok=1 getlk-free:0 type=UN "
		     "rd-shared:0 wr-vs-rd:-1/EAGAIN getlk-rd:0 type=RD pidok=1 "
		     "split-hole:0 split-rest:-1/EAGAIN after-unlock:0 eof-range:-1/EAGAIN "
		     "after-close-other-fd:0 ");
}
END_TEST

START_TEST(locks_posix_blocking)
{
	T_BEGIN();
	run_scenario(posix_blocking, "blk", "still-blocked:1 acquired:0 ");
}
END_TEST

START_TEST(locks_flock)
{
	T_BEGIN();
	run_scenario(flock_scenario, "fl",
		     "ex-vs-ex:-1/EAGAIN sh-vs-ex:-1/EAGAIN posix-vs-flock:0 inherited-fd:0 "
		     "sh-vs-sh:0 ex-vs-sh:-1/EAGAIN after-un:0 after-close:0 flock-blocked:1 "
		     "flock-acquired:y ");
}
END_TEST

START_TEST(locks_ofd)
{
	T_BEGIN();
	run_scenario(ofd_scenario, "ofd",
		     "ofd-a:0/0 ofd-b-conflict:-1/EAGAIN ofd-b-after-close:0/0 ");
}
END_TEST

/* N processes increment a counter in the file under F_SETLKW / flock. */
static void counter_run(const char *path, int use_flock)
{
	ck_assert_int_eq(write_file(path, "0\n", 2, 0644), 0);
	const int nproc = 4, iters = 100;
	pid_t pids[4];
	for (int p = 0; p < nproc; p++) {
		pids[p] = fork();
		if (pids[p] == 0) {
			int fd = open(path, O_RDWR);
			if (fd < 0)
				_exit(2);
			for (int i = 0; i < iters; i++) {
				struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
				if (use_flock ? flock(fd, LOCK_EX) : fcntl(fd, F_SETLKW, &fl))
					_exit(3);
				char b[32] = "";
				if (pread(fd, b, sizeof b - 1, 0) < 0)
					_exit(4);
				int v = atoi(b) + 1;
				int n = snprintf(b, sizeof b, "%d\n", v);
				if (pwrite(fd, b, n, 0) != n)
					_exit(5);
				fl.l_type = F_UNLCK;
				if (use_flock ? flock(fd, LOCK_UN) : fcntl(fd, F_SETLK, &fl))
					_exit(6);
			}
			_exit(0);
		}
	}
	for (int p = 0; p < nproc; p++) {
		int st;
		waitpid(pids[p], &st, 0);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: worker status %#x", path,
			      st);
	}
	size_t l;
	char *s = slurp(path, &l);
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(atoi(s) == nproc * iters, "%s (%s): counter %d, want %d", path,
		      use_flock ? "flock" : "fcntl", atoi(s), nproc * iters);
	free(s);
}

START_TEST(locks_counter)
{
	T_BEGIN();
	counter_run(PR("c1"), 0);
	counter_run(PM("c1"), 0);
	counter_run(PR("c2"), 1);
	counter_run(PM("c2"), 1);
	check_identity("c1");
}
END_TEST

/* ---- locks through the mount and on the backing file (issue 38 #5) -------- */

/* A process that holds a lock on path until told (a byte on its pipe):
 * kind A_SETLK (POSIX), A_OFD_SETLK or A_FLOCK, a write lock of [0, 100). */
struct holder {
	pid_t pid;
	int go; /* write end: release and exit */
};

static struct holder hold(const char *path, enum act_kind kind)
{
	int ready[2], go[2];
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(ready[0]);
		close(go[1]);
		int fd = open(path, O_RDWR);
		struct act a = { kind, F_WRLCK, 0, 100, LOCK_EX | LOCK_NB };
		struct act_res r = { -1, 0, { 0 } };
		if (fd >= 0)
			do_act(fd, &a, &r);
		char c = r.ret == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		if (read(go[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	char c = 0;
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	close(ready[0]);
	ck_assert_msg(c == 'y', "holder could not lock %s", path);
	return (struct holder){ pid, go[1] };
}

static void release(struct holder h)
{
	ck_assert_int_eq(write(h.go, "x", 1), 1);
	close(h.go);
	int st;
	waitpid(h.pid, &st, 0);
}

static const char *getlk_str(struct act_res g, pid_t holder)
{
	static char b[96];
	snprintf(b, sizeof b, "%s/%s/%lld+%lld/%s", fmt_res(g),
		 g.fl.l_type == F_WRLCK	  ? "WR"
		 : g.fl.l_type == F_RDLCK ? "RD"
					  : "UN",
		 (long long)g.fl.l_start, (long long)g.fl.l_len,
		 g.fl.l_pid == holder ? "holder"
		 : g.fl.l_pid == -1   ? "ofd"
				      : "other");
	return b;
}

/*
 * mnt and bk are one file seen through the mount and in the backing tree
 * (for the bind-mount self-test, two names of one file).  Each kind of lock
 * taken on one side must be seen on the other: conflicts both ways, F_GETLK
 * with the holder, release at unlock, at close(2) of another descriptor
 * (POSIX), at exit; POSIX locks are not inherited by fork(2); a wait on one
 * side for a lock of the other ends when it goes.
 */
static void cross_scenario(const char *mnt, const char *bk, char *out, size_t outlen)
{
	out[0] = 0;
	int fd = open(mnt, O_RDWR | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	/* 1. POSIX through the mount, seen on the backing file */
	parent_lk(fd, F_WRLCK, 0, 100);
	LOG("bk-overlap:%s ", fmt_res(child_act(bk, (struct act){ A_SETLK, F_WRLCK, 50, 10, 0 })));
	LOG("bk-disjoint:%s ",
	    fmt_res(child_act(bk, (struct act){ A_SETLK, F_WRLCK, 200, 10, 0 })));
	LOG("bk-ofd:%s ", fmt_res(child_act(bk, (struct act){ A_OFD_SETLK, F_RDLCK, 0, 10, 0 })));
	LOG("bk-getlk:%s ",
	    getlk_str(child_act(bk, (struct act){ A_GETLK, F_WRLCK, 0, 0, 0 }), getpid()));
	/* a second descriptor of the same process: the same owner */
	int fd2 = open(mnt, O_RDWR);
	ck_assert_int_ge(fd2, 0);
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10 };
	LOG("same-owner:%d ", fcntl(fd2, F_SETLK, &fl));
	/* fork(2): the child is another owner, also through the inherited fd */
	pid_t pid = fork();
	if (pid == 0) {
		struct flock c = {
			.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10
		};
		_exit(fcntl(fd, F_SETLK, &c) == 0 ? 0 : 10);
	}
	int st;
	waitpid(pid, &st, 0);
	LOG("forked-child:%d ", WEXITSTATUS(st));
	/* close(2) of any descriptor of the file ends them */
	close(fd2);
	LOG("after-close-fd2:%s ",
	    fmt_res(child_act(bk, (struct act){ A_SETLK, F_WRLCK, 0, 100, 0 })));
	/* 2. POSIX on the backing file, seen through the mount */
	struct holder h = hold(bk, A_SETLK);
	LOG("mnt-overlap:%s ", fmt_res(child_act(mnt, (struct act){ A_SETLK, F_RDLCK, 0, 10, 0 })));
	LOG("mnt-getlk:%s ",
	    getlk_str(child_act(mnt, (struct act){ A_GETLK, F_WRLCK, 0, 0, 0 }), h.pid));
	LOG("mnt-parent:%d ",
	    fcntl(fd, F_SETLK, &fl) == 0 ? 0 : errno == EAGAIN || errno == EACCES);
	struct flock un = { .l_type = F_UNLCK, .l_whence = SEEK_SET };
	fcntl(fd, F_SETLK, &un); /* whatever that took is not in the way below */
	/* a wait through the mount ends when the backing holder lets go */
	int pfd[2], rfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(pipe(rfd), 0);
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		close(rfd[0]);
		int cfd = open(mnt, O_RDWR);
		struct act_res c = { -1, 0, { 0 } };
		struct act a = { A_SETLKW, F_WRLCK, 5, 1, 0 };
		if (write(rfd[1], "r", 1) != 1)
			_exit(1);
		do_act(cfd, &a, &c);
		if (write(pfd[1], &c, sizeof c) != sizeof c)
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	close(rfd[1]);
	LOG("mnt-waits:%d ", blocked_in(pid, rfd[0], SYS_fcntl));
	close(rfd[0]);
	release(h);
	struct act_res c;
	ssize_t n = read(pfd[0], &c, sizeof c);
	close(pfd[0]);
	waitpid(pid, &st, 0);
	LOG("mnt-acquired:%s ", n == sizeof c ? fmt_res(c) : "no-answer");
	/* the waiter has exited: its lock went with it */
	LOG("after-exit:%s ", fmt_res(child_act(bk, (struct act){ A_SETLK, F_WRLCK, 0, 100, 0 })));
	/* 3. F_OFD_SETLK through the mount, on the backing file */
	struct flock ofl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100 };
	LOG("ofd-mnt:%d ", fcntl(fd, F_OFD_SETLK, &ofl));
	LOG("bk-vs-ofd:%s ", fmt_res(child_act(bk, (struct act){ A_SETLK, F_RDLCK, 10, 10, 0 })));
	ofl.l_type = F_UNLCK;
	LOG("ofd-unlock:%d ", fcntl(fd, F_OFD_SETLK, &ofl));
	/* 4. flock(2) both ways */
	LOG("flock-mnt:%d ", flock(fd, LOCK_EX | LOCK_NB));
	LOG("bk-flock:%s ",
	    fmt_res(child_act(bk, (struct act){ A_FLOCK, 0, 0, 0, LOCK_SH | LOCK_NB })));
	flock(fd, LOCK_UN);
	LOG("bk-flock-after:%s ",
	    fmt_res(child_act(bk, (struct act){ A_FLOCK, 0, 0, 0, LOCK_EX | LOCK_NB })));
	h = hold(bk, A_FLOCK);
	LOG("mnt-flock:%s ",
	    fmt_res(child_act(mnt, (struct act){ A_FLOCK, 0, 0, 0, LOCK_SH | LOCK_NB })));
	release(h);
	LOG("mnt-flock-after:%s ",
	    fmt_res(child_act(mnt, (struct act){ A_FLOCK, 0, 0, 0, LOCK_EX | LOCK_NB })));
	close(fd);
}

START_TEST(locks_mount_and_backing)
{
	T_BEGIN();
	char out[2048];
	ck_assert_int_eq(write_file(PM("x"), "", 0, 0644), 0);
	cross_scenario(PM("x"), PE("x"), out, sizeof out);
	/* a program on the backing tree sees the mount's POSIX locks as
	 * open-file-description locks (dcfs(8), LOCKS) */
	const char *pid = g_cfg->mm == MM_BIND ? "holder" : "ofd";
	char want[2048];
	snprintf(want, sizeof want,
		 "bk-overlap:-1/EAGAIN bk-disjoint:0 bk-ofd:-1/EAGAIN bk-getlk:0/WR/0+100/%s "
		 "same-owner:0 forked-child:10 after-close-fd2:0 mnt-overlap:-1/EAGAIN "
		 "mnt-getlk:0/WR/0+100/holder mnt-parent:1 mnt-waits:1 mnt-acquired:0 "
		 "after-exit:0 ofd-mnt:0 bk-vs-ofd:-1/EAGAIN ofd-unlock:0 flock-mnt:0 "
		 "bk-flock:-1/EAGAIN bk-flock-after:0 "
		 "mnt-flock:-1/EAGAIN mnt-flock-after:0 ",
		 pid);
	ck_assert_msg(strcmp(out, want) == 0,
		      "locks through the mount vs on the backing file:\n got: %s\nwant: %s", out,
		      want);
}
END_TEST

/*
 * A wait for a lock ends with EINTR at a signal (the handler installed
 * without SA_RESTART), as natively; a waiter killed meanwhile leaves no
 * lock behind once the holder lets go.
 */
static void on_alarm(int sig)
{
	(void)sig;
}

START_TEST(locks_wait_interrupted)
{
	T_BEGIN();
	const char *paths[2] = { PR("w"), PM("w") };
	for (int side = 0; side < 2; side++) {
		const char *path = paths[side];
		ck_assert_int_eq(write_file(path, "", 0, 0644), 0);
		struct holder h = hold(path, A_SETLK);
		pid_t pid = fork();
		if (pid == 0) {
			struct sigaction sa = { .sa_handler = on_alarm };
			sigaction(SIGALRM, &sa, NULL);
			int fd = open(path, O_RDWR);
			struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 10 };
			alarm(1);
			int r = fcntl(fd, F_SETLKW, &fl);
			_exit(r < 0 && errno == EINTR ? 0 : 10);
		}
		int st;
		waitpid(pid, &st, 0);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "%s: F_SETLKW interrupted by a signal did not return EINTR (%#x)",
			      side ? "dcfs" : "native", st);
		/* the same for flock(2) */
		release(h);
		h = hold(path, A_FLOCK);
		pid = fork();
		if (pid == 0) {
			struct sigaction sa = { .sa_handler = on_alarm };
			sigaction(SIGALRM, &sa, NULL);
			int fd = open(path, O_RDWR);
			alarm(1);
			int r = flock(fd, LOCK_EX);
			_exit(r < 0 && errno == EINTR ? 0 : 10);
		}
		waitpid(pid, &st, 0);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			      "%s: flock interrupted by a signal did not return EINTR (%#x)",
			      side ? "dcfs" : "native", st);
		release(h);
		/* a waiter killed while waiting leaves nothing behind */
		h = hold(path, A_SETLK);
		int rfd[2];
		ck_assert_int_eq(pipe(rfd), 0);
		pid = fork();
		if (pid == 0) {
			close(rfd[0]);
			int fd = open(path, O_RDWR);
			struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_len = 10 };
			if (write(rfd[1], "r", 1) != 1)
				_exit(1);
			fcntl(fd, F_SETLKW, &fl);
			_exit(0);
		}
		close(rfd[1]);
		ck_assert_msg(blocked_in(pid, rfd[0], SYS_fcntl), "waiter not blocked");
		close(rfd[0]);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		release(h);
		struct act_res r = child_act(path, (struct act){ A_SETLK, F_WRLCK, 0, 100, 0 });
		ck_assert_msg(r.ret == 0, "%s: a lock is left after a killed waiter: %s",
			      side ? "dcfs" : "native", fmt_res(r));
	}
}
END_TEST

void add_locks_tests(TCase *tc)
{
	tcase_add_test(tc, locks_mount_and_backing);
	tcase_add_test(tc, locks_wait_interrupted);
	tcase_add_test(tc, locks_posix);
	tcase_add_test(tc, locks_posix_blocking);
	tcase_add_test(tc, locks_flock);
	tcase_add_test(tc, locks_ofd);
	tcase_add_test(tc, locks_counter);
}
