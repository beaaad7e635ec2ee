// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The O_PATH fd cache.
 *
 * Inodes with a file handle (handle.c) keep their O_PATH fd only while it
 * is in use or among the most recently used: a handler pins the inode for
 * as long as it uses the fd (fdcache_pin()/fdcache_unpin()), an unpinned fd
 * goes to the tail of an LRU list, and once more fds are cached than the
 * budget allows the head of the list is closed.  A pin of an inode whose fd
 * was closed reopens it from the handle.
 *
 * Budget: half of RLIMIT_NOFILE (at least 64).  The other half is the
 * reserve for what cannot be evicted: the backing fds of open files and
 * directories, inodes of filesystems without handles, mount fds, and the
 * daemon's own.  When an open still finds no fd (EMFILE), the cache is
 * shrunk to a quarter and the open retried (fdcache_retry()), and the
 * failure that remains is logged once per episode.
 *
 * Files deleted behind dcfs's back (on the backing filesystem, not through
 * the mount) would keep their space while their cached fd lives, which is
 * until the kernel forgets the node: maybe never.  So a thread looks at
 * the cached fds every REAP_SECONDS and closes those of inodes with no
 * name left (st_nlink 0).  A later use reopens by handle: the file, while
 * someone still has it open, else ESTALE, as for any vanished inode.
 *
 * Lock order: the inode table lock, then the cache lock.
 */
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

#define MIN_BUDGET 64
#define REAP_SECONDS 5

/* The cache (under cache_lock, except the counters). */
static struct {
	pthread_mutex_t cache_lock;
	struct dcfs_inode *lru_head, *lru_tail; /* head: least recently used */
	size_t n_cached;			/* open fds of inodes with handles */
	size_t budget;
	size_t peak_cached;
	atomic_ulong n_reopens, n_evictions, n_reaped;
	atomic_bool emfile_episode;
} cache = { .cache_lock = PTHREAD_MUTEX_INITIALIZER, .budget = MIN_BUDGET };

/* The reaper of deleted files' fds (fdcache_reap_unlinked()). */
static struct {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool running, stop;
} reaper = { .lock = PTHREAD_MUTEX_INITIALIZER };

void fdcache_init(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		cache.budget = rl.rlim_cur / 2;
	else
		cache.budget = 1 << 20;
	if (cache.budget < MIN_BUDGET)
		cache.budget = MIN_BUDGET;
	handle_set_make_room(fdcache_retry);
}

size_t fdcache_budget(void)
{
	return cache.budget;
}

static void lru_remove(struct dcfs_inode *inode)
{
	if (!inode->on_lru)
		return;
	if (inode->lru_prev)
		inode->lru_prev->lru_next = inode->lru_next;
	else
		cache.lru_head = inode->lru_next;
	if (inode->lru_next)
		inode->lru_next->lru_prev = inode->lru_prev;
	else
		cache.lru_tail = inode->lru_prev;
	inode->lru_prev = inode->lru_next = NULL;
	inode->on_lru = false;
}

static void lru_append(struct dcfs_inode *inode)
{
	inode->lru_prev = cache.lru_tail;
	inode->lru_next = NULL;
	if (cache.lru_tail)
		cache.lru_tail->lru_next = inode;
	else
		cache.lru_head = inode;
	cache.lru_tail = inode;
	inode->on_lru = true;
}

/* Closes least recently used fds until at most limit are cached. */
static void evict_to(size_t limit)
{
	while (cache.n_cached > limit && cache.lru_head) {
		struct dcfs_inode *victim = cache.lru_head;

		lru_remove(victim);
		close(victim->fd);
		victim->fd = -1;
		cache.n_cached--;
		atomic_fetch_add(&cache.n_evictions, 1);
	}
}

/* A new fd for inode, unpinned: cache it if it can be reopened. */
void fdcache_add(struct dcfs_inode *inode)
{
	if (!inode->handle)
		return;
	pthread_mutex_lock(&cache.cache_lock);
	cache.n_cached++;
	if (cache.n_cached > cache.peak_cached)
		cache.peak_cached = cache.n_cached;
	if (inode->pins == 0)
		lru_append(inode);
	evict_to(cache.budget);
	pthread_mutex_unlock(&cache.cache_lock);
}

/*
 * Gives inode a fd it does not have yet (a lookup that found the inode
 * evicted).  Returns true if fd was taken.
 */
bool fdcache_adopt(struct dcfs_inode *inode, int fd)
{
	bool taken = false;

	pthread_mutex_lock(&cache.cache_lock);
	if (inode->fd < 0) {
		inode->fd = fd;
		taken = true;
	}
	pthread_mutex_unlock(&cache.cache_lock);
	if (taken)
		fdcache_add(inode);
	return taken;
}

/* Before the inode is freed: it leaves the cache, its fd is returned. */
int fdcache_remove(struct dcfs_inode *inode)
{
	int fd;

	pthread_mutex_lock(&cache.cache_lock);
	lru_remove(inode);
	fd = inode->fd;
	if (fd >= 0 && inode->handle)
		cache.n_cached--;
	inode->fd = -1;
	pthread_mutex_unlock(&cache.cache_lock);
	return fd;
}

/*
 * Takes inode's fd out of the cache if nothing uses it (no pin) and it can
 * be reopened (a handle): returns the fd for the caller to close, or -1.
 */
