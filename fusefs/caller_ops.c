// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * -o nodefault_permissions: the kernel no longer checks permissions, so
 * the daemon must not act with its own (root) rights.  Every handler that
 * resolves names or opens objects runs with the caller's fsuid, fsgid and
 * supplementary groups, set per thread with the raw syscalls (glibc's
 * setgroups() would change every thread of the daemon), and the backing
 * filesystem makes the decision it would make for the caller.
 *
 * This is a wrapper around the operations table, switched on once, not a
 * test in every handler.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "dcfs.h"

#define MAX_GROUPS 256

static struct fuse_lowlevel_ops real;

static void caller_enter(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[MAX_GROUPS];
	int n = fuse_req_getgroups(req, MAX_GROUPS, groups);

	if (n < 0 || n > MAX_GROUPS)
		n = 0;
	syscall(SYS_setgroups, (size_t)n, groups);
	syscall(SYS_setfsgid, ctx->gid);
	syscall(SYS_setfsuid, ctx->uid);
}

static void caller_leave(void)
{
	syscall(SYS_setfsuid, geteuid());
	syscall(SYS_setfsgid, getegid());
	syscall(SYS_setgroups, (size_t)0, NULL);
}

#define AS_CALLER(op, params, args)          \
	static void caller_##op params       \
	{                                    \
		caller_enter(req);           \
		real.op args;                \
		caller_leave();              \
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

void caller_ops_wrap(struct fuse_lowlevel_ops *ops)
{
	real = *ops;
	ops->lookup = caller_lookup;
	ops->setattr = caller_setattr;
	ops->readlink = caller_readlink;
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
	ops->getxattr = caller_getxattr;
	ops->listxattr = caller_listxattr;
	ops->removexattr = caller_removexattr;
	ops->access = caller_access;
}
