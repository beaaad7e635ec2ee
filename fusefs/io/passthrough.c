// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Kernel FUSE passthrough (Linux >= 6.9) on libfuse 3.14, which has no API
 * for it: what dcfs asks at INIT (passthrough with max_stack_depth 1, so
 * a backing tree on overlayfs or another stacking filesystem is refused
 * per file and dcfs itself can still sit under an overlayfs; uncached
 * passthrough and backing-inode attributes where this project's kernel
 * offers them), the backing ids, and which open gets one.  The wire
 * itself is transport/wire.c's: passthrough_install() registers this
 * file's part of the INIT reply there, and passthrough_open() arms the
 * OPEN/CREATE reply it decided to pass through (FOPEN_PASSTHROUGH, the
 * uncached flags, the backing id).
 *
 * What the kernel requires (fs/fuse/iomode.c): once an inode has a
 * passthrough open, every open of it must be FOPEN_PASSTHROUGH with the
 * same backing file, or open(2) fails with EIO; a passthrough open of an
 * inode the kernel caches (a forwarded open without FOPEN_DIRECT_IO, or a
 * shared mapping of a direct-I/O one) fails with EIO too.  The kernel
 * drops an inode's backing file when its last passthrough file is
 * released, before RELEASE reaches us, so counts kept here at open and
 * release are never behind the kernel's.  Hence one backing id per inode
 * and three per-inode states:
 *
 *   inode state   new open wants ->  kernel I/O      daemon I/O       cached forwarded
 *                                     (cache class,   (streaming)      (auto, deferred)
 *                                     drop-behind
 *                                     readers)
 *   none          register id: PT  FWD (direct I/O)  FWD
 *                 (failure: FWD)
 *   PT (has id)   PT; PTD if a     PTD              PTD
 *                 writer of other
 *                 credentials
 *   FWD           FWD              FWD              FWD
 *
 *   PT  = FOPEN_PASSTHROUGH: the kernel reads, writes, splices and maps the
 *         backing file itself.
 *   PTD = FOPEN_PASSTHROUGH | FOPEN_DIRECT_IO: read/write still come to the
 *         daemon (RWF_DONTCACHE, stream detection, the caller's
 *         credentials), mmap goes to the backing file (shared writable
 *         maps of streaming files work, one page cache).
 *   FWD = today's forwarded path (keep_cache or FOPEN_DIRECT_IO as
 *         io_select() decided; ALLOW_MMAP for shared maps of direct I/O).
 *
 * So no open gets EIO from a mode conflict, and no data is stale: a PT
 * open does not keep the FUSE cache (the kernel drops it at open) and
 * nothing can fill it while the inode has a backing file; a streaming
 * handle's read-ahead buffer is not trusted while a writable PT/PTD handle
 * exists (passthrough_bypassed()), since those writes never reach us.
 * An inode leaves a state only when its last handle is released.
 *
 * A streaming open of an inode without an id stays forwarded (direct I/O;
 * shared maps through ALLOW_MMAP and the daemon): registering it would let
 * the kernel map the backing file directly, past the writes the streaming
 * engine holds back (write_pipe.c), which then stops holding writes back
 * for as long as any handle of the inode has the backing file
 * (passthrough_backed()).
 *
 * Credentials: the kernel performs all I/O of a passthrough file with the
 * credentials current at FUSE_DEV_IOC_BACKING_OPEN.  open/create run as the
 * caller (caller_ops.c: fsuid, fsgid, groups; no filesystem capabilities,
 * no CAP_SYS_RESOURCE), which is exactly what forwarded writes use, so the
 * id is registered right there; a root caller gets CAP_SYS_RESOURCE for it
 * like its forwarded writes (creds_backing_begin()).  Reserved blocks,
 * quotas and set-id clearing then behave as for the caller.  A later
 * writer with other credentials cannot use that id for kernel I/O: it gets
 * PTD and its writes come through the daemon as itself.  Readers share the
 * id whoever they are: reads do not depend on credentials.
 *
 * Probe, don't assume: the INIT offer, CAP_SYS_ADMIN, and the answer of the
 * first BACKING_OPEN on each backing filesystem decide; on any failure the
 * open is served forwarded, counted, and logged once.
 */
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dcfs_fuse_proto.h"
#include "io/io.h"

/*
 * The uncached open flags are only ever sent where the kernel offered
 * them at INIT: a kernel without kernel-patches/0022 fails such opens with
 * EIO.
 */
