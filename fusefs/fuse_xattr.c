// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE extended attribute handlers.  They act on the backing object
 * through its /proc/self/fd link, because O_PATH fds do not take f*xattr()
 * calls.  That link would be followed for a symlink, reaching the target,
 * so symlinks report no attributes at all instead (ENOTSUP, and an empty
 * list), never those of a file the caller did not name.
 */
#include <stdlib.h>
#include <sys/xattr.h>

#include "dcfs.h"

static bool xattr_unsupported(const struct dcfs_inode *inode)
{
	return inode->type == S_IFLNK;
}

/* Replies with the size when asked for it, else with the value. */
static void reply_sized(fuse_req_t req, size_t size, const char *buf, ssize_t n)
{
	if (n < 0)
		fuse_reply_err(req, errno);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void dcfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			  size_t size)
{
	struct dcfs_inode *inode = dcfs_inode_of(ino);
	char path[64], *buf = NULL;
	ssize_t n;

	if (xattr_unsupported(inode)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	inode_proc_path(inode, path);
	n = getxattr(path, name, buf, size);
	reply_sized(req, size, buf, n);
	free(buf);
}

static void dcfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct dcfs_inode *inode = dcfs_inode_of(ino);
	char path[64], *buf = NULL;
	ssize_t n;

	if (xattr_unsupported(inode)) {
		reply_sized(req, size, "", 0);
		return;
	}
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	inode_proc_path(inode, path);
	n = listxattr(path, buf, size);
	reply_sized(req, size, buf, n);
	free(buf);
}

static void dcfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			  const char *value, size_t size, int flags)
{
	struct dcfs_inode *inode = dcfs_inode_of(ino);
	char path[64];
	int err;

	if (xattr_unsupported(inode)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	inode_proc_path(inode, path);
	err = (int)dcfs_err(setxattr(path, name, value, size, flags));
	fuse_reply_err(req, -err);
}

static void dcfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct dcfs_inode *inode = dcfs_inode_of(ino);
	char path[64];
	int err;

	if (xattr_unsupported(inode)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	inode_proc_path(inode, path);
	err = (int)dcfs_err(removexattr(path, name));
	fuse_reply_err(req, -err);
}

void fuse_xattr_ops(struct fuse_lowlevel_ops *ops)
{
	ops->getxattr = dcfs_getxattr;
	ops->listxattr = dcfs_listxattr;
	ops->setxattr = dcfs_setxattr;
	ops->removexattr = dcfs_removexattr;
}
