// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Writes of the streaming class: coalescing in a per-handle buffer,
 * deferred errors, and bounded writeback behind the stream.
 *
 * Why coalesce.  Every FUSE write request used to become one backing
 * pwritev2(RWF_DONTCACHE) of exactly the application's size.  A 4 KiB
 * writer then pays a backing syscall per request, and an odd-sized one
 * (4000 bytes, or the 1048560 + 16 byte split FUSE makes of an unaligned
 * 1 MiB buffer) issues partial-page uncached writes: ext4 on 6.18 keeps
 * such pages resident (2046 of 2048 after 4000-byte appends), defeating
 * the point of the class.  So sequential writes of a handle collect in a
 * buffer of BUF_CAP bytes and reach the backing file as large writes that
 * end on a page boundary; only the remainder below a page waits for the
 * next request.  A page left partly written (the run's first page, the
 * file's last one) is dropped by dcfs once its writeback is done.
 *
 * Invariants:
 *  - Data in a buffer has been acknowledged to the application.  Every
 *    operation that can observe the file through the mount first writes
 *    all buffers of the inode (wpipe_sync_inode): reads on any handle,
 *    writes on other handles, getattr, lookup, setattr, fallocate, lseek,
 *    copy_file_range, flush, fsync, open with O_TRUNC.  The mount
 *    therefore behaves as if each write had been made when it was
 *    acknowledged.  A process using the backing directory directly sees
 *    the data at the latest at close or fsync (close-to-open, like NFS).
 *  - A backing write that fails after its data was acknowledged is
 *    recorded per inode with a sequence number, like the kernel's errseq:
 *    every handle of the inode open at that time reports it once, at its
 *    next write, flush (close) or fsync that reaches the daemon.  That is
 *    why every handle of a regular file has a struct wpipe, whatever its
 *    strategy: for a cache-class (forwarded or passthrough) handle it is
 *    only the error cursor.  Each error is counted (deferred_errors) and
 *    logged; each report to a handle is counted too (deferred_reported).
 *    To make space errors prompt, a run is only buffered while the
 *    backing filesystem has ample free space (LOW_SPACE plus everything
 *    buffered); below that, writes go through at once and ENOSPC is the
 *    answer to the write() that hit it.
 *  - O_SYNC/O_DSYNC handles are not buffered: they must be durable at the
 *    reply.  O_APPEND handles are: an append lands at the end of the
 *    file as the daemon knows it (the end of the handle's own pending
 *    data, else the backing file's size), not at the kernel's offset,
 *    which is the size the kernel last saw.  Every other handle's write
 *    first writes this handle's data, so appends of several handles keep
 *    their order; the backing fd keeps O_APPEND, so a writer outside the
 *    mount can make data land later than planned but never overwritten.
 *  - Buffered data is written with the fsuid/fsgid the writer had
 *    (captured with the data), whichever thread writes it.
 *  - Pipelining: once a run reaches the backing filesystem's page
 *    boundary and RWF_DONTCACHE is known to work there, it becomes a job
 *    without being copied again: a run mostly from the buffer (small
 *    writers) takes the buffer itself, which is a job's memory, and the
 *    handle continues in a fresh one; a run mostly from the request (1 MiB
 *    writes) takes the block the request was read into (reqbuf.c).  The
 *    handle's own worker thread writes it, so
 *    the reply (and the application's next request) overlaps with the
 *    backing write.  Adopted blocks count in flight like copies.  Jobs of
 *    a handle are written one after the other, in order; every
 *    synchronous backing write of the handle and every sync point above
 *    first waits for them (drain), so overlapping writes, reads,
 *    truncation and the rest see them in order.  Bytes in jobs are
 *    bounded per handle (inflight) and per mount (inflight_mount): a
 *    request waits for room (counted as queue_waits).  Workers write with
 *    the identity captured with the data and record failures like any
 *    deferred error.  The fallback path (no RWF_DONTCACHE) stays
 *    synchronous: its window state is shared with reads.
 *  - Acknowledged data waits in a buffer at most write_expire (dcfs.conf):
 *    a buffer that holds data is due that long after it stopped being
 *    empty, and one flusher thread writes it then, as its writer would.
 *    Without it a slow writer (a log, a recorder between chunks) kept its
 *    last bytes in the daemon until the next sync point, invisible in the
 *    backing directory and lost if the daemon died.
 *  - Lock order: struct wp_inode lock, then dcfs_file lock, then the
 *    handle's io_lock (backing-write state: written spans, partial pages,
 *    bounded writeback) or qlock (the job queue); expiry.lock last.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"

#define PAGE 4096
/* One max-size FUSE request; large enough that a backing write is cheap. */
#define BUF_CAP ((size_t)1 << 20)
/* All coalescing buffers of the mount together stay below this. */
#define BUF_GLOBAL_CAP ((uint64_t)256 << 20)
/* Below this much free space (plus what is buffered) writes go through. */
#define LOW_SPACE ((uint64_t)64 << 20)
#define NBUCKETS 256
/* Largest job: a buffer's worth plus one max-size request. */
#define JOB_CAP (BUF_CAP + ((size_t)1 << 20))
/* Recycled job buffers per handle (their pages are already faulted in). */
#define SPARE_JOBS 9
/*
 * Adopted jobs a handle may have ahead of its worker, in bytes (within
 * inflight): one being written, one waiting.  The worker then reads a
 * block the request thread has just filled, still in cache; with the full
 * 8 MiB ahead it read it back from memory: 1 MiB writes on ext4, 5 runs
 * each, daemon CPU 0.28 s/GiB against 0.33, 0.84 s against 0.89 s per
 * 2 GiB, and half the peak RSS.
 */
#define ADOPT_AHEAD (2 * (((size_t)1 << 20) + PAGE))

struct wjob {
	struct wjob *next;
	off_t off;
	size_t len;
	struct creds_id id;
	char *data;	   /* mem, or in rb */
	struct reqbuf *rb; /* the request's own block, adopted; or NULL */
	char mem[];	   /* JOB_CAP bytes in a copy job */
};

struct wp_inode {
	struct wp_inode *next; /* hash chain; reg_lock */
	struct dcfs_inode *inode;
	unsigned int refs;    /* reg_lock */
	pthread_mutex_t lock; /* handles */
	struct wpipe *handles;
	_Atomic uint64_t err_seq; /* bumped by every deferred error */
	_Atomic int err;	  /* the last one, -errno */
};

struct wpipe {
	struct dcfs_file *f;
	struct wp_inode *wi;
	struct wpipe *next; /* wi->lock */
	/* the fields below: f->lock */
	uint64_t err_seen;
	struct wjob *bufjob; /* the buffer, a job's memory: see submit_buffer */
	off_t boff;	     /* buffered file range [boff, boff + blen) */
	size_t blen;
	struct creds_id id;
	uint64_t inflight_limit, mount_limit;
	uint64_t expire_ms;   /* write_expire of the handle's open */
	_Atomic uint64_t due; /* when the buffer must be written; 0: empty */
	/* io_lock: the backing-write state, also f->stream->dc_lo/dc_hi */
	pthread_mutex_t io_lock;
	uint64_t wb_limit;
	off_t wb_front, wb_waited; /* bounded writeback */
	off_t rag_lo, rag_hi;	   /* partial pages written uncached */
	/* qlock: the job queue of the worker */
	pthread_mutex_t qlock;
	pthread_cond_t qcv; /* a job was queued, or one is done */
	struct wjob *qhead, *qtail, *spare;
	unsigned int nspare;
	size_t inflight; /* bytes in queued or running jobs */
	off_t q_end;	 /* where the last queued job ends (appends) */
	bool worker, stop;
	pthread_t thread;
};

/* The pipe's own state, for all handles of the mount. */
static struct {
	pthread_mutex_t reg_lock;
	struct wp_inode *buckets[NBUCKETS]; /* reg_lock */
	_Atomic long buffered_handles;	    /* handles with blen > 0 */
	_Atomic uint64_t buffered_bytes;
	_Atomic uint64_t buf_total;	 /* allocated buffers */
	_Atomic uint64_t inflight_total; /* bytes in jobs, all handles */
	/* Backing writes of the pipe done, all handles: see wpipe_settle(). */
	_Atomic uint64_t landings;
	/* The flusher of write_expire (the end of this file). */
	struct {
		pthread_once_t once;
		pthread_mutex_t lock;
		pthread_cond_t cv;
		bool kicked;	       /* a buffer became due sooner than planned */
		_Atomic uint64_t next; /* when the flusher wakes; 0 while it scans */
	} expiry;
} pipes = {
	.reg_lock = PTHREAD_MUTEX_INITIALIZER,
	.expiry = {
		.once = PTHREAD_ONCE_INIT,
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.next = UINT64_MAX,
	},
};

/* The coalescing buffer's memory, NULL before buf_alloc(). */
static char *buf_mem(const struct wpipe *wp)
{
	return wp->bufjob ? wp->bufjob->mem : NULL;
}

static off_t page_down(off_t x)
{
	return x & ~(off_t)(PAGE - 1);
}

static off_t page_up(off_t x)
{
	return (x + PAGE - 1) & ~(off_t)(PAGE - 1);
}

static size_t bucket_of(const struct dcfs_inode *inode)
{
	return ((uintptr_t)inode >> 6) % NBUCKETS;
}

/* Finds inode's entry and takes a reference; NULL if none (and !create). */
static struct wp_inode *wi_get(struct dcfs_inode *inode, bool create)
{
	struct wp_inode **pp, *wi;

	pthread_mutex_lock(&pipes.reg_lock);
	for (pp = &pipes.buckets[bucket_of(inode)]; (wi = *pp); pp = &wi->next)
		if (wi->inode == inode)
			break;
	if (!wi && create) {
		wi = calloc(1, sizeof(*wi));
		if (wi) {
			wi->inode = inode;
			pthread_mutex_init(&wi->lock, NULL);
			*pp = wi;
		}
	}
	if (wi)
		wi->refs++;
	pthread_mutex_unlock(&pipes.reg_lock);
	return wi;
}

/* Drops a reference (reg_lock held); the last one frees the entry. */
static void wi_put_locked(struct wp_inode *wi)
{
	struct wp_inode **pp;

	if (--wi->refs)
		return;
	for (pp = &pipes.buckets[bucket_of(wi->inode)]; *pp != wi; pp = &(*pp)->next)
		;
	*pp = wi->next;
	pthread_mutex_destroy(&wi->lock);
	free(wi);
}

static void wi_put(struct wp_inode *wi)
{
	pthread_mutex_lock(&pipes.reg_lock);
	wi_put_locked(wi);
	pthread_mutex_unlock(&pipes.reg_lock);
}

int wpipe_open(struct dcfs_file *f, const struct wpipe_limits *lim)
{
	struct wpipe *wp = calloc(1, sizeof(*wp));

	if (!wp)
		return -ENOMEM;
	wp->wi = wi_get(f->inode, true);
	if (!wp->wi) {
		free(wp);
		return -ENOMEM;
	}
	wp->f = f;
	wp->wb_limit = lim->writeback;
	wp->inflight_limit = lim->inflight;
	wp->mount_limit = lim->inflight_mount;
	wp->expire_ms = lim->expire_ms;
	pthread_mutex_init(&wp->io_lock, NULL);
	pthread_mutex_init(&wp->qlock, NULL);
	pthread_cond_init(&wp->qcv, NULL);
	pthread_mutex_lock(&wp->wi->lock);
	/* Errors of writes before this open are not this handle's. */
	wp->err_seen = atomic_load(&wp->wi->err_seq);
	wp->next = wp->wi->handles;
	wp->wi->handles = wp;
	pthread_mutex_unlock(&wp->wi->lock);
	f->wp = wp;
	return 0;
}

/* Consumes the handle's unreported deferred error (f->lock): 0 or -errno. */
static int take_error(struct wpipe *wp)
{
	uint64_t seq = atomic_load(&wp->wi->err_seq);
	int err;

	if (seq == wp->err_seen)
		return 0;
	wp->err_seen = seq;
	err = atomic_load(&wp->wi->err);
	stats_add(wp->f->policy, ST_DEFERRED_REPORTED, 1);
	log_debug("ino %llu: deferred %s reported to a %s handle\n",
		  (unsigned long long)wp->f->inode->ino, strerror(-err), wp->f->io->name);
	return err;
}

/*
 * Before a write of any strategy: the handle's unreported deferred error,
 * if any, is the answer to this write (the data is not written).
 */
int wpipe_check(struct dcfs_file *f)
{
	int err;

	if (!f->wp)
		return 0;
	pthread_mutex_lock(&f->lock);
	err = take_error(f->wp);
	pthread_mutex_unlock(&f->lock);
	return err;
}

/*
 * The write of len acknowledged bytes at off failed with err (-errno): a
 * deferred error of the inode, for every handle open now.
 */
static void record_error(struct wpipe *wp, int err, off_t off, size_t len)
{
	atomic_store(&wp->wi->err, err);
	atomic_fetch_add(&wp->wi->err_seq, 1);
	stats_add(wp->f->policy, ST_DEFERRED_ERRORS, 1);
	log_err("ino %llu: write of %zu acknowledged bytes at %lld failed: %s; "
		"reported to the next write, flush or fsync of every handle\n",
		(unsigned long long)wp->f->inode->ino, len, (long long)off, strerror(-err));
}

/*
 * As record_error(), for a failure this handle reports itself, now: the
 * other handles get it later, this one not twice.
 */
static void record_own_error(struct wpipe *wp, int err, off_t off, size_t len)
{
	record_error(wp, err, off, len);
	wp->err_seen = atomic_load(&wp->wi->err_seq);
}

/*
 * Keeps at most wb_limit bytes of the stream dirty or under writeback:
 * what lies further behind its front is waited for.  RWF_DONTCACHE starts
 * writeback at once but does not wait, so a writer faster than the disk
 * would otherwise fill memory with pages under writeback, and that is what
 * evicts everybody else's cache under a memory cgroup limit.
 */
static void throttle(struct dcfs_file *f, off_t off, off_t end)
{
	struct wpipe *wp = f->wp;
	off_t lim = (off_t)wp->wb_limit, target;

	if (!lim)
		return;
	if (end + lim < wp->wb_front || off > wp->wb_front + lim) {
		/* A new stream: nothing behind it is ours to wait for. */
		wp->wb_front = end;
		wp->wb_waited = off > lim ? page_down(off - lim) : 0;
		return;
	}
	if (end > wp->wb_front)
		wp->wb_front = end;
	target = page_down(wp->wb_front - lim);
	/* In steps of a quarter of the bound: one syscall per few MiB. */
	if (target < wp->wb_waited + lim / 4)
		return;
	sync_file_range(f->fd, wp->wb_waited, target - wp->wb_waited,
			SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				SYNC_FILE_RANGE_WAIT_AFTER);
	stats_add(f->policy, ST_WRITEBACK_WAITS, 1);
	wp->wb_waited = target;
	/* Partial pages behind the front are written back: drop them now. */
	if (wp->rag_hi > wp->rag_lo && wp->rag_hi <= target) {
		fallback_drop(f, wp->rag_lo, wp->rag_hi);
		wp->rag_lo = wp->rag_hi = 0;
	}
}

static void note_ragged(struct wpipe *wp, off_t lo, off_t hi)
{
	if (wp->rag_hi == wp->rag_lo || lo < wp->rag_lo)
		wp->rag_lo = lo;
	if (hi > wp->rag_hi)
		wp->rag_hi = hi;
}

/* The handle wrote [off, end) uncached: what to drop and wait for later. */
static void note_uncached(struct dcfs_file *f, off_t off, off_t end)
{
	/* Only streams write uncached (io_stream_set_uncached()). */
	if (!f->stream)
		return;
	if (f->stream->dc_hi == f->stream->dc_lo || off < f->stream->dc_lo)
		f->stream->dc_lo = off;
	if (end > f->stream->dc_hi)
		f->stream->dc_hi = end;
	if (!f->wp)
		return;
	if (off & (PAGE - 1))
		note_ragged(f->wp, page_down(off), page_down(off) + PAGE);
	if (end & (PAGE - 1))
		note_ragged(f->wp, page_down(end), page_up(end));
	throttle(f, off, end);
}

/*
 * One backing write of the handle (f->lock held): uncached where the
 * backing filesystem can, else through the fallback window.  Returns the
 * bytes written; when that is less than asked, *err says why (-errno),
 * else it is 0.
 */
static size_t backing_write_locked(struct dcfs_file *f, struct iovec *iov, int cnt, off_t off,
				   int *err)
{
	size_t len = 0, done = 0;
	ssize_t n = 0;

	*err = 0;
	for (int i = 0; i < cnt; i++)
		len += iov[i].iov_len;
	while (done < len) {
		n = probe_pwritev(f->probe, f->fd, iov, cnt, off + (off_t)done);
		if (n == -EOPNOTSUPP)
			break;
		if (n <= 0) {
			*err = n ? (int)n : -EIO;
			break;
		}
		stats_add(f->policy, ST_WRITE_DONTCACHE, (uint64_t)n);
		stats_add(f->policy, ST_BACKING_WRITES, 1);
		done += (size_t)n;
		/* Short write: go on with what is left. */
		while (cnt && (size_t)n >= iov[0].iov_len) {
			n -= (ssize_t)iov[0].iov_len;
			iov++;
			cnt--;
		}
		if (cnt) {
			iov[0].iov_base = (char *)iov[0].iov_base + n;
			iov[0].iov_len -= (size_t)n;
		}
	}
	if (done)
		note_uncached(f, off, off + (off_t)done);
	if (n != -EOPNOTSUPP)
		return done;
	/* No RWF_DONTCACHE here: the fallback window, piece by piece. */
	for (int i = 0; i < cnt; i++) {
		size_t piece = 0;

		while (piece < iov[i].iov_len) {
			n = fallback_write(f, (char *)iov[i].iov_base + piece,
					   iov[i].iov_len - piece, off + (off_t)done);
			if (n <= 0) {
				*err = n ? (int)n : -EIO;
				return done;
			}
			stats_add(f->policy, ST_WRITE_FALLBACK, (uint64_t)n);
			stats_add(f->policy, ST_BACKING_WRITES, 1);
			piece += (size_t)n;
			done += (size_t)n;
		}
	}
	return done;
}

static size_t backing_write(struct dcfs_file *f, struct iovec *iov, int cnt, off_t off, int *err)
{
	size_t n;

	if (f->wp)
		pthread_mutex_lock(&f->wp->io_lock);
	n = backing_write_locked(f, iov, cnt, off, err);
	if (f->wp)
		pthread_mutex_unlock(&f->wp->io_lock);
	/* Before the data stops counting as buffered or in flight. */
	atomic_fetch_add(&pipes.landings, 1);
	/*
	 * Acknowledged writes bumped the generation already; landing bumps it
	 * again, so a read-ahead window read before this is never served
	 * after it (readahead.c), and stamps what the file looks like now,
	 * so that a change from outside after it is seen as one.
	 */
	stamp_landed(f->inode, f->fd);
	return n;
}

/* --- the pipeline ------------------------------------------------------ */

static void *worker_main(void *arg)
{
	struct wpipe *wp = arg;
	struct creds_saved saved;
	struct creds_id in_force;
	bool switched = false;
	struct wjob *job;
	struct iovec iov;
	int err;

	pthread_mutex_lock(&wp->qlock);
	for (;;) {
		while (!wp->qhead && !wp->stop)
			pthread_cond_wait(&wp->qcv, &wp->qlock);
		job = wp->qhead;
		if (!job)
			break;
		/* The job stays queued (and counted) until it is written. */
		pthread_mutex_unlock(&wp->qlock);
		iov = (struct iovec){ job->data, job->len };
		/*
		 * The worker does nothing but these writes, so the writer's
		 * identity stays in force from one job to the next: switching
		 * costs up to ten syscalls, per MiB at 1 MiB writes.
		 */
		if (!switched || job->id.uid != in_force.uid || job->id.gid != in_force.gid) {
			if (switched)
				creds_io_restore(&saved);
			creds_io_switch(&job->id, &saved);
			in_force = job->id;
			switched = true;
		}
		stats_add(wp->f->policy, ST_BACKGROUND_WRITES, 1);
		if (backing_write(wp->f, &iov, 1, job->off, &err) != job->len)
			record_error(wp, err ? err : -EIO, job->off, job->len);
		reqbuf_release(job->rb);
		pthread_mutex_lock(&wp->qlock);
		wp->qhead = job->next;
		if (!wp->qhead)
			wp->qtail = NULL;
		wp->inflight -= job->len;
		atomic_fetch_sub(&pipes.inflight_total, job->len);
		stats_add(wp->f->policy, ST_INFLIGHT, -(uint64_t)job->len);
		if (!job->rb && wp->nspare < SPARE_JOBS) {
			job->next = wp->spare;
			wp->spare = job;
			wp->nspare++;
		} else {
			free(job);
		}
		pthread_cond_broadcast(&wp->qcv);
	}
	pthread_mutex_unlock(&wp->qlock);
	if (switched)
		creds_io_restore(&saved);
	return NULL;
}

/* Waits until every job of the handle is written (f->lock held). */
static void drain(struct wpipe *wp)
{
	pthread_mutex_lock(&wp->qlock);
	while (wp->inflight)
		pthread_cond_wait(&wp->qcv, &wp->qlock);
	pthread_mutex_unlock(&wp->qlock);
}

static bool space_is_low(struct dcfs_file *f);

/* Also only with ample space: a background ENOSPC would come late. */
static bool may_pipeline(struct dcfs_file *f, size_t len)
{
	return f->wp->inflight_limit && len <= JOB_CAP && atomic_load(&f->probe->wr) == PROBE_YES &&
	       !space_is_low(f);
}

/*
 * A job is a copy of what it writes, or the request's own memory.  Data
 * mostly from the buffer (small writers: the run of 4 KiB or 64 KiB
 * requests) was copied once already and the worker overlaps the backing
 * write with the next requests.  Data mostly from the request itself
 * (1 MiB writes) is not copied again: the job adopts the block the request
 * was read into (reqbuf.c, adopt_write()).  Copying it instead cost more
 * than the overlap won on the 2-CPU machine this was measured on (1 MiB
 * writes 0.76x native RWF_DONTCACHE queued with a copy against 1.17x
 * written directly on ext4, 0.76x against 0.83x on xfs); where the block
 * cannot be adopted such data is written at once from the request.
 * Except on an io_uring thread (whose entry can never be adopted): it
 * runs on the writer's own CPU, and queueing a copy for the worker on the
 * other one beat writing from the entry on ext4 (1 MiB writes 0.88x ->
 * 1.04-1.20x native over 5-7 runs; xfs 1.12x -> 1.02-1.06x), for more
 * daemon CPU (ext4 0.32 -> 0.46, xfs 0.17 -> 0.28 s/GiB).
 */
static bool worth_queueing(size_t from_buf, size_t from_req)
{
	return from_buf >= from_req || uring_thread();
}

/*
 * Waits while the handle has limit bytes or the mount its bound in flight
 * and makes sure the worker runs (qlock held): 0, or -EAGAIN without a
 * worker.  A handle with nothing in flight may always queue one job, so
 * the mount bound cannot starve it.
 */
static int reserve(struct wpipe *wp, size_t len, uint64_t limit)
{
	bool waited = false;

	while (wp->inflight && (wp->inflight + len > limit ||
				atomic_load(&pipes.inflight_total) + len > wp->mount_limit)) {
		if (!waited)
			stats_add(wp->f->policy, ST_QUEUE_WAITS, 1);
		waited = true;
		pthread_cond_wait(&wp->qcv, &wp->qlock);
	}
	if (!wp->worker) {
		sigset_t all, old;
		int rc;

		/* Signals are for libfuse's threads, not for the writer. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = pthread_create(&wp->thread, NULL, worker_main, wp);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc != 0)
			return -EAGAIN;
		wp->worker = true;
	}
	return 0;
}

/* Hands a filled job to the worker; its bytes count in flight from here. */
static void enqueue(struct wpipe *wp, struct wjob *job, off_t off, size_t len)
{
	job->next = NULL;
	job->off = off;
	job->len = len;
	job->id = wp->id;
	pthread_mutex_lock(&wp->qlock);
	if (wp->qtail)
		wp->qtail->next = job;
	else
		wp->qhead = job;
	wp->qtail = job;
	wp->q_end = off + (off_t)len;
	wp->inflight += len;
	atomic_fetch_add(&pipes.inflight_total, len);
	stats_add(wp->f->policy, ST_INFLIGHT, len);
	pthread_cond_broadcast(&wp->qcv);
	pthread_mutex_unlock(&wp->qlock);
}

/*
 * A job's memory (JOB_CAP bytes): a spare one, its pages faulted in, else
 * a new one.  With reserve set, first waits for room for len bytes in
 * flight.  NULL when there is no room or no memory.
 */
static struct wjob *job_get(struct wpipe *wp, bool reserve_room, size_t len)
{
	struct wjob *job;

	pthread_mutex_lock(&wp->qlock);
	if (reserve_room && reserve(wp, len, wp->inflight_limit) < 0) {
		pthread_mutex_unlock(&wp->qlock);
		return NULL;
	}
	job = wp->spare;
	if (job) {
		wp->spare = job->next;
		wp->nspare--;
	}
	pthread_mutex_unlock(&wp->qlock);
	return job ? job : malloc(sizeof(*job) + JOB_CAP);
}

/*
 * Queues a copy of iov for the worker (f->lock held): 0, or -errno when it
 * could not (the caller then writes synchronously).
 */
static int submit(struct wpipe *wp, const struct iovec *iov, int cnt, off_t off, size_t len)
{
	struct wjob *job = job_get(wp, true, len);
	size_t at = 0;

	if (!job)
		return -EAGAIN;
	for (int i = 0; i < cnt; i++) {
		memcpy(job->mem + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	job->data = job->mem;
	job->rb = NULL;
	enqueue(wp, job, off, len);
	return 0;
}

/*
 * Queues the buffered run, with req appended, by giving the worker the
 * buffer itself (f->lock held): the buffer is a job's memory, so only req
 * is copied (a 64 KiB writer's data was copied into the buffer once
 * already; copying the whole run again into a job was a second 1 MiB
 * copy per MiB), and the handle continues in a fresh buffer, which gets
 * what the old one held past from_buf.  0, or -errno when it could not
 * (nothing changed; the caller then writes synchronously).
 */
static int submit_buffer(struct wpipe *wp, const struct iovec *req, size_t from_buf, size_t len)
{
	struct wjob *job = wp->bufjob, *fresh = job_get(wp, true, len);
	size_t keep = wp->blen - from_buf;

	if (!fresh)
		return -EAGAIN;
	/* Before req lands there. */
	if (keep)
		memcpy(fresh->mem, job->mem + from_buf, keep);
	if (req->iov_len)
		memcpy(job->mem + from_buf, req->iov_base, req->iov_len);
	job->data = job->mem;
	job->rb = NULL;
	wp->bufjob = fresh;
	enqueue(wp, job, wp->boff, len);
	return 0;
}

/* Queues len bytes at data, inside rb, for the worker, which then owns rb. */
static int submit_adopted(struct wpipe *wp, struct reqbuf *rb, char *data, off_t off, size_t len)
{
	struct wjob *job;
	int rc;

	pthread_mutex_lock(&wp->qlock);
	rc = reserve(wp, len, wp->inflight_limit < ADOPT_AHEAD ? wp->inflight_limit : ADOPT_AHEAD);
	pthread_mutex_unlock(&wp->qlock);
	if (rc < 0)
		return rc;
	job = malloc(sizeof(*job));
	if (!job)
		return -ENOMEM;
	job->data = data;
	job->rb = rb;
	enqueue(wp, job, off, len);
	return 0;
}

static void worker_stop(struct wpipe *wp)
{
	struct wjob *job;

	pthread_mutex_lock(&wp->qlock);
	wp->stop = true;
	pthread_cond_broadcast(&wp->qcv);
	pthread_mutex_unlock(&wp->qlock);
	if (wp->worker)
		pthread_join(wp->thread, NULL);
	while ((job = wp->spare)) {
		wp->spare = job->next;
		free(job);
	}
}

static void expiry_arm(struct wpipe *wp);

static void set_buffered(struct wpipe *wp, size_t blen)
{
	if (!wp->blen && blen) {
		atomic_fetch_add(&pipes.buffered_handles, 1);
		expiry_arm(wp);
	} else if (wp->blen && !blen) {
		atomic_fetch_sub(&pipes.buffered_handles, 1);
		atomic_store(&wp->due, 0);
	}
	atomic_fetch_add(&pipes.buffered_bytes, blen - wp->blen);
	stats_add(wp->f->policy, ST_BUFFERED, blen - wp->blen);
	wp->blen = blen;
}

/*
 * Writes the whole buffer (f->lock held).  A failure is recorded as a
 * deferred error and also returned; the data is gone either way.
 */
static int flush_buf(struct wpipe *wp)
{
	struct iovec iov = { buf_mem(wp), wp->blen };
	size_t len = wp->blen;
	int err;

	if (!len)
		return 0;
	drain(wp);
	if (backing_write(wp->f, &iov, 1, wp->boff, &err) == len)
		err = 0;
	set_buffered(wp, 0);
	if (err)
		record_error(wp, err, wp->boff, len);
	return err;
}

/*
 * As flush_buf, in the writer's own request: a failure is this request's
 * answer, and the handle does not get it again later.
 */
static int flush_own(struct wpipe *wp)
{
	int err = flush_buf(wp);

	if (err)
		wp->err_seen = atomic_load(&wp->wi->err_seq);
	return err;
}

/* As flush_buf, from a thread that is not the writer's request. */
static void flush_as_writer(struct wpipe *wp)
{
	struct creds_saved saved;

	if (!wp->blen)
		return;
	creds_io_switch(&wp->id, &saved);
	flush_buf(wp);
	creds_io_restore(&saved);
}

/* The buffer is a job (JOB_CAP bytes, BUF_CAP of them for buffering). */
static bool buf_alloc(struct wpipe *wp)
{
	struct wjob *job;

	if (wp->bufjob)
		return true;
	if (atomic_fetch_add(&pipes.buf_total, BUF_CAP) + BUF_CAP > BUF_GLOBAL_CAP)
		goto fail;
	job = job_get(wp, false, 0);
	if (job) {
		wp->bufjob = job;
		return true;
	}
fail:
	atomic_fetch_sub(&pipes.buf_total, BUF_CAP);
	return false;
}

/* Would acknowledging data without writing it risk a late ENOSPC? */
static bool space_is_low(struct dcfs_file *f)
{
	struct statfs sfs;

	if (fstatfs(f->fd, &sfs) < 0)
		return true;
	return (uint64_t)sfs.f_bavail * (uint64_t)sfs.f_bsize <
	       LOW_SPACE + atomic_load(&pipes.buffered_bytes) + atomic_load(&pipes.inflight_total);
}

/*
 * Nothing is held back while the kernel reaches the backing file for some
 * handle of the file (passthrough I/O or mappings): those reads never come
 * here to wait.
 */
static bool may_buffer(const struct dcfs_file *f)
{
	return f->wp && !(f->flags & (O_SYNC | O_DSYNC)) && !passthrough_backed(f->inode);
}

/*
 * Where an O_APPEND write of the handle lands (f->lock held): after its
 * own pending data, else at the backing file's end.  The data of other
 * handles was written before this request (wpipe_sync_others), so the
 * backing size is the file's end through the mount.
 */
static off_t append_pos(struct dcfs_file *f, off_t off)
{
	struct wpipe *wp = f->wp;
	struct stat st;
	off_t end = -1;

	if (wp->blen)
		return wp->boff + (off_t)wp->blen;
	pthread_mutex_lock(&wp->qlock);
	if (wp->inflight)
		end = wp->q_end;
	pthread_mutex_unlock(&wp->qlock);
	if (end >= 0)
		return end;
	return fstat(f->fd, &st) == 0 ? st.st_size : off;
}

/* Writes data at once, as a backing write of its own. */
static ssize_t write_through(struct dcfs_file *f, const void *data, size_t len, off_t off)
{
	struct iovec iov = { (void *)data, len };
	size_t n;
	int err;

	if (f->wp)
		drain(f->wp);
	n = backing_write(f, &iov, 1, off, &err);
	return n || !err ? (ssize_t)n : err;
}

/*
 * A write mostly from the request (1 MiB writes), written up to upto with
 * from_buf bytes of the buffered run in front: its data is already in the
 * block the request was read into (reqbuf.c), so the job takes that block
 * instead of a copy.  The buffered head of the run goes into the room in
 * front of the data and the tail beyond upto into the buffer, both before
 * the job is queued: from then on the block is the worker's.  Returns true
 * when the write was handled here (*res: its answer), false when nothing
 * was done and the caller goes on as before.
 */
static bool adopt_write(struct dcfs_file *f, const char *data, size_t len, off_t off, off_t upto,
			size_t from_buf, ssize_t *res)
{
	struct wpipe *wp = f->wp;
	size_t from_req = upto > off ? (size_t)(upto - off) : 0;
	size_t want = from_buf + from_req, tail;
	struct reqbuf *rb;
	struct iovec iov;
	off_t at = wp->boff;
	char *start;
	int err;

	if (!from_req || worth_queueing(from_buf, from_req) || from_buf != wp->blen ||
	    from_buf > reqbuf_room() || !may_pipeline(f, want))
		return false;
	tail = len - from_req;
	if (tail && !buf_alloc(wp))
		return false;
	rb = reqbuf_adopt(data, len);
	if (!rb)
		return false;
	start = reqbuf_data(rb) - from_buf;
	if (from_buf)
		memcpy(start, buf_mem(wp), from_buf);
	if (tail)
		memcpy(buf_mem(wp), reqbuf_data(rb) + from_req, tail);
	wp->boff = upto;
	/*
	 * The buffer's count drops only once its from_buf acknowledged bytes
	 * are counted in flight or written: in between, nothing_pending()
	 * would let another request's getattr or read skip the sync and
	 * answer from a backing file without them.
	 */
	if (submit_adopted(wp, rb, start, at, want) == 0) {
		set_buffered(wp, tail);
		stats_add(f->policy, ST_ADOPTED, 1);
		*res = (ssize_t)len;
		return true;
	}
	/* No worker or no memory for the job: written here, after its jobs. */
	drain(wp);
	iov = (struct iovec){ start, want };
	if (backing_write(f, &iov, 1, at, &err) == want)
		err = 0;
	else if (!err)
		err = -EIO;
	set_buffered(wp, tail);
	reqbuf_release(rb);
	*res = (ssize_t)len;
	if (err) {
		/* Acknowledged data was lost: other handles must know. */
		if (from_buf)
			record_own_error(wp, err, at, from_buf);
		set_buffered(wp, 0);
		*res = err;
	}
	return true;
}

/*
 * Before a write that does not continue the buffered run (another offset,
 * or another writer's identity), that run is written.  0, or -errno: the
 * failed run was this writer's own, so the error is reported here, to
 * this handle.  Another writer's error is deferred like any other.
 */
static int end_run(struct wpipe *wp, off_t off, struct creds_id id)
{
	bool same_writer = id.uid == wp->id.uid && id.gid == wp->id.gid;

	if (!wp->blen || (same_writer && off == wp->boff + (off_t)wp->blen))
		return 0;
	if (!same_writer) {
		flush_as_writer(wp);
		return 0;
	}
	return flush_own(wp);
}

/* A write that fits the buffer: acknowledged from it, if it may hold data. */
static bool coalesce(struct dcfs_file *f, const void *data, size_t len)
{
	struct wpipe *wp = f->wp;

	if ((!wp->blen && space_is_low(f)) || !buf_alloc(wp))
		return false;
	memcpy(buf_mem(wp) + wp->blen, data, len);
	set_buffered(wp, wp->blen + len);
	stats_add(f->policy, ST_COALESCED, 1);
	return true;
}

/* backing_write() of all want bytes: 0, or -errno (-EIO if short). */
static int backing_write_all(struct dcfs_file *f, struct iovec *iov, int cnt, off_t off,
			     size_t want)
{
	int err;

	if (backing_write(f, iov, cnt, off, &err) == want)
		return 0;
	return err ? err : -EIO;
}

/*
 * The run at wp->boff (from_buf bytes of the buffer in iov[0], the
 * request's part in iov[1]) goes to the worker, or is written here after
 * its jobs: 0 or -errno.  *handed: the worker took the buffer itself.
 */
static int send_run(struct dcfs_file *f, struct iovec iov[2], size_t from_buf, size_t want,
		    bool *handed)
{
	struct wpipe *wp = f->wp;
	int err = -EAGAIN;

	if (worth_queueing(from_buf, iov[1].iov_len) && may_pipeline(f, want))
		err = from_buf ? submit_buffer(wp, &iov[1], from_buf, want)
			       : submit(wp, iov + 1, 1, wp->boff, want);
	if (err == 0) {
		*handed = from_buf != 0;
		return 0;
	}
	drain(wp);
	return from_buf ? backing_write_all(f, iov, 2, wp->boff, want)
			: backing_write_all(f, iov + 1, 1, wp->boff, want);
}

/*
 * After the run up to upto was sent: what stays buffered is the buffer's
 * unwritten part, then the tail of data beyond upto.  len, or -errno.
 */
static ssize_t keep_rest(struct dcfs_file *f, const char *data, size_t len, off_t off, off_t upto,
			 size_t from_buf, bool handed)
{
	struct wpipe *wp = f->wp;
	size_t keep = wp->blen - from_buf;
	off_t tail_from = upto > off ? upto : off;
	size_t tail = (size_t)(off + (off_t)len - tail_from);
	ssize_t n;

	if (keep && !handed) /* else submit_buffer moved it */
		memmove(buf_mem(wp), buf_mem(wp) + from_buf, keep);
	wp->boff = upto;
	if (tail && !buf_alloc(wp)) {
		/* No memory to keep it (so nothing was kept): write it now. */
		set_buffered(wp, 0);
		n = write_through(f, data + (tail_from - off), tail, tail_from);
		return n == (ssize_t)tail ? (ssize_t)len : (n < 0 ? n : -EIO);
	}
	if (tail)
		memcpy(buf_mem(wp) + keep, data + (tail_from - off), tail);
	set_buffered(wp, keep + tail);
	return (ssize_t)len;
}

/*
 * Writes the buffered run together with data up to upto, and keeps what
 * lies beyond: len, or -errno.  Acknowledged data that could not be
 * written is an error for every handle of the file as well.
 */
static ssize_t write_run(struct dcfs_file *f, const char *data, size_t len, off_t off, off_t upto)
{
	struct wpipe *wp = f->wp;
	size_t from_buf = (off_t)wp->blen < upto - wp->boff ? wp->blen : (size_t)(upto - wp->boff);
	struct iovec iov[2] = {
		{ buf_mem(wp), from_buf },
		{ (void *)data, upto > off ? (size_t)(upto - off) : 0 },
	};
	bool handed = false;
	ssize_t n;
	int err;

	if (adopt_write(f, data, len, off, upto, from_buf, &n))
		return n;
	err = send_run(f, iov, from_buf, from_buf + iov[1].iov_len, &handed);
	if (!err)
		return keep_rest(f, data, len, off, upto, from_buf, handed);
	if (from_buf)
		record_own_error(wp, err, wp->boff, from_buf);
	set_buffered(wp, 0);
	return err;
}

/*
 * A write of the streaming class (f->lock held): acknowledged from the
 * buffer when it continues the buffered run and fits, else written up to
 * its last page boundary together with the buffer, the rest kept.
 */
ssize_t wpipe_write(struct dcfs_file *f, const void *data, size_t len, off_t off)
{
	struct wpipe *wp = f->wp;
	struct creds_id id = { 0, 0 };
	off_t end, upto;
	int err = wp ? take_error(wp) : 0;

	if (err)
		return err;
	if (!may_buffer(f))
		return write_through(f, data, len, off);
	if (f->flags & O_APPEND)
		off = append_pos(f, off);
	end = off + (off_t)len;
	if (dcfs.privileged)
		creds_io_capture(&id);
	err = end_run(wp, off, id);
	if (err)
		return err;
	/* Its failure must be its own answer: written now, after the run. */
	if (!admit_held(f, end)) {
		err = flush_own(wp);
		return err ? err : write_through(f, data, len, off);
	}
	if (!wp->blen) {
		wp->boff = off;
		wp->id = id;
	}
	if (wp->blen + len < BUF_CAP) {
		if (coalesce(f, data, len))
			return (ssize_t)len;
		if (!wp->blen)
			return write_through(f, data, len, off);
		upto = end;
	} else {
		/* Write up to the last page boundary, keep the rest. */
		upto = page_down(end);
		if (upto < end && space_is_low(f))
			upto = end;
	}
	return write_run(f, data, len, off, upto);
}

static bool nothing_pending(void)
{
	return !atomic_load(&pipes.buffered_handles) && !atomic_load(&pipes.inflight_total);
}

/* Writes the buffers of every handle of wi except skip's. */
static bool sync_wi(struct wp_inode *wi, struct dcfs_file *skip)
{
	bool any = false;

	pthread_mutex_lock(&wi->lock);
	for (struct wpipe *wp = wi->handles; wp; wp = wp->next) {
		if (wp->f == skip)
			continue;
		pthread_mutex_lock(&wp->f->lock);
		if (wp->blen) {
			flush_as_writer(wp);
			any = true;
		}
		pthread_mutex_lock(&wp->qlock);
		any = any || wp->inflight;
		pthread_mutex_unlock(&wp->qlock);
		drain(wp);
		pthread_mutex_unlock(&wp->f->lock);
	}
	pthread_mutex_unlock(&wi->lock);
	return any;
}

static bool sync_except(struct dcfs_inode *inode, struct dcfs_file *skip)
{
	struct wp_inode *wi;
	bool any;

	if (nothing_pending())
		return false;
	wi = wi_get(inode, false);
	if (!wi)
		return false;
	any = sync_wi(wi, skip);
	wi_put(wi);
	return any;
}

bool wpipe_sync_inode(struct dcfs_inode *inode)
{
	return sync_except(inode, NULL);
}

/* A mark for wpipe_settle(), taken before attributes are read. */
uint64_t wpipe_landings(void)
{
	return atomic_load(&pipes.landings);
}

/*
 * Attributes read after since = wpipe_landings() are about to go into a
 * reply: lands the inode's acknowledged writes, and says whether the
 * attributes must be read again.  They must if anything was landed here,
 * and also if any landing finished since the mark: another request may
 * have been landing the inode's data while they were read (the stat saw
 * the file half written), and then left nothing for this sync to find.
 * The kernel applies an entry's size whenever the request was sent after
 * the write's reply, and the old size then stands for the attribute
 * timeout (issue 38 #1).  Landings of other inodes only cost a stat.
 */
bool wpipe_settle(struct dcfs_inode *inode, uint64_t since)
{
	bool any = wpipe_sync_inode(inode);

	return any || atomic_load(&pipes.landings) != since;
}

void wpipe_sync_others(struct dcfs_file *f)
{
	sync_except(f->inode, f);
}

void wpipe_sync_all(void)
{
	struct wp_inode *wi, *next;

	if (nothing_pending())
		return;
	/*
	 * Written outside reg_lock (wi->lock comes first); the reference
	 * keeps the entry, and so its place in the chain, while unlocked.
	 */
	pthread_mutex_lock(&pipes.reg_lock);
	for (size_t b = 0; b < NBUCKETS; b++) {
		for (wi = pipes.buckets[b]; wi; wi = next) {
			wi->refs++;
			pthread_mutex_unlock(&pipes.reg_lock);
			sync_wi(wi, NULL);
			pthread_mutex_lock(&pipes.reg_lock);
			next = wi->next;
			wi_put_locked(wi);
		}
	}
	pthread_mutex_unlock(&pipes.reg_lock);
}

/*
 * flush (close) and fsync: everything written through the mount reaches
 * the backing file, then the handle's unreported error, if any.
 */
int wpipe_flush(struct dcfs_file *f)
{
	struct wpipe *wp = f->wp;
	int err;

	wpipe_sync_inode(f->inode);
	if (!wp)
		return 0;
	pthread_mutex_lock(&f->lock);
	err = take_error(wp);
	pthread_mutex_unlock(&f->lock);
	return err;
}

/* After a successful fsync the partial pages are clean: drop them now. */
void wpipe_synced(struct dcfs_file *f)
{
	struct wpipe *wp = f->wp;

	if (!wp)
		return;
	pthread_mutex_lock(&wp->io_lock);
	if (wp->rag_hi > wp->rag_lo) {
		fallback_drop(f, wp->rag_lo, wp->rag_hi);
		wp->rag_lo = wp->rag_hi = 0;
	}
	pthread_mutex_unlock(&wp->io_lock);
}

/*
 * At release, first: what the handle still holds goes to the backing file
 * (an error can only be logged now).  Before the handle stops counting in
 * passthrough.c: once it does, a new open may give the kernel the backing
 * file, which must then hold everything acknowledged.
 */
void wpipe_land(struct dcfs_file *f)
{
	if (!f->wp)
		return;
	pthread_mutex_lock(&f->lock);
	flush_as_writer(f->wp);
	drain(f->wp);
	pthread_mutex_unlock(&f->lock);
}

/* At release, last: the pipe goes (wpipe_land() left nothing in it). */
void wpipe_close(struct dcfs_file *f)
{
	struct wpipe *wp = f->wp, **pp;

	if (!wp)
		return;
	wpipe_land(f);
	worker_stop(wp);
	pthread_mutex_lock(&wp->wi->lock);
	for (pp = &wp->wi->handles; *pp != wp; pp = &(*pp)->next)
		;
	*pp = wp->next;
	pthread_mutex_unlock(&wp->wi->lock);
	wi_put(wp->wi);
	if (wp->bufjob) {
		free(wp->bufjob);
		atomic_fetch_sub(&pipes.buf_total, BUF_CAP);
	}
	pthread_cond_destroy(&wp->qcv);
	pthread_mutex_destroy(&wp->qlock);
	pthread_mutex_destroy(&wp->io_lock);
	free(wp);
	f->wp = NULL;
}

/* --- expiry: the longest wait of acknowledged data (write_expire) ------ */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Writes the due buffers of wi's handles; returns when the next is due. */
static uint64_t write_due_wi(struct wp_inode *wi, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	pthread_mutex_lock(&wi->lock);
	for (struct wpipe *wp = wi->handles; wp; wp = wp->next) {
		uint64_t due = atomic_load(&wp->due);

		if (due && due > now && due < next)
			next = due;
		if (!due || due > now)
			continue;
		pthread_mutex_lock(&wp->f->lock);
		if (atomic_load(&wp->due) && atomic_load(&wp->due) <= now)
			flush_as_writer(wp); /* an error is the writer's, deferred */
		pthread_mutex_unlock(&wp->f->lock);
	}
	pthread_mutex_unlock(&wi->lock);
	return next;
}

/* One pass over every inode with handles, as wpipe_sync_all() walks them. */
static uint64_t write_due(void)
{
	uint64_t now = now_ms(), next = UINT64_MAX, n;
	struct wp_inode *wi, *following;

	if (!atomic_load(&pipes.buffered_handles))
		return next;
	pthread_mutex_lock(&pipes.reg_lock);
	for (size_t b = 0; b < NBUCKETS; b++) {
		for (wi = pipes.buckets[b]; wi; wi = following) {
			wi->refs++;
			pthread_mutex_unlock(&pipes.reg_lock);
			n = write_due_wi(wi, now);
			next = n < next ? n : next;
			pthread_mutex_lock(&pipes.reg_lock);
			following = wi->next;
			wi_put_locked(wi);
		}
	}
	pthread_mutex_unlock(&pipes.reg_lock);
	return next;
}

static void *flusher_main(void *arg)
{
	uint64_t next;
	struct timespec ts;

	(void)arg;
	for (;;) {
		atomic_store(&pipes.expiry.next, 0); /* every arming kicks meanwhile */
		pthread_mutex_lock(&pipes.expiry.lock);
		pipes.expiry.kicked = false;
		pthread_mutex_unlock(&pipes.expiry.lock);
		next = write_due();
		pthread_mutex_lock(&pipes.expiry.lock);
		atomic_store(&pipes.expiry.next, next);
		if (!pipes.expiry.kicked && next == UINT64_MAX) {
			pthread_cond_wait(&pipes.expiry.cv, &pipes.expiry.lock);
		} else if (!pipes.expiry.kicked) {
			/* The condition variable's clock is CLOCK_MONOTONIC too. */
			ts.tv_sec = (time_t)(next / 1000);
			ts.tv_nsec = (long)(next % 1000) * 1000000;
			pthread_cond_timedwait(&pipes.expiry.cv, &pipes.expiry.lock, &ts);
		}
		pthread_mutex_unlock(&pipes.expiry.lock);
	}
	return NULL;
}

static void expiry_start(void)
{
	pthread_condattr_t attr;
	sigset_t all, old;
	pthread_t t;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&pipes.expiry.cv, &attr);
	pthread_condattr_destroy(&attr);
	/* Signals are for libfuse's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, NULL, flusher_main, NULL) == 0)
		pthread_detach(t);
	else
		log_err("write_expire: no flusher thread: buffers wait for a sync point\n");
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The buffer of wp has just received its first bytes (f->lock held). */
static void expiry_arm(struct wpipe *wp)
{
	uint64_t due;

	if (!wp->expire_ms)
		return;
	due = now_ms() + wp->expire_ms;
	atomic_store(&wp->due, due);
	pthread_once(&pipes.expiry.once, expiry_start);
	/* Sooner than the flusher's plan, or while it scans: tell it. */
	if (due >= atomic_load(&pipes.expiry.next))
		return;
	pthread_mutex_lock(&pipes.expiry.lock);
	pipes.expiry.kicked = true;
	pthread_cond_signal(&pipes.expiry.cv);
	pthread_mutex_unlock(&pipes.expiry.lock);
}