#define PT_MAX_STACK_DEPTH 1

/* How the kernel does one handle's I/O (struct dcfs_file .pt). */
enum {
	PT_NONE,
	PT_KERNEL,
	PT_DAEMON,
	PT_FWD
};

/* Credentials the kernel captured with a backing id. */
#define PT_GROUPS 32
struct pt_ident {
	uid_t fsuid;
	gid_t fsgid;
	int ngroups; /* -1: too many to compare, matches nothing */
	gid_t groups[PT_GROUPS];
	bool reserve; /* CAP_SYS_RESOURCE (a root caller) */
};

struct pt_node {
	struct pt_node *next;
	const struct dcfs_inode *inode;
	int backing_id;	       /* > 0: state PT */
	unsigned int n_backed; /* handles replied with FOPEN_PASSTHROUGH */
	unsigned int n_fwd;    /* forwarded handles: state FWD */
	unsigned int n_bypass; /* writable backed handles */
	unsigned int n_kernel; /* handles whose reads and writes the kernel does */
	unsigned int n_drop; /* ... of which streams dropped behind (dropbehind.c, writebehind.c) */
	struct pt_ident ident;
};

/* Backing filesystems, by st_dev: the first BACKING_OPEN answers for all. */
struct pt_fs {
	dev_t dev;
	char fstype[16];
	int state; /* PT_FS_* */
	int err;
};

#define PT_BUCKETS 1024

static struct {
	pthread_mutex_t lock; /* the table, the filesystems, the reasons */
	struct pt_node *buckets[PT_BUCKETS];
	struct pt_fs fs[PT_MAX_FS];
	size_t nfs;
	int dev_fd;		/* session fd, for the backing ioctls */
	bool disabled;		/* -o nopassthrough */
	bool no_admin;		/* no CAP_SYS_ADMIN at mount */
	_Atomic bool on;	/* requested at INIT and not withdrawn */
	_Atomic bool dontcache; /* uncached passthrough accepted at INIT */
	_Atomic bool attr;	/* backing-inode attributes accepted at INIT */
	char off_reason[96];	/* why passthrough is off, once it is */
	bool logged_transient;
	_Atomic uint64_t bypass_total; /* sum of n_bypass: a fast "none" */
	_Atomic uint64_t ids_open, ids_opened, ids_closed, max_id;
	_Atomic uint64_t opens_kernel, opens_daemon, opens_fwd, fallbacks;
	_Atomic uint64_t opens_uncached; /* of opens_kernel: uncached */
} pt = { .lock = PTHREAD_MUTEX_INITIALIZER, .dev_fd = -1 };

/* --- credentials ------------------------------------------------------- */

static bool has_cap_sys_admin(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	return data[CAP_SYS_ADMIN / 32].effective & (1U << (CAP_SYS_ADMIN % 32));
}

/* What this thread runs as now: set by creds_enter() for open/create. */
static void ident_current(struct pt_ident *id, bool reserve)
{
	int n;

	id->fsuid = (uid_t)syscall(SYS_setfsuid, -1);
	id->fsgid = (gid_t)syscall(SYS_setfsgid, -1);
	n = (int)syscall(SYS_getgroups, PT_GROUPS, id->groups);
	id->ngroups = n < 0 ? -1 : n;
	id->reserve = reserve;
}

static bool ident_equal(const struct pt_ident *a, const struct pt_ident *b)
{
	/* The kernel keeps group lists sorted, so equal sets compare equal. */
	return a->ngroups >= 0 && a->fsuid == b->fsuid && a->fsgid == b->fsgid &&
	       a->reserve == b->reserve && a->ngroups == b->ngroups &&
	       memcmp(a->groups, b->groups, sizeof(gid_t) * (size_t)a->ngroups) == 0;
}

/* --- the per-inode table -------------------------------------------------- */

static struct pt_node **bucket_of(const struct dcfs_inode *inode)
{
	return &pt.buckets[((uintptr_t)inode >> 4) % PT_BUCKETS];
}

static struct pt_node *node_find(const struct dcfs_inode *inode)
{
	struct pt_node *n;

	for (n = *bucket_of(inode); n; n = n->next)
		if (n->inode == inode)
			return n;
	return NULL;
}

static struct pt_node *node_get(const struct dcfs_inode *inode)
{
	struct pt_node *n = node_find(inode), **b;

