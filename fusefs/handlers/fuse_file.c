// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE handlers for open files.  Each open gets its own backing fd and an
 * I/O strategy chosen once, here, at open/create; read and write only call
 * through the handle.
 *
 * Data a streaming handle has acknowledged but not yet written (write_pipe.c)
 * is written before any operation here that could observe it.
 *
 * Locks are the backing filesystem's (fuse_lock.c): a close(2) ends the
 * closing process's POSIX locks (flush), a release its flock and F_OFD_*
 * locks.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "handlers/handlers.h"

/*
 * O_DIRECT is not passed down: FUSE hands the daemon buffers with no
 * alignment guarantee, so the backing file's alignment rules would leak out
 * as EINVAL.  The kernel already bypasses its FUSE page cache for O_DIRECT
 * callers.
 */
static int backing_flags(int flags)
{
	return (flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_DIRECT)) | O_CLOEXEC;
}

/*
 * Every open handle is on a list, so that handles the kernel never
 * releases (a lazy unmount with files still open) are freed at teardown.
 */
static struct dcfs_file *open_files;
static size_t nopen_files;
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;

static void files_link(struct dcfs_file *f)
{
	pthread_mutex_lock(&files_lock);
	f->next = open_files;
	if (open_files)
		open_files->prev = f;
	open_files = f;
	nopen_files++;
	pthread_mutex_unlock(&files_lock);
}

static void files_unlink(struct dcfs_file *f)
{
	pthread_mutex_lock(&files_lock);
	if (f->prev)
		f->prev->next = f->next;
	else
		open_files = f->next;
	if (f->next)
		f->next->prev = f->prev;
	nopen_files--;
	pthread_mutex_unlock(&files_lock);
}

/* For the graceful stop (shutdown.c). */
size_t files_open_count(void)
{
	size_t n;

	pthread_mutex_lock(&files_lock);
	n = nopen_files;
	pthread_mutex_unlock(&files_lock);
	return n;
}

/* For `dcfs stat --files`: fn runs with the list locked, f cannot go away. */
void files_foreach(void (*fn)(struct dcfs_file *f, void *arg), void *arg)
{
	pthread_mutex_lock(&files_lock);
	for (struct dcfs_file *f = open_files; f; f = f->next)
		fn(f, arg);
	pthread_mutex_unlock(&files_lock);
}

/* st: the file's stat if the caller has just taken it, else NULL. */
static int file_new(fuse_req_t req, struct dcfs_inode *inode, int fd,
		    int flags, struct fuse_file_info *fi, const struct stat *st)
{
	struct dcfs_file *f = calloc(1, sizeof(*f));
	int err;

	if (!f)
		return -ENOMEM;
	f->fd = fd;
	f->flags = flags;
	f->inode = inode;
	f->io = &io_plain;
	f->refs = 1; /* dropped by release */
	pthread_mutex_init(&f->lock, NULL);
	err = io_select(req, f, fi, st);
	if (err) {
		stream_state_free(f);
		pthread_mutex_destroy(&f->lock);
		free(f);
		return err;
	}
	fi->fh = (uintptr_t)f;
	passthrough_open(req, f, fi);
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
	coh_opened(f, fi);
	if (f->pt.dropbehind_wish && passthrough_by_kernel(f))
		dropbehind_add(f);
	/* Whether what such a stream leaves may go at release (dropbehind.c). */
	if (f->pt.uncached)
		f->use.was_resident = file_has_cached_pages(f->fd);
	if (f->use.fuse_cached)
		stats_add(f->policy, ST_FUSE_READAHEAD, 1);
	/* Its writes go through the FUSE page cache: see notify.c. */
	if ((flags & O_ACCMODE) != O_RDONLY && !fi->direct_io &&
	    !passthrough_by_kernel(f))
		f->use.cached_writer = notify_writer_open(inode->nodeid);
	files_link(f);
	return 0;
}

