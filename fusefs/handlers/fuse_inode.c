// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE handlers for names and attributes: lookup/forget, getattr/setattr,
 * node creation, unlink, rename, link, readlink, statfs, access.
 *
 * All of them act through the O_PATH fd of the inode or of the parent with
 * *at() calls and AT_SYMLINK_NOFOLLOW, so the daemon never resolves a
 * symlink of the backing tree for the caller.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "handlers/handlers.h"

static void reply_entry_or_err(fuse_req_t req, int err, const struct fuse_entry_param *e)
{
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_entry(req, e);
}

static void dcfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	uint64_t mark = io_entry_mark();
	int err = -ENOENT;

	/* "." of an id the kernel does not have: an export handle decoded. */
	if (strcmp(name, ".") == 0)
		err = inode_lookup_self(parent, &e);
	else
		err = inode_lookup(inode_of(parent), name, &e);
	/* Buffered writes (write_pipe.c) change the size the entry reports. */
	if (!err && io_entry_settle(inode_of(e.ino), mark))
		inode_stat(inode_of(e.ino), &e.attr);
	/* The kernel may remember that the name is missing (options.c). */
	if (err == -ENOENT && dcfs.opt.negative_timeout > 0) {
		memset(&e, 0, sizeof(e));
		e.entry_timeout = dcfs.opt.negative_timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	reply_entry_or_err(req, err, &e);
}

static void dcfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	inode_forget(inode_of(ino), nlookup);
	fuse_reply_none(req);
}

static void dcfs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		inode_forget(inode_of(forgets[i].ino), forgets[i].nlookup);
	fuse_reply_none(req);
}

static void dcfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int err = io_getattr(inode_of(ino), fi, &st);

	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, dcfs.opt.attr_timeout);
}

/*
 * The setattr helpers get the inode's pinned O_PATH fd (pfd) and, when the
 * kernel named an open file, its backing fd (fd, else -1).
 */
static int setattr_mode(struct dcfs_inode *inode, int pfd, int fd, mode_t mode)
{
	char path[64];

	if (fd >= 0)
		return (int)dcfs_err(fchmod(fd, mode));
	if (inode->type == S_IFLNK)
		return -EOPNOTSUPP;
	inode_proc_path(pfd, path);
	return (int)dcfs_err(chmod(path, mode));
}

static int setattr_owner(int pfd, const struct stat *attr, int valid)
{
	uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
	gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;

	return (int)dcfs_err(fchownat(pfd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
}

static struct timespec time_arg(const struct timespec *t, int valid, int set_bit, int now_bit)
{
	struct timespec ts = { .tv_nsec = UTIME_OMIT };

	if (valid & now_bit)
		ts.tv_nsec = UTIME_NOW;
	else if (valid & set_bit)
		ts = *t;
	return ts;
}

static int setattr_times(int pfd, int fd, const struct stat *attr, int valid)
{
	struct timespec tv[2];

	tv[0] = time_arg(&attr->st_atim, valid, FUSE_SET_ATTR_ATIME, FUSE_SET_ATTR_ATIME_NOW);
	tv[1] = time_arg(&attr->st_mtim, valid, FUSE_SET_ATTR_MTIME, FUSE_SET_ATTR_MTIME_NOW);
	if (fd >= 0)
		return (int)dcfs_err(futimens(fd, tv));
	return (int)dcfs_err(utimensat(pfd, "", tv, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
}

static int setattr_apply(struct dcfs_inode *inode, int fd, const struct stat *attr, int valid)
{
	int pfd = fdcache_pin(inode), err = 0;

	if (pfd < 0)
		return pfd;
	if (valid & FUSE_SET_ATTR_MODE)
		err = setattr_mode(inode, pfd, fd, attr->st_mode);
	if (!err && (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		err = setattr_owner(pfd, attr, valid);
	if (!err && (valid & FUSE_SET_ATTR_SIZE))
		err = io_truncate(inode, pfd, fd, attr->st_size);
	if (!err && (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
			      FUSE_SET_ATTR_MTIME_NOW)))
		err = setattr_times(pfd, fd, attr, valid);
	fdcache_unpin(inode);
	return err;
}

static void dcfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
			 struct fuse_file_info *fi)
{
	struct dcfs_inode *inode = inode_of(ino);
	int err;

	/* Buffered writes come first: a size or mtime set must stay. */
	io_setattr_prepare(inode);
	err = setattr_apply(inode, io_fd(fi), attr, valid);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	io_setattr_done(inode, valid);
	dcfs_getattr(req, ino, fi);
}

static void dcfs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct dcfs_inode *inode = inode_of(ino);
	char buf[PATH_MAX + 1];
	int fd = fdcache_pin(inode), err;
	ssize_t n;

	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	n = readlinkat(fd, "", buf, sizeof(buf));
	err = n < 0 ? errno : 0;
	fdcache_unpin(inode);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	if (n == sizeof(buf)) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

static int make_object(struct dcfs_inode *dir, const char *name, mode_t mode, dev_t rdev,
		       const char *target)
{
	int fd = fdcache_pin(dir), err;

	if (fd < 0)
		return fd;
	if (target)
		err = (int)dcfs_err(symlinkat(target, fd, name));
	else if (S_ISDIR(mode))
		err = (int)dcfs_err(mkdirat(fd, name, mode));
	else
		err = (int)dcfs_err(mknodat(fd, name, mode, rdev));
	fdcache_unpin(dir);
	return err;
}

/*
 * mknod, mkdir and symlink, run as the caller (caller_ops.c): the object is
 * the caller's from the start, nothing is changed by name afterwards.  The
 * entry replied is what the name holds now; if someone replaced it in the
 * backing tree meanwhile, the kernel must not get an object of another
 * type for the one it asked for.
 */
static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
		      const char *target)
{
	struct dcfs_inode *dir = inode_of(parent);
	struct fuse_entry_param e;
	struct umask_scope um;
	int err;

	mode = umask_enter(req, mode, &um);
	err = make_object(dir, name, mode, rdev, target);
	umask_leave(&um);
	if (!err)
		err = inode_lookup(dir, name, &e);
	if (!err && (e.attr.st_mode & S_IFMT) != (mode & S_IFMT)) {
		log_warn("%s was replaced in the backing tree while being created\n", name);
		inode_forget(inode_of(e.ino), 1);
		err = -EEXIST;
	}
	reply_entry_or_err(req, err, &e);
}

static void dcfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	make_node(req, parent, name, mode, rdev, NULL);
}

static void dcfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | mode, 0, NULL);
}

