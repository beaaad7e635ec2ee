// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * May a streamed write be acknowledged before it reaches the backing file
 * (write_pipe.c holds it in a buffer or a background job)?  Only where the
 * backing write cannot fail in a way a local filesystem reports at the
 * write itself: a deferred error is right only where the kernel would
 * defer it too (issue 38 #6).  A write that is not admitted goes through
 * at once, after what its handle holds, and the backing filesystem's
 * answer is the write's:
 *  - it ends past the largest file the backing filesystem allows (probed
 *    once per filesystem, probe.c): EFBIG, or a short write up to it;
 *  - the backing file is immutable (made so while it was open): EPERM;
 *  - the backing filesystem enforces quotas: EDQUOT;
 *  - (little free space: ENOSPC, write_pipe.c's space_is_low()).
 * An append-only file needs nothing here: its opens without O_APPEND and
 * its truncation fail at once, through the daemon, as natively.
 */
#include <linux/dqblk_xfs.h>
#include <stdatomic.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"

/* Quotas can be switched on at run time (quotaon): looked at again after. */
#define QUOTA_RECHECK_S 5

static int64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

/*
 * Does the filesystem of fd enforce user, group or project quotas?  Asked
 * through the generic quota status, which every filesystem with quota
 * support answers (without quota support: no).
 */
static bool quota_enforced(struct probe *p, int fd)
{
	int64_t now = now_s(), seen = atomic_load(&p->quota_seen);
	struct fs_quota_stat qs;
	bool on;

	if (seen && now - seen < QUOTA_RECHECK_S)
		return atomic_load(&p->quota_on);
	on = syscall(SYS_quotactl_fd, fd, QCMD(Q_XGETQSTAT, USRQUOTA), 0, &qs) == 0 &&
	     (qs.qs_flags & (FS_QUOTA_UDQ_ENFD | FS_QUOTA_GDQ_ENFD | FS_QUOTA_PDQ_ENFD));
	atomic_store(&p->quota_on, on);
	atomic_store(&p->quota_seen, now);
	return on;
}

bool admit_held(struct dcfs_file *f, off_t end)
{
	int64_t max = f->probe ? atomic_load(&f->probe->max_size) : 0;
	struct statx sx;

	if (max > 0 && end > max)
		return false;
	if (f->probe && quota_enforced(f->probe, f->fd))
		return false;
	if (statx(f->fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, 0, &sx) == 0 &&
	    (sx.stx_attributes & STATX_ATTR_IMMUTABLE))
		return false;
	return true;
}
