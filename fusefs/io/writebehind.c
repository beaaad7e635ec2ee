// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Write-behind for write streams the kernel serves itself.
 *
 * On kernels with FUSE passthrough but without uncached passthrough (every
 * stock kernel from 6.9 on), a write stream is opened as a passthrough
 * file (passthrough_writes, the default): the application's write(2)
 * goes straight to the backing file's page cache, with no request to the
 * daemon.  What dcfs still owes is that the stream does not fill memory,
 * and RWF_DONTCACHE cannot be asked for there.  So a thread per such
 * stream follows the file from the daemon's own fd, every 1 ms while it
 * moves, up to every 50 ms at rest, and at once at the first write after a
 * rest (writewatch.c):
 *  - the front: the file's size when the stream extends the file (the
 *    page below it is dirty); else where its dirty pages end (cachestat,
 *    bisected in STEP_BYTES);
 *  - writeback of everything up to LAG_BYTES below the front is started,
 *    not by the look thread but by a second thread of the stream, the
 *    kicker (sync_file_range(SYNC_FILE_RANGE_WRITE)): starting writeback
 *    blocks at times (block allocation, a busy disk: 6-17 ms measured on
 *    xfs and ext4), and a look thread blocked there let the writer run on
 *    unpaced at several GB/s (peaks of 57-127 MiB on xfs beside another
 *    writer of the disk, 24-27 MiB with the kicker: tests/bench/README.md);
 *  - what the kicker has started is dropped once written back
 *    (POSIX_FADV_DONTNEED, which leaves dirty, locked, mapped pages and
 *    pages under writeback alone, and, having nothing dirty in that range,
 *    starts no writeback itself);
 *  - the pace: when more than PACE_BYTES of the file are resident, the
 *    writer is held while writeback of everything up to PACE_KEEP below
 *    the front is started and waited for, and that is dropped;
 *  - a writer at rest (the size did not move since the last look) gets
 *    its dirty tail written back (by the kicker) and, once clean, dropped.
 *  The daemon never sees the
 *    writes, so it cannot make the writer wait the way the engine does
 *    (write_pipe.c throttle()); instead it holds the lock a buffered write
 *    needs.  An O_DIRECT read takes the backing inode's i_rwsem shared and
 *    writes back and waits for its range before it reads (ext4 and xfs,
 *    iomap_dio_rw()), while a buffered write takes i_rwsem exclusive
 *    (ext4_buffered_write_iter(), xfs_file_buffered_write()).  So one
 *    O_DIRECT read of the range into a mapping without access rights
 *    waits for exactly that writeback while the writer waits for it, and
 *    then fails with EFAULT without reading anything.  Where that does not
 *    hold (a filesystem that falls back to buffered reads for O_DIRECT)
 *    the stream is only not paced: nothing is read, nothing is lost.
 * Why 24 and 16 MiB: what the pace leaves in flight is what keeps the disk
 * busy while the writer waits, and a 16 / 4 MiB pace left 12-15 writes
 * in the loop device's queue where native RWF_DONTCACHE keeps 37-48.  In
 * two interleaved rounds (64 KiB and 1 MiB on ext4 and xfs, against
 * native RWF_DONTCACHE) 16 / 4 MiB ran at 0.76-1.35x, 24 / 16 at
 * 0.96-1.31x, with peaks of 29-33 MiB instead of 20-28
 * (tests/bench/README.md).
 * The stream then holds at most about PACE_BYTES plus what the writer
 * adds during one look (measured peaks: tests/bench/README.md; a look
 * that a busy CPU delays lets the writer run on), and nothing after the
 * close: at FLUSH (close(2) waits for it) and at release the rest is
 * written back and dropped.
 *
 * Without the pace a writer faster than its disk fills the page cache up
 * to the kernel's dirty limits (vm.dirty_ratio: gigabytes here), 500-1700
 * MiB in a 2 GiB write on this machine: the window is the pace.
 *
 * Pages of others survive: a file with cached pages at open is not served
 * this way (io_select.c), and nothing is dropped while the inode has a
 * handle that is not a stream dropped behind (passthrough_shared()).
 * Writeback errors reach the writer as natively: the kernel records them
 * in the backing file's mapping (errseq), FUSE sends fsync to the daemon,
 * whose fsync() of this handle's own fd reports them; the pace, the drops
 * and the wait at FLUSH (on the O_DIRECT fd, a file of its own) never
 * consume them.  ENOSPC, EDQUOT and EFBIG are
 * the kernel's answer to the write itself.
 *
 * Kept to ext4 and xfs, where this was measured; btrfs keeps the engine:
 * sync_file_range blocked for seconds there and the window was not held
 * (561 MiB in a 2 GiB write of 4 KiB requests).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"
