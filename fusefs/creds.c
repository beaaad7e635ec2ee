// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Ownership of objects created through the mount.
 *
 * The daemon creates as itself and then hands the object to the caller,
 * rather than switching to the caller's fsuid: a switched fsuid would keep
 * the daemon's supplementary groups, so the backing filesystem could refuse
 * what the kernel's default_permissions check (made with the caller's real
 * groups) already allowed.
 */
#include <fcntl.h>
#include <unistd.h>

#include "dcfs.h"

static bool dir_is_setgid(struct dcfs_inode *dir)
{
	struct stat st;

	return inode_stat(dir, &st) == 0 && (st.st_mode & S_ISGID);
}

int creds_chown_to_caller(fuse_req_t req, int dirfd, const char *name,
			  struct dcfs_inode *parent, mode_t mode)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t gid = ctx->gid;

	/* Without default_permissions the object was created as the caller. */
	if (!dcfs.privileged || dcfs.opt.nodefault_permissions)
		return 0;
	if (ctx->uid == geteuid() && ctx->gid == getegid())
		return 0;
	/* In a setgid directory the backing filesystem already chose the group. */
	if (dir_is_setgid(parent))
		gid = (gid_t)-1;
	if (fchownat(dirfd, name, ctx->uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	/* chown(2) clears set-id bits of non-directories; put back what was asked. */
	if ((mode & (S_ISUID | S_ISGID)) && S_ISREG(mode) &&
	    fchmodat(dirfd, name, mode & 07777, 0) < 0)
		return -errno;
	return 0;
}
