// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Wakes a write-behind look thread (writebehind.c) at the first write to
 * its backing file after the thread went to sleep.
 *
 * The kernel writes a kernel-served stream without telling the daemon, and
 * the look thread that holds the stream's window polls: every 1 ms while
 * the stream moves, less often once it rests (up to 50 ms).  A writer that
 * paused (a recorder between bursts, a download that stalled) and then
 * writes again ran unpaced until the next look: 216 MiB resident after a
 * 3 s pause, on xfs at 1 MiB requests (tests/bench/README.md).  So a
 * resting stream asks inotify for the next IN_MODIFY of its backing file
 * (a passthrough write is a vfs_iter_write() of it, which reports one), once
 * (IN_ONESHOT): a busy writer pays for one event, not one per write.
 *
 * One inotify instance for the daemon (fs.inotify.max_user_instances is
 * 128 by default, fewer than the streams a daemon may serve) and one thread
 * that reads it and wakes the streams whose watch fired.  A watch is per
 * inode: two streams of one file share it.  Where inotify cannot be had
 * (no instance, no watch left), the look thread polls as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <unistd.h>

#include "io/io.h"

#define EVENT_BUF 4096

static int ino_fd = -1;
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct write_watch *armed; /* the watches that have not fired */

static void unlink_watch(struct write_watch *w)
{
	for (struct write_watch **p = &armed; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	w->next = NULL;
	w->wd = -1;
}

/*
 * An event of wd (its IN_MODIFY, or IN_IGNORED once the watch went): wake.
 * wd -1 (IN_Q_OVERFLOW: events were lost): wake every armed stream.
 */
static void fired(int wd)
{
	pthread_mutex_lock(&table_lock);
	for (struct write_watch *w = armed, *next; w; w = next) {
		next = w->next;
		if (w->wd != wd && wd != -1)
			continue;
		unlink_watch(w);
		w->wake(w->arg);
	}
	pthread_mutex_unlock(&table_lock);
}

/*
 * As prompt as the look threads it wakes (writebehind.c look_priority()):
 * a wake that waits for a busy CPU lets the writer run on.
 */
static void *watcher_main(void *unused)
{
	struct sched_param sp = { .sched_priority = 1 };
	char buf[EVENT_BUF] __attribute__((aligned(__alignof__(struct inotify_event))));

	(void)unused;
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0)
		setpriority(PRIO_PROCESS, (id_t)gettid(), -10);
	for (;;) {
		ssize_t n = read(ino_fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			log_warn("write-behind: inotify read: %s: resting streams are polled\n",
				 n < 0 ? strerror(errno) : "end of file");
			return NULL;
		}
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			fired(ev->wd);
			p += sizeof(*ev) + ev->len;
		}
	}
}

static void start(void)
{
	pthread_t t;
	pthread_attr_t attr;
	int fd = inotify_init1(IN_CLOEXEC);

	if (fd < 0) {
		log_info("write-behind: no inotify instance (%s): resting streams are polled\n",
			 strerror(errno));
		return;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	ino_fd = fd;
	if (pthread_create(&t, &attr, watcher_main, NULL) != 0) {
		log_info("write-behind: no inotify thread: resting streams are polled\n");
		close(fd);
		ino_fd = -1;
	}
	pthread_attr_destroy(&attr);
}

void writewatch_init(struct write_watch *w, void (*wake)(void *), void *arg)
{
	*w = (struct write_watch){ .wd = -1, .wake = wake, .arg = arg };
}

/*
 * The next write to the file of fd calls w->wake(w->arg), once, from the
 * watcher thread (with no lock of the caller held: the caller must not
 * hold one that its wake takes).  Armed already: nothing to do.
 */
int writewatch_arm(struct write_watch *w, int fd)
{
	char path[64];
	int wd, err = 0;

	pthread_once(&start_once, start);
	if (ino_fd < 0)
		return -ENOSYS;
	pthread_mutex_lock(&table_lock);
	if (w->wd < 0) {
		/* The daemon's own fd: the file it has open, not a name. */
		inode_proc_path(fd, path);
		wd = inotify_add_watch(ino_fd, path, IN_MODIFY | IN_ONESHOT);
		if (wd < 0) {
			err = -errno;
		} else {
			w->wd = wd;
			w->next = armed;
			armed = w;
		}
	}
	pthread_mutex_unlock(&table_lock);
	return err;
}

/* Once it returns, w->wake is neither running nor called again for w. */
void writewatch_cancel(struct write_watch *w)
{
	int wd;
	bool shared = false;

	pthread_mutex_lock(&table_lock);
	wd = w->wd;
	if (wd >= 0) {
		unlink_watch(w);
		for (struct write_watch *o = armed; o; o = o->next)
			shared |= o->wd == wd;
		if (!shared)
			inotify_rm_watch(ino_fd, wd); /* EINVAL if it fired meanwhile */
	}
	pthread_mutex_unlock(&table_lock);
}