#include "dcfs_sys.h"

#define PAGE_BYTES 4096
#define STEP_BYTES (1LL << 20)	/* resolution of a dirty front */
#define LAG_BYTES (2LL << 20)	/* writeback starts this far behind the front */
#define PACE_BYTES (24LL << 20) /* resident above this: the writer waits */
#define PACE_KEEP (16LL << 20)	/* ... until all but this much is written */
/* The writer's memory cgroup has less room than this: the engine writes. */
#define MEMCG_ROOM_MIN (64LL << 20)
#define WB_NICE (-10)
#define WB_RT_PRIO 1 /* SCHED_FIFO, the lowest */
#define POLL_MIN_US 1000
#define POLL_MAX_US 10000
#define POLL_IDLE_US 50000
#define IDLE_POLLS 100
/* The no-access mapping the pace reads into, reused by every iovec. */
#define NONE_BYTES ((size_t)8 << 20)
#define PACE_IOV 64 /* so one read covers up to 512 MiB */

struct wb_state {
	struct dcfs_file *file;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	bool running, served;	  /* the thread; the kernel writes the stream */
	bool quiet;		  /* writebehind_quiesce() ran */
	bool woken;		  /* written since the watch was armed */
	struct write_watch watch; /* wakes a resting look (writewatch.c) */
	pthread_t kicker;	  /* starts writeback (kicker_main()) */
	pthread_cond_t kick_cond;
	bool kicking;		    /* the kicker runs */
	off_t kick_to, kicked;	    /* wanted started below; started below */
	int dio_fd;		    /* O_DIRECT reader of the backing file; -1: no pace */
	off_t last_size;	    /* at the last look */
	off_t counted;		    /* written_kernel counted up to this size */
	struct dcfs_cachestat seen; /* the file's pages then */
	uint64_t peak;		    /* resident pages, most seen */
};

static void *none_map; /* NONE_BYTES of PROT_NONE, made once */
static pthread_once_t none_once = PTHREAD_ONCE_INIT;
static _Atomic unsigned int streams; /* running now */

static void none_make(void)
{
	void *p = mmap(NULL, NONE_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		       0);

	none_map = p == MAP_FAILED ? NULL : p;
}

static off_t page_down(off_t x)
{
	return x & ~(off_t)(PAGE_BYTES - 1);
}

static int stat_range(int fd, off_t off, off_t len, struct dcfs_cachestat *cs)
{
	if (len < 0) {
		memset(cs, 0, sizeof(*cs));
		return 0;
	}
	return (int)dcfs_cachestat(fd, (uint64_t)off, (uint64_t)len, cs);
}

static uint64_t dirty_pages(int fd, off_t off, off_t len)
{
	struct dcfs_cachestat cs;

	if (stat_range(fd, off, len, &cs) < 0)
		return 0;
	return cs.nr_dirty + cs.nr_writeback;
}

/*
 * Where the stream writes: at the end of the file when the page below the
 * size is dirty (an appending writer), else where the dirty pages end.
 */
static off_t dirty_front(int fd, off_t size)
{
	off_t end;

	if (size > 0 && dirty_pages(fd, page_down(size - 1), PAGE_BYTES))
		return size;
	end = resident_end(fd, size, STEP_BYTES, true);
	return end < size ? end : size;
}

/*
 * Holds the writer until writeback of [lo, hi) is done: an O_DIRECT read
 * of the range into the no-access mapping (see the top comment).
 */
