// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What the handlers call: the life of an open file (struct dcfs_file) and
 * every request on it, and the attribute requests that must see the data
 * as the mount holds it.  A request comes down here once and goes back up
 * with its answer; the order of the coherence model's steps
 * (coherence.c), the write pipe's (write_pipe.c), passthrough's
 * (passthrough.c) and the notifications (notify.c) is kept here, not in
 * the handlers.
 *
 * As fs/fuse/iomode.c does for the kernel's side of a FUSE file, the I/O
 * mode of a handle is decided once, at io_open(), and everything it set
 * up on its inode is undone in reverse at its release: io_select() picks
 * the strategy and the open flags, passthrough.c decides who does the
 * handle's I/O and keeps the per-inode state the kernel requires, and the
 * rest of the open follows from those two decisions.
 *
 * A handle lives while the kernel has it open or a request holds it
 * (io_get()/io_put()): when the caller of a long read is killed, the
 * kernel gives up on the request and sends RELEASE at once, and the fd
 * must not be closed (and maybe reused for another file) nor the buffers
 * freed under the request still in the daemon.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "io/io.h"

/*
 * Every open handle is on a list, so that handles the kernel never
 * releases (a lazy unmount with files still open) are freed at teardown.
 */
static struct {
	pthread_mutex_t lock;
	struct dcfs_file *list;
	size_t n;
} files = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void files_link(struct dcfs_file *f)
{
	pthread_mutex_lock(&files.lock);
	f->next = files.list;
	if (files.list)
		files.list->prev = f;
	files.list = f;
	files.n++;
	pthread_mutex_unlock(&files.lock);
}

static void files_unlink(struct dcfs_file *f)
{
	pthread_mutex_lock(&files.lock);
	if (f->prev)
		f->prev->next = f->next;
	else
		files.list = f->next;
	if (f->next)
		f->next->prev = f->prev;
	files.n--;
	pthread_mutex_unlock(&files.lock);
}

/* For the graceful stop (shutdown.c). */
size_t io_open_count(void)
{
	size_t n;

	pthread_mutex_lock(&files.lock);
	n = files.n;
	pthread_mutex_unlock(&files.lock);
	return n;
}

/* What `dcfs stat --files` shows of a handle (handlers/report.c). */
static void view_of(struct dcfs_file *f, struct io_file_view *v)
{
	const struct file_stats *st = f->stats;

	v->inode = f->inode;
	v->policy = f->policy;
	v->uid = st->uid;
	v->pid = st->pid;
	v->bytes[0] = atomic_load(&st->bytes[0]);
	v->bytes[1] = atomic_load(&st->bytes[1]);
	v->why = st->why;
	pthread_mutex_lock(&f->lock);
	v->streamed = f->io != &io_plain;
	v->read_uncached = f->use.read_uncached;
	v->write_uncached = f->use.write_uncached;
	v->probe_rd = f->probe ? f->probe->rd : PROBE_UNKNOWN;
	v->probe_wr = f->probe ? f->probe->wr : PROBE_UNKNOWN;
	v->switch_after = f->io == &io_stream ? f->stream->switch_after : 0;
	pthread_mutex_unlock(&f->lock);
}

/*
 * For `dcfs stat --files`: fn sees every regular file's handle, with the
 * list locked (the view's strings last until fn returns).
 */
void io_foreach(void (*fn)(const struct io_file_view *v, void *arg), void *arg)
{
	struct io_file_view v;

	pthread_mutex_lock(&files.lock);
	for (struct dcfs_file *f = files.list; f; f = f->next) {
		if (!f->stats)
			continue;
		view_of(f, &v);
		fn(&v, arg);
	}
	pthread_mutex_unlock(&files.lock);
}

/* The threads of the I/O layer, once the session is served. */
int io_start(struct fuse_session *se)
{
	if (notify_start(se) < 0 || coherence_start() < 0 || dropbehind_start() < 0)
		return -EAGAIN;
	return 0;
}

void io_stop(void)
{
	dropbehind_stop();
	coherence_stop();
	notify_stop();
}

/*
 * Before the backing open: an O_TRUNC open truncates what the mount
 * acknowledged, which must have landed.  inode NULL: a create, whose name
 * may hold any file with buffered writes.
 */
