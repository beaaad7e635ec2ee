// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Graceful stop.  SIGTERM (what `systemctl stop` sends) and SIGINT no
 * longer detach the mount at once, which cut a running writer off with
 * ENOTCONN in the middle of its file.  The first one starts a drain:
 *
 *  - new opens and creates fail with EBUSY (logged), so nothing new starts;
 *  - handles already open keep working;
 *  - once the last file handle is released, or after stop_timeout seconds,
 *    or at a second SIGTERM/SIGINT, the session loop is ended and main()
 *    unmounts exactly as libfuse's own handler would have: whatever is still
 *    open then gets ENOTCONN, as before.
 *
 * The draining state itself is a leaf (base/drain.c) that the handlers read;
 * the refusal of opens is theirs (handlers/fuse_file.c).
 *
 * umount(8) and fusermount3 -u do not go through here: the kernel ends the
 * connection and the daemon exits as it always did.
 *
 * The session ends once every worker has finished its request.  One that
 * never does -- blocked in the kernel on a filesystem that does not answer:
 * a hung backing filesystem, or this mount itself before INIT is answered
 * -- would keep the daemon and its mount forever, so the stop is bounded
 * (bound_stop()): half-way through stop_timeout (at least a second after
 * the session was told to end) this mount's FUSE connection is ended,
 * which fails every request waiting on it, and the mount is detached; the
 * daemon then exits with status 1, at stop_timeout (at least a second
 * later) without waiting for a thread still blocked elsewhere.
 *
 * Invariants: the signal handler only writes one byte to a pipe (async
 * signal safe); all decisions are taken by the stop thread, which has the
 * signals blocked, so it never interrupts itself.  The session loop runs in
 * the main thread and sleeps in sem_wait() (or read() with -s); the stop
 * thread ends it with fuse_session_exit() and a signal aimed at that thread,
 * whose handler is installed without SA_RESTART so the wait returns.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"

static struct {
	int wake[2]; /* handler -> stop thread */
	pthread_t stop_thread, main_thread;
	bool started;
	_Atomic bool quitting;
	_Atomic bool forced; /* the connection was aborted (bound_stop) */
	struct sigaction old_term, old_int;
} stop = { .wake = { -1, -1 } };

static void on_stop_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;

	/* A full pipe means the thread has bytes to read anyway. */
	if (write(stop.wake[1], &c, 1) < 0)
		(void)0;
	errno = saved;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits up to ms for a byte; returns the signal number, 0 on timeout. */
static int wait_signal(int ms)
{
	struct pollfd pfd = { .fd = stop.wake[0], .events = POLLIN };
	char c;

	if (poll(&pfd, 1, ms) <= 0 || read(stop.wake[0], &c, 1) != 1)
		return 0;
	return (unsigned char)c;
}

static const char *sig_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : "SIGTERM";
}

static void drain(int sig)
{
	int timeout = dcfs.opt.stop_timeout;
	double start = now_s(), left;
	size_t n = io_open_count();

	if (n == 0) {
		log_info("%s: no file open: unmounting\n", sig_name(sig));
		return;
	}
	if (timeout <= 0) {
		log_info("%s: stop_timeout=0: unmounting with %zu file%s open\n", sig_name(sig), n,
			 n == 1 ? "" : "s");
		return;
	}
	drain_begin();
	log_info(
		"%s: stopping: refusing new opens, waiting up to %d s for %zu open file%s (send it again to unmount now)\n",
		sig_name(sig), timeout, n, n == 1 ? "" : "s");
	for (;;) {
		left = start + timeout - now_s();
		if (left <= 0) {
			log_warn(
				"stop timeout of %d s reached with %zu file%s still open: unmounting\n",
				timeout, n, n == 1 ? "" : "s");
			return;
		}
		sig = wait_signal(left < 0.1 ? (int)(left * 1000) + 1 : 100);
		if (atomic_load(&stop.quitting))
			return;
		n = io_open_count();
		if (sig) {
			log_warn("second %s: unmounting now with %zu file%s open\n", sig_name(sig),
				 n, n == 1 ? "" : "s");
			return;
		}
		if (n == 0) {
			log_info("all files closed after %.1f s: unmounting\n", now_s() - start);
			return;
		}
	}
}

/* Waits until the main thread is done with the session or until t. */
static bool quit_by(double t)
{
	double left;

	while (!atomic_load(&stop.quitting) && (left = t - now_s()) > 0)
		wait_signal(left < 0.1 ? (int)(left * 1000) + 1 : 100);
	return atomic_load(&stop.quitting);
}

static double later(double a, double b)
{
	return a > b ? a : b;
}

/* See the top of the file: the stop began (first signal) at start. */
static void bound_stop(double start, int sig)
{
	double abort_at = later(now_s() + 1, start + dcfs.opt.stop_timeout / 2.0);
	double exit_at = later(abort_at + 1, start + dcfs.opt.stop_timeout);

	if (quit_by(abort_at))
		return;
	atomic_store(&stop.forced, true);
	log_warn(
		"%s: the session has not ended after %.1f s (a request is blocked in the kernel): ending the connection and unmounting %s\n",
		sig_name(sig), now_s() - start, dcfs.opt.mountpoint);
	guard_end_self(dcfs.opt.mountpoint);
	if (quit_by(exit_at))
		return;
	log_err("%s: still blocked after %.1f s: exiting\n", sig_name(sig), now_s() - start);
	_exit(1);
}

static void *stop_main(void *arg)
{
	double start;
	int sig;

	(void)arg;
	do
		sig = wait_signal(-1);
	while (!sig && !atomic_load(&stop.quitting));
	if (atomic_load(&stop.quitting))
		return NULL;
	start = now_s();
	drain(sig);
	if (atomic_load(&stop.quitting))
		return NULL;
	fuse_session_exit(dcfs.se);
	pthread_kill(stop.main_thread, SIGTERM);
	bound_stop(start, sig);
	return NULL;
}

bool shutdown_forced(void)
{
	return atomic_load(&stop.forced);
}

/*
 * Called in the thread that will run the session loop, after
 * fuse_set_signal_handlers(): SIGTERM and SIGINT are taken over from
 * libfuse's handler, which shutdown_stop() puts back.
 */
int shutdown_start(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };
	sigset_t block, old;
	int err;

	if (pipe2(stop.wake, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	stop.main_thread = pthread_self();
	/* The stop thread must never take the signals itself. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	err = pthread_create(&stop.stop_thread, NULL, stop_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		close(stop.wake[0]);
		close(stop.wake[1]);
		return -err;
	}
	stop.started = true;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: the loop's wait must return */
	sigaction(SIGTERM, &sa, &stop.old_term);
	sigaction(SIGINT, &sa, &stop.old_int);
	return 0;
}

void shutdown_stop(void)
{
	if (!stop.started)
		return;
	sigaction(SIGTERM, &stop.old_term, NULL);
	sigaction(SIGINT, &stop.old_int, NULL);
	atomic_store(&stop.quitting, true);
	if (write(stop.wake[1], "q", 1) < 0)
		(void)0; /* full: the thread wakes anyway */
	pthread_join(stop.stop_thread, NULL);
	close(stop.wake[0]);
	close(stop.wake[1]);
	stop.started = false;
}