static void pace(struct wb_state *d, off_t lo, off_t hi)
{
	struct iovec iov[PACE_IOV];
	int n = 0;

	if (d->dio_fd < 0 || !none_map)
		return;
	lo = page_down(lo);
	hi = page_down(hi); /* O_DIRECT: whole blocks, or EINVAL */
	if (hi <= lo)
		return;
	if (hi - lo > (off_t)(NONE_BYTES * PACE_IOV))
		lo = hi - (off_t)(NONE_BYTES * PACE_IOV);
	for (off_t at = lo; at < hi && n < PACE_IOV; n++) {
		size_t len = hi - at > (off_t)NONE_BYTES ? NONE_BYTES : (size_t)(hi - at);

		iov[n].iov_base = none_map;
		iov[n].iov_len = len;
		at += (off_t)len;
	}
	if (preadv(d->dio_fd, iov, n, lo) >= 0 ||
	    (errno != EFAULT && errno != EIO && errno != EINTR && errno != EAGAIN)) {
		/* Not the lock-and-wait this relies on: stop pacing this stream. */
		log_info("write-behind: ino %llu: the writer cannot be paced (%s)\n",
			 (unsigned long long)d->file->inode->ino,
			 errno ? strerror(errno) : "the read returned data");
		close(d->dio_fd);
		d->dio_fd = -1;
		return;
	}
	stats_add(d->file->policy, ST_WRITE_BEHIND_PACED, 1);
}

/*
 * Drops what is written back of [0, end); end 0: of the whole file.  Not
 * counted here: a cachestat walks every resident page of its range, and
 * at 4 KiB pages extra walks per look were 7 % of the daemon's CPU.
 */
static void drop_below(struct wb_state *d, off_t end)
{
	if (end < 0 || passthrough_shared(d->file->inode))
		return;
	posix_fadvise(d->file->fd, 0, end, POSIX_FADV_DONTNEED);
}

/* Pages that went between two looks at the whole file (an estimate). */
static void count_dropped(struct wb_state *d, const struct dcfs_cachestat *before,
			  const struct dcfs_cachestat *after)
{
	if (before->nr_cache > after->nr_cache)
		stats_add(d->file->policy, ST_DROPPED_BEHIND,
			  (before->nr_cache - after->nr_cache) * PAGE_BYTES);
}

static void note_peak(struct wb_state *d, uint64_t pages)
{
	if (pages <= d->peak)
		return;
	d->peak = pages;
	stats_max(d->file->policy, ST_WRITE_BEHIND_PEAK, pages * PAGE_BYTES);
}

static bool same_pages(const struct dcfs_cachestat *a, const struct dcfs_cachestat *b)
{
	return a->nr_cache == b->nr_cache && a->nr_dirty == b->nr_dirty &&
	       a->nr_writeback == b->nr_writeback;
}

/*
 * What the kernel wrote, estimated by the file's growth (overwrites in
 * place are not seen), counted as it goes: dcfs stat shows a kernel-served
 * writer's progress, per class and per handle.
 */
static void count_growth(struct wb_state *d, off_t size)
{
	struct dcfs_file *f = d->file;

	if (size <= d->counted)
		return;
	stats_add(f->policy, ST_WRITE_KERNEL, (uint64_t)(size - d->counted));
	file_stats_bytes(f, false, (uint64_t)(size - d->counted));
	d->counted = size;
}

/*
 * The kicker: starts writeback of [kicked, kick_to) whenever the look
 * thread moves kick_to, at nice -10 rather than real-time: while it is
 * busy starting writeback it must not keep the look thread, which holds
 * the bound, off a CPU.  Late, it only costs speed: the pace waits for
 * what is not written yet.
 */
