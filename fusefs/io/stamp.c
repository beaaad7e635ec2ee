// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Changes made outside the mount, noticed by a stamp (part of the
 * coherence model, coherence.c; dcfs(8) DATA COHERENCE).
 *
 * Outside changes.  dcfs does not let the kernel drop a file's FUSE page
 * cache whenever a reply shows a new mtime (FUSE_AUTO_INVAL_DATA, main.c):
 * every write through the mount changes the mtime, and the drop that the
 * next read's attribute refresh then makes can hit the pages of a
 * write-through write in flight, which the kernel has already filled and
 * unlocked but not yet sent; a READ fetching the range before that WRITE
 * lands caches the old data after write() returned (tests/KNOWN_FAILURES.md
 * #9: 3 stale read-backs of one's own write in 42 000 writes, none
 * without it).
 *
 * Instead dcfs keeps, per inode, a stamp of the backing file's mtime and
 * size as it last saw them and the inode's data_gen (bumped by every data
 * change through the mount) at that moment.  A different stamp with the
 * same data_gen is a change from outside: an open of the file then does
 * not keep the mount's cache (the kernel drops it before open returns,
 * close-to-open consistency as with NFS), and a stat queues a drop of it
 * (notify.c).  A change from outside racing a change through the mount is
 * taken for the mount's own: two writers that do not coordinate get no
 * ordering anyway.
 *
 * Every change through the mount bumps data_gen and, once it is on the
 * backing file, stamps the file as it is then (stamp_landed()), so a
 * change from outside right after the mount's own is still seen as one.
 */
#include <stdatomic.h>
#include <unistd.h>

#include "io/io.h"

/* coh_flags: a change from outside not yet seen by an open */
#define COH_OUTSIDE 4u

/* 32 bits of the stamp's hash, 32 of data_gen: one atomic word. */
static uint64_t stamp_of(const struct stat *st, uint64_t gen)
{
	uint64_t h = (uint64_t)st->st_mtim.tv_sec * 0x9e3779b97f4a7c15ULL;

	h ^= (uint64_t)st->st_mtim.tv_nsec + 0x632be59bd9b4e019ULL + (h << 6) + (h >> 2);
	h ^= (uint64_t)st->st_size * 0xc2b2ae3d27d4eb4fULL + (h << 6) + (h >> 2);
	h ^= h >> 29;
	/* 0 means "never seen": keep it out of the stamps */
	return ((h << 32) | (uint32_t)gen) | (1ULL << 63);
}

uint64_t stamp_gen(struct dcfs_inode *inode)
{
	return atomic_load(&inode->data_gen);
}

/*
 * st was read after gen (stamp_gen()) was: has the data changed since
 * the last look other than through the mount?  Records what it saw either
 * way.  Only regular files have data the mount caches.
 */
bool stamp_changed_outside(struct dcfs_inode *inode, const struct stat *st, uint64_t gen)
{
	uint64_t now, before;

	if (!S_ISREG(st->st_mode))
		return false;
	now = stamp_of(st, gen);
	before = atomic_exchange(&inode->seen, now);
	if (!before || before == now)
		return false;
	/* Another data_gen: the mount changed it (or raced with it). */
	if ((uint32_t)before != (uint32_t)now)
		return false;
	/*
	 * What the daemon holds of the file (read-ahead windows, keyed by
	 * data_gen) is stale too; the stamp recorded above then no longer
	 * matches data_gen, so the next look only records.
	 */
	atomic_fetch_add(&inode->data_gen, 1);
	/*
	 * For the next open, whoever saw it: a GETATTR that notices the
	 * change only queues the drop of the FUSE cache, and the open right
	 * after it (which finds the stamp already recorded) must not keep
	 * that cache either (#16).
	 */
	atomic_fetch_or(&inode->coh_flags, COH_OUTSIDE);
	return true;
}

/* Was a change from outside seen since the last open?  Clears it. */
bool stamp_take_outside(struct dcfs_inode *inode)
{
	return atomic_fetch_and(&inode->coh_flags, ~COH_OUTSIDE) & COH_OUTSIDE;
}

/*
 * A change through the mount is on the backing file (fd): bump data_gen
 * and stamp the file as it is now.  Without the stamp, a change from
 * outside after it but before the next look would carry the new data_gen
 * and be taken for the mount's own, and an open would keep the old pages
 * (KNOWN_FAILURES #16: a stream's last data landed at its asynchronous
 * release, after the next open's look).  A stamp older than another
 * landing's is not stored over it.
 */
void stamp_landed(struct dcfs_inode *inode, int fd)
{
	uint64_t gen = atomic_fetch_add(&inode->data_gen, 1) + 1, cur;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	cur = atomic_load(&inode->seen);
	if (atomic_load(&inode->data_gen) == gen && (!cur || (uint32_t)cur != (uint32_t)gen))
		atomic_compare_exchange_strong(&inode->seen, &cur, stamp_of(&st, gen));
}

/* A change through the mount that the data_gen of writes does not count. */
void stamp_changed_inside(struct dcfs_inode *inode)
{
	atomic_fetch_add(&inode->data_gen, 1);
}