static void dcfs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_node(req, parent, name, S_IFLNK | 0777, 0, link);
}

static int unlink_in(fuse_ino_t parent, const char *name, int flags)
{
	struct dcfs_inode *dir = inode_of(parent);
	int fd = fdcache_pin(dir), err;

	if (fd < 0)
		return fd;
	if (!(flags & AT_REMOVEDIR))
		inode_release_name(fd, name);
	err = (int)dcfs_err(unlinkat(fd, name, flags));
	fdcache_unpin(dir);
	return err;
}

static void dcfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -unlink_in(parent, name, 0));
}

static void dcfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -unlink_in(parent, name, AT_REMOVEDIR));
}

static void dcfs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
			const char *newname, unsigned int flags)
{
	struct dcfs_inode *from = inode_of(parent);
	struct dcfs_inode *to = inode_of(newparent);
	int ffd = fdcache_pin(from), tfd, err;

	if (ffd < 0) {
		fuse_reply_err(req, -ffd);
		return;
	}
	tfd = fdcache_pin(to);
	if (tfd >= 0 && !(flags & (RENAME_EXCHANGE | RENAME_NOREPLACE)))
		inode_release_name(tfd, newname);
	err = tfd < 0 ? tfd : (int)dcfs_err(renameat2(ffd, name, tfd, newname, flags));
	if (tfd >= 0)
		fdcache_unpin(to);
	fdcache_unpin(from);
	fuse_reply_err(req, -err);
}

static int link_fd(int fd, int newdirfd, const char *newname)
{
	char path[64];

	if (linkat(fd, "", newdirfd, newname, AT_EMPTY_PATH) == 0)
		return 0;
	/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; the proc link does not. */
	if (errno != ENOENT && errno != EPERM)
		return -errno;
	inode_proc_path(fd, path);
	return (int)dcfs_err(linkat(AT_FDCWD, path, newdirfd, newname, AT_SYMLINK_FOLLOW));
}

static void dcfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct dcfs_inode *dir = inode_of(newparent);
	struct dcfs_inode *inode = inode_of(ino);
	int fd = fdcache_pin(inode), dfd, err;
	struct fuse_entry_param e;
	uint64_t mark = io_entry_mark();

	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	dfd = fdcache_pin(dir);
	err = dfd < 0 ? dfd : link_fd(fd, dfd, newname);
	if (dfd >= 0)
		fdcache_unpin(dir);
	fdcache_unpin(inode);
	/* The new name is another name of this inode, whatever it holds now. */
	if (!err)
		err = inode_lookup_again(inode, &e);
	/* The kernel takes a new entry's size whatever it holds (as lookup). */
	if (!err && io_entry_settle(inode, mark))
		inode_stat(inode, &e.attr);
	reply_entry_or_err(req, err, &e);
}

static void dcfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct dcfs_inode *inode = inode_of(ino);
	int fd = fdcache_pin(inode), err;
	struct statvfs sv;

	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	err = (int)dcfs_err(fstatvfs(fd, &sv));
	fdcache_unpin(inode);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_statfs(req, &sv);
}

/*
 * Only sent with -o nodefault_permissions (access(2), chdir(2) and the
 * like), where it runs with the caller's fsuid, fsgid and groups
 * (caller_ops.c).  AT_EACCESS makes faccessat() check those: without it
 * the kernel checks the real uid, which is root's.
 */
static void dcfs_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct dcfs_inode *inode = inode_of(ino);
	int fd = fdcache_pin(inode), err;

	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	err = (int)dcfs_err(faccessat(fd, "", mask, AT_EMPTY_PATH | AT_EACCESS));
	fdcache_unpin(inode);
	fuse_reply_err(req, -err);
}

void fuse_inode_ops(struct fuse_lowlevel_ops *ops)
{
	ops->lookup = dcfs_lookup;
	ops->forget = dcfs_forget;
	ops->forget_multi = dcfs_forget_multi;
	ops->getattr = dcfs_getattr;
	ops->setattr = dcfs_setattr;
	ops->readlink = dcfs_readlink;
	ops->mknod = dcfs_mknod;
	ops->mkdir = dcfs_mkdir;
	ops->symlink = dcfs_symlink;
	ops->unlink = dcfs_unlink;
	ops->rmdir = dcfs_rmdir;
	ops->rename = dcfs_rename;
	ops->link = dcfs_link;
	ops->statfs = dcfs_statfs;
	ops->access = dcfs_access;
}