	if (n)
		return n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	b = bucket_of(inode);
	n->inode = inode;
	n->next = *b;
	*b = n;
	return n;
}

static void node_put_if_idle(struct pt_node *n)
{
	struct pt_node **p;

	if (n->n_backed || n->n_fwd)
		return;
	for (p = bucket_of(n->inode); *p; p = &(*p)->next) {
		if (*p == n) {
			*p = n->next;
			break;
		}
	}
	free(n);
}

/* --- probing and fallback ------------------------------------------------ */

static void turn_off(const char *why)
{
	if (!atomic_exchange(&pt.on, false)) {
		return;
	}
	snprintf(pt.off_reason, sizeof(pt.off_reason), "%s", why);
	log_warn("passthrough: off (%s); cached files are forwarded\n", why);
}

static struct pt_fs *fs_of(int fd, dev_t dev)
{
	struct pt_fs *fs;

	for (size_t i = 0; i < pt.nfs; i++)
		if (pt.fs[i].dev == dev)
			return &pt.fs[i];
	if (pt.nfs == PT_MAX_FS)
		return NULL;
	fs = &pt.fs[pt.nfs++];
	fs->dev = dev;
	snprintf(fs->fstype, sizeof(fs->fstype), "%s", probe_get(fd)->fstype);
	return fs;
}

/*
 * Registers fd's file; returns the backing id or -errno.  Errors that are a
 * property of the filesystem (stacking depth, a file type or filesystem the
 * kernel will not pass through) are remembered per st_dev, lack of
 * privilege for the whole mount; anything else is only counted.
 */
static int backing_open(fuse_req_t req, int fd, dev_t dev)
{
	struct pt_backing_map map = { .fd = fd };
	struct pt_fs *fs = fs_of(fd, dev);
	int how, id, err;

	if (fs && fs->state == PT_FS_REFUSED)
		return -fs->err;
	how = creds_backing_begin(req);
	id = ioctl(pt.dev_fd, PT_IOC_BACKING_OPEN, &map);
	err = id < 0 ? errno : 0;
	creds_io_end(how);
	if (id > 0) {
		if (fs && fs->state == PT_FS_UNKNOWN) {
			fs->state = PT_FS_YES;
			log_info("passthrough: backing %s (dev %u:%u) passes through\n", fs->fstype,
				 major(dev), minor(dev));
		}
		return id;
	}
	if (id == 0)
		err = EIO; /* not a valid id: never hand it out */
	atomic_fetch_add(&pt.fallbacks, 1);
	if (err == EPERM) {
		turn_off("the kernel refused to register backing files (EPERM)");
	} else if (err == ELOOP || err == EINVAL || err == EOPNOTSUPP || err == ENOTTY ||
		   err == EISDIR) {
		if (fs) {
			fs->state = PT_FS_REFUSED;
			fs->err = err;
			log_warn(
				"passthrough: backing %s (dev %u:%u) refused (%s); its cached files are forwarded\n",
				fs->fstype, major(dev), minor(dev), strerror(err));
		}
	} else if (!pt.logged_transient) {
		pt.logged_transient = true;
		log_warn(
			"passthrough: registering a backing file failed (%s); that open is forwarded (logged once)\n",
			strerror(err));
	}
	return -err;
}

static void backing_close(int id)
{
	uint32_t arg = (uint32_t)id;

	/* After an unmount the kernel has dropped every id itself. */
	if (ioctl(pt.dev_fd, PT_IOC_BACKING_CLOSE, &arg) < 0 && errno != ENODEV &&
	    errno != ENOTCONN)
		log_warn("passthrough: closing backing id %d: %s\n", id, strerror(errno));
	atomic_fetch_sub(&pt.ids_open, 1);
	atomic_fetch_add(&pt.ids_closed, 1);
}

/* --- decisions at open and release ---------------------------------------- */

enum wish {
	WISH_KERNEL,
	WISH_DAEMON,
	WISH_CACHED
};

/*
 * The uncached FOPEN flags a streaming handle needs for the kernel to do
 * its I/O, or 0 if the kernel cannot: not offered, not wanted
 * (passthrough_uncached = no), or a direction the handle streams that the
 * backing filesystem has not been seen to do with RWF_DONTCACHE (unknown
 * until the first such I/O, which the daemon then does and probes).
 */
