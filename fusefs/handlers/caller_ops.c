// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Handlers that run with the caller's identity (see creds.c for why).
 *
 * With default_permissions (the default) the kernel has checked access on
 * its view; every handler that creates, opens, renames, removes or changes
 * something still runs as the caller, so the backing filesystem checks the
 * object the daemon actually reaches.  Lookups, getattr, readdir and reads
 * of xattrs stay as root: they change nothing, and the kernel checked the
 * search and read permissions.
 *
 * With -o nodefault_permissions the kernel checks nothing, so every handler
 * that resolves names or opens objects runs as the caller.
 *
 * This is a wrapper around the operations table, switched on once, not a
 * test in every handler.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "handlers/handlers.h"

static struct fuse_lowlevel_ops real;

#define AS_CALLER(op, params, args)          \
	static void caller_##op params       \
	{                                    \
		int how = creds_enter(req);  \
		real.op args;                \
		creds_leave(how);            \
	}

AS_CALLER(lookup, (fuse_req_t req, fuse_ino_t p, const char *n), (req, p, n))
AS_CALLER(setattr, (fuse_req_t req, fuse_ino_t i, struct stat *a, int v,
		    struct fuse_file_info *fi), (req, i, a, v, fi))
AS_CALLER(readlink, (fuse_req_t req, fuse_ino_t i), (req, i))
AS_CALLER(mknod, (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m,
		  dev_t r), (req, p, n, m, r))
AS_CALLER(mkdir, (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m),
	  (req, p, n, m))
AS_CALLER(unlink, (fuse_req_t req, fuse_ino_t p, const char *n), (req, p, n))
AS_CALLER(rmdir, (fuse_req_t req, fuse_ino_t p, const char *n), (req, p, n))
AS_CALLER(symlink, (fuse_req_t req, const char *l, fuse_ino_t p,
		    const char *n), (req, l, p, n))
AS_CALLER(rename, (fuse_req_t req, fuse_ino_t p, const char *n,
		   fuse_ino_t np, const char *nn, unsigned int f),
	  (req, p, n, np, nn, f))
AS_CALLER(link, (fuse_req_t req, fuse_ino_t i, fuse_ino_t np, const char *nn),
	  (req, i, np, nn))
AS_CALLER(open, (fuse_req_t req, fuse_ino_t i, struct fuse_file_info *fi),
	  (req, i, fi))
AS_CALLER(create, (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m,
		   struct fuse_file_info *fi), (req, p, n, m, fi))
AS_CALLER(opendir, (fuse_req_t req, fuse_ino_t i, struct fuse_file_info *fi),
	  (req, i, fi))
AS_CALLER(setxattr, (fuse_req_t req, fuse_ino_t i, const char *n,
		     const char *v, size_t s, int f), (req, i, n, v, s, f))
AS_CALLER(getxattr, (fuse_req_t req, fuse_ino_t i, const char *n, size_t s),
	  (req, i, n, s))
AS_CALLER(listxattr, (fuse_req_t req, fuse_ino_t i, size_t s), (req, i, s))
AS_CALLER(removexattr, (fuse_req_t req, fuse_ino_t i, const char *n),
	  (req, i, n))
AS_CALLER(access, (fuse_req_t req, fuse_ino_t i, int m), (req, i, m))

/*
 * A mode change keeps the daemon's rights when the kernel checks
 * permissions: the kernel itself asks for one to clear set-id bits after a
 * write or truncate by a user who does not own the file, which the caller's
 * own rights could not do.  The kernel has checked that a chmod(2) came
 * from the owner.
 */
static bool as_caller_all;

static void caller_setattr_checked(fuse_req_t req, fuse_ino_t i, struct stat *a,
				   int v, struct fuse_file_info *fi)
{
	if (!as_caller_all && (v & FUSE_SET_ATTR_MODE))
		real.setattr(req, i, a, v, fi);
	else
		caller_setattr(req, i, a, v, fi);
}

void caller_ops_wrap(struct fuse_lowlevel_ops *ops, bool all)
{
	real = *ops;
	as_caller_all = all;
	ops->setattr = caller_setattr_checked;
	ops->mknod = caller_mknod;
	ops->mkdir = caller_mkdir;
	ops->unlink = caller_unlink;
	ops->rmdir = caller_rmdir;
	ops->symlink = caller_symlink;
	ops->rename = caller_rename;
	ops->link = caller_link;
	ops->open = caller_open;
	ops->create = caller_create;
	ops->opendir = caller_opendir;
	ops->setxattr = caller_setxattr;
	ops->removexattr = caller_removexattr;
	if (!all)
		return;
	ops->lookup = caller_lookup;
	ops->readlink = caller_readlink;
	ops->getxattr = caller_getxattr;
	ops->listxattr = caller_listxattr;
	ops->access = caller_access;
}
