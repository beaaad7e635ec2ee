// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The caller's umask, applied by the backing filesystem.
 *
 * POSIX ACLs: a new object in a directory with a default ACL gets its
 * permissions from that ACL and the mode asked for, and the umask is not
 * applied at all.  Only the filesystem that holds the directory can tell,
 * at the moment of the create.  So dcfs asks the kernel not to apply the
 * umask (FUSE_CAP_DONT_MASK, main.c) and takes the caller's umask from the
 * request instead, and creates with that umask in force: the backing
 * filesystem then decides exactly as for the caller (an ACL added by
 * setfacl between a check of ours and the create cannot be missed, and a
 * filesystem without ACLs applies the umask).
 *
 * The umask belongs to the fs_struct, which all threads share; a worker
 * gets a private one (unshare(CLONE_FS), as virtiofsd does) before its
 * first create, so that setting the umask there affects that thread only.
 * Nothing in the daemon uses the working directory after startup (it is
 * "/" for every thread).  Where unshare fails, the mode gets the umask
 * applied here, as the kernel would have done without FUSE_CAP_DONT_MASK.
 *
 * A worker's umask is left as the last caller's: the next create sets it
 * only when its caller's differs, which saves two syscalls per create in
 * the common case of one umask for all (they are dear under UML, and a
 * create is several of them anyway).  Nothing else a worker creates
 * depends on it: the probe's O_TMPFILE (probe.c) is never linked and is
 * opened read-write at once.
 */
#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "core/core.h"

enum fs_state {
	FS_SHARED,
	FS_PRIVATE,
	FS_FAILED
};

/* Each worker thread's own: its fs_struct, and the umask in force there. */
static __thread struct {
	enum fs_state fs_state;
	int cur_mask; /* what umask() was set to, -1: unknown */
} self = { .cur_mask = -1 };
static atomic_bool warned; /* the one process-wide flag */

static bool own_fs_struct(void)
{
	if (self.fs_state == FS_SHARED) {
		self.fs_state = unshare(CLONE_FS) == 0 ? FS_PRIVATE : FS_FAILED;
		if (self.fs_state == FS_FAILED && !atomic_exchange(&warned, true))
			log_warn(
				"unshare(CLONE_FS): %m: the umask is applied even where a default ACL says otherwise\n");
	}
	return self.fs_state == FS_PRIVATE;
}

mode_t umask_enter(fuse_req_t req, mode_t mode, struct umask_scope *s)
{
	mode_t mask = fuse_req_ctx(req)->umask & 0777;

	s->active = own_fs_struct();
	if (!s->active)
		return mode & ~mask;
	if (self.cur_mask != (int)mask) {
		umask(mask);
		self.cur_mask = (int)mask;
	}
	return mode;
}

void umask_leave(const struct umask_scope *s)
{
	(void)s; /* kept in force: see above */
}