static void *kicker_main(void *arg)
{
	struct wb_state *d = arg;

	setpriority(PRIO_PROCESS, (id_t)gettid(), WB_NICE);
	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		off_t from = d->kicked, to = d->kick_to;

		if (to <= from) {
			pthread_cond_wait(&d->kick_cond, &d->lock);
			continue;
		}
		pthread_mutex_unlock(&d->lock);
		sync_file_range(d->file->fd, from, to - from, SYNC_FILE_RANGE_WRITE);
		pthread_mutex_lock(&d->lock);
		if (d->kicked == from) /* not reset by a shorter file meanwhile */
			d->kicked = to;
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/*
 * Writeback of [0, to) wanted started: by the kicker; without one (no
 * thread could be made), by the look's drop below (POSIX_FADV_DONTNEED
 * writes back what it finds dirty), as before there was a kicker.
 */
static void kick(struct wb_state *d, off_t to)
{
	if (to <= 0)
		return;
	if (!d->kicking) {
		d->kicked = to;
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (to < d->kicked) /* truncated, or rewritten from the start */
		d->kicked = 0;
	if (to != d->kick_to) {
		d->kick_to = to;
		pthread_cond_signal(&d->kick_cond);
	}
	pthread_mutex_unlock(&d->lock);
}

/* Below this, writeback has been started (so a drop starts none). */
static off_t kicked_below(struct wb_state *d)
{
	off_t done;

	pthread_mutex_lock(&d->lock);
	done = d->kicked;
	pthread_mutex_unlock(&d->lock);
	return done;
}

/* One look; false if nothing changed since the last. */
static bool look(struct wb_state *d)
{
	int fd = d->file->fd;
	struct dcfs_cachestat cs;
	struct stat st;
	off_t front, behind, size_before = d->last_size;

	if (stat_range(fd, 0, 0, &cs) < 0 || fstat(fd, &st) < 0)
		return false;
	note_peak(d, cs.nr_cache);
	count_growth(d, st.st_size);
	/*
	 * Nothing moved: nothing to do, unless a writer at rest left a dirty
	 * tail the kicker was never asked for (the look that would have asked
	 * found the pages as the last look left them, and the tail stayed
	 * until the kernel's flusher came, 30 s later).
	 */
	if (same_pages(&cs, &d->seen) && st.st_size == d->last_size &&
	    !(cs.nr_dirty && kicked_below(d) < st.st_size))
		return false;
	d->last_size = st.st_size;
	if (!cs.nr_cache) {
		d->seen = cs;
		return true;
	}
	front = cs.nr_dirty + cs.nr_writeback ? dirty_front(fd, st.st_size) : st.st_size;
	behind = page_down(front - LAG_BYTES);
	/* A writer that paused (or stopped): its tail too. */
	if (cs.nr_dirty)
		kick(d, st.st_size == size_before ? st.st_size : behind);
	if ((long long)cs.nr_cache * PAGE_BYTES > PACE_BYTES && front > PACE_KEEP) {
		/* Over the budget: written back and waited for, the writer held. */
		pace(d, 0, front - PACE_KEEP);
		drop_below(d, front - PACE_KEEP);
	} else if (!cs.nr_dirty && !cs.nr_writeback && st.st_size == size_before) {
		drop_below(d, 0); /* a writer at rest, all written: everything */
	} else {
		off_t started = kicked_below(d);

		if (started > behind)
			started = behind;
		if (started > 0) /* (0 would be the whole file) */
			drop_below(d, started);
	}
	if (stat_range(fd, 0, 0, &d->seen) == 0)
		count_dropped(d, &cs, &d->seen);
	return true;
}

/*
 * A stream that moves is looked at every POLL_MIN_US at once: halving from
 * a rest's 10 ms took four looks (5 + 2.5 + 1.25 + 1 ms), and a writer
 * that resumed after a rest peaked at 39-46 MiB where one that never
 * rested peaked at 25-27 (1 MiB writes on xfs).  At rest they thin out.
 */
static long next_interval(long us, bool busy)
{
	if (busy)
		return POLL_MIN_US;
	return us * 2 < POLL_MAX_US ? us * 2 : POLL_MAX_US;
}

static void deadline_in(struct timespec *ts, long us)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_nsec += us * 1000L;
	ts->tv_sec += ts->tv_nsec / 1000000000L;
	ts->tv_nsec %= 1000000000L;
}

/*
 * The window is what the writer adds between two looks: a look that waits
 * behind a busy CPU's other work lets it run on unchecked (2-5 GB/s into
 * the page cache).  A raised nice value was not enough: with every CPU busy
 * the looks came tens of ms late and streams peaked at 13-628 MiB.  With
 * real-time looks, streams beside stress-ng peaked lower in 20 of 24 paired
 * cells (xfs, 1 MiB writes: 62-69 -> 28-37 MiB; at load 10: 34-50 -> 32-34),
 * at up to 10 % of the 4 KiB speed there.  So the look thread takes the
 * lowest real-time priority, which runs it as soon as its timer fires,
 * ahead of every ordinary task.  It sleeps between looks
 * (1-50 ms) and a look is a few syscalls, so it costs others little, and
 * the kernel's real-time throttling bounds it anyway.  A daemon that may
 * not (no CAP_SYS_NICE, an RLIMIT_RTPRIO of 0) raises its nice value
 * instead, or stays at the daemon's.
 */
static void look_priority(void)
{
	struct sched_param sp = { .sched_priority = WB_RT_PRIO };

	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0)
		return;
	setpriority(PRIO_PROCESS, (id_t)gettid(), WB_NICE);
}

