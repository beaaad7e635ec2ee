// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * SIGHUP reloads the config file.  The signal is blocked in every thread
 * and taken by sigwait() here, so the reload runs in ordinary thread
 * context (it allocates and logs).  A file that fails validation changes
 * nothing: the old rules stay and every error is logged.  Open handles
 * keep the decision they were given at open.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "policy/policy.h"

/*
 * The file is loaded by a loader thread of its own (which has a child
 * process read it, see spawn_reader), and the reload waits for it at most
 * RELOAD_TIMEOUT_S: a config on a hung filesystem (a stopped
 * FUSE daemon, an NFS server gone) must not wedge reloads, and must never
 * keep SIGTERM from unmounting.  An abandoned loader discards its result
 * whenever it finishes; until then further SIGHUPs are refused with a log
 * line.
 */
#define RELOAD_TIMEOUT_S 10

struct reload_job {
	char *path;
	bool done, abandoned;
	int ret;
	struct dcfs_config *cfg;
	struct cfg_errors errs;
};

static struct {
	pthread_t reload_thread;
	pthread_mutex_t reload_lock;
	pthread_cond_t reload_cond;
	bool stopping;		    /* reload_stop() was called */
	struct reload_job *running; /* a loader that has not finished */
	/*
	 * The last failed reload, shown where an admin looks without syslog:
	 * the root's user.dcfs.policy, `dcfs stat` and its JSON.  Cleared by
	 * the next reload that succeeds.
	 */
	struct {
		pthread_mutex_t lock;
		bool failed;
		time_t when;
		char why[256];
		unsigned long failures;
	} last;
} rl = {
	.reload_lock = PTHREAD_MUTEX_INITIALIZER,
	.reload_cond = PTHREAD_COND_INITIALIZER,
	.last = { .lock = PTHREAD_MUTEX_INITIALIZER },
};

static void note_failure(const char *why)
{
	pthread_mutex_lock(&rl.last.lock);
	rl.last.failed = true;
	rl.last.when = time(NULL);
	rl.last.failures++;
	snprintf(rl.last.why, sizeof(rl.last.why), "%s", why);
	pthread_mutex_unlock(&rl.last.lock);
}

static void note_success(void)
{
	pthread_mutex_lock(&rl.last.lock);
	rl.last.failed = false;
	pthread_mutex_unlock(&rl.last.lock);
}