int fdcache_evict(struct dcfs_inode *inode)
{
	int fd = -1;

	pthread_mutex_lock(&cache.cache_lock);
	if (inode->pins == 0 && inode->handle && inode->fd >= 0) {
		lru_remove(inode);
		fd = inode->fd;
		inode->fd = -1;
		cache.n_cached--;
		atomic_fetch_add(&cache.n_evictions, 1);
	}
	pthread_mutex_unlock(&cache.cache_lock);
	return fd;
}

int fdcache_pin(struct dcfs_inode *inode)
{
	int fd;

	if (inode == &dcfs.root)
		return inode->fd;
	pthread_mutex_lock(&cache.cache_lock);
	inode->pins++;
	lru_remove(inode);
	fd = inode->fd;
	pthread_mutex_unlock(&cache.cache_lock);
	if (fd >= 0)
		return fd;
	/* Reopened outside the lock; a concurrent pin may do the same. */
	fd = handle_reopen(inode);
	pthread_mutex_lock(&cache.cache_lock);
	if (fd < 0) {
		inode->pins--;
	} else if (inode->fd >= 0) {
		close(fd);
		fd = inode->fd;
	} else {
		inode->fd = fd;
		cache.n_cached++;
		if (cache.n_cached > cache.peak_cached)
			cache.peak_cached = cache.n_cached;
		atomic_fetch_add(&cache.n_reopens, 1);
		evict_to(cache.budget);
	}
	pthread_mutex_unlock(&cache.cache_lock);
	return fd;
}

void fdcache_unpin(struct dcfs_inode *inode)
{
	if (inode == &dcfs.root)
		return;
	pthread_mutex_lock(&cache.cache_lock);
	if (--inode->pins == 0 && inode->fd >= 0 && inode->handle) {
		lru_append(inode);
		evict_to(cache.budget);
	}
	pthread_mutex_unlock(&cache.cache_lock);
}

/*
 * An open or lookup failed with EMFILE/ENFILE: shrink the cache to a
 * quarter so it can be retried.  Returns true if anything was freed.
 */
bool fdcache_retry(int err)
{
	size_t before;

	if (err != EMFILE && err != ENFILE)
		return false;
	pthread_mutex_lock(&cache.cache_lock);
	before = cache.n_cached;
	evict_to(cache.budget / 4);
	pthread_mutex_unlock(&cache.cache_lock);
	return cache.n_cached < before;
}

/*
 * Closes the cached fds of inodes that lost their last name (deleted on
 * the backing filesystem behind dcfs's back).  Only unpinned fds are on
 * the list, each with a handle to reopen it by.  One fstat per cached fd,
 * under the cache lock: about 5 ms at a budget of 10 000.
 */
size_t fdcache_reap_unlinked(void)
{
	struct dcfs_inode *inode, *next;
	struct stat st;
	size_t n = 0;

	pthread_mutex_lock(&cache.cache_lock);
	for (inode = cache.lru_head; inode; inode = next) {
		next = inode->lru_next;
		if (fstat(inode->fd, &st) < 0 || st.st_nlink)
			continue;
		lru_remove(inode);
		close(inode->fd);
		inode->fd = -1;
		cache.n_cached--;
		n++;
	}
	pthread_mutex_unlock(&cache.cache_lock);
	atomic_fetch_add(&cache.n_reaped, n);
	return n;
}

static void *reaper_main(void *arg)
{
	struct timespec ts;

	(void)arg;
	pthread_mutex_lock(&reaper.lock);
	while (!reaper.stop) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += REAP_SECONDS;
		if (pthread_cond_timedwait(&reaper.cond, &reaper.lock, &ts) != ETIMEDOUT)
			continue;
		pthread_mutex_unlock(&reaper.lock);
		fdcache_reap_unlinked();
		pthread_mutex_lock(&reaper.lock);
	}
	pthread_mutex_unlock(&reaper.lock);
	return NULL;
}

int fdcache_start(void)
{
	pthread_condattr_t ca;
	int err;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&reaper.cond, &ca);
	pthread_condattr_destroy(&ca);
	err = pthread_create(&reaper.thread, NULL, reaper_main, NULL);
	if (err) {
		log_err("cannot start the O_PATH fd reaper: %s\n", strerror(err));
		return -err;
	}
	reaper.running = true;
	return 0;
}

void fdcache_stop(void)
{
	if (!reaper.running)
		return;
	pthread_mutex_lock(&reaper.lock);
	reaper.stop = true;
	pthread_cond_signal(&reaper.cond);
	pthread_mutex_unlock(&reaper.lock);
	pthread_join(reaper.thread, NULL);
	reaper.running = false;
}

/* An EMFILE that still reaches a caller: logged once per episode. */
void fdcache_report(int err, const char *what)
{
	if (err != EMFILE && err != ENFILE) {
		atomic_store(&cache.emfile_episode, false);
		return;
	}
	if (!atomic_exchange(&cache.emfile_episode, true))
		log_err("%s: out of file descriptors (%s): %zu cached O_PATH fds (budget %zu), the rest held by open files, directories and inodes without file handles; raise RLIMIT_NOFILE\n",
			what, strerror(err), cache.n_cached, cache.budget);
}

void fdcache_stats(struct fdcache_stats *s)
{
	pthread_mutex_lock(&cache.cache_lock);
	s->cached = cache.n_cached;
	s->peak = cache.peak_cached;
	s->budget = cache.budget;
	pthread_mutex_unlock(&cache.cache_lock);
	s->reopens = atomic_load(&cache.n_reopens);
	s->evictions = atomic_load(&cache.n_evictions);
	s->reaped = atomic_load(&cache.n_reaped);
}
