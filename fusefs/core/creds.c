// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Whose rights the daemon uses.
 *
 * dcfs runs as root for every user of an allow_other mount.  Every handler
 * that creates, opens, renames or removes something, or changes attributes,
 * runs with the caller's fsuid, fsgid and supplementary groups (set per
 * thread, see creds_enter()), so the backing filesystem decides exactly what
 * it would decide for the caller, and an object is created belonging to the
 * caller in one step.
 *
 * Why not create as root and chown afterwards (what dcfs did first): the
 * chown and the chmod that restores set-id bits act on a name, and a user
 * who can write the backing directory can rename a symlink to a root-owned
 * file over that name in between.  Why not rely on the kernel's
 * default_permissions alone: it checks cached attributes and the entry it
 * looked up, not the object the daemon reaches by name later (a name that
 * did not exist at LOOKUP may exist at CREATE; a chmod made in the backing
 * tree is invisible until the attribute timeout).  With the caller's
 * identity in force, any such race gives the caller at most their own
 * rights.  virtiofsd and libfuse's passthrough_hp make the same choice.
 *
 * Supplementary groups matter: a switched fsuid alone would keep root's
 * group list, so the backing filesystem could refuse (or allow) what the
 * caller's real groups would not.  They come from fuse_req_getgroups(),
 * which reads /proc; a caller that has exited meanwhile gets no groups,
 * which can only deny.
 */
#include <fcntl.h>
#include <linux/capability.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/core.h"

#define GROUPS_ON_STACK 64

static int caller_groups(fuse_req_t req, gid_t **list, gid_t *stack)
{
	int n = fuse_req_getgroups(req, GROUPS_ON_STACK, stack);

	*list = stack;
	if (n <= GROUPS_ON_STACK)
		return n < 0 ? 0 : n;
	*list = malloc(sizeof(gid_t) * (size_t)n);
	if (!*list) {
		*list = stack;
		return 0;
	}
	n = fuse_req_getgroups(req, n, *list);
	return n < 0 ? 0 : n;
}

int creds_enter(fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t stack[GROUPS_ON_STACK], *groups;
	int n;

	/* Root callers keep root's rights; an unprivileged daemon has no choice. */
	if (!dcfs.privileged || ctx->uid == 0)
		return CREDS_KEPT;
	n = caller_groups(req, &groups, stack);
	/* The raw syscalls change this thread only (glibc's change all). */
	syscall(SYS_setgroups, (size_t)n, groups);
	if (groups != stack)
		free(groups);
	syscall(SYS_setfsgid, ctx->gid);
	syscall(SYS_setfsuid, ctx->uid);
	return CREDS_CALLER;
}

void creds_leave(int how)
{
	if (how != CREDS_CALLER)
		return;
	syscall(SYS_setfsuid, 0);
	syscall(SYS_setfsgid, 0);
	syscall(SYS_setgroups, (size_t)0, NULL);
}

/*
 * A capability missing from the permitted set (a container that dropped
 * CAP_SYS_RESOURCE from the bounding set) can never be raised, since a
 * process never gains permitted capabilities without an exec: after the
 * first EPERM, raising it is answered here instead of by two syscalls per
 * write.
 */
static _Atomic bool raise_denied;

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

	if (raise && atomic_load(&raise_denied))
		return false;
	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	if (raise && !(data[cap / 32].permitted & (1U << (cap % 32)))) {
		atomic_store(&raise_denied, true);
		return false;
	}
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
		return cap_set_effective(true, CAP_SYS_RESOURCE) ? IO_RAISED : IO_AS_DAEMON;
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

/*
 * Passthrough: the kernel keeps the credentials in force at
 * FUSE_DEV_IOC_BACKING_OPEN for all I/O of the file.  open/create already
 * run as a non-root caller (creds_enter()), which is what its forwarded
 * writes use; a root caller's forwarded writes may use the reserve
 * (creds_io_begin()), so the registration gets CAP_SYS_RESOURCE too.
 * End with creds_io_end().
 */
int creds_backing_begin(fuse_req_t req)
{
	if (!dcfs.privileged || fuse_req_ctx(req)->uid != 0)
		return IO_AS_DAEMON;
	return cap_set_effective(true, CAP_SYS_RESOURCE) ? IO_RAISED : IO_AS_DAEMON;
}

/*
 * A write the daemon makes later for a caller (a coalesced write flushed by
 * another request, or at release) must be made with the identity that
 * caller had at write(): the identity is captured with the data and put in
 * force around the backing write.  The thread may itself be acting for
 * someone (a setattr under creds_enter()), so whatever it had is saved and
 * restored exactly, rather than reset to root.
 */
void creds_io_capture(struct creds_id *id)
{
	/* An invalid id changes nothing and returns the current one. */
	id->uid = (uid_t)syscall(SYS_setfsuid, -1);
	id->gid = (gid_t)syscall(SYS_setfsgid, -1);
}

static bool cap_effective(unsigned int cap)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	return data[cap / 32].effective & (1U << (cap % 32));
}

void creds_io_switch(const struct creds_id *id, struct creds_saved *s)
{
	s->active = dcfs.privileged;
	if (!s->active)
		return;
	creds_io_capture(&s->prev);
	s->resource = cap_effective(CAP_SYS_RESOURCE);
	/* fsuid 0 first: switching back to root restores the fs capabilities. */
	syscall(SYS_setfsuid, 0);
	syscall(SYS_setfsgid, id->gid);
	syscall(SYS_setfsuid, id->uid);
	if (s->resource != (id->uid == 0))
		cap_set_effective(id->uid == 0, CAP_SYS_RESOURCE);
}

void creds_io_restore(const struct creds_saved *s)
{
	if (!s->active)
		return;
	if (cap_effective(CAP_SYS_RESOURCE) != s->resource)
		cap_set_effective(s->resource, CAP_SYS_RESOURCE);
	syscall(SYS_setfsuid, 0);
	syscall(SYS_setfsgid, s->prev.gid);
	syscall(SYS_setfsuid, s->prev.uid);
}
