// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Double-buffered read-ahead for uncached reads.
 *
 * The streaming class serves reads of up to `readahead` bytes from a
 * per-handle buffer filled by one large uncached read (io_stream.c).  With
 * that buffer alone the reader still waits for the backing read whenever
 * it crosses into the next window.  Here a second buffer of the same size
 * is filled by the handle's own thread while the current one is served,
 * once the handle reads sequentially (a request starting where the one
 * before ended), so the next window is usually there when it is needed.
 *
 * Invariants:
 *  - A prefetched window is used only for requests inside it and only if
 *    the inode's data generation is unchanged since it was asked for.
 *    Writes bump the generation when they are acknowledged and again when
 *    they land in the backing file (write_pipe.c), so a window read before
 *    a write landed is never served after it.
 *  - A request elsewhere cancels the window (its result is dropped); a
 *    read error of the prefetch is never reported: the request then reads
 *    synchronously and gets its own answer.
 *  - Only where RWF_DONTCACHE reads work: the fallback's drop-behind state
 *    is not made for two threads.
 *  - The second buffers of all handles count against the same 128 MiB as
 *    the first ones (ra_account() below).
 *  - Lock order: dcfs_file lock, then ra_next lock.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "io/io.h"

/*
 * All read-ahead buffers of the mount together stay below this: 16
 * sequential readers with the default 4 MiB window (two buffers each).
 */
#define RA_GLOBAL_CAP (128ULL << 20)

static _Atomic uint64_t ra_total;

/* Reserves n bytes of read-ahead buffer under the mount's cap. */
bool ra_account(size_t n)
{
	if (atomic_fetch_add(&ra_total, n) + n <= RA_GLOBAL_CAP)
		return true;
	atomic_fetch_sub(&ra_total, n);
	return false;
}

void ra_unaccount(size_t n)
{
	atomic_fetch_sub(&ra_total, n);
}

enum {
	RA_IDLE,
	RA_QUEUED,
	RA_FILLING,
	RA_READY
};

struct ra_next {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int state;
	bool stop, thread_up;
	pthread_t thread;
	char *buf;
	size_t cap;
	off_t off;    /* the window asked for */
	ssize_t len;  /* bytes read, or -errno */
	uint64_t gen; /* data generation when asked for */
};

static void *ra_main(void *arg)
{
	struct dcfs_file *f = arg;
	struct ra_next *r = f->stream->ra_next;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (r->state != RA_QUEUED && !r->stop)
			pthread_cond_wait(&r->cv, &r->lock);
		if (r->stop)
			break;
		r->state = RA_FILLING;
		pthread_mutex_unlock(&r->lock);
		ssize_t n = probe_pread(f->probe, f->fd, r->buf, r->cap, r->off);
		if (n > 0)
			file_stats_io(f, ST_READ_DONTCACHE, (uint64_t)n);
		stats_add(f->policy, ST_PREFETCHES, 1);
		pthread_mutex_lock(&r->lock);
		r->len = n;
		r->state = RA_READY;
		pthread_cond_broadcast(&r->cv);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* Waits for a fill in progress (r->lock held): its buffer is ours again. */
static void ra_wait(struct ra_next *r)
{
	while (r->state == RA_QUEUED || r->state == RA_FILLING)
		pthread_cond_wait(&r->cv, &r->lock);
}

static struct ra_next *ra_create(struct dcfs_file *f)
{
	struct ra_next *r = calloc(1, sizeof(*r));
	sigset_t all, old;
	int rc;

	if (!r)
		return NULL;
	r->cap = f->stream->ra_cap;
	if (!ra_account(r->cap))
		goto out_free;
	r->buf = malloc(r->cap);
	if (!r->buf)
		goto out_unaccount;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cv, NULL);
	f->stream->ra_next = r;
	/* Signals are for libfuse's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&r->thread, NULL, ra_main, f);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0) {
		r->thread_up = true;
		return r;
	}
	f->stream->ra_next = NULL;
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->lock);
	free(r->buf);
out_unaccount:
	ra_unaccount(r->cap);
out_free:
	free(r);
	return NULL;
}

/*
 * Asks for the window at off (f->lock held), unless it is already asked
 * for.  Failing to set up is not an error: reads stay synchronous.
 */
void ra_prefetch(struct dcfs_file *f, off_t off, uint64_t gen)
{
	struct ra_next *r = f->stream->ra_next;

	if (!f->stream->ra_prefetch || !f->stream->ra_buf ||
	    atomic_load(&f->probe->rd) != PROBE_YES)
		return;
	if (!r) {
		r = ra_create(f);
		if (!r) {
			f->stream->ra_prefetch = false; /* do not retry on every read */
			return;
		}
	}
	pthread_mutex_lock(&r->lock);
	if (r->state != RA_IDLE && r->off == off && r->gen == gen) {
		pthread_mutex_unlock(&r->lock);
		return;
	}
	ra_wait(r);
	r->off = off;
	r->gen = gen;
	r->state = RA_QUEUED;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->lock);
}

