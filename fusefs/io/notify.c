// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE page-cache invalidation, sent from a thread of its own.
 *
 * libfuse forbids sending fuse_lowlevel_notify_inval_inode() from the
 * execution path of a related request: the kernel may hold the very page
 * locks the invalidation waits for until our reply arrives.  Handlers
 * therefore only queue a range here; this thread sends it once the
 * handler has replied.
 *
 * An invalidation must not overtake a write-through write (a writable
 * handle that goes through the FUSE page cache).  The kernel copies such a
 * write into its cached pages, unlocks those it made uptodate, and only
 * then waits for our reply: dropping them in between, and a READ that
 * reaches the backing file before the WRITE has landed, leaves the old
 * data cached after the write returned (tests/KNOWN_FAILURES.md #9).  So
 * the open writable FUSE-cached handles of each inode are counted here,
 * and a range is not dropped while the inode has more of them than the
 * handle that asked for the drop (checked when queued and when sent).
 * Such an inode owes the drop: the whole file is dropped once its last
 * writable cached handle is gone, and nothing of a stream stays behind.
 *
 * The handle that asks may have writes in flight too, from another thread
 * of the same open file.  That matters once the file is mapped shared and
 * written through the mapping: a page dropped while a pwrite's WRITE is on
 * its way, faulted back in with the old bytes and dirtied, is written back
 * over the pwrite (tests/KNOWN_FAILURES.md #15).  The daemon cannot see a
 * WRITE before it arrives, but it sees how the file is used: once a
 * writable cached handle also reads through the cache (read(2) on it, or
 * faults of a mapping of it) or a mapping is written back, no range of the
 * inode is dropped while it has writable cached handles (a mapping keeps
 * its file open), only the whole file after the last one.  As natively, a
 * file read and written at once stays cached while open for writing.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "io/io.h"

#define QUEUE_MAX 1024

struct inval {
	fuse_ino_t ino;
	off_t off, len;
	unsigned int allowed; /* writable cached handles that may be open */
};

/* Inodes with writable FUSE-cached handles open, by node id (qlock). */
#define WRITER_BUCKETS 256
struct writers {
	struct writers *next;
	fuse_ino_t ino;
	unsigned int n;
	bool owed;  /* a drop was held back */
	bool mixed; /* read and written through the cache: no drops while open */
};

/* The queue and the writers' counts (under qlock), and the thread. */
static struct {
	pthread_mutex_t qlock;
	pthread_cond_t qcond; /* queued, or stopping */
	struct inval queue[QUEUE_MAX];
	size_t head, count;
	struct writers *writer_buckets[WRITER_BUCKETS];
	/*
	 * The inode whose range is being dropped now; an open of a writable
	 * cached handle of it waits (sent_cond) so that its writes cannot
	 * start meanwhile.
	 */
	fuse_ino_t sending;
	pthread_cond_t sent_cond;
	pthread_t thread;
	bool running, stopping;
	struct fuse_session *session;
} nt = {
	.qlock = PTHREAD_MUTEX_INITIALIZER,
	.qcond = PTHREAD_COND_INITIALIZER,
	.sent_cond = PTHREAD_COND_INITIALIZER,
};

static struct writers **writers_slot(fuse_ino_t ino)
{
	struct writers **w = &nt.writer_buckets[(ino * 0x9e3779b97f4a7c15ULL) >> 56];

	while (*w && (*w)->ino != ino)
		w = &(*w)->next;
	return w;
}

/* May the range go now (qlock held)?  If not, the inode owes it. */
static bool may_drop(fuse_ino_t ino, unsigned int allowed)
{
	struct writers *w = *writers_slot(ino);

	if (!w || (w->n <= allowed && !w->mixed))
		return true;
	w->owed = true;
	return false;
}

static void enqueue(fuse_ino_t ino, off_t off, off_t len, unsigned int allowed)
{
	/* Ranges of one stream arrive in order: merge with the last. */
	struct inval *last = nt.count ? &nt.queue[(nt.head + nt.count - 1) % QUEUE_MAX] : NULL;

	if (last && last->ino == ino && last->allowed == allowed && last->off + last->len == off) {
		last->len += len;
	} else if (nt.count < QUEUE_MAX) {
		nt.queue[(nt.head + nt.count) % QUEUE_MAX] =
			(struct inval){ ino, off, len, allowed };
		nt.count++;
	}
	pthread_cond_signal(&nt.qcond);
}

static void *notify_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&nt.qlock);
	for (;;) {
		struct inval iv;

		while (!nt.count && !nt.stopping)
			pthread_cond_wait(&nt.qcond, &nt.qlock);
		if (!nt.count)
			break;
		iv = nt.queue[nt.head];
		nt.head = (nt.head + 1) % QUEUE_MAX;
		nt.count--;
		if (!may_drop(iv.ino, iv.allowed))
			continue;
		nt.sending = iv.ino;
		pthread_mutex_unlock(&nt.qlock);
		/* -ENOENT: the kernel already forgot the inode, nothing cached. */
		fuse_lowlevel_notify_inval_inode(nt.session, iv.ino, iv.off, iv.len);
		pthread_mutex_lock(&nt.qlock);
		nt.sending = 0;
		pthread_cond_broadcast(&nt.sent_cond);
	}
	pthread_mutex_unlock(&nt.qlock);
	return NULL;
}