static void file_free(struct dcfs_file *f)
{
	files_unlink(f);
	stats_file_close(f);
	wpipe_land(f); /* before the inode may get a backing file */
	passthrough_release(f);
	dropbehind_remove(f); /* after the counts, before the fd goes */
	/* Before release: what the handle leaves may then be dropped. */
	if (f->use.cached_writer)
		notify_writer_close(f->inode->nodeid);
	if (f->io->release)
		f->io->release(f);
	stream_state_free(f);
	close(f->fd);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/*
 * A request already in the daemon may outlive the kernel's view of the
 * handle: when the caller is killed mid-read, the kernel gives up on the
 * request and sends RELEASE at once.  Handlers of long operations hold a
 * reference, so the fd is not closed (and maybe reused for another file)
 * and the buffers not freed under them.
 */
static struct dcfs_file *file_get(struct fuse_file_info *fi)
{
	struct dcfs_file *f = dcfs_file_of(fi);

	atomic_fetch_add(&f->refs, 1);
	return f;
}

static void file_put(struct dcfs_file *f)
{
	if (atomic_fetch_sub(&f->refs, 1) == 1)
		file_free(f);
}

void files_release_all(void)
{
	while (open_files)
		file_free(open_files);
}

/*
 * f changed the data: read-ahead buffers of every handle of the inode are
 * stale now, and what the backing file looks like after it is the mount's
 * own (coherence.c).
 */
static void data_changed(struct dcfs_file *f)
{
	coherence_landed(f->inode, f->fd);
}

/* Opens the backing object of inode; an fd shortage shrinks the cache. */
static int open_inode(struct dcfs_inode *inode, int flags)
{
	char path[64];
	int pfd = inode_pin(inode), fd;

	if (pfd < 0)
		return pfd;
	inode_proc_path(pfd, path);
	fd = open(path, flags);
	if (fd < 0 && fdcache_retry(errno))
		fd = open(path, flags);
	if (fd < 0)
		fd = -errno;
	inode_unpin(inode);
	return fd;
}

/* Refusals logged one by one before only every REFUSE_LOG_EVERY-th is. */
#define REFUSE_LOG_FIRST 10
#define REFUSE_LOG_EVERY 100

static _Atomic unsigned long refused;

/*
 * While draining, opens fail with EBUSY: "the device is going away, try
 * again later", which callers report sensibly.  Returns true if the open of
 * name in dir (or of inode, name NULL) is refused.
 */
static bool refuse_open_while_stopping(fuse_req_t req,
				       struct dcfs_inode *inode,
				       const char *name)
{
	unsigned long n;
	char path[4096];

	if (!shutdown_draining())
		return false;
	n = atomic_fetch_add(&refused, 1) + 1;
	if (n <= REFUSE_LOG_FIRST || n % REFUSE_LOG_EVERY == 0) {
		if (file_backing_path(inode, path, sizeof(path)) < 0)
			snprintf(path, sizeof(path), "(ino %llu)",
				 (unsigned long long)inode->ino);
		log_info("stopping: refused %s of %s%s%s by pid %d (EBUSY)%s\n",
			 name ? "create" : "open", path,
			 name && strcmp(path, "/") ? "/" : "", name ? name : "",
			 (int)fuse_req_ctx(req)->pid,
			 n > REFUSE_LOG_FIRST ? " (logging every 100th)" : "");
	}
	return true;
}

/*
 * __FMODE_EXEC: the kernel's open of a program for execve() (fs/exec.c)
 * keeps it in the file's f_flags, and FUSE passes those in OPEN.  Not in
 * the userspace headers; open(2) drops it (VALID_OPEN_FLAGS), so no caller
 * can set it.
 */
#define DCFS_FMODE_EXEC 040

static bool is_exec_open(int flags)
{
	return (flags & DCFS_FMODE_EXEC) && (flags & O_ACCMODE) == O_RDONLY &&
	       !(flags & (O_TRUNC | O_CREAT | O_APPEND));
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The daemon's own filesystem identity, for one open (as in handle.c). */
static int open_as_daemon(const char *path, int flags)
{
	int old = (int)syscall(SYS_setfsuid, -1), fd;

	if (old != 0)
		syscall(SYS_setfsuid, 0);
	fd = open(path, flags);
	if (fd < 0)
		fd = -errno;
	if (old != 0)
		syscall(SYS_setfsuid, old);
	return fd;
}

/*
 * execve() of a file the caller may execute but not read (mode 0711): the
 * kernel needs only execute permission, but the daemon's open as the
 * caller asks the backing filesystem for read permission.  So an exec open
 * whose caller has execute permission on that very inode (checked on its
 * O_PATH fd with the caller's identity, which also honours ACLs and a
 * noexec backing mount) is opened read-only with the daemon's rights;
 * nothing else is granted: the fd stays the kernel's, read-only, for this
 * exec.  A script still fails for such a caller, as natively: its
 * interpreter opens it with an ordinary read open.
 */
static int open_for_exec(struct dcfs_inode *inode)
{
	struct stat want, got;
	char path[64];
	int pfd = inode_pin(inode), fd;

	if (pfd < 0)
		return pfd;
	if (fstat(pfd, &want) < 0) {
		fd = -errno;
	} else if (!S_ISREG(want.st_mode)) {
		fd = -EACCES;
	} else if (faccessat(pfd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) < 0) {
		fd = -errno;
	} else {
		inode_proc_path(pfd, path);
		fd = open_as_daemon(path, O_RDONLY | O_CLOEXEC);
	}
	/* What was checked is what was opened. */
	if (fd >= 0 && (fstat(fd, &got) < 0 || !same_inode(&want, &got))) {
		close(fd);
		fd = -EACCES;
	}
	inode_unpin(inode);
	return fd;
}

static void dcfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dcfs_inode *inode = dcfs_inode_of(ino);
	int fd, err;

	if (refuse_open_while_stopping(req, inode, NULL)) {
		fuse_reply_err(req, EBUSY);
		return;
	}
	if (fi->flags & O_TRUNC)
		wpipe_sync_inode(inode);
	fd = open_inode(inode, backing_flags(fi->flags) & ~O_NOFOLLOW);
	if (fd == -EACCES && dcfs.privileged && is_exec_open(fi->flags))
		fd = open_for_exec(inode);
	fdcache_report(fd < 0 ? -fd : 0, "open");
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	err = file_new(req, inode, fd, fi->flags, fi, NULL);
	if (err) {
		close(fd);
		fuse_reply_err(req, -err);
		return;
	}
	if (fi->flags & O_TRUNC)
		coh_mode_may_change(inode, fd);
	if (fuse_reply_open(req, fi) == -ENOENT)
		file_free(dcfs_file_of(fi));
}

/*
 * Opens name in dir, creating it only if absent; *created says which.
 * Runs as the caller (caller_ops.c), so opening an existing file, which
 * the kernel did not check when the name did not exist at its LOOKUP, is
 * decided by the backing filesystem with the caller's rights, O_TRUNC
 * included.
 */
static int create_or_open(int dirfd, const char *name, int flags,
			  mode_t mode, bool *created)
{
	int fd, base = backing_flags(flags) | O_NOFOLLOW;

	fd = openat(dirfd, name, base | O_CREAT | O_EXCL, mode);
	if (fd < 0 && fdcache_retry(errno))
		fd = openat(dirfd, name, base | O_CREAT | O_EXCL, mode);
	*created = fd >= 0;
	if (fd < 0 && errno == EEXIST && !(flags & O_EXCL)) {
		fd = openat(dirfd, name, base);
		if (fd < 0 && fdcache_retry(errno))
			fd = openat(dirfd, name, base);
	}
	return fd < 0 ? -errno : fd;
}

/* Undoes a create that cannot be completed, if the name still holds it. */
static void undo_create(int dirfd, const char *name, int fd)
{
	struct stat made, now;

	if (fstat(fd, &made) == 0 &&
	    fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
	    made.st_dev == now.st_dev && made.st_ino == now.st_ino)
		unlinkat(dirfd, name, 0);
}

static void dcfs_create(fuse_req_t req, fuse_ino_t parent, const char *name,
			mode_t mode, struct fuse_file_info *fi)
{
	struct dcfs_inode *dir = dcfs_inode_of(parent);
	struct fuse_entry_param e;
	struct umask_scope um;
	uint64_t landed = wpipe_landings();
	bool created;
	int fd, err, dirfd = inode_pin(dir);

	if (refuse_open_while_stopping(req, dir, name)) {
		if (dirfd >= 0)
			inode_unpin(dir);
		fuse_reply_err(req, EBUSY);
		return;
	}
	if (dirfd < 0) {
		fuse_reply_err(req, -dirfd);
		return;
	}
	/* The name may be a file with buffered writes: O_TRUNC comes after. */
	if (fi->flags & O_TRUNC)
		wpipe_sync_all();
	mode = umask_enter(req, mode, &um);
	fd = create_or_open(dirfd, name, fi->flags, mode, &created);
	umask_leave(&um);
	fdcache_report(fd < 0 ? -fd : 0, "create");
	if (fd < 0) {
		inode_unpin(dir);
		fuse_reply_err(req, -fd);
		return;
	}
	/* The object is the one the fd refers to, not what the name holds now. */
	err = inode_lookup_open_fd(fd, &e);
	if (err)
		goto out_undo;
	io_fs_inherit(dcfs_inode_of(e.ino), dir, dirfd);
	err = file_new(req, dcfs_inode_of(e.ino), fd, fi->flags, fi,
		       &e.attr);
	if (err) {
		inode_forget(dcfs_inode_of(e.ino), 1);
		goto out_undo;
	}
	inode_unpin(dir);
	/* An existing file's size, with what other handles acknowledged. */
	if (!created && wpipe_settle(dcfs_inode_of(e.ino), landed))
		fstat(fd, &e.attr);
	if (!created && (fi->flags & O_TRUNC))
		coh_mode_may_change(dcfs_inode_of(e.ino), fd);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		file_free(dcfs_file_of(fi));
		inode_forget(dcfs_inode_of(e.ino), 1);
	}
	return;
out_undo:
	if (created)
		undo_create(dirfd, name, fd);
	inode_unpin(dir);
	close(fd);
	fuse_reply_err(req, -err);
}

