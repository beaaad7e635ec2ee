// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The streaming I/O strategy: the daemon's reads and writes of the backing
 * file carry RWF_DONTCACHE, or go through the fallback window where the
 * backing filesystem cannot do that.
 *
 * Splice cannot carry the flag, so this class moves data through the
 * daemon's own buffers.  Small reads are served from a per-handle
 * read-ahead buffer filled with large uncached reads, so a 4 KiB reader
 * does not cost one backing syscall (and, with drop-behind, one disk read)
 * per request; a sequential reader gets the next window prefetched
 * meanwhile (readahead.c).  Writes are coalesced the same way
 * (write_pipe.c).  The buffer is dropped whenever the file's data changes
 * through the mount (inode data_gen).
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"

/* Under the mount's cap a handle takes a smaller window, down to this. */
#define RA_MIN_CAP ((size_t)256 << 10)

/* How far out of order requests of one stream may arrive (see io_stream_account). */
#define SEQ_SLACK ((off_t)4 << 20)

static ssize_t read_uncached(struct dcfs_file *f, void *buf, size_t len, off_t off)
{
	ssize_t n = probe_pread(f->probe, f->fd, buf, len, off);

	if (n != -EOPNOTSUPP) {
		if (n > 0)
			file_stats_io(f, ST_READ_DONTCACHE, (uint64_t)n);
		return n;
	}
	if (!f->stream->fadv_random) {
		/* Only what we read may come in: it is dropped right after. */
		posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM);
		f->stream->fadv_random = true;
	}
	n = fallback_read(f, buf, len, off);
	if (n > 0)
		file_stats_io(f, ST_READ_FALLBACK, (uint64_t)n);
	return n;
}

void io_stream_set_uncached(struct dcfs_file *f, int policy)
{
	f->use.read_uncached = policy == POLICY_DONTCACHE || policy == POLICY_DONTCACHE_READ;
	f->use.write_uncached = policy == POLICY_DONTCACHE || policy == POLICY_DONTCACHE_WRITE;
}

/*
 * Many readers at once: a smaller window (halved down to RA_MIN_CAP) is
 * better than none, which would cost a backing read per small request.
 */
static bool ra_reserve(struct dcfs_file *f)
{
	if (f->stream->ra_buf)
		return true;
	while (f->stream->ra_cap) {
		if (ra_account(f->stream->ra_cap)) {
			f->stream->ra_buf = malloc(f->stream->ra_cap);
			if (f->stream->ra_buf)
				return true;
			ra_unaccount(f->stream->ra_cap);
		}
		/* 0 in the end: do not retry on every read */
		f->stream->ra_cap = f->stream->ra_cap / 2 >= RA_MIN_CAP ? f->stream->ra_cap / 2 : 0;
	}
	return false;
}

static bool ra_covers(const struct dcfs_file *f, size_t size, off_t off, uint64_t gen)
{
	return f->stream->ra_len && f->stream->ra_gen == gen && off >= f->stream->ra_off &&
	       off + (off_t)size <= f->stream->ra_off + (off_t)f->stream->ra_len;
}

/*
 * One read of exactly this range.  The backing filesystem's own read-ahead
 * would read on past it, and for a reader through the FUSE cache that is
 * ground the handle's windows already covered (a late request) or will
 * not read the same way: pages read ahead and never read stay resident
 * even with RWF_DONTCACHE.  So such a read goes without backing read-ahead
 * (FMODE_RANDOM of this handle's own file, while no prefetch runs).
 */
static ssize_t read_exact(struct dcfs_file *f, void *buf, size_t size, off_t off)
{
	bool toggle = f->use.fuse_cached && !f->stream->fadv_random;
	ssize_t n;

	if (toggle)
		posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM);
	n = read_uncached(f, buf, size, off);
	if (toggle && !f->stream->fadv_random)
		posix_fadvise(f->fd, 0, 0, POSIX_FADV_NORMAL);
	return n;
}