/* "failed at 2026-12-03T10:00:00Z: why"; false if the last reload did not fail. */
bool reload_failure(char *buf, size_t size)
{
	char when[32];
	struct tm tm;
	bool failed;

	pthread_mutex_lock(&rl.last.lock);
	failed = rl.last.failed;
	if (failed) {
		gmtime_r(&rl.last.when, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		snprintf(buf, size, "failed at %s: %s", when, rl.last.why);
	}
	pthread_mutex_unlock(&rl.last.lock);
	return failed;
}

void reload_stats(struct reload_stats *st)
{
	st->error[0] = '\0';
	st->failed = reload_failure(st->error, sizeof(st->error));
	pthread_mutex_lock(&rl.last.lock);
	st->failures = rl.last.failures;
	pthread_mutex_unlock(&rl.last.lock);
}

static void job_free(struct reload_job *job)
{
	config_free(job->cfg);
	config_errors_free(&job->errs);
	free(job->path);
	free(job);
}

/*
 * The bytes come from `dcfs --read-config` (cli.c), a process of its own;
 * they are parsed here.  Why a process: a read can be stuck in the kernel
 * where no signal reaches it.  A stopped FUSE daemon holds every request it
 * has taken, and with FUSE over io_uring every request it has been sent, in
 * an uninterruptible wait; a thread of ours stuck like that would keep this
 * daemon from ever exiting.  A stuck child holds only itself, and when it
 * finishes after we are gone, its write to the closed pipe ends it.
 */
static pid_t spawn_reader(const char *path, int *rfd)
{
	char *argv[] = { "dcfs", "--read-config", (char *)path, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	pid_t pid;
	int p[2], err;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	posix_spawnattr_init(&attr);
	/* Every signal is blocked in the daemon's threads: not in the reader. */
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	err = posix_spawn(&pid, "/proc/self/exe", &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (err) {
		close(p[0]);
		return -err;
	}
	*rfd = p[0];
	return pid;
}

static int reader_status(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

/* config_load(), with the file read by a child process. */
static int load_isolated(const char *path, struct dcfs_config **cfg, struct cfg_errors *errs)
{
	char *buf = NULL, msg[PATH_MAX + 96];
	ssize_t len;
	pid_t pid;
	int fd = -1, st, ret;

	pid = spawn_reader(path, &fd);
	if (pid < 0) {
		log_warn("reload: cannot start a reader process (%s): reading %s here\n",
			 strerror((int)-pid), path);
		return config_load(path, cfg, errs);
	}
	len = config_read_fd(fd, &buf);
	close(fd);
	st = reader_status(pid);
	if (st == 0 && len >= 0 && len <= CONFIG_MAX_BYTES) {
		ret = config_load_bytes(path, buf, (size_t)len, cfg, errs);
		free(buf);
		return ret;
	}
	if (st == 1 && len > 0) {
		config_error_add(errs, buf); /* the reader's own message */
		free(buf);
		return -EINVAL;
	}
	free(buf);
	if (len < 0)
		snprintf(msg, sizeof(msg), "%s: cannot read: %s", path, strerror((int)-len));
	else
		snprintf(msg, sizeof(msg),
			 "%s: cannot read: the reader process ended with status %d", path, st);
	config_error_add(errs, msg);
	return -EIO;
}

static void *loader_main(void *arg)
{
	struct reload_job *job = arg;
	struct cfg_errors errs = { 0 };
	struct dcfs_config *cfg = NULL;
	int ret = load_isolated(job->path, &cfg, &errs);
	bool abandoned;

	pthread_mutex_lock(&rl.reload_lock);
	job->ret = ret;
	job->cfg = cfg;
	job->errs = errs;
	job->done = true;
	rl.running = NULL;
	abandoned = job->abandoned;
	pthread_cond_broadcast(&rl.reload_cond);
	pthread_mutex_unlock(&rl.reload_lock);
	if (abandoned) {
		log_warn("the abandoned reload of %s finished late: result discarded\n", job->path);
		job_free(job);
	}
	return NULL;
}

/* Starts a loader; NULL if one is still running or on failure (logged). */
static struct reload_job *job_start(void)
{
	struct reload_job *job;
	pthread_attr_t attr;
	pthread_t tid;
	int err;

	if (rl.running) {
		log_err("reload of %s failed: the previous reload has not finished yet\n",
			dcfs.opt.config);
		note_failure("the previous reload has not finished yet");
		return NULL;
	}
	job = calloc(1, sizeof(*job));
	if (job)
		job->path = strdup(dcfs.opt.config);
	if (!job || !job->path) {
		free(job);
		log_err("reload of %s failed: out of memory\n", dcfs.opt.config);
		note_failure("out of memory");
		return NULL;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&tid, &attr, loader_main, job);
	pthread_attr_destroy(&attr);
	if (err) {
		log_err("reload of %s failed: %s\n", dcfs.opt.config, strerror(err));
		note_failure(strerror(err));
		free(job->path);
		free(job);
		return NULL;
	}
	rl.running = job;
	return job;
}

/* Waits for the loader; false if it was abandoned (it then frees itself). */
static bool job_wait(struct reload_job *job)
{
	struct timespec deadline;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += RELOAD_TIMEOUT_S;
	while (!job->done && !rl.stopping)
		if (pthread_cond_timedwait(&rl.reload_cond, &rl.reload_lock, &deadline) ==
		    ETIMEDOUT)
			break;
	if (job->done)
		return true;
	job->abandoned = true;
	return false;
}

static void reload(void)
{
	struct reload_job *job;
	char summary[512];
	bool done;
	int level;

	if (!dcfs.opt.config) {
		log_info("SIGHUP: no config file to reload\n");
		return;
	}
	pthread_mutex_lock(&rl.reload_lock);
	job = job_start();
	done = job && job_wait(job);
	pthread_mutex_unlock(&rl.reload_lock);
	if (!job)
		return;
	if (!done) {
		log_err("reload of %s failed: not read within %d s (hung filesystem?): keeping the previous rules\n",
			dcfs.opt.config, RELOAD_TIMEOUT_S);
		note_failure("not read within 10 s (hung filesystem?)");
		return;
	}
	if (job->ret < 0) {
		for (size_t i = 0; i < job->errs.n; i++)
			log_err("%s\n", job->errs.msgs[i]);
		log_err("reload of %s failed: keeping the previous rules\n", dcfs.opt.config);
		note_failure(job->errs.n ? job->errs.msgs[0] : "invalid config");
		job_free(job);
		return;
	}
	config_summary(job->cfg, summary, sizeof(summary));
	level = job->cfg->log_level >= 0 ? job->cfg->log_level : FUSE_LOG_INFO;
	config_install(job->cfg);
	job->cfg = NULL;
	if (!dcfs.opt.debug)
		log_set_level(level);
	note_success();
	log_info("reloaded %s\n", summary);
	job_free(job);
}

static void *reload_main(void *arg)
{
	sigset_t *set = arg;
	int sig;

	for (;;) {
		if (sigwait(set, &sig) != 0)
			continue;
		if (sig == SIGHUP)
			reload();
		else
			break;
	}
	return NULL;
}

/* Call before any other thread exists, so all of them inherit the mask. */
int reload_start(void)
{
	static sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR2); /* reload_stop() */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return -EINVAL;
	if (pthread_create(&rl.reload_thread, NULL, reload_main, &set) != 0)
		return -EAGAIN;
	return 0;
}

/* Returns true if an abandoned loader is still stuck in the kernel. */
bool reload_stop(void)
{
	bool stuck;

	pthread_mutex_lock(&rl.reload_lock);
	rl.stopping = true;
	pthread_cond_broadcast(&rl.reload_cond);
	pthread_mutex_unlock(&rl.reload_lock);
	pthread_kill(rl.reload_thread, SIGUSR2);
	pthread_join(rl.reload_thread, NULL);
	pthread_mutex_lock(&rl.reload_lock);
	stuck = rl.running != NULL;
	pthread_mutex_unlock(&rl.reload_lock);
	return stuck;
}