static uint32_t uncached_flags(const struct dcfs_file *f, bool reads, bool writes)
{
	uint32_t flags = 0;

	if (!atomic_load(&pt.dontcache) || !f->pt.kernel_uncached_wish || !f->probe)
		return 0;
	if (reads && f->use.read_uncached) {
		if (atomic_load(&f->probe->rd) != PROBE_YES)
			return 0;
		flags |= PT_FOPEN_DONTCACHE_READ;
	}
	if (writes && f->use.write_uncached) {
		if (atomic_load(&f->probe->wr) != PROBE_YES)
			return 0;
		flags |= PT_FOPEN_DONTCACHE_WRITE;
	}
	return flags;
}

/*
 * Kernel I/O is sound when this handle would never do uncached I/O and has
 * no switch pending: the cache class, small files, and the cached
 * direction of dontcache-read/-write when the open cannot use the other;
 * and for read-only streams io_select.c chose for drop-behind (the kernel
 * reads, dropbehind.c keeps the backing cache small).
 * Streaming handles need the daemon for RWF_DONTCACHE, unless the kernel
 * can do uncached I/O itself (*uncached: the flags for that); auto and
 * deferred handles need the daemon to see the stream.
 */
static enum wish wish_of(const struct dcfs_file *f, const struct fuse_file_info *fi,
			 uint32_t *uncached)
{
	int acc = f->flags & O_ACCMODE;
	bool reads = acc != O_WRONLY, writes = acc != O_RDONLY;

	*uncached = 0;
	if (f->stream && f->stream->switch_after)
		return fi->direct_io ? WISH_DAEMON : WISH_CACHED;
	/*
	 * The backing filesystem clears set-id bits at a write by a caller
	 * without CAP_FSETID, and the kernel does not tell: its own attributes
	 * would keep the bits until they time out.  Such writes come to the
	 * daemon, which drops them at once (coherence_mode_may_change()).  Root's
	 * opens too: the kernel would write with the opener's credentials, and
	 * a process that drops its privileges after opening writes as itself.
	 */
	if (writes && f->pt.setid0)
		return WISH_CACHED;
	/* A streaming reader the kernel can serve: dropbehind.c trails it. */
	if (f->pt.dropbehind_wish && !writes)
		return WISH_KERNEL;
	if ((reads && f->use.read_uncached) || (writes && f->use.write_uncached)) {
		*uncached = uncached_flags(f, reads, writes);
		/* On stock kernels a write stream writebehind.c follows. */
		return *uncached || f->pt.writebehind_wish ? WISH_KERNEL : WISH_DAEMON;
	}
	return WISH_KERNEL;
}

static bool writable(const struct dcfs_file *f)
{
	return (f->flags & O_ACCMODE) != O_RDONLY;
}

/*
 * A stream the daemon drops behind (dropbehind.c, writebehind.c): its
 * pages are its own, unlike those of any other handle of the inode.
 */
static bool trailed(const struct dcfs_file *f)
{
	return f->pt.dropbehind_wish || (f->pt.writebehind_wish && !f->pt.uncached);
}

