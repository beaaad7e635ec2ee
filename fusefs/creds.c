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
#include <linux/capability.h>
#include <sys/syscall.h>
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

/*
 * Writes are made with the caller's filesystem identity.  A root daemon
 * writing for everyone would let any user fill a filesystem into the
 * reserve its owner kept for root (ext4 lets fsuid 0 or CAP_SYS_RESOURCE
 * in), and would keep set-id bits a write by another user must clear
 * (CAP_FSETID).  So the daemon runs with CAP_SYS_RESOURCE out of its
 * effective set (threads inherit that), raises it around writes for root
 * callers, and switches fsuid/fsgid (which drops CAP_FSETID and the other
 * filesystem capabilities) around writes for everyone else.  The fd was
 * opened, and permission checked, at open time.
 */
static bool cap_set_effective(bool raise, unsigned int cap)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	if (raise)
		data[cap / 32].effective |= 1U << (cap % 32);
	else
		data[cap / 32].effective &= ~(1U << (cap % 32));
	return syscall(SYS_capset, &hdr, data) == 0;
}

void creds_drop_reserve(void)
{
	if (dcfs.privileged)
		cap_set_effective(false, CAP_SYS_RESOURCE);
}

int creds_io_begin(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	if (!dcfs.privileged)
		return IO_AS_DAEMON;
	if (ctx->uid == 0)
		return cap_set_effective(true, CAP_SYS_RESOURCE) ? IO_RAISED
								 : IO_AS_DAEMON;
	syscall(SYS_setfsgid, ctx->gid);
	syscall(SYS_setfsuid, ctx->uid);
	return IO_AS_CALLER;
}

void creds_io_end(int how)
{
	if (how == IO_RAISED) {
		cap_set_effective(false, CAP_SYS_RESOURCE);
	} else if (how == IO_AS_CALLER) {
		syscall(SYS_setfsuid, 0);
		syscall(SYS_setfsgid, 0);
	}
}
