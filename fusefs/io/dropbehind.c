// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Drop-behind for read-only streams that the kernel reads itself.
 *
 * With passthrough_reads (the default), a read-only open of a streaming
 * class is a FUSE passthrough open (passthrough.c): the application's own
 * reads go to the backing file in the kernel, with its read-ahead and its
 * large folios, and never reach the daemon.  What dcfs still owes is that
 * the stream leaves the page cache as it goes, which RWF_DONTCACHE cannot
 * do here (the kernel decides the read flags).  So this thread looks at
 * each such file: when more of it is resident than it keeps, it finds
 * where the resident pages end (the reader's read-ahead front; cachestat,
 * bisected in STEP_BYTES) and drops everything more than the kept amount
 * below it (POSIX_FADV_DONTNEED, which leaves dirty, locked and mapped
 * pages alone).  The amount kept is two read-ahead windows of the backing
 * device and a step (4-64 MiB): the window being read and the one under
 * I/O stay.  Looks come every 1-10 ms, sooner while they find much more
 * than is kept (a fast reader), every 50 ms once nothing changed for 100
 * of them.  A reader at 2 GB/s on a device with 2.5 MiB of read-ahead
 * held 9-18 MiB at a time (test suite: 13-29 MiB); everything goes at
 * release.
 *
 * Measured on ext4 (2 GiB file, same run): buffered reads with this
 * dropping behind them at 1.6-2.5 GB/s against 0.16-1.4 GB/s for
 * RWF_DONTCACHE reads of 4 KiB-1 MiB, and 0.07-0.25 s/GiB of CPU against
 * 0.23-1.6 (the dropping is a few syscalls per poll, on large folios).
 *
 * Pages of others are left alone where dcfs can tell: a file with cached
 * pages at open is not served this way (io_select.c), and nothing is
 * dropped while the inode has a handle of another kind open (a cache-class
 * reader wants its pages).  Several drop-behind readers of one file share
 * one front: a reader far behind may read some of its read-ahead twice.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "io/io.h"
#include "dcfs_sys.h"

#define PAGE_BYTES 4096
#define STEP_BYTES (1LL << 20) /* resolution of the front */
/* Kept behind the front: two read-ahead windows (the one being read, the
 * one under I/O) and a step, within these bounds. */
#define KEEP_MIN (4LL << 20)
#define KEEP_MAX (64LL << 20)
#define KEEP_DEFAULT (8LL << 20) /* read_ahead_kb unknown */
/* Looks come sooner while one finds HIGH more than kept, later below LOW. */
#define HIGH_BYTES (8LL << 20)
#define LOW_BYTES (2LL << 20)
#define POLL_MIN_US 1000
#define POLL_MAX_US 10000
#define POLL_IDLE_US 50000
#define IDLE_POLLS 100	/* unchanged looks before POLL_IDLE_US */
#define STUCK_POLLS 100 /* looks to wait after a drop that left pages */

/* One trailed stream: allocated by dropbehind_add(), freed by _remove(). */
struct db_state {
	struct dcfs_file *file;
	struct db_state *next; /* the thread's list, under db.lock */
	uint64_t cached;       /* resident pages at the last look */
	long long keep;	       /* bytes kept behind the read-ahead front */
	unsigned int stuck;    /* looks to skip: mapped pages stayed */
	off_t front;	       /* read-ahead front counted as read_kernel */
};

static struct {
	pthread_mutex_t lock; /* the list and every entry's db_ fields */
	pthread_cond_t cond;
	struct db_state *list;
	pthread_t thread;
	bool running, stopping;
} db = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static uint64_t cached_pages(int fd, off_t off, off_t len)
{
	struct dcfs_cachestat cs;

	if (dcfs_cachestat(fd, (uint64_t)off, (uint64_t)len, &cs) < 0)
		return 0;
	return cs.nr_cache;
}

/*
 * The kernel reads such a stream without a request to dcfs: the bytes it
 * read are estimated by the read-ahead front, which only moves forward,
 * and counted as read_kernel as it moves (up to the file's size).  Class
 * counters only: the handle's own may be freed while it is being looked at.
 */
static void count_front(struct db_state *d, off_t front, off_t size)
{
	if (front > size)
		front = size;
	if (front <= d->front)
		return;
	stats_add(d->file->policy, ST_READ_KERNEL, (uint64_t)(front - d->front));
	d->front = front;
}

/*
 * One look at one file: how many bytes more than it keeps it had resident
 * (a measure of how late the look was), -1 if nothing changed.
 */
static long long poll_one(struct db_state *d)
{
	struct dcfs_file *f = d->file;
	uint64_t now = cached_pages(f->fd, 0, 0), below, left;
	long long seen = (long long)now * PAGE_BYTES;
	struct stat st;
	off_t end;

	if (now == d->cached)
		return -1;
	d->cached = now;
	if (seen <= d->keep + STEP_BYTES)
		return seen - d->keep;
	if (d->stuck) {
		d->stuck--;
		return 0;
	}
	if (passthrough_shared(f->inode) || fstat(f->fd, &st) < 0)
		return 0;
	end = resident_end(f->fd, st.st_size, STEP_BYTES, false);
	count_front(d, end, st.st_size);
	end -= d->keep;
	if (end <= 0)
		return seen - d->keep;
	/* Counted below end only: the reader adds pages above it meanwhile. */
	below = cached_pages(f->fd, 0, end);
	posix_fadvise(f->fd, 0, end, POSIX_FADV_DONTNEED);
	left = cached_pages(f->fd, 0, end);
	/*
	 * Mapped pages stay: if most did, do not walk them again at once.  (A
	 * few pages still under read-ahead I/O near end are not a reason.)
	 */
	if (left * PAGE_BYTES > STEP_BYTES && left * 2 > below)
		d->stuck = STUCK_POLLS;
	if (below > left)
		stats_add(f->policy, ST_DROPPED_BEHIND, (below - left) * PAGE_BYTES);
	d->cached = cached_pages(f->fd, 0, 0);
	return seen - d->keep;
}