void passthrough_open(fuse_req_t req, struct dcfs_file *f, struct fuse_file_info *fi)
{
	uint32_t uncached;
	enum wish wish = wish_of(f, fi, &uncached);
	struct pt_ident me;
	struct pt_node *n;
	int kind = PT_FWD, id;

	wire_arm_open(0, 0, 0);
	f->pt.kind = PT_NONE;
	if (f->inode->type != S_IFREG)
		return;
	/* Off, and no inode left that needs its opens to agree: nothing to track. */
	if (!atomic_load(&pt.on) && !atomic_load(&pt.ids_open)) {
		atomic_fetch_add(&pt.opens_fwd, 1);
		return;
	}
	pthread_mutex_lock(&pt.lock);
	n = node_get(f->inode);
	if (!n) {
		/*
		 * An untracked forwarded open could meet a later passthrough
		 * open of the inode (EIO): stop registering new ones.
		 */
		turn_off("out of memory for the inode table");
		pthread_mutex_unlock(&pt.lock);
		atomic_fetch_add(&pt.opens_fwd, 1);
		return;
	}
	ident_current(&me, dcfs.privileged && fuse_req_ctx(req)->uid == 0);
	if (n->backing_id > 0) {
		kind = wish == WISH_KERNEL && (!writable(f) || ident_equal(&me, &n->ident))
			       ? PT_KERNEL
			       : PT_DAEMON;
	} else if (!n->n_fwd && wish == WISH_KERNEL && atomic_load(&pt.on)) {
		/* f->fd was opened from the inode: same st_dev. */
		id = backing_open(req, f->fd, f->inode->dev);
		if (id > 0) {
			n->backing_id = id;
			n->ident = me;
			atomic_fetch_add(&pt.ids_open, 1);
			atomic_fetch_add(&pt.ids_opened, 1);
			if ((uint64_t)id > atomic_load(&pt.max_id))
				atomic_store(&pt.max_id, (uint64_t)id);
			kind = wish == WISH_KERNEL ? PT_KERNEL : PT_DAEMON;
		}
	}
	if (kind == PT_FWD) {
		n->n_fwd++;
	} else {
		n->n_backed++;
		if (writable(f)) {
			n->n_bypass++;
			atomic_fetch_add(&pt.bypass_total, 1);
		}
		wire_arm_open((uintptr_t)f, n->backing_id,
			      PT_FOPEN_PASSTHROUGH | (kind == PT_KERNEL ? uncached : 0));
	}
	f->pt.kind = kind;
	f->pt.uncached = kind == PT_KERNEL ? uncached : 0;
	if (kind == PT_KERNEL)
		n->n_kernel++;
	if (kind == PT_KERNEL && trailed(f))
		n->n_drop++;
	pthread_mutex_unlock(&pt.lock);
	if (kind == PT_KERNEL) {
		fi->direct_io = 0;
		fi->keep_cache = 0; /* the kernel rejects it with passthrough */
		atomic_fetch_add(&pt.opens_kernel, 1);
		if (f->pt.uncached)
			atomic_fetch_add(&pt.opens_uncached, 1);
		stats_add(f->policy, ST_PASSTHROUGH, 1);
	} else if (kind == PT_DAEMON) {
		fi->direct_io = 1;
		fi->keep_cache = 0;
		atomic_fetch_add(&pt.opens_daemon, 1);
	} else {
		atomic_fetch_add(&pt.opens_fwd, 1);
	}
}

/*
 * The kernel wrote through this handle without a request to dcfs: what the
 * file grew by since the open is counted as written_kernel (an estimate:
 * overwrites in place are not seen).  At release, before the fd closes.
 */
static void count_kernel_writes(struct dcfs_file *f)
{
	struct stat st;

	/* writebehind.c counts its streams as they grow. */
	if (f->pt.kind != PT_KERNEL || !writable(f) || f->pt.size0 < 0 || f->wb ||
	    fstat(f->fd, &st) < 0 || st.st_size <= f->pt.size0)
		return;
	stats_add(f->policy, ST_WRITE_KERNEL, (uint64_t)(st.st_size - f->pt.size0));
}

void passthrough_release(struct dcfs_file *f)
{
	struct pt_node *n;
	int id = 0;

	if (f->pt.kind == PT_NONE)
		return;
	count_kernel_writes(f);
	pthread_mutex_lock(&pt.lock);
	n = node_find(f->inode);
	if (n && f->pt.kind == PT_FWD) {
		n->n_fwd--;
	} else if (n) {
		if (f->pt.kind == PT_KERNEL)
			n->n_kernel--;
		if (f->pt.kind == PT_KERNEL && trailed(f))
			n->n_drop--;
		if (writable(f)) {
			n->n_bypass--;
			atomic_fetch_sub(&pt.bypass_total, 1);
		}
		if (--n->n_backed == 0) {
			id = n->backing_id;
			n->backing_id = 0;
		}
	}
	if (n)
		node_put_if_idle(n);
	/* Closed under the lock: a new open of the inode must not see it. */
	if (id > 0)
		backing_close(id);
	pthread_mutex_unlock(&pt.lock);
	f->pt.kind = PT_NONE;
}

/*
 * Does the kernel reach the backing file of inode for some handle (its
 * I/O, or its mappings), without asking the daemon first?
 */
bool passthrough_backed(const struct dcfs_inode *inode)
{
	struct pt_node *n;
	bool ret;

	if (!atomic_load(&pt.ids_open))
		return false;
	pthread_mutex_lock(&pt.lock);
	n = node_find(inode);
	ret = n && n->n_backed;
	pthread_mutex_unlock(&pt.lock);
	return ret;
}

/* Does the kernel reach the backing file of handle f's inode (I/O or maps)? */
bool passthrough_reaches_backing(const struct dcfs_file *f)
{
	return f->pt.kind == PT_KERNEL || f->pt.kind == PT_DAEMON;
}