/* From the watcher thread (writewatch.c): the resting stream was written. */
static void woken(void *arg)
{
	struct wb_state *d = arg;

	pthread_mutex_lock(&d->lock);
	d->woken = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

static void *writebehind_main(void *arg)
{
	struct wb_state *d = arg;
	unsigned int idle = 0;
	long us = POLL_MIN_US;
	bool busy = true;

	look_priority();
	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		struct timespec ts;
		bool written = d->woken;

		d->woken = false;
		pthread_mutex_unlock(&d->lock);
		/*
		 * At rest, the next write wakes the thread (writewatch.c); armed
		 * before the look, so that a write after it is not missed.
		 */
		if (!busy && !written)
			writewatch_arm(&d->watch, d->file->fd);
		busy = look(d) || written;
		pthread_mutex_lock(&d->lock);
		if (d->woken)
			continue; /* written since the watch was armed: look now */
		idle = busy ? 0 : idle + 1;
		us = next_interval(us, busy);
		deadline_in(&ts, idle > IDLE_POLLS ? POLL_IDLE_US : us);
		if (!d->stop)
			pthread_cond_timedwait(&d->cond, &d->lock, &ts);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/*
 * Whether the opener's memory cgroup (or one above it) is at or near its
 * limit.  The pages of a kernel-served stream are the writer's, charged to
 * its cgroup: there each one the stream holds (up to the window and what a
 * look lets through) is reclaimed from the cgroup's other pages at once,
 * and the writer waits in that reclaim.  The engine's pages are the
 * daemon's, and it drops each request's at once.  Measured
 * (tests/bench/README.md: a 2 GiB hot file read under a 1 GiB limit,
 * 8 GiB streamed in 1 MiB writes in the same cgroup, the daemon too, 8
 * runs each, alternating): kernel-served 92.7-96.7 % of the hot set kept,
 * the engine 97.2-98.2 %, at about the same speed (985-1686 MiB/s against
 * 680-1765) and a fourth of the writer's CPU (0.28-0.44 s against
 * 0.97-1.71: the reclaim it no longer does).
 */
static bool memcg_full(pid_t writer)
{
	uint64_t room;

	return writer > 0 && memcg_room(writer, &room) == 0 && room < MEMCG_ROOM_MIN;
}

/*
 * Whether a write stream may be served by the kernel with write-behind
 * here; NULL if so, else why not (user.dcfs.policy, the log).  writer:
 * the process whose memory cgroup the stream's pages would be charged to
 * (the opener; for user.dcfs.policy the asker), 0 if none is known.
 */
const char *writebehind_refusal(const struct dcfs_file *f, pid_t writer)
{
	struct dcfs_cachestat cs;

	if (!f->probe || (strcmp(f->probe->fstype, "ext4") && strcmp(f->probe->fstype, "xfs")))
		return "by the daemon engine: kernel-served writes are kept to ext4 and xfs";
	if (dcfs_cachestat(f->fd, 0, 0, &cs) < 0)
		return "by the daemon engine: no cachestat(2) (Linux >= 6.5) for write-behind";
	if (cs.nr_cache)
		return "by the daemon engine: the file has cached pages (in use)";
	if (memcg_full(writer))
		return "by the daemon engine: the writer's memory cgroup is at its limit";
	return NULL;
}

/* The dirty front is found with cachestat (Linux >= 6.5). */
static bool cachestat_works(int fd)
{
	struct dcfs_cachestat cs;

	return dcfs_cachestat(fd, 0, 0, &cs) == 0;
}

/*
 * At open, before passthrough.c decides: the state a kernel-served write
 * stream needs, so that once the kernel has it nothing can be missing.
 */
int writebehind_prepare(struct dcfs_file *f)
{
	struct wb_state *d;
	char path[64];
	pthread_condattr_t ca;

	if (!cachestat_works(f->fd))
		return -ENOSYS;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_once(&none_once, none_make);
	d->file = f;
	inode_proc_path(f->fd, path);
	/* The daemon's own identity: it only waits on the file, reads nothing. */
	d->dio_fd = open(path, O_RDONLY | O_DIRECT | O_NOATIME | O_CLOEXEC);
	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cond, &ca);
	pthread_cond_init(&d->kick_cond, NULL);
	pthread_condattr_destroy(&ca);
	d->counted = f->pt.size0 > 0 ? f->pt.size0 : 0;
	writewatch_init(&d->watch, woken, d);
	f->wb = d;
	return 0;
}

/* Logs each reason once per filesystem, every open at debug level. */
static void note_mode(struct dcfs_file *f, const char *mode)
{
	static struct {
		const char *mode;
		dev_t dev;
	} seen[32];
	static unsigned int nseen;
	static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
	bool first = true;

	pthread_mutex_lock(&seen_lock);
	for (unsigned int i = 0; i < nseen && first; i++)
		first = seen[i].mode != mode || seen[i].dev != f->inode->dev;
	if (first && nseen < sizeof(seen) / sizeof(seen[0])) {
		seen[nseen].mode = mode;
		seen[nseen++].dev = f->inode->dev;
	}
	pthread_mutex_unlock(&seen_lock);
	if (first)
		log_info(
			"write streams on %s (dev %u:%u): %s (first such open: ino %llu; later ones logged at debug level)\n",
			f->probe && f->probe->fstype[0] ? f->probe->fstype : "fs",
			major(f->inode->dev), minor(f->inode->dev), mode,
			(unsigned long long)f->inode->ino);
	else
		log_debug("ino %llu: writes %s\n", (unsigned long long)f->inode->ino, mode);
	if (f->stats)
		snprintf(f->stats->why + strlen(f->stats->why),
			 sizeof(f->stats->why) - strlen(f->stats->why), "; writes %s", mode);
}

/* Why passthrough.c did not let the kernel write a stream that could be. */
static const char *engine_reason(const struct dcfs_file *f)
{
	if (f->pt.uncached)
		return "by the kernel, uncached (passthrough)";
	if (f->pt.setid0)
		return "by the daemon engine: a set-id file (its writes must reach the daemon)";
	if (passthrough_reaches_backing(f))
		return "by the daemon engine: the file is open for writing by another user";
	return "by the daemon engine: no kernel passthrough for this open";
}

/*
 * After passthrough.c decided, before the open reply: a stream the kernel
 * serves gets its thread; how the writes of a write stream are served, and
 * why, is said (the log, dcfs stat --files).
 */
void writebehind_decided(struct dcfs_file *f)
{
	struct wb_state *d = f->wb;
	int err;

	if (!f->pt.write_mode && !d)
		return; /* not a write stream */
	if (d && passthrough_by_kernel(f) && !f->pt.uncached) {
		/* Without it, the look thread starts writeback itself. */
		d->kicking = pthread_create(&d->kicker, NULL, kicker_main, d) == 0;
		err = pthread_create(&d->thread, NULL, writebehind_main, d);
		if (err)
			/* Written back and dropped at release all the same. */
			log_warn(
				"write-behind: ino %llu: no thread (%s): the stream is not followed until its release\n",
				(unsigned long long)f->inode->ino, strerror(err));
		d->running = !err;
		d->served = true;
		atomic_fetch_add(&streams, 1);
		stats_add(f->policy, ST_WRITE_BEHIND, 1);
		f->pt.write_mode = "by the kernel (passthrough), written behind";
	} else if (d) {
		f->pt.write_mode = engine_reason(f);
		writebehind_stop(f);
	}
	note_mode(f, f->pt.write_mode);
}

/*
 * At release, first (before the handle's counters go): the thread stops,
 * and the last of the stream is counted.
 */
void writebehind_quiesce(struct dcfs_file *f)
{
	struct wb_state *d = f->wb;
	struct dcfs_cachestat cs;
	struct stat st;

	if (!d || d->quiet)
		return;
	d->quiet = true;
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->cond);
	pthread_cond_signal(&d->kick_cond);
	pthread_mutex_unlock(&d->lock);
	if (d->running)
		pthread_join(d->thread, NULL);
	if (d->kicking)
		pthread_join(d->kicker, NULL);
	d->running = d->kicking = false;
	writewatch_cancel(&d->watch);
	if (!d->served)
		return;
	atomic_fetch_sub(&streams, 1);
	if (stat_range(f->fd, 0, 0, &cs) == 0)
		note_peak(d, cs.nr_cache);
	if (fstat(f->fd, &st) == 0)
		count_growth(d, st.st_size);
}