/*
 * A handle read through the FUSE page cache gets its requests from the
 * kernel's read-ahead, several at once and served by several threads: one
 * for the end of a window can come after the first one of the next.  The
 * window before stays for those (a third buffer, counted like the others);
 * returns the buffer the prefetch may fill next.
 */
static char *keep_previous(struct dcfs_file *f)
{
	char *spare = f->stream->ra_prev_buf;

	if (!f->use.fuse_cached)
		return f->stream->ra_buf;
	if (!spare) {
		if (!ra_account(f->stream->ra_cap))
			return f->stream->ra_buf;
		spare = malloc(f->stream->ra_cap);
		if (!spare) {
			ra_unaccount(f->stream->ra_cap);
			return f->stream->ra_buf;
		}
	}
	f->stream->ra_prev_buf = f->stream->ra_buf;
	f->stream->ra_prev_off = f->stream->ra_off;
	f->stream->ra_prev_len = f->stream->ra_len;
	f->stream->ra_prev_gen = f->stream->ra_gen;
	return spare;
}

/*
 * The request at off wants a new window (f->lock held): if the prefetched
 * one holds off and is still valid, it becomes the current buffer (the two
 * are swapped) and true is returned.  Otherwise the prefetch is dropped.
 */
bool ra_take(struct dcfs_file *f, off_t off, uint64_t gen)
{
	struct ra_next *r = f->stream->ra_next;
	bool used = false;
	char *tmp;

	if (!r)
		return false;
	pthread_mutex_lock(&r->lock);
	if (r->state != RA_IDLE && off >= r->off && off < r->off + (off_t)r->cap && r->gen == gen) {
		if (r->state != RA_READY)
			stats_add(f->policy, ST_PREFETCH_WAITS, 1);
		ra_wait(r);
		if (r->len >= 0 && atomic_load(&f->inode->data_gen) == gen) {
			tmp = keep_previous(f);
			f->stream->ra_buf = r->buf;
			r->buf = tmp;
			f->stream->ra_off = r->off;
			f->stream->ra_len = (size_t)r->len;
			f->stream->ra_gen = gen;
			used = true;
		}
	} else {
		ra_wait(r);
	}
	r->state = RA_IDLE;
	pthread_mutex_unlock(&r->lock);
	return used;
}

/*
 * Before the request thread reads the backing file itself (f->lock held):
 * two uncached reads of the same pages at once can each leave the other's
 * pages behind (neither drops a folio the other still holds), so a fill
 * in progress is waited for.  Its window stays for a later request.
 */
void ra_quiesce(struct dcfs_file *f)
{
	struct ra_next *r = f->stream->ra_next;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	ra_wait(r);
	pthread_mutex_unlock(&r->lock);
}

/* At release, before the fd is closed. */
void ra_stop(struct dcfs_file *f)
{
	struct ra_next *r = f->stream->ra_next;

	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	ra_wait(r);
	r->stop = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->lock);
	if (r->thread_up)
		pthread_join(r->thread, NULL);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->lock);
	free(r->buf);
	ra_unaccount(r->cap);
	free(r);
	f->stream->ra_next = NULL;
	if (f->stream->ra_prev_buf) {
		free(f->stream->ra_prev_buf);
		f->stream->ra_prev_buf = NULL;
		ra_unaccount(f->stream->ra_cap);
	}
}
