// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE handlers for open files: they open the backing file (with the
 * caller's identity, or for an exec), then hand the handle to io/, which
 * owns its life and every request on it (io/io.c); each handler here
 * replies with what io/ answered.
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

/* Opens the backing object of inode; an fd shortage shrinks the cache. */
static int open_inode(struct dcfs_inode *inode, int flags)
{
	char path[64];
	int pfd = fdcache_pin(inode), fd;

	if (pfd < 0)
		return pfd;
	inode_proc_path(pfd, path);
	fd = open(path, flags);
	if (fd < 0 && fdcache_retry(errno))
		fd = open(path, flags);
	if (fd < 0)
		fd = -errno;
	fdcache_unpin(inode);
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
static bool refuse_open_while_stopping(fuse_req_t req, struct dcfs_inode *inode, const char *name)
{
	unsigned long n;
	char path[4096];

	if (!drain_active())
		return false;
	n = atomic_fetch_add(&refused, 1) + 1;
	if (n <= REFUSE_LOG_FIRST || n % REFUSE_LOG_EVERY == 0) {
		if (inode_backing_path(inode, path, sizeof(path)) < 0)
			snprintf(path, sizeof(path), "(ino %llu)", (unsigned long long)inode->ino);
		log_info("stopping: refused %s of %s%s%s by pid %d (EBUSY)%s\n",
			 name ? "create" : "open", path, name && strcmp(path, "/") ? "/" : "",
			 name ? name : "", (int)fuse_req_ctx(req)->pid,
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
	int pfd = fdcache_pin(inode), fd;

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
	fdcache_unpin(inode);
	return fd;
}

static void dcfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dcfs_inode *inode = inode_of(ino);
	int fd, err;

	if (refuse_open_while_stopping(req, inode, NULL)) {
		fuse_reply_err(req, EBUSY);
		return;
	}
	io_open_prepare(inode, fi->flags);
	fd = open_inode(inode, backing_flags(fi->flags) & ~O_NOFOLLOW);
	if (fd == -EACCES && dcfs.privileged && is_exec_open(fi->flags))
		fd = open_for_exec(inode);
	fdcache_report(fd < 0 ? -fd : 0, "open");
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	err = io_open(req, inode, fd, fi, NULL);
	if (err) {
		close(fd);
		fuse_reply_err(req, -err);
		return;
	}
	if (fuse_reply_open(req, fi) == -ENOENT)
		io_release(dcfs_file_of(fi));
}

/*
 * Opens name in dir, creating it only if absent; *created says which.
 * Runs as the caller (caller_ops.c), so opening an existing file, which
 * the kernel did not check when the name did not exist at its LOOKUP, is
 * decided by the backing filesystem with the caller's rights, O_TRUNC
 * included.
 */
static int create_or_open(int dirfd, const char *name, int flags, mode_t mode, bool *created)
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

	if (fstat(fd, &made) == 0 && fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
	    made.st_dev == now.st_dev && made.st_ino == now.st_ino)
		unlinkat(dirfd, name, 0);
}

static void dcfs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			struct fuse_file_info *fi)
{
	struct dcfs_inode *dir = inode_of(parent);
	struct fuse_entry_param e;
	struct umask_scope um;
	uint64_t mark = io_entry_mark();
	bool created;
	int fd, err, dirfd = fdcache_pin(dir);

	if (refuse_open_while_stopping(req, dir, name)) {
		if (dirfd >= 0)
			fdcache_unpin(dir);
		fuse_reply_err(req, EBUSY);
		return;
	}
	if (dirfd < 0) {
		fuse_reply_err(req, -dirfd);
		return;
	}
	/* The name may be a file with buffered writes: O_TRUNC comes after. */
	io_open_prepare(NULL, fi->flags);
	mode = umask_enter(req, mode, &um);
	fd = create_or_open(dirfd, name, fi->flags, mode, &created);
	umask_leave(&um);
	fdcache_report(fd < 0 ? -fd : 0, "create");
	if (fd < 0) {
		fdcache_unpin(dir);
		fuse_reply_err(req, -fd);
		return;
	}
	/* The object is the one the fd refers to, not what the name holds now. */
	err = inode_lookup_open_fd(fd, &e);
	if (err)
		goto out_undo;
	io_select_fs_inherit(inode_of(e.ino), dir, dirfd);
	err = io_open(req, inode_of(e.ino), fd, fi, &e.attr);
	if (err) {
		inode_forget(inode_of(e.ino), 1);
		goto out_undo;
	}
	fdcache_unpin(dir);
	/* An existing file's size, with what other handles acknowledged. */
	if (!created && io_entry_settle(inode_of(e.ino), mark))
		fstat(fd, &e.attr);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		io_release(dcfs_file_of(fi));
		inode_forget(inode_of(e.ino), 1);
	}
	return;
out_undo:
	if (created)
		undo_create(dirfd, name, fd);
	fdcache_unpin(dir);
	close(fd);
	fuse_reply_err(req, -err);
}

static void dcfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct dcfs_file *f = io_get(fi);

	(void)ino;
	io_read(req, f, fi, size, off);
	io_put(f);
}

static void dcfs_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			   struct fuse_file_info *fi)
{
	struct dcfs_file *f = io_get(fi);
	ssize_t n = io_write(req, f, fi, in, off);

	(void)ino;
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
	io_put(f);
}

static void dcfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dcfs_file *f = io_get(fi);
	int err = io_flush(f);

	(void)ino;
	fuse_lock_flush(f, fi->lock_owner);
	io_put(f);
	fuse_reply_err(req, -err);
}

static void dcfs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fuse_lock_release(dcfs_file_of(fi), fi->flock_release);
	io_release(dcfs_file_of(fi));
	fuse_reply_err(req, 0);
}

static void dcfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct dcfs_file *f = io_get(fi);
	int err = io_fsync(f, datasync);

	(void)ino;
	io_put(f);
	fuse_reply_err(req, -err);
}

static void dcfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			   struct fuse_file_info *fi)
{
	struct dcfs_file *f = io_get(fi);
	int err = io_fallocate(req, f, mode, off, len);

	(void)ino;
	io_put(f);
	fuse_reply_err(req, -err);
}

static void dcfs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		       struct fuse_file_info *fi)
{
	off_t res = io_lseek(dcfs_file_of(fi), off, whence);

	(void)ino;
	if (res < 0)
		fuse_reply_err(req, (int)-res);
	else
		fuse_reply_lseek(req, res);
}

static void dcfs_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
				 struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
				 struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct dcfs_file *fin = io_get(fi_in), *fout = io_get(fi_out);
	ssize_t n = io_copy_file_range(req, fin, off_in, fout, off_out, len, flags);

	(void)ino_in;
	(void)ino_out;
	io_put(fin);
	io_put(fout);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
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