/*
 * What the stream left is written back, waited for and dropped, unless
 * another handle shares its pages (drop_below()).  The wait advances the
 * writeback-error cursor of wait_fd only.
 */
static void settle(struct wb_state *d, int wait_fd, const char *when)
{
	struct dcfs_file *f = d->file;
	struct dcfs_cachestat before, after;

	stat_range(f->fd, 0, 0, &before);
	if (sync_file_range(wait_fd, 0, 0,
			    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				    SYNC_FILE_RANGE_WAIT_AFTER) < 0)
		log_debug("write-behind: ino %llu: writeback at %s: %s\n",
			  (unsigned long long)f->inode->ino, when, strerror(errno));
	drop_below(d, 0);
	if (stat_range(f->fd, 0, 0, &after) == 0)
		count_dropped(d, &before, &after);
}

/*
 * FLUSH, which close(2) of each descriptor of the handle waits for (the
 * RELEASE comes later, without anyone waiting): the stream is settled now,
 * so that the program's next open of the file, which may reach the daemon
 * before that RELEASE, finds it written and out of the page cache as after
 * a native RWF_DONTCACHE writer; an open of a file with cached pages would
 * take them for someone else's (io_select.c) and be served differently.
 * The wait is on the daemon's O_DIRECT descriptor, a file of its own: a
 * writeback error stays unread for the handle's fd, whose fsync reports it.
 */