static void deadline_in(struct timespec *ts, long us)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_nsec += us * 1000L;
	ts->tv_sec += ts->tv_nsec / 1000000000L;
	ts->tv_nsec %= 1000000000L;
}

/*
 * The interval follows the readers: a look that finds HIGH_BYTES resident
 * halves it (a fast reader), one that finds less than LOW_BYTES doubles it.
 */
static long next_interval(long us, long long most)
{
	if (most > HIGH_BYTES && us > POLL_MIN_US)
		return us / 2;
	if (most < LOW_BYTES && us < POLL_MAX_US)
		return us * 2 > POLL_MAX_US ? POLL_MAX_US : us * 2;
	return us;
}

static void *dropbehind_main(void *arg)
{
	unsigned int idle = 0;
	long us = POLL_MAX_US;

	(void)arg;
	pthread_mutex_lock(&db.lock);
	while (!db.stopping) {
		struct timespec ts;
		long long most = -2;

		if (!db.list) {
			pthread_cond_wait(&db.cond, &db.lock);
			idle = 0;
			continue;
		}
		for (struct db_state *d = db.list; d; d = d->next) {
			long long seen = poll_one(d);

			if (seen > most)
				most = seen;
		}
		idle = most > -1 ? 0 : idle + 1;
		if (most > -1)
			us = next_interval(us, most);
		deadline_in(&ts, idle > IDLE_POLLS ? POLL_IDLE_US : us);
		pthread_cond_timedwait(&db.cond, &db.lock, &ts);
	}
	pthread_mutex_unlock(&db.lock);
	return NULL;
}

int dropbehind_start(void)
{
	pthread_condattr_t ca;
	int err;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&db.cond, &ca);
	pthread_condattr_destroy(&ca);
	err = pthread_create(&db.thread, NULL, dropbehind_main, NULL);
	if (err)
		return -err;
	db.running = true;
	return 0;
}

void dropbehind_stop(void)
{
	if (!db.running)
		return;
	pthread_mutex_lock(&db.lock);
	db.stopping = true;
	pthread_cond_signal(&db.cond);
	pthread_mutex_unlock(&db.lock);
	pthread_join(db.thread, NULL);
	db.running = false;
}

static long long keep_for(int fd)
{
	long long ra = conn_limits_read_ahead(fd);
	long long keep;

	if (ra <= 0)
		return KEEP_DEFAULT;
	keep = 2 * ra + STEP_BYTES;
	return keep < KEEP_MIN ? KEEP_MIN : keep > KEEP_MAX ? KEEP_MAX : keep;
}

/* f is a passthrough reader from now on: drop behind it until release. */
void dropbehind_add(struct dcfs_file *f)
{
	struct db_state *d = calloc(1, sizeof(*d));

	/* Without memory the stream is only not trailed: nothing is lost. */
	if (!d)
		return;
	d->file = f;
	d->keep = keep_for(f->fd);
	pthread_mutex_lock(&db.lock);
	d->next = db.list;
	db.list = d;
	f->db = d;
	pthread_cond_signal(&db.cond);
	pthread_mutex_unlock(&db.lock);
}

/*
 * At release, after passthrough_release() and before f->fd closes: the
 * thread no longer looks at f, and the stream leaves nothing behind unless
 * another handle of the inode is still open.  Of handles released at the
 * same time, the last to be uncounted sees none left.  A stream the kernel
 * did uncached I/O for (passthrough_uncached) gets the same last drop if
 * the file had nothing cached at open: what mmap, splice (sendfile) or a
 * partial page at the end left, which RWF_DONTCACHE does not cover.
 */
void dropbehind_remove(struct dcfs_file *f)
{
	uint64_t before, after;
	struct stat st;

	if (f->db) {
		pthread_mutex_lock(&db.lock);
		for (struct db_state **p = &db.list; *p; p = &(*p)->next) {
			if (*p == f->db) {
				*p = f->db->next;
				break;
			}
		}
		pthread_mutex_unlock(&db.lock);
		/* The last stretch, which no look may have seen. */
		if (fstat(f->fd, &st) == 0)
			count_front(f->db, resident_end(f->fd, st.st_size, STEP_BYTES, false),
				    st.st_size);
		free(f->db);
		f->db = NULL;
	} else if (!f->pt.uncached || f->use.was_resident) {
		return;
	}
	if (passthrough_handles(f->inode))
		return;
	before = cached_pages(f->fd, 0, 0);
	if (!before)
		return;
	posix_fadvise(f->fd, 0, 0, POSIX_FADV_DONTNEED);
	after = cached_pages(f->fd, 0, 0);
	if (before > after)
		stats_add(f->policy, ST_DROPPED_BEHIND, (before - after) * PAGE_BYTES);
}