static void read_direct(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off)
{
	char *buf = malloc(size);
	ssize_t n;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ra_quiesce(f);
	n = read_exact(f, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static bool prev_covers(const struct dcfs_file *f, size_t size, off_t off, uint64_t gen)
{
	return f->stream->ra_prev_buf && f->stream->ra_prev_len && f->stream->ra_prev_gen == gen &&
	       off >= f->stream->ra_prev_off &&
	       off + (off_t)size <= f->stream->ra_prev_off + (off_t)f->stream->ra_prev_len;
}

static void reply_from_ra(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off)
{
	size_t skip = (size_t)(off - f->stream->ra_off);
	size_t n = f->stream->ra_len - skip < size ? f->stream->ra_len - skip : size;

	fuse_reply_buf(req, f->stream->ra_buf + skip, n);
}

static void stream_read(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off)
{
	uint64_t gen;
	ssize_t n;
	bool seq, tiles;

	if (!f->use.read_uncached) {
		file_stats_io(f, ST_READ_CACHED, size);
		io_plain_read(req, f, size, off);
		return;
	}
	pthread_mutex_lock(&f->lock);
	gen = atomic_load(&f->inode->data_gen);
	/*
	 * Prefetch (readahead.c) only for sequential requests that tile the
	 * window (4K, 64K, 1M...): others would cross into the next window
	 * somewhere the prefetch could not start from.
	 */
	seq = off == f->stream->ra_last_end ||
	      (f->use.fuse_cached && f->stream->ra_len && off >= f->stream->ra_off &&
	       off < f->stream->ra_off + (off_t)(f->stream->ra_len + f->stream->ra_cap));
	tiles = f->stream->ra_prefetch && size && f->stream->ra_cap % size == 0;
	f->stream->ra_last_end = off + (off_t)size;
	/* Writes of passthrough handles change the data behind our back. */
	if (passthrough_bypassed(f->inode)) {
		f->stream->ra_len = 0;
		f->stream->ra_prev_len = 0;
		read_direct(req, f, size, off);
		goto out;
	} else if (ra_covers(f, size, off, gen)) {
		reply_from_ra(req, f, size, off);
	} else if (prev_covers(f, size, off, gen)) {
		fuse_reply_buf(req, f->stream->ra_prev_buf + (off - f->stream->ra_prev_off), size);
		goto out;
	} else if (f->use.fuse_cached && f->stream->ra_len && off < f->stream->ra_off &&
		   off + (off_t)f->stream->ra_cap > f->stream->ra_off) {
		/* late, and not in the window kept: leave the windows alone */
		read_direct(req, f, size, off);
		goto out;
	} else if ((size < f->stream->ra_cap || (tiles && size == f->stream->ra_cap)) &&
		   ra_reserve(f) && size <= f->stream->ra_cap) {
		/* ra_reserve may have taken a smaller window */
		tiles = f->stream->ra_prefetch && size && f->stream->ra_cap % size == 0;
		if (!(seq && tiles && ra_take(f, off, gen) && ra_covers(f, size, off, gen))) {
			ra_quiesce(f);
			n = read_uncached(f, f->stream->ra_buf, f->stream->ra_cap, off);
			if (n < 0) {
				f->stream->ra_len = 0;
				fuse_reply_err(req, (int)-n);
				goto out;
			}
			f->stream->ra_off = off;
			f->stream->ra_len = (size_t)n;
			f->stream->ra_gen = gen;
		}
		reply_from_ra(req, f, size, off);
	} else {
		read_direct(req, f, size, off);
		goto out;
	}
	/* A full window and a sequential reader: fetch the next one meanwhile. */
	if (seq && tiles && f->stream->ra_len == f->stream->ra_cap && f->stream->ra_gen == gen)
		ra_prefetch(f, f->stream->ra_off + (off_t)f->stream->ra_len, gen);
out:
	pthread_mutex_unlock(&f->lock);
}

static ssize_t stream_write(struct dcfs_file *f, struct fuse_bufvec *in, off_t off)
{
	size_t len = fuse_buf_size(in);
	struct fuse_bufvec mem = FUSE_BUFVEC_INIT(len);
	const void *data;
	ssize_t n;

	if (!f->use.write_uncached) {
		n = io_plain_write(f, in, off);
		if (n > 0)
			file_stats_io(f, ST_WRITE_CACHED, (uint64_t)n);
		return n;
	}
	if (in->count == 1 && !(in->buf[0].flags & FUSE_BUF_IS_FD)) {
		data = (const char *)in->buf[0].mem + in->off;
	} else {
		/* Data arrived in a pipe or in pieces: gather it. */
		mem.buf[0].mem = malloc(len);
		if (!mem.buf[0].mem)
			return -ENOMEM;
		n = fuse_buf_copy(&mem, in, 0);
		if (n < 0) {
			free(mem.buf[0].mem);
			return n;
		}
		len = (size_t)n;
		data = mem.buf[0].mem;
	}
	stats_add(f->policy, ST_WRITE_REQUESTS, 1);
	pthread_mutex_lock(&f->lock);
	n = wpipe_write(f, data, len, off);
	/*
	 * The handle's own counter (dcfs stat --files) counts what the
	 * application wrote; the class counters count the backing writes
	 * when they are made (write_pipe.c).
	 */
	if (n > 0)
		file_stats_bytes(f, false, (uint64_t)n);
	pthread_mutex_unlock(&f->lock);
	free(mem.buf[0].mem);
	return n;
}

/*
 * Handles whose stream passes through the FUSE page cache, which dcfs
 * drops behind them: switched auto/deferred handles (FOPEN_DIRECT_IO
 * cannot be set after open) and readers opened with fuse_readahead.
 */
static bool trails_fuse_cache(const struct dcfs_file *f)
{
	return f->use.fuse_cached || (f->stream->target && !f->stream->switch_after);
}

/*
 * Has an open dropped the file's whole FUSE cache (notify_cache_dropped())
 * since the handle's last request?  Then nothing of its stream is left
 * there, and a drop at its release, which arrives asynchronously and may
 * well come after such an open, would only disturb the new reader's first
 * size refresh (notify.c).
 */
static bool dropped_since_last_request(const struct dcfs_file *f)
{
	/* At release no request holds the handle any more: no lock. */
	return atomic_load(&f->inode->cache_drops) != f->stream->drops_seen;
}

static void stream_release(struct dcfs_file *f)
{
	/* First what is still buffered, then what it leaves in the cache. */
	ra_stop(f);
	wpipe_close(f);
	fallback_finish(f);
	/*
	 * A switched handle leaves nothing of its stream behind: not in the
	 * FUSE cache, and not what backing read-ahead brought in around it
	 * (unless the file was in use when we opened it).
	 */
	if (trails_fuse_cache(f) && !dropped_since_last_request(f))
		notify_inval(f->inode->nodeid, 0, 0, 0);
	if (f->stream->target && !f->stream->switch_after && !f->use.was_resident)
		fallback_drop(f, f->stream->pre_lo, f->stream->seq_next + SEQ_SLACK);
	if (f->stream->ra_buf) {
		free(f->stream->ra_buf);
		ra_unaccount(f->stream->ra_cap);
	}
}

int io_stream_alloc(struct dcfs_file *f)
{
	f->stream = calloc(1, sizeof(*f->stream));
	return f->stream ? 0 : -ENOMEM;
}

/* With the handle, after its release: what it held is gone by then. */
void io_stream_free(struct dcfs_file *f)
{
	free(f->stream);
	f->stream = NULL;
}

const struct dcfs_io io_stream = {
	.name = "stream",
	.read = stream_read,
	.write = stream_write,
	.release = stream_release,
};

/*
 * The one-way switch of an auto or min_size-deferred handle: from here on
 * its backing I/O is uncached, what it already passed through the cache is
 * dropped from the backing cache (unless the file was in use before) and,
 * by the notify thread, from the FUSE cache.
 */
static void switch_now(struct dcfs_file *f)
{
	fuse_ino_t ino = f->inode->nodeid;

	/* Counters stay with the class decided at open (auto, or deferred). */
	f->stream->switch_after = 0;
	io_stream_set_uncached(f, f->stream->target);
	file_stats_io(f, ST_SWITCHED, 1);
	if (!f->use.was_resident)
		fallback_drop(f, f->stream->pre_lo, f->stream->pre_hi);
	notify_inval(ino, f->stream->pre_lo, f->stream->pre_hi - f->stream->pre_lo,
		     f->use.cached_writer);
	f->stream->inval_done = f->stream->pre_hi;
	log_debug("ino %llu: switched to %s after %llu bytes\n", (unsigned long long)f->inode->ino,
		  policy_name(f->stream->target), (unsigned long long)f->stream->seq_run);
}

/*
 * A reader through the FUSE cache (fuse_readahead): its requests are the
 * kernel's read-ahead, up to two 1 MiB windows ahead of the application,
 * so pages this far behind the front are read.  Each drop also costs a
 * GETATTR (the kernel invalidates the attributes with the pages), hence
 * drops of 1 MiB, not of every request: at most about 4 MiB of the
 * mount's cache per reader, plus what the notify thread has not sent yet.
 */
#define FRA_LAG ((off_t)3 << 20)
#define FRA_CHUNK ((off_t)1 << 20)

/*
 * After the switch the handle still passes through the FUSE page cache
 * (FOPEN_DIRECT_IO cannot be set after open): drop what the stream left
 * there, a window behind it so the kernel's read-ahead is not wasted.
 */
static void trail_inval(struct dcfs_file *f)
{
	off_t lag = f->use.fuse_cached ? FRA_LAG : (off_t)f->stream->window;
	off_t chunk = f->use.fuse_cached ? FRA_CHUNK : (off_t)f->stream->window;
	off_t upto = f->stream->seq_next - lag;

	if (upto < f->stream->inval_done + chunk)
		return;
	notify_inval(f->inode->nodeid, f->stream->inval_done, upto - f->stream->inval_done,
		     f->use.cached_writer);
	f->stream->inval_done = upto;
}

/*
 * A reader through the FUSE cache moved elsewhere: what the kernel read
 * ahead for the run it left is not read again soon, drop it now rather
 * than at close (a random reader would otherwise fill the FUSE cache).
 */
static void drop_left_behind(struct dcfs_file *f, off_t next)
{
	off_t lo = f->stream->inval_done > f->stream->seq_start ? f->stream->inval_done
								: f->stream->seq_start;

	if (f->stream->seq_next > lo)
		notify_inval(f->inode->nodeid, lo, f->stream->seq_next - lo, f->use.cached_writer);
	f->stream->inval_done = next;
}

/*
 * Requests of one stream reach the daemon slightly out of order (kernel
 * read-ahead is asynchronous and several threads serve it), so a stream
 * is any run of requests that stay within a slack of its front.
 */
static bool continues_stream(const struct dcfs_file *f, off_t off)
{
	return f->stream->seq_run && off + SEQ_SLACK >= f->stream->seq_start &&
	       off <= f->stream->seq_next + SEQ_SLACK;
}

void io_stream_account(struct dcfs_file *f, off_t off, size_t n)
{
	off_t end = off + (off_t)n;

	if (f->io != &io_stream || !n || !(f->stream->target || f->use.fuse_cached))
		return;
	pthread_mutex_lock(&f->lock);
	/* Before the request is served: its pages are the kernel's already. */
	f->stream->drops_seen = atomic_load(&f->inode->cache_drops);
	if (!continues_stream(f, off)) {
		if (f->use.fuse_cached)
			drop_left_behind(f, off);
		f->stream->seq_start = off;
		f->stream->seq_next = off;
		f->stream->seq_run = 0;
	}
	f->stream->seq_run += n;
	if (end > f->stream->seq_next)
		f->stream->seq_next = end;
	if (f->stream->switch_after) {
		/* Everything this handle put in the caches before the switch. */
		if (f->stream->pre_hi == f->stream->pre_lo || off < f->stream->pre_lo)
			f->stream->pre_lo = off;
		if (end > f->stream->pre_hi)
			f->stream->pre_hi = end;
		if (f->stream->seq_run >= f->stream->switch_after)
			switch_now(f);
	} else {
		if (f->stream->inval_done > f->stream->seq_next)
			f->stream->inval_done = f->stream->seq_start;
		trail_inval(f);
	}
	pthread_mutex_unlock(&f->lock);
}