void writebehind_flush(struct dcfs_file *f)
{
	struct wb_state *d = f->wb;

	if (d && d->served && d->dio_fd >= 0)
		settle(d, d->dio_fd, "close");
}

/*
 * At release, after passthrough_release() and before f->fd closes: the
 * thread stops, and what the stream left is written back and dropped
 * unless another handle of the inode is still open (then the last one's
 * release or its own drop-behind does it).  An error of this writeback
 * can only be logged: the handle is closed (as natively, a later fsync
 * of another open of the file reports it).
 */
void writebehind_stop(struct dcfs_file *f)
{
	struct wb_state *d = f->wb;

	if (!d)
		return;
	writebehind_quiesce(f);
	if (d->served && !passthrough_handles(f->inode))
		settle(d, f->fd, "release");
	if (d->dio_fd >= 0)
		close(d->dio_fd);
	pthread_cond_destroy(&d->cond);
	pthread_cond_destroy(&d->kick_cond);
	pthread_mutex_destroy(&d->lock);
	free(d);
	f->wb = NULL;
}

/*
 * For user.dcfs.policy: how a write open of a streaming file by asker (a
 * pid: its memory cgroup counts) would have its writes served now (the
 * open decides again, the same way).
 */
void writebehind_describe(struct dcfs_inode *inode, const struct dcfs_config *cfg, bool deferred,
			  pid_t asker, char *buf, size_t size)
{
	struct dcfs_file probe_file = { .inode = inode, .fd = -1 };
	char pt_mode[160], path[64];
	const char *why = NULL;
	int pfd;

	passthrough_describe(inode, pt_mode, sizeof(pt_mode));
	if (deferred) {
		why = "by the daemon engine: cached until min_size bytes were written";
	} else if (!cfg->passthrough_writes) {
		why = "by the daemon engine: passthrough_writes = no";
	} else if (strncmp(pt_mode, "passthrough", 11) != 0) {
		snprintf(buf, size, "writes by the daemon engine (%s)", pt_mode);
		return;
	} else if ((pfd = fdcache_pin(inode)) >= 0) {
		/* The daemon's look only: nothing is read. */
		inode_proc_path(pfd, path);
		probe_file.fd = open(path, O_RDONLY | O_NOATIME | O_CLOEXEC);
		fdcache_unpin(inode);
	}
	if (!why && probe_file.fd < 0)
		why = "by the daemon engine: the file cannot be looked at";
	if (!why) {
		probe_file.probe = probe_get(probe_file.fd);
		why = writebehind_refusal(&probe_file, asker);
	}
	if (probe_file.fd >= 0)
		close(probe_file.fd);
	snprintf(buf, size, "writes %s", why ? why : "by the kernel (passthrough), written behind");
}

/* Kernel-served write streams running now. */
unsigned int writebehind_streams(void)
{
	return atomic_load(&streams);
}
