// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE page-cache invalidation, sent from a thread of its own.
 *
 * libfuse forbids sending fuse_lowlevel_notify_inval_inode() from the
 * execution path of a related request: the kernel may hold the very page
 * locks the invalidation waits for until our reply arrives.  Handlers
 * therefore only queue a range here; this thread sends it once the
 * handler has replied.
 */
#include <stdlib.h>

#include "dcfs_io.h"

#define QUEUE_MAX 1024

struct inval {
	fuse_ino_t ino;
	off_t off, len;
};

static struct inval queue[QUEUE_MAX];
static size_t head, count;
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;
static pthread_t thread;
static bool running, stopping;
static struct fuse_session *session;

static void *notify_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&qlock);
	for (;;) {
		struct inval iv;

		while (!count && !stopping)
			pthread_cond_wait(&qcond, &qlock);
		if (!count)
			break;
		iv = queue[head];
		head = (head + 1) % QUEUE_MAX;
		count--;
		pthread_mutex_unlock(&qlock);
		/* -ENOENT: the kernel already forgot the inode, nothing cached. */
		fuse_lowlevel_notify_inval_inode(session, iv.ino, iv.off, iv.len);
		pthread_mutex_lock(&qlock);
	}
	pthread_mutex_unlock(&qlock);
	return NULL;
}

int notify_start(struct fuse_session *se)
{
	session = se;
	if (pthread_create(&thread, NULL, notify_main, NULL) != 0)
		return -EAGAIN;
	running = true;
	return 0;
}

void notify_stop(void)
{
	if (!running)
		return;
	pthread_mutex_lock(&qlock);
	stopping = true;
	pthread_cond_signal(&qcond);
	pthread_mutex_unlock(&qlock);
	pthread_join(thread, NULL);
	running = false;
}

void notify_inval(fuse_ino_t ino, off_t off, off_t len)
{
	pthread_mutex_lock(&qlock);
	if (running && count < QUEUE_MAX) {
		/* Ranges of one stream arrive in order: merge with the last. */
		struct inval *last = count ? &queue[(head + count - 1) % QUEUE_MAX] : NULL;

		if (last && last->ino == ino && last->off + last->len == off) {
			last->len += len;
		} else {
			queue[(head + count) % QUEUE_MAX] =
				(struct inval){ ino, off, len };
			count++;
		}
		pthread_cond_signal(&qcond);
	}
	pthread_mutex_unlock(&qlock);
}