/* A READ of a range a direct write is landing in: with its bytes. */
static bool read_overlaid(fuse_req_t req, struct dcfs_file *f, size_t size,
			  off_t off)
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

static void dcfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct dcfs_file *f = file_get(fi);

	(void)ino;
	coh_read_seen(f, fi);
	wpipe_sync_inode(f->inode);
	/* Before the reply: the next request of the stream may follow at once. */
	io_account(f, off, size);
	if (!coh_overlaid(f->inode, off, size) || !read_overlaid(req, f, size, off))
		f->io->read(req, f, size, off);
	file_put(f);
}

/*
 * A write beside the FUSE page cache (coherence.c): its data in memory,
 * published while it lands; and a write-back of cached pages while a
 * direct write of the range lands: with the direct write's bytes.
 */
static ssize_t write_coherent(struct dcfs_file *f, struct fuse_file_info *fi,
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
		ov = coh_direct_begin(f, fi, (const char *)in->buf[0].mem + in->off,
				      len, off);
		n = f->io->write(f, in, off);
		if (n >= 0)
			data_changed(f);
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
			data_changed(f);
		coh_direct_end(ov);
	}
	free(mem.buf[0].mem);
	return n;
}

static void dcfs_write_buf(fuse_req_t req, fuse_ino_t ino,
			   struct fuse_bufvec *in, off_t off,
			   struct fuse_file_info *fi)
{
	struct dcfs_file *f = file_get(fi);
	int how = creds_io_begin(req);
	ssize_t n;