void io_open_prepare(struct dcfs_inode *inode, int flags)
{
	if (!(flags & O_TRUNC))
		return;
	if (inode)
		wpipe_sync_inode(inode);
	else
		wpipe_sync_all();
}

/*
 * After passthrough.c decided who does the handle's I/O: the kernel may
 * reach the backing file, the FUSE cache may hold the data, a trailing
 * drop-behind, the write-behind of a kernel-served write stream or the
 * write-through bookkeeping of notify.c may be needed.
 */
static void open_finish(struct dcfs_file *f, struct fuse_file_info *fi)
{
	/*
	 * The kernel reaches the backing file itself from now on (I/O or
	 * mappings): what streaming handles hold back (write_pipe.c) must be
	 * there.
	 */
	if (passthrough_reaches_backing(f))
		wpipe_sync_inode(f->inode);
	/* No FUSE cache with direct I/O, nor where the kernel reads. */
	if (fi->direct_io || passthrough_by_kernel(f))
		f->use.fuse_cached = false;
	coherence_opened(f, fi);
	/* The kernel drops the file's FUSE cache before this open returns. */
	if (!fi->keep_cache && S_ISREG(f->inode->type))
		notify_cache_dropped(f->inode);
	if (f->pt.dropbehind_wish && passthrough_by_kernel(f))
		dropbehind_add(f);
	writebehind_decided(f);
	/* Whether what such a stream leaves may go at release (dropbehind.c). */
	if (f->pt.uncached)
		f->use.was_resident = io_select_has_cached_pages(f->fd);
	if (f->use.fuse_cached)
		stats_add(f->policy, ST_FUSE_READAHEAD, 1);
	/* Its writes go through the FUSE page cache: see notify.c. */
	if ((f->flags & O_ACCMODE) != O_RDONLY && !fi->direct_io && !passthrough_by_kernel(f))
		f->use.cached_writer = notify_writer_open(f->inode->nodeid);
}

/*
 * A new handle of inode on the backing fd opened with fi->flags, just
 * before the open or create reply: sets fi->fh and the reply's open flags.
 * The handle owns fd from here; on failure (-errno) the caller still does.
 * st: the file's stat if the caller has just taken it, else NULL.
 */
int io_open(fuse_req_t req, struct dcfs_inode *inode, int fd, struct fuse_file_info *fi,
	    const struct stat *st)
{
	struct dcfs_file *f = calloc(1, sizeof(*f));
	int err;

	if (!f)
		return -ENOMEM;
	f->fd = fd;
	f->flags = fi->flags;
	f->inode = inode;
	f->io = &io_plain;
	f->refs = 1; /* dropped by io_release() */
	pthread_mutex_init(&f->lock, NULL);
	err = io_select(req, f, fi, st);
	if (err) {
		writebehind_stop(f);
		io_stream_free(f);
		pthread_mutex_destroy(&f->lock);
		free(f);
		return err;
	}
	fi->fh = (uintptr_t)f;
	passthrough_open(req, f, fi);
	open_finish(f, fi);
	files_link(f);
	/* The truncation may have cleared set-id bits the kernel shows. */
	if (fi->flags & O_TRUNC)
		coherence_mode_may_change(inode, fd);
	return 0;
}