/* Does the kernel read and write the backing file for handle f itself? */
bool passthrough_by_kernel(const struct dcfs_file *f)
{
	return f->pt.kind == PT_KERNEL;
}

/*
 * Does inode have an open handle that is not a drop-behind reader (whose
 * pages a drop-behind would take from it)?
 */
bool passthrough_shared(const struct dcfs_inode *inode)
{
	struct pt_node *n;
	bool ret;

	pthread_mutex_lock(&pt.lock);
	n = node_find(inode);
	ret = n && (n->n_fwd || n->n_backed > n->n_drop);
	pthread_mutex_unlock(&pt.lock);
	return ret;
}

/* Handles of inode open now, as far as passthrough.c tracks them. */
unsigned int passthrough_handles(const struct dcfs_inode *inode)
{
	struct pt_node *n;
	unsigned int ret;

	pthread_mutex_lock(&pt.lock);
	n = node_find(inode);
	ret = n ? n->n_backed + n->n_fwd : 0;
	pthread_mutex_unlock(&pt.lock);
	return ret;
}

bool passthrough_bypassed(const struct dcfs_inode *inode)
{
	struct pt_node *n;
	bool ret;

	if (!atomic_load(&pt.bypass_total))
		return false;
	pthread_mutex_lock(&pt.lock);
	n = node_find(inode);
	ret = n && n->n_bypass;
	pthread_mutex_unlock(&pt.lock);
	return ret;
}

/* What an open of a cache-class file would get now, for user.dcfs.policy. */
void passthrough_describe(const struct dcfs_inode *inode, char *buf, size_t size)
{
	struct pt_node *n;
	struct stat st;

	pthread_mutex_lock(&pt.lock);
	n = node_find(inode);
	if (n && n->backing_id > 0) {
		snprintf(buf, size, "passthrough");
	} else if (!atomic_load(&pt.on)) {
		snprintf(buf, size, "forwarded: %s",
			 pt.off_reason[0] ? pt.off_reason : "passthrough off");
	} else if (n && n->n_fwd) {
		snprintf(buf, size, "forwarded: the file is open by a forwarded handle");
	} else {
		snprintf(buf, size, "passthrough");
		if (inode_stat((struct dcfs_inode *)inode, &st) == 0) {
			for (size_t i = 0; i < pt.nfs; i++)
				if (pt.fs[i].dev == st.st_dev && pt.fs[i].state == PT_FS_REFUSED)
					snprintf(buf, size,
						 "forwarded: backing %s refuses passthrough (%s)",
						 pt.fs[i].fstype, strerror(pt.fs[i].err));
		}
	}
	pthread_mutex_unlock(&pt.lock);
}

/* --- INIT ------------------------------------------------------------------ */

/*
 * This project's kernel (kernel-patches/, patch 22) offers uncached
 * passthrough and backing attributes only while the administrator has
 * switched the fuse module parameter passthrough_private on: the INIT bits
 * are private, and a future mainline server must not get them by accident.
 * dcfs does not switch it on itself (that would turn it on for every FUSE
 * server); where the parameter exists and is off, say how.
 */
static void log_private_switch_hint(void)
{
	int fd = open("/sys/module/fuse/parameters/passthrough_private", O_RDONLY | O_CLOEXEC);
	char v = 0;

	if (fd < 0)
		return;
	if (read(fd, &v, 1) == 1 && v == 'N')
		log_warn(
			"passthrough: this kernel has uncached passthrough but fuse.passthrough_private is off, so streams go through the daemon: boot with fuse.passthrough_private=1, or echo Y > /sys/module/fuse/parameters/passthrough_private and mount again\n");
	close(fd);
}

/*
 * This file's part of the INIT reply (wire.c calls it last, out NULL when
 * the kernel offers no extended INIT): passthrough where it is offered
 * and wanted, and not with the writeback cache; then the mount's one line
 * on it.
 */
