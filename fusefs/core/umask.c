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
 */
#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "core/core.h"

enum fs_state { FS_SHARED, FS_PRIVATE, FS_FAILED };

static __thread enum fs_state fs_state;
static atomic_bool warned;

static bool own_fs_struct(void)
{
	if (fs_state == FS_SHARED) {
		fs_state = unshare(CLONE_FS) == 0 ? FS_PRIVATE : FS_FAILED;
		if (fs_state == FS_FAILED && !atomic_exchange(&warned, true))
			log_warn("unshare(CLONE_FS): %m: the umask is applied even where a default ACL says otherwise\n");
	}
	return fs_state == FS_PRIVATE;
}

mode_t umask_enter(fuse_req_t req, mode_t mode, struct umask_scope *s)
{
	mode_t mask = fuse_req_ctx(req)->umask & 0777;

	s->active = own_fs_struct();
	if (!s->active)
		return mode & ~mask;
	s->old = umask(mask);
	return mode;
}

void umask_leave(const struct umask_scope *s)
{
	if (s->active)
		umask(s->old);
}