int notify_start(struct fuse_session *se)
{
	nt.session = se;
	if (pthread_create(&nt.thread, NULL, notify_main, NULL) != 0)
		return -EAGAIN;
	nt.running = true;
	return 0;
}

void notify_stop(void)
{
	if (!nt.running)
		return;
	pthread_mutex_lock(&nt.qlock);
	nt.stopping = true;
	pthread_cond_signal(&nt.qcond);
	pthread_mutex_unlock(&nt.qlock);
	pthread_join(nt.thread, NULL);
	nt.running = false;
}

void notify_inval(fuse_ino_t ino, off_t off, off_t len, unsigned int allowed)
{
	pthread_mutex_lock(&nt.qlock);
	if (nt.running && may_drop(ino, allowed))
		enqueue(ino, off, len, allowed);
	pthread_mutex_unlock(&nt.qlock);
}

bool notify_writer_open(fuse_ino_t ino)
{
	struct writers **slot, *w;
	bool counted = true;

	pthread_mutex_lock(&nt.qlock);
	while (nt.sending == ino)
		pthread_cond_wait(&nt.sent_cond, &nt.qlock);
	slot = writers_slot(ino);
	if (*slot) {
		(*slot)->n++;
	} else if ((w = calloc(1, sizeof(*w)))) {
		w->ino = ino;
		w->n = 1;
		*slot = w;
	} else {
		counted = false;
	}
	pthread_mutex_unlock(&nt.qlock);
	return counted;
}

/* ino is read and written through the FUSE cache at once (above). */
void notify_writer_mixed(fuse_ino_t ino)
{
	struct writers *w;

	pthread_mutex_lock(&nt.qlock);
	w = *writers_slot(ino);
	if (w)
		w->mixed = true;
	pthread_mutex_unlock(&nt.qlock);
}

void notify_writer_close(fuse_ino_t ino)
{
	struct writers **slot, *w;

	pthread_mutex_lock(&nt.qlock);
	slot = writers_slot(ino);
	w = *slot;
	if (w && --w->n == 0) {
		*slot = w->next;
		if (w->owed && nt.running)
			enqueue(ino, 0, 0, 0);
		free(w);
	}
	pthread_mutex_unlock(&nt.qlock);
}

/*
 * An open of inode is replied without keep_cache: before it returns, the
 * kernel drops every page the mount caches of the file.  The drops queued
 * for it are then owed to nobody, and one sent after the open's reply
 * would only hurt: every FUSE_NOTIFY_INVAL_INODE also invalidates the
 * attributes and bumps the inode's attr_version, and the kernel discards
 * the reply of a GETATTR that was in flight meanwhile.  After a change
 * from outside, the reader's first GETATTR is what tells the kernel the
 * new size; discarded, a read through the FUSE cache stops at the old end
 * (tests/KNOWN_FAILURES.md #20).  So they go from the queue here, one
 * being sent is waited for, and cache_drops tells the handles that read
 * before this open that what they left is gone already (io_stream.c).
 */
void notify_cache_dropped(struct dcfs_inode *inode)
{
	fuse_ino_t ino = inode->nodeid;
	size_t kept = 0;

	atomic_fetch_add(&inode->cache_drops, 1);
	pthread_mutex_lock(&nt.qlock);
	while (nt.sending == ino)
		pthread_cond_wait(&nt.sent_cond, &nt.qlock);
	for (size_t i = 0; i < nt.count; i++) {
		struct inval iv = nt.queue[(nt.head + i) % QUEUE_MAX];

		if (iv.ino != ino)
			nt.queue[(nt.head + kept++) % QUEUE_MAX] = iv;
	}
	nt.count = kept;
	pthread_mutex_unlock(&nt.qlock);
}

/*
 * Synchronous drops for coherence.c, from its own thread or a handler.
 * Attributes alone (off -1) touch no page and wait for nothing.
 */
void notify_inval_range_now(fuse_ino_t ino, off_t off, off_t len)
{
	if (nt.running)
		fuse_lowlevel_notify_inval_inode(nt.session, ino, off, len);
}

void notify_inval_attr_now(fuse_ino_t ino)
{
	if (nt.running)
		fuse_lowlevel_notify_inval_inode(nt.session, ino, -1, 0);
}