static void pt_init(const struct wire_offer *offer, struct fuse_init_out *out)
{
	uint32_t depth = PT_MAX_STACK_DEPTH;
	bool want_pt = !pt.disabled && !pt.no_admin;
	struct wire_stats ws;

	if (!out) {
		snprintf(pt.off_reason, sizeof(pt.off_reason),
			 "the kernel offers no extended INIT");
		log_info("passthrough: off (%s)\n", pt.off_reason);
		return;
	}
	if (want_pt && (offer->flags2 & PT_FLAGS2(PT_INIT_PASSTHROUGH)) &&
	    !(out->flags & FUSE_WRITEBACK_CACHE)) {
		out->flags2 |= PT_FLAGS2(PT_INIT_PASSTHROUGH);
		memcpy((char *)out + INIT_OUT_MAX_STACK_DEPTH, &depth, sizeof(depth));
		atomic_store(&pt.on, true);
		if (offer->flags2 & PT_FLAGS2(PT_INIT_DONTCACHE)) {
			out->flags2 |= PT_FLAGS2(PT_INIT_DONTCACHE);
			atomic_store(&pt.dontcache, true);
		}
		/*
		 * dcfs reports size, blocks, times and xattrs as the backing
		 * inode has them, and holds no write back while the kernel has
		 * the backing file (passthrough_backed()): the kernel may take
		 * them from the backing inode itself.
		 */
		if (offer->flags2 & PT_FLAGS2(PT_INIT_ATTR)) {
			out->flags2 |= PT_FLAGS2(PT_INIT_ATTR);
			atomic_store(&pt.attr, true);
		}
	} else {
		snprintf(pt.off_reason, sizeof(pt.off_reason), "%s",
			 pt.disabled   ? "-o nopassthrough"
			 : pt.no_admin ? "the daemon lacks CAP_SYS_ADMIN"
				       : "the kernel does not offer it");
	}
	wire_stats(&ws);
	log_info(
		"passthrough: %s%s%s; uncached passthrough %s; attributes from the backing inode %s; direct-I/O shared mmap %s\n",
		atomic_load(&pt.on) ? "on" : "off (", atomic_load(&pt.on) ? "" : pt.off_reason,
		atomic_load(&pt.on) ? "" : ")", atomic_load(&pt.dontcache) ? "on" : "not offered",
		atomic_load(&pt.attr) ? "on" : "not offered",
		ws.allow_mmap ? "allowed" : "not offered (ENODEV)");
	if (atomic_load(&pt.on) && !atomic_load(&pt.dontcache))
		log_private_switch_hint();
}

/*
 * For the startup line of each backing filesystem (caps.c), written before
 * the INIT reply goes out: what the kernel offered and what dcfs will ask.
 */
void passthrough_summary(char *buf, size_t size)
{
	struct wire_offer offer;

	wire_offer(&offer);
	if (pt.disabled)
		snprintf(buf, size, "off (-o nopassthrough)");
	else if (pt.no_admin)
		snprintf(buf, size, "off (the daemon lacks CAP_SYS_ADMIN)");
	else if (offer.flags2 & PT_FLAGS2(PT_INIT_PASSTHROUGH))
		snprintf(buf, size, "offered by the kernel");
	else
		snprintf(buf, size, "not offered by the kernel");
}

/*
 * Before the session runs: this file's part of INIT goes to the wire, and
 * the session fd is kept for the backing ioctls.
 */
int passthrough_install(struct fuse_session *se, bool disabled)
{
	pt.disabled = disabled;
	pt.no_admin = !has_cap_sys_admin();
	pt.dev_fd = fuse_session_fd(se);
	wire_set_init_hook(pt_init);
	return 0;
}

/* --- reporting ---------------------------------------------------------- */

void passthrough_stats(struct passthrough_stats *st)
{
	pthread_mutex_lock(&pt.lock);
	st->on = atomic_load(&pt.on);
	snprintf(st->reason, sizeof(st->reason), "%s", st->on ? "" : pt.off_reason);
	st->dontcache = atomic_load(&pt.dontcache);
	st->opens_uncached = pt.opens_uncached;
	st->ids_open = pt.ids_open;
	st->ids_opened = pt.ids_opened;
	st->ids_closed = pt.ids_closed;
	st->max_id = pt.max_id;
	st->opens_kernel = pt.opens_kernel;
	st->opens_daemon = pt.opens_daemon;
	st->opens_fwd = pt.opens_fwd;
	st->fallbacks = pt.fallbacks;
	st->nfs = pt.nfs;
	for (size_t i = 0; i < pt.nfs; i++) {
		st->fs[i].dev = pt.fs[i].dev;
		snprintf(st->fs[i].fstype, sizeof(st->fs[i].fstype), "%s", pt.fs[i].fstype);
		st->fs[i].state = pt.fs[i].state;
		st->fs[i].err = pt.fs[i].err;
	}
	pthread_mutex_unlock(&pt.lock);
}
