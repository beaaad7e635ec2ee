// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The coherence model: who may hold a file's data, who may write it, and
 * what every transition flushes, waits for or invalidates.  Every handler
 * that moves data calls in here (or into the pieces named below); dcfs(8)
 * DATA COHERENCE has the same table for users.
 *
 * Holders of an inode's data:
 *   B  the backing file and its page cache: kernel passthrough handles
 *      read, write and map it directly; so do processes outside the mount.
 *   F  the FUSE page cache of the inode: forwarded handles without
 *      FOPEN_DIRECT_IO (cache class without passthrough, auto and deferred
 *      handles before and after their switch, fuse_readahead readers), and
 *      mappings of direct-I/O handles (FUSE_DIRECT_IO_ALLOW_MMAP).  Pages
 *      outlive their handles.  COH_FUSE_CACHE says F may hold pages.
 *   D  the daemon: write coalescing buffers and background jobs of
 *      streaming handles (acknowledged, not yet on B: write_pipe.c) and
 *      read-ahead windows of streaming readers (io_stream.c, readahead.c).
 *
 * Writers and what keeps each coherent:
 *   - kernel passthrough (PT): writes B, F cannot hold pages meanwhile
 *     (the kernel drops F at a PT open and fills none while the inode has
 *     a backing file); D's windows are not trusted while a writable PT
 *     handle exists, and D holds no writes back while the inode is backed
 *     (passthrough.c).  Write streams on stock kernels are such handles
 *     too (writebehind.c): what the daemon adds is writeback and drops of
 *     B's clean pages, which never change the data anyone sees.
 *   - write-through of an F handle: the kernel updates F itself; drops of
 *     F wait while other writable F handles are open (notify.c, #9), and
 *     all of them once a writable cached handle also reads through the
 *     cache or a mapping is written back (coherence_read_seen(),
 *     coherence_write_seen(), #15).
 *   - write-back of dirty F pages (mappings): lands like any write; while a
 *     direct write of the range is in progress it carries that write's
 *     bytes (below).
 *   - direct writes (a streaming handle's FOPEN_DIRECT_IO, O_DIRECT, AIO):
 *     the kernel drops F only before sending them, so pages read while one
 *     is in flight stay stale, and a mapped page read then and dirtied
 *     writes the old bytes back over it.  On an inode F may cache, the
 *     write is published as an overlay, made (into B or D), the range of F
 *     is dropped, and only then is it answered (coh_direct_begin/_end).
 *   - copy_file_range, fallocate, truncate: D's writes of the inode land
 *     first; the kernel writes F back before and drops the range after.
 *   - outside processes: seen by a stamp of B's mtime and size (below);
 *     close-to-open, like NFS.
 *
 * Rules every path follows:
 *   1. Whatever observes the data (reads, getattr, setattr, fallocate,
 *      lseek, copy_file_range, flush, fsync, O_TRUNC) first lands D's
 *      acknowledged writes of the inode (wpipe_sync_inode()).  A reply
 *      carrying attributes read before the inode was known (lookup,
 *      readdirplus, link, create of an existing name) lands them after,
 *      and reads the attributes again if anything landed in between
 *      (wpipe_settle()): the kernel takes an entry's size whenever the
 *      request was sent after a write's reply (attr_version), and a size
 *      without that write then stands for the attribute timeout, so
 *      lseek(SEEK_END) and reads stop at it (issue 38 #1: another
 *      process's open looked the file up while a getattr was landing it).
 *   2. data_gen is bumped after a change is on B (a write when it lands,
 *      copy_file_range after the copy, fallocate and truncate after), and
 *      a read-ahead window is tagged with the generation read before its
 *      data: a window read while a change was landing is never served
 *      after it (issue 24 #1: copy_file_range bumped it only before).
 *      With the bump, B's mtime and size are stamped as the mount's own
 *      (stamp_landed(), #16).
 *   3. A direct write on an inode F may cache: overlay, write, drop the
 *      range, answer (issue 24 #2 and #3).  F may cache an inode from the
 *      first open of a cached handle or the first page-cache READ of a
 *      mapping on; that moment waits for direct writes already past
 *      their check.
 *   4. An operation after which the backing filesystem may have cleared
 *      set-id bits (writes, truncate, fallocate, copy_file_range, O_TRUNC)
 *      or changed the mode (an access ACL) drops the inode's attributes
 *      before its reply if any bit went: the kernel itself only refreshes
 *      size and times, so statx() for the mode alone showed the old bits
 *      (#6; issue 38 #3: also when one of two bits stays).  A writer of a
 *      set-id file gets no kernel passthrough I/O, so that its writes come
 *      here (passthrough.c).
 *   5. An outside change drops F at the next open (before open returns)
 *      or stat, and D's windows through data_gen.
 *   6. Release of a stream drops what it left in F and B; an auto handle's
 *      switch drops what it cached before (io_stream.c).  Every drop of F
 *      also drops the attributes, and a GETATTR in flight meanwhile is
 *      discarded by the kernel: so no drop is sent that an open without
 *      keep_cache made needless (the kernel dropped all of F before that
 *      open returned), or the new reader's size refresh after a change
 *      from outside may be lost and its read stop at the old end
 *      (notify_cache_dropped(), #20).
 *   7. posix_fadvise(DONTNEED) drops clean pages only (F or B): nothing to
 *      do.  A reload changes the decisions of later opens only.
 *
 * Changes from outside the mount and the stamps that notice them: stamp.c.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"

/* ---- who may cache the data, and the transitions that must invalidate ---- */

/*
 * The mount may hold pages of the inode in its FUSE page cache: a handle
 * without FOPEN_DIRECT_IO that the kernel does not pass through was opened
 * (forwarded cache class, auto and deferred handles, fuse_readahead
 * readers), or a mapping of a direct-I/O handle faulted pages in.  Sticky
 * for the inode's life: pages outlive their handles (keep_cache).
 */
#define COH_FUSE_CACHE 1u
/*
 * Set-id bits the kernel may hold for the inode: each seen in a reply or
 * at an open since the attributes were last dropped for them.
 */
#define COH_SUID 2u
#define COH_SGID 8u
/* 4u: COH_OUTSIDE, a change from outside not yet seen by an open (stamp.c) */
/*
 * Above the flags: direct writes in progress that checked COH_FUSE_CACHE
 * and found it clear.  Setting the flag waits for them (coh_may_hold()):
 * a handle that could cache a page before such a write lands would keep
 * it after, uninvalidated.  Both sides use sequentially consistent
 * atomics, so either the write sees the flag or the setter sees the write.
 */
#define COH_WRITER 256u
#define COH_FLAGS (COH_WRITER - 1)
#define DRAIN_WAIT_US 2000000

/* From now on the FUSE cache may hold pages of the inode. */
static void coh_may_hold(struct dcfs_inode *inode)
{
	unsigned int old = atomic_fetch_or(&inode->coh_flags, COH_FUSE_CACHE);

	if (old & COH_FUSE_CACHE)
		return;
	for (int waited = 0; waited < DRAIN_WAIT_US && atomic_load(&inode->coh_flags) >= COH_WRITER;
	     waited += 200)
		usleep(200);
}

void coherence_opened(struct dcfs_file *f, const struct fuse_file_info *fi)
{
	f->use.direct_io = fi->direct_io;
	if (!fi->direct_io && !passthrough_by_kernel(f))
		coh_may_hold(f->inode);
}

/*
 * A READ of a direct-I/O handle without a lock owner comes from the page
 * cache, not from read(2): the kernel names the caller's files table only
 * for direct reads (fuse_direct_io()).  So the file is mapped.
 */
void coherence_read_seen(struct dcfs_file *f, const struct fuse_file_info *fi)
{
	if (f->use.direct_io && !fi->lock_owner)
		coh_may_hold(f->inode);
	/*
	 * A handle that writes through the FUSE cache and reads through it
	 * too (read(2), or faults of a mapping): as for a write-back of a
	 * mapping (coherence_write_seen()), and seen before the first drop (#15).
	 */
	if (f->use.cached_writer)
		notify_writer_mixed(f->inode->nodeid);
}

/*
 * A write-back of cached pages (FUSE_WRITE_CACHE): the file is mapped
 * shared and written through the mapping.  From now on the FUSE cache of
 * the inode is not dropped piecemeal while it is open for writing
 * (notify.c; KNOWN_FAILURES #15).
 */
void coherence_write_seen(struct dcfs_file *f, const struct fuse_file_info *fi)
{
	if (fi->writepage)
		notify_writer_mixed(f->inode->nodeid);
}

static unsigned int setid_flags(mode_t mode)
{
	return (mode & S_ISUID ? COH_SUID : 0) | (mode & S_ISGID ? COH_SGID : 0);
}

void coherence_saw_mode(struct dcfs_inode *inode, mode_t mode)
{
	unsigned int bits = setid_flags(mode);

	if (bits)
		atomic_fetch_or(&inode->coh_flags, bits);
}

/*
 * The backing filesystem clears set-id bits on writes, truncation and
 * fallocate by callers without CAP_FSETID: the set-user-id bit always, the
 * set-group-id bit where the group may execute or the caller is not in the
 * file's group (so a 6744 file written by its owner keeps the latter).
 * The kernel refreshes only size and times after such requests, so a
 * statx() for the mode alone would show the old bits until the attribute
 * timeout: drop the attributes before the reply whenever a bit the kernel
 * may hold went (issue 38 #3: only a file that lost both was dropped).
 */
void coherence_mode_may_change(struct dcfs_inode *inode, int fd)
{
	unsigned int held = atomic_load(&inode->coh_flags) & (COH_SUID | COH_SGID);
	unsigned int gone;
	struct stat st;

	if (!held)
		return;
	/* A streamed write clears the bits when it lands. */
	wpipe_sync_inode(inode);
	if (fstat(fd, &st) < 0)
		return;
	gone = held & ~setid_flags(st.st_mode);
	if (gone) {
		atomic_fetch_and(&inode->coh_flags, ~gone);
		notify_inval_attr_now(inode->nodeid);
	}
}

/* A mode changed through an ACL: the kernel only refreshes ctime. */
void coherence_mode_changed(struct dcfs_inode *inode)
{
	notify_inval_attr_now(inode->nodeid);
}

/*
 * Direct writes beside the FUSE page cache.
 *
 * A write that does not pass through the FUSE page cache (a streaming
 * handle's FOPEN_DIRECT_IO, an O_DIRECT caller, AIO) leaves pages of the
 * range that the kernel read while it was in flight: kernels before 6.19
 * invalidate them only before sending an asynchronous direct write, and
 * for FOPEN_DIRECT_IO only before either kind.  A reader then sees the old
 * data after the write completed (issue 24 #2); a page of a shared mapping
 * read in that window and then written to carries the old bytes back over
 * the new ones when it is written back (#3: a pwrite lost).
 *
 * So while such a write is in progress on an inode the mount may cache,
 * it is published here as an overlay: the daemon's READs of the range
 * return its bytes, and write-backs of cached pages (launder included)
 * get its bytes put back in, whatever their pages held.  The write is made
 * (a streaming handle may keep it in its buffer: every later read or
 * write of the range through the daemon writes that first), then the
 * range is invalidated in the kernel: pages read before are dropped (dirty
 * ones written back, patched), and pages read since already hold the new
 * bytes.  Only then is the overlay
 * withdrawn and the write answered.  The invalidation runs on a thread of
 * its own (it may wait for a write-back that needs a free daemon thread);
 * the handler waits for it, for at most INVAL_WAIT, so an overloaded
 * daemon answers late rather than never (the overlay stays until done).
 */
struct coh_overlay {
	struct coh_overlay *next;
	struct dcfs_inode *inode;
	off_t off;
	size_t len;
	char *data;
	uint64_t seq;
	bool done, abandoned;
};

/*
 * Long enough for a loaded machine: answering before the drop leaves a
 * stale window; never answering would hang a daemon whose every thread
 * waits for a write-back that needs one of them.
 */
#define INVAL_WAIT_MS 10000

/* The overlays and the invalidation thread (one instance: the module's state). */
static struct {
	pthread_mutex_t ov_lock;      /* the fields below */
	pthread_cond_t ov_cond;	      /* an overlay was invalidated */
	struct coh_overlay *overlays; /* oldest first */
	uint64_t ov_seq;
	/* the invalidation thread's queue: overlays not yet invalidated */
	pthread_cond_t inval_cond;
	pthread_t inval_thread;
	bool inval_running, inval_stopping;
	_Atomic unsigned int n_overlays;
	_Atomic unsigned long late_invals;
} coh = {
	.ov_lock = PTHREAD_MUTEX_INITIALIZER,
	.ov_cond = PTHREAD_COND_INITIALIZER,
	.inval_cond = PTHREAD_COND_INITIALIZER,
};

static bool overlaps(const struct coh_overlay *o, const struct dcfs_inode *inode, off_t off,
		     size_t len)
{
	return o->inode == inode && off < o->off + (off_t)o->len && o->off < off + (off_t)len;
}

/* Copies every published overlay's bytes over buf (file range off, len). */
static bool patch_locked(struct dcfs_inode *inode, char *buf, off_t off, size_t len,
			 const struct coh_overlay *skip)
{
	bool any = false;

	for (struct coh_overlay *o = coh.overlays; o; o = o->next) {
		off_t lo, hi;

		if (o == skip || !overlaps(o, inode, off, len))
			continue;
		lo = o->off > off ? o->off : off;
		hi = o->off + (off_t)o->len < off + (off_t)len ? o->off + (off_t)o->len
							       : off + (off_t)len;
		memcpy(buf + (lo - off), o->data + (lo - o->off), (size_t)(hi - lo));
		any = true;
	}
	return any;
}

static bool coh_overlaid(struct dcfs_inode *inode, off_t off, size_t len)
{
	bool any = false;

	if (!atomic_load(&coh.n_overlays))
		return false;
	pthread_mutex_lock(&coh.ov_lock);
	for (struct coh_overlay *o = coh.overlays; o && !any; o = o->next)
		any = overlaps(o, inode, off, len);
	pthread_mutex_unlock(&coh.ov_lock);
	return any;
}

static void coh_patch(struct dcfs_inode *inode, char *buf, off_t off, size_t len,
		      const struct coh_overlay *skip)
{
	if (!atomic_load(&coh.n_overlays))
		return;
	pthread_mutex_lock(&coh.ov_lock);
	patch_locked(inode, buf, off, len, skip);
	pthread_mutex_unlock(&coh.ov_lock);
}

static void unlink_free_locked(struct coh_overlay *ov)
{
	struct coh_overlay **p = &coh.overlays;

	while (*p && *p != ov)
		p = &(*p)->next;
	if (*p)
		*p = ov->next;
	atomic_fetch_sub(&coh.n_overlays, 1);
	free(ov->data);
	free(ov);
}

static void *inval_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&coh.ov_lock);
	for (;;) {
		struct coh_overlay *o = coh.overlays;

		if (coh.inval_stopping)
			break; /* the session is over: nothing to invalidate */
		/* the oldest published overlay whose data has landed */
		while (o && (o->done || !o->seq))
			o = o->next;
		if (!o) {
			pthread_cond_wait(&coh.inval_cond, &coh.ov_lock);
			continue;
		}
		pthread_mutex_unlock(&coh.ov_lock);
		notify_inval_range_now(o->inode->nodeid, o->off, (off_t)o->len);
		pthread_mutex_lock(&coh.ov_lock);
		o->done = true;
		if (o->abandoned)
			unlink_free_locked(o);
		pthread_cond_broadcast(&coh.ov_cond);
	}
	pthread_mutex_unlock(&coh.ov_lock);
	return NULL;
}

int coherence_start(void)
{
	if (pthread_create(&coh.inval_thread, NULL, inval_main, NULL) != 0)
		return -EAGAIN;
	coh.inval_running = true;
	return 0;
}

void coherence_stop(void)
{
	if (!coh.inval_running)
		return;
	struct timespec until;

	pthread_mutex_lock(&coh.ov_lock);
	coh.inval_stopping = true;
	pthread_cond_broadcast(&coh.inval_cond);
	pthread_cond_broadcast(&coh.ov_cond);
	pthread_mutex_unlock(&coh.ov_lock);
	/* An invalidation stuck in the kernel must not hold up the exit. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	if (pthread_timedjoin_np(coh.inval_thread, NULL, &until) != 0) {
		pthread_detach(coh.inval_thread);
		coh.inval_running = false;
		return;
	}
	coh.inval_running = false;
	pthread_mutex_lock(&coh.ov_lock);
	/* Left by handlers that gave up waiting, and never invalidated. */
	while (coh.overlays)
		unlink_free_locked(coh.overlays);
	pthread_mutex_unlock(&coh.ov_lock);
}

/*
 * A WRITE with a lock owner is a direct write (fuse_direct_io() names the
 * caller's files table; page-cache write-through and write-back do not).
 * Returns the overlay to pass to coh_direct_end(), or NULL when the inode
 * needs none: nothing of it can be in the FUSE page cache, or the kernel
 * reads it through a backing file.
 */
static bool coh_direct_unprotected(struct dcfs_file *f, const struct fuse_file_info *fi)
{
	if (!fi->lock_owner || fi->writepage)
		return false;
	atomic_fetch_add(&f->inode->coh_flags, COH_WRITER);
	if (!(atomic_load(&f->inode->coh_flags) & COH_FUSE_CACHE))
		return true;
	atomic_fetch_sub(&f->inode->coh_flags, COH_WRITER);
	return false;
}

static void coh_direct_unprotected_done(struct dcfs_inode *inode)
{
	atomic_fetch_sub(&inode->coh_flags, COH_WRITER);
}

static struct coh_overlay *coh_direct_begin(struct dcfs_file *f, const struct fuse_file_info *fi,
					    const void *data, size_t len, off_t off)
{
	struct coh_overlay *ov, **tail;

	if (!fi->lock_owner || fi->writepage || !len || !coh.inval_running ||
	    passthrough_backed(f->inode))
		return NULL;
	ov = calloc(1, sizeof(*ov));
	if (!ov || !(ov->data = malloc(len))) {
		free(ov);
		return NULL;
	}
	memcpy(ov->data, data, len);
	ov->inode = f->inode;
	ov->off = off;
	ov->len = len;
	pthread_mutex_lock(&coh.ov_lock);
	for (tail = &coh.overlays; *tail; tail = &(*tail)->next)
		;
	*tail = ov;
	atomic_fetch_add(&coh.n_overlays, 1);
	pthread_mutex_unlock(&coh.ov_lock);
	return ov;
}

/* The write was made (or failed): invalidate, wait, withdraw. */
static void coh_direct_end(struct coh_overlay *ov)
{
	struct timespec until;

	if (!ov)
		return;
	/*
	 * The write may still sit in the handle's buffer: whatever reads or
	 * writes the range later through the daemon writes the buffer first.
	 */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += INVAL_WAIT_MS / 1000;
	until.tv_nsec += (INVAL_WAIT_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&coh.ov_lock);
	ov->seq = ++coh.ov_seq;
	pthread_cond_broadcast(&coh.inval_cond);
	while (!ov->done && !coh.inval_stopping)
		if (pthread_cond_timedwait(&coh.ov_cond, &coh.ov_lock, &until) == ETIMEDOUT)
			break;
	if (ov->done) {
		unlink_free_locked(ov);
		pthread_mutex_unlock(&coh.ov_lock);
		return;
	}
	ov->abandoned = true; /* the thread frees it */
	pthread_mutex_unlock(&coh.ov_lock);
	if (atomic_fetch_add(&coh.late_invals, 1) == 0)
		log_warn(
			"a direct write was answered before the FUSE cache of its range was dropped (%d ms): readers may see old data until it is\n",
			INVAL_WAIT_MS);
}

/* A READ of a range a direct write is landing in: with its bytes. */
static bool read_overlaid(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off)
{
	char *buf = malloc(size ? size : 1);
	ssize_t n;

	if (!buf)
		return false;
	n = pread(f->fd, buf, size, off);
	if (n < 0) {
		free(buf);
		return false; /* a write-only fd: the strategy reads */
	}
	coh_patch(f->inode, buf, off, (size_t)n, NULL);
	fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
	return true;
}

/*
 * A READ of a range a direct write is landing in is answered here, with
 * that write's bytes: true if it was (the request is replied).
 */
bool coherence_read_overlaid(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off)
{
	return coh_overlaid(f->inode, off, size) && read_overlaid(req, f, size, off);
}

/*
 * The handle's strategy writes in (f->io->write), beside the FUSE page
 * cache: a direct write's data is in memory, published while it lands;
 * and a write-back of cached pages while a direct write of the range
 * lands carries the direct write's bytes.  The bytes written, or -errno.
 */
ssize_t coherence_write(struct dcfs_file *f, const struct fuse_file_info *fi,
			struct fuse_bufvec *in, off_t off)
{
	size_t len = fuse_buf_size(in);
	bool direct = fi->lock_owner && !fi->writepage;
	struct fuse_bufvec mem = FUSE_BUFVEC_INIT(len);
	struct coh_overlay *ov = NULL;
	ssize_t n;

	/* Nothing of the file can be in the FUSE cache: as it comes. */
	if (direct && coh_direct_unprotected(f, fi)) {
		n = f->io->write(f, in, off);
		coh_direct_unprotected_done(f->inode);
		return n;
	}
	if (!direct && !coh_overlaid(f->inode, off, len))
		return f->io->write(f, in, off);
	/* In memory already: written from there, so the engine may adopt it. */
	if (direct && in->count == 1 && !(in->buf[0].flags & FUSE_BUF_IS_FD)) {
		ov = coh_direct_begin(f, fi, (const char *)in->buf[0].mem + in->off, len, off);
		n = f->io->write(f, in, off);
		if (n >= 0)
			stamp_landed(f->inode, f->fd);
		coh_direct_end(ov);
		return n;
	}
	mem.buf[0].mem = malloc(len ? len : 1);
	if (!mem.buf[0].mem)
		return -ENOMEM;
	n = fuse_buf_copy(&mem, in, 0);
	if (n >= 0) {
		mem.buf[0].size = (size_t)n;
		if (direct)
			ov = coh_direct_begin(f, fi, mem.buf[0].mem, (size_t)n, off);
		else
			coh_patch(f->inode, mem.buf[0].mem, off, (size_t)n, NULL);
		n = f->io->write(f, &mem, off);
		if (n >= 0)
			stamp_landed(f->inode, f->fd);
		coh_direct_end(ov);
	}
	free(mem.buf[0].mem);
	return n;
}