	(void)ino;
	coh_write_seen(f, fi);
	wpipe_sync_others(f);
	/* A deferred error of any handle of the file is this write's answer. */
	n = wpipe_check(f);
	/* The data may not be in libfuse's buffer (reqbuf.c). */
	if (!n)
		n = reqbuf_locate(in);
	if (!n)
		n = write_coherent(f, fi, in, off);
	creds_io_end(how);
	data_changed(f);
	if (n > 0)
		coh_mode_may_change(f->inode, f->fd);
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
	} else {
		io_account(f, off, (size_t)n);
		fuse_reply_write(req, (size_t)n);
	}
	file_put(f);
}

/*
 * close(2) of a duplicate reports deferred write errors of filesystems
 * that have them (NFS, FUSE) to the caller's close, as the kernel would.
 */
static void dcfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dcfs_file *f = file_get(fi);
	int werr = wpipe_flush(f);
	int fd = dup(f->fd);
	int err = fd < 0 ? -errno : (int)dcfs_err(close(fd));

	(void)ino;
	locks_flush(f, fi->lock_owner);
	if (werr)
		err = werr;
	file_put(f);
	fuse_reply_err(req, -err);
}

static void dcfs_release(fuse_req_t req, fuse_ino_t ino,
			 struct fuse_file_info *fi)
{
	(void)ino;
	locks_release(dcfs_file_of(fi), fi->flock_release);
	file_put(dcfs_file_of(fi));
	fuse_reply_err(req, 0);
}

static void dcfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		       struct fuse_file_info *fi)
{
	struct dcfs_file *f = file_get(fi);
	int werr = wpipe_flush(f);
	int err = (int)dcfs_err(datasync ? fdatasync(f->fd) : fsync(f->fd));

	(void)ino;
	if (!err)
		wpipe_synced(f);
	if (werr)
		err = werr;
	file_put(f);
	fuse_reply_err(req, -err);
}

static void dcfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			   off_t off, off_t len, struct fuse_file_info *fi)
{
	struct dcfs_file *f = file_get(fi);
	int how, err;

	wpipe_sync_inode(f->inode);
	how = creds_io_begin(req);
	err = (int)dcfs_err(fallocate(f->fd, mode, off, len));

	(void)ino;
	creds_io_end(how);
	data_changed(f);
	if (!err)
		coh_mode_may_change(f->inode, f->fd);
	file_put(f);
	fuse_reply_err(req, -err);
}