/* The open's setup, undone in reverse (io_open()). */
static void file_free(struct dcfs_file *f)
{
	files_unlink(f);
	writebehind_quiesce(f); /* its threads count into f->stats */
	file_stats_close(f);
	wpipe_land(f); /* before the inode may get a backing file */
	passthrough_release(f);
	dropbehind_remove(f); /* after the counts, before the fd goes */
	writebehind_stop(f);
	/* Before release: what the handle leaves may then be dropped. */
	if (f->use.cached_writer)
		notify_writer_close(f->inode->nodeid);
	if (f->io->release)
		f->io->release(f);
	io_stream_free(f);
	close(f->fd);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/* A request's reference to the handle of fi, for as long as it runs. */
struct dcfs_file *io_get(struct fuse_file_info *fi)
{
	struct dcfs_file *f = dcfs_file_of(fi);

	atomic_fetch_add(&f->refs, 1);
	return f;
}

void io_put(struct dcfs_file *f)
{
	if (atomic_fetch_sub(&f->refs, 1) == 1)
		file_free(f);
}

/*
 * RELEASE, or an open whose reply the kernel did not take: the handle
 * goes once the last request holding it is done.
 */
void io_release(struct dcfs_file *f)
{
	io_put(f);
}

void io_release_all(void)
{
	while (files.list)
		file_free(files.list);
}

/* The backing fd of the handle the kernel named, or -1 (fi NULL). */
int io_fd(struct fuse_file_info *fi)
{
	return fi ? dcfs_file_of(fi)->fd : -1;
}

/*
 * f changed the data: read-ahead buffers of every handle of the inode are
 * stale now, and what the backing file looks like after it is the mount's
 * own (stamp.c).
 */
static void data_changed(struct dcfs_file *f)
{
	stamp_landed(f->inode, f->fd);
}

/* READ: replies itself (the strategy may splice the data to the kernel). */
void io_read(fuse_req_t req, struct dcfs_file *f, const struct fuse_file_info *fi, size_t size,
	     off_t off)
{
	coherence_read_seen(f, fi);
	wpipe_sync_inode(f->inode);
	/* Before the reply: the next request of the stream may follow at once. */
	io_stream_account(f, off, size);
	if (!coherence_read_overlaid(req, f, size, off))
		f->io->read(req, f, size, off);
}

/* WRITE, with the caller's identity: the bytes written, or -errno. */
ssize_t io_write(fuse_req_t req, struct dcfs_file *f, const struct fuse_file_info *fi,
		 struct fuse_bufvec *in, off_t off)
{
	int how = creds_io_begin(req);
	ssize_t n;

	coherence_write_seen(f, fi);
	wpipe_sync_others(f);
	/* A deferred error of any handle of the file is this write's answer. */
	n = wpipe_check(f);
	/* The data may not be in libfuse's buffer (reqbuf.c). */
	if (!n)
		n = reqbuf_locate(in);
	if (!n)
		n = coherence_write(f, fi, in, off);
	creds_io_end(how);
	data_changed(f);
	if (n > 0)
		coherence_mode_may_change(f->inode, f->fd);
	/* Before the reply, as for a read. */
	if (n >= 0)
		io_stream_account(f, off, (size_t)n);
	return n;
}

/*
 * FLUSH: close(2) of a duplicate reports deferred write errors of
 * filesystems that have them (NFS, FUSE) to the caller's close, as the
 * kernel would; so do the handle's own (write_pipe.c).  0 or -errno.
 */
int io_flush(struct dcfs_file *f)
{
	int werr = wpipe_flush(f);
	int fd, err;

	writebehind_flush(f); /* before the next open, maybe before RELEASE */
	fd = dup(f->fd);
	err = fd < 0 ? -errno : (int)dcfs_err(close(fd));
	return werr ? werr : err;
}

int io_fsync(struct dcfs_file *f, int datasync)
{
	int werr = wpipe_flush(f);
	int err = (int)dcfs_err(datasync ? fdatasync(f->fd) : fsync(f->fd));

	if (!err)
		wpipe_synced(f);
	return werr ? werr : err;
}

/* FALLOCATE, with the caller's identity: 0 or -errno. */
int io_fallocate(fuse_req_t req, struct dcfs_file *f, int mode, off_t off, off_t len)
{
	int how, err;

	wpipe_sync_inode(f->inode);
	how = creds_io_begin(req);
	err = (int)dcfs_err(fallocate(f->fd, mode, off, len));
	creds_io_end(how);
	data_changed(f);
	if (!err)
		coherence_mode_may_change(f->inode, f->fd);
	return err;
}

/* LSEEK (SEEK_DATA, SEEK_HOLE): the offset, or -errno. */
off_t io_lseek(struct dcfs_file *f, off_t off, int whence)
{
	wpipe_sync_inode(f->inode);
	return (off_t)dcfs_err(lseek(f->fd, off, whence));
}

/*
 * Is either side of a copy a stream?  A copy in the backing filesystem
 * would leave both files in its page cache, which is what a streaming
 * class is there to prevent (cp(1) of a film uses copy_file_range): such a
 * copy is made by copy_uncached() instead.
 */
static bool copy_streams(struct dcfs_file *fin, struct dcfs_file *fout)
{
	bool streams;

	pthread_mutex_lock(&fin->lock);
	streams = fin->use.read_uncached;
	pthread_mutex_unlock(&fin->lock);
	if (streams)
		return true;
	pthread_mutex_lock(&fout->lock);
	streams = fout->use.write_uncached;
	pthread_mutex_unlock(&fout->lock);
	return streams;
}

/*
 * COPY_FILE_RANGE, with the caller's identity: the bytes copied, or
 * -errno.
 */
ssize_t io_copy_file_range(fuse_req_t req, struct dcfs_file *fin, off_t off_in,
			   struct dcfs_file *fout, off_t off_out, size_t len, int flags)
{
	loff_t in = off_in, out = off_out;
	bool streams = copy_streams(fin, fout);
	ssize_t n;
	int how;

	wpipe_sync_inode(fin->inode);
	wpipe_sync_inode(fout->inode);
	data_changed(fout);
	how = creds_io_begin(req);
	if (streams)
		n = copy_uncached(fin, in, fout, out, len);
	else
		n = dcfs_err(
			copy_file_range(fin->fd, &in, fout->fd, &out, len, (unsigned int)flags));
	creds_io_end(how);
	/*
	 * Again once the copy landed: a read-ahead window read meanwhile
	 * carries the generation bumped before and would be served stale.
	 */
	data_changed(fout);
	if (n > 0)
		coherence_mode_may_change(fout->inode, fout->fd);
	return n;
}

/* --- attributes and entries --------------------------------------------- */

/*
 * GETATTR: the attributes with every acknowledged write of the inode
 * landed (through the handle's fd when the kernel named one).  A change
 * made in the backing tree drops what the mount caches of the file, not
 * while the kernel reads it through a backing file (nothing cached then).
 */
int io_getattr(struct dcfs_inode *inode, struct fuse_file_info *fi, struct stat *st)
{
	uint64_t gen;
	int err;

	wpipe_sync_inode(inode);
	gen = stamp_gen(inode);
	if (fi)
		err = (int)dcfs_err(fstat(dcfs_file_of(fi)->fd, st));
	else
		err = inode_stat(inode, st);
	if (err)
		return err;
	if (stamp_changed_outside(inode, st, gen) && !passthrough_backed(inode))
		notify_inval(inode->nodeid, 0, 0, 0);
	coherence_saw_mode(inode, st->st_mode);
	return 0;
}

/* SETATTR, before it changes anything: a size or mtime set must stay. */
void io_setattr_prepare(struct dcfs_inode *inode)
{
	wpipe_sync_inode(inode);
}

/*
 * SETATTR's new size, through the handle's fd if any (fd >= 0), else
 * through the inode's pinned O_PATH fd (pfd): 0 or -errno.
 */
int io_truncate(struct dcfs_inode *inode, int pfd, int fd, off_t size)
{
	char path[64];
	int err;

	if (fd >= 0) {
		err = (int)dcfs_err(ftruncate(fd, size));
	} else {
		inode_proc_path(pfd, path);
		err = (int)dcfs_err(truncate(path, size));
	}
	stamp_changed_inside(inode);
	return err;
}

/* SETATTR done: a new size or mtime of the mount's own is no outside change. */
void io_setattr_done(struct dcfs_inode *inode, int valid)
{
	if (valid & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
		stamp_changed_inside(inode);
}

/* A mark for io_entry_settle(), taken before an entry's attributes are read. */
uint64_t io_entry_mark(void)
{
	return wpipe_landings();
}

/*
 * An entry (lookup, link, readdirplus, create of an existing name) is
 * about to be replied with attributes read after mark: true if they must
 * be read again, now that the inode's acknowledged writes landed
 * (wpipe_settle()).
 */
bool io_entry_settle(struct dcfs_inode *inode, uint64_t mark)
{
	return wpipe_settle(inode, mark);
}

/* The mode changed other than by chmod (an access ACL). */
void io_mode_changed(struct dcfs_inode *inode)
{
	coherence_mode_changed(inode);
}

/* What an open of a cache-class file would get now, for user.dcfs.policy. */
void io_describe_cached(struct dcfs_inode *inode, char *buf, size_t size)
{
	passthrough_describe(inode, buf, size);
}

/* How asker's write open of a streaming file would have its writes served now. */
void io_describe_writes(struct dcfs_inode *inode, const struct dcfs_config *cfg, bool deferred,
			pid_t asker, char *buf, size_t size)
{
	writebehind_describe(inode, cfg, deferred, asker, buf, size);
}
