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
 * test in every handler; which op runs as whom is its row in
 * DCFS_FUSE_OPS (handlers.h).
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "handlers/handlers.h"

static struct {
	struct fuse_lowlevel_ops real; /* the handlers, unwrapped */
	/*
	 * A mode change keeps the daemon's rights when the kernel checks
	 * permissions: the kernel itself asks for one to clear set-id bits
	 * after a write or truncate by a user who does not own the file,
	 * which the caller's own rights could not do.  The kernel has checked
	 * that a chmod(2) came from the owner.
	 */
	bool as_caller_all;
} caller;

/* One wrapper per op of DCFS_FUSE_OPS (handlers.h); its row says which. */
#define AS_CALLER(op, who, ro, params, args)                   \
	static void __attribute__((unused)) caller_##op params \
	{                                                      \
		int how = creds_enter(req);                    \
		caller.real.op args;                           \
		creds_leave(how);                              \
	}
DCFS_FUSE_OPS(AS_CALLER)
#undef AS_CALLER

static void caller_setattr_checked(fuse_req_t req, fuse_ino_t i, struct stat *a, int v,
				   struct fuse_file_info *fi)
{
	if (!caller.as_caller_all && (v & FUSE_SET_ATTR_MODE))
		caller.real.setattr(req, i, a, v, fi);
	else
		caller_setattr(req, i, a, v, fi);
}

static bool runs_as_caller(enum op_who who, bool all)
{
	return who == OP_CALLER || (all && who == OP_CALLER_NDP);
}

/* all: -o nodefault_permissions, the kernel checks nothing. */
void caller_ops_wrap(struct fuse_lowlevel_ops *ops, bool all)
{
	caller.real = *ops;
	caller.as_caller_all = all;
#define WRAP(op, who, ro, params, args)          \
	if (ops->op && runs_as_caller(who, all)) \
		ops->op = caller_##op;
	DCFS_FUSE_OPS(WRAP)
#undef WRAP
	if (ops->setattr)
		ops->setattr = caller_setattr_checked;
}