static void dcfs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		       struct fuse_file_info *fi)
{
	off_t res;

	wpipe_sync_inode(dcfs_file_of(fi)->inode);
	res = lseek(dcfs_file_of(fi)->fd, off, whence);
	(void)ino;
	if (res < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, res);
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

/* copy_file_range between streams: pieces, and at most one chunk a request. */
#define COPY_PIECE ((size_t)1 << 20)
#define COPY_CHUNK ((size_t)8 << 20)

/* Writes all of buf at off uncached; bytes written, or -errno if none. */
static ssize_t write_all_uncached(struct probe *p, int fd, const char *buf,
				  size_t len, off_t off)
{
	size_t done = 0;
	ssize_t n = 0;

	while (done < len) {
		n = uncached_pwrite(p, fd, buf + done, len - done,
				    off + (off_t)done);
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	return done ? (ssize_t)done : n < 0 ? n : -EIO;
}

/*
 * A copy between streams, made here with uncached reads and writes.  Made
 * inside the backing filesystem, it would leave both files in its page
 * cache (cp(1) of a film).  Handed back to the kernel (EOPNOTSUPP), it
 * would be read through a direct-I/O handle of the source, which does not
 * see the dirty pages a shared mapping of it may hold.  Returns the bytes
 * copied (a short count: the caller asks again), or -errno;
 * -EOPNOTSUPP where the backing filesystem cannot do uncached I/O, and the
 * kernel then copies through the handles (the fallback windows).
 */
static ssize_t copy_uncached(struct dcfs_file *fin, off_t in,
			     struct dcfs_file *fout, off_t out, size_t len)
{
	struct probe *pin = fin->probe ? fin->probe : probe_get(fin->fd);
	struct probe *pout = fout->probe ? fout->probe : probe_get(fout->fd);
	size_t done = 0, want;
	ssize_t r = 0, w;
	char *buf;

	if (len > COPY_CHUNK)
		len = COPY_CHUNK;
	buf = malloc(len < COPY_PIECE ? len : COPY_PIECE);
	if (!buf)
		return -ENOMEM;
	while (done < len) {
		want = len - done < COPY_PIECE ? len - done : COPY_PIECE;
		r = uncached_pread(pin, fin->fd, buf, want, in + (off_t)done);
		if (r <= 0)
			break;
		stats_io(fin, ST_READ_DONTCACHE, (uint64_t)r);
		w = write_all_uncached(pout, fout->fd, buf, (size_t)r,
				       out + (off_t)done);
		if (w < 0) {
			r = w;
			break;
		}
		stats_io(fout, ST_WRITE_DONTCACHE, (uint64_t)w);
		done += (size_t)w;
		if (w < r || (size_t)r < want)
			break;
	}
	free(buf);
	return done ? (ssize_t)done : r;
}

static void dcfs_copy_file_range(fuse_req_t req, fuse_ino_t ino_in,
				 off_t off_in, struct fuse_file_info *fi_in,
				 fuse_ino_t ino_out, off_t off_out,
				 struct fuse_file_info *fi_out, size_t len,
				 int flags)
{
	loff_t in = off_in, out = off_out;
	struct dcfs_file *fin, *fout;
	bool streams;
	ssize_t n;
	int how;

	(void)ino_in;
	(void)ino_out;
	fin = file_get(fi_in);
	fout = file_get(fi_out);
	streams = copy_streams(fin, fout);
	wpipe_sync_inode(fin->inode);
	wpipe_sync_inode(fout->inode);
	data_changed(fout);
	how = creds_io_begin(req);
	if (streams) {
		n = copy_uncached(fin, in, fout, out, len);
		if (n < 0) {
			errno = (int)-n;
			n = -1;
		}
	} else {
		n = copy_file_range(fin->fd, &in, fout->fd, &out, len,
				    (unsigned int)flags);
	}
	creds_io_end(how);
	/*
	 * Again once the copy landed: a read-ahead window read meanwhile
	 * carries the generation bumped before and would be served stale.
	 */
	data_changed(fout);
	if (n > 0)
		coh_mode_may_change(fout->inode, fout->fd);
	file_put(fin);
	file_put(fout);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

void fuse_file_ops(struct fuse_lowlevel_ops *ops)
{
	ops->open = dcfs_open;
	ops->create = dcfs_create;
	ops->read = dcfs_read;
	ops->write_buf = dcfs_write_buf;
	ops->flush = dcfs_flush;
	ops->release = dcfs_release;
	ops->fsync = dcfs_fsync;
	ops->fallocate = dcfs_fallocate;
	ops->lseek = dcfs_lseek;
	ops->copy_file_range = dcfs_copy_file_range;
}
