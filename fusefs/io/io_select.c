// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Decide once: at open/create the file is classified (policy.c) and the
 * handle gets its strategy and FUSE open flags.  read/write never look at
 * the config again; the only later change is the one-way switch of an
 * auto (or min_size-deferred) handle to uncached I/O.
 *
 * Why FOPEN_DIRECT_IO for streaming handles: otherwise the FUSE mount
 * keeps its own page-cache copy of everything that passes, whatever the
 * daemon does on the backing file.
 */
#include <stdatomic.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"
#include "dcfs_sys.h"

static int io_select_comm(fuse_req_t req, char comm[16])
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char path[64];
	ssize_t n;
	int fd;

	comm[0] = '\0';
	if (!ctx || ctx->pid <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)ctx->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, comm, 15);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	comm[n] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
	return 0;
}

bool io_select_has_cached_pages(int fd)
{
	return resident_count(fd, 0, 0) != 0;
}

/* Starts cached, switches to target once switch_after bytes streamed. */
static void start_deferred(struct dcfs_file *f, int target, uint64_t after,
			   struct fuse_file_info *fi)
{
	f->io = &io_stream;
	f->stream->target = target;
	f->stream->switch_after = after ? after : 1;
	f->use.was_resident = io_select_has_cached_pages(f->fd);
	fi->keep_cache = 1;
}

/*
 * Backing filesystems whose close(2) neither writes nor reports anything
 * (no ->flush): closing a dup of the backing fd, all FLUSH would do for a
 * handle without buffered writes, cannot fail there.  Network and stacked
 * filesystems (NFS, CIFS, FUSE, overlayfs) and F2FS (atomic writes) keep
 * FLUSH.
 */
enum {
	CLOSE_UNKNOWN,
	CLOSE_NOOP,
	CLOSE_FLUSHES
};

static unsigned char close_kind_of_fd(int fd)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return CLOSE_UNKNOWN;
	switch ((unsigned long)sf.f_type) {
	case EXT4_SUPER_MAGIC: /* also ext2 and ext3 */
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC: return CLOSE_NOOP;
	default: return CLOSE_FLUSHES;
	}
}

/* Asked once per inode (fd: one of its fds), not at every open. */
static bool close_is_noop(struct dcfs_inode *inode, int fd)
{
	unsigned char k = atomic_load(&inode->close_kind);

	if (k == CLOSE_UNKNOWN) {
		k = close_kind_of_fd(fd);
		atomic_store(&inode->close_kind, k);
	}
	return k == CLOSE_NOOP;
}

/*
 * A file just created in dir is on dir's filesystem if it has dir's
 * st_dev: two live superblocks never share one, and dirfd keeps dir's
 * alive.  So a create asks fstatfs() once per directory, not per file.
 */
void io_select_fs_inherit(struct dcfs_inode *inode, struct dcfs_inode *dir, int dirfd)
{
	if (inode->dev != dir->dev || atomic_load(&inode->close_kind))
		return;
	close_is_noop(dir, dirfd);
	atomic_store(&inode->close_kind, atomic_load(&dir->close_kind));
}

/*
 * How a write stream's writes will be served, decided once: by the kernel
 * (passthrough) with write-behind where it is allowed and measured to be
 * better, else by the daemon's engine; the reason goes to
 * user.dcfs.files, dcfs stat --files and the log (writebehind_decided()).
 * passthrough.c has the last word (the inode's other opens).
 */
static void choose_write_mode(struct dcfs_file *f, const struct dcfs_config *cfg)
{
	if ((f->flags & O_ACCMODE) == O_RDONLY || !f->use.write_uncached)
		return;
	if (!cfg->passthrough_writes)
		f->pt.write_mode = "by the daemon engine: passthrough_writes = no";
	else
		f->pt.write_mode = writebehind_refusal(f, f->stats ? f->stats->pid : 0);
	f->pt.writebehind_wish = !f->pt.write_mode && writebehind_prepare(f) == 0;
	if (!f->pt.write_mode && !f->pt.writebehind_wish)
		f->pt.write_mode =
			"by the daemon engine: no memory or no cachestat(2) for write-behind";
}

static int apply_decision(struct dcfs_file *f, const struct dcfs_decision *d,
			  const struct dcfs_config *cfg, struct fuse_file_info *fi)
{
	int err;

	f->policy = d->policy;
	if (d->policy == POLICY_CACHE) {
		f->io = &io_plain;
		fi->keep_cache = 1;
		/*
		 * No FLUSH round trip at close (FOPEN_NOFLUSH): a cache-class
		 * handle has no buffered writes of its own, its writes are
		 * done by the time they return.  Streaming and auto handles
		 * keep FLUSH: close returns their deferred write errors.  So
		 * does every handle of a file a POSIX lock was taken on: its
		 * FLUSH is how a close(2) ends the closer's locks
		 * (handlers/fuse_lock.c).
		 */
		fi->noflush =
			close_is_noop(f->inode, f->fd) && !atomic_load(&f->inode->posix_locked);
		return 0;
	}
	err = io_stream_alloc(f);
	if (err)
		return err;
	f->stream->window = cfg->window;
	f->stream->ra_cap = cfg->readahead;
	f->stream->ra_prefetch = cfg->prefetch;
	f->probe = cfg->force_fallback ? probe_forced_fallback() : probe_get(f->fd);
	if (d->policy == POLICY_AUTO)
		/* A small file being written is also held back by min_size. */
		start_deferred(f, POLICY_DONTCACHE,
			       d->deferred && (uint64_t)d->min_size > cfg->auto_threshold
				       ? (uint64_t)d->min_size
				       : cfg->auto_threshold,
			       fi);
	else if (d->deferred)
		start_deferred(f, d->policy, (uint64_t)d->min_size, fi);
	else {
		f->io = &io_stream;
		io_stream_set_uncached(f, d->policy);
		f->use.fuse_cached =
			(d->fuse_readahead >= 0 ? d->fuse_readahead : cfg->fuse_readahead) &&
			(f->flags & O_ACCMODE) == O_RDONLY && f->use.read_uncached;
		fi->direct_io = !f->use.fuse_cached;
		/*
		 * Better still, the kernel reads (passthrough) and dropbehind.c
		 * trails it, if passthrough.c can set that up: not for a file
		 * in use at open, whose pages would go with the stream's.
		 */
		f->pt.dropbehind_wish = cfg->passthrough_reads &&
					(f->flags & O_ACCMODE) == O_RDONLY &&
					f->use.read_uncached && !io_select_has_cached_pages(f->fd);
		/*
		 * Or, where the kernel offers it (kernel-patches/), the kernel
		 * reads and writes the stream itself with RWF_DONTCACHE.
		 */
		f->pt.kernel_uncached_wish = cfg->passthrough_uncached;
		/*
		 * Else, on stock kernels, the kernel writes a write stream
		 * itself and writebehind.c keeps its page cache small.
		 */
		choose_write_mode(f, cfg);
		/*
		 * The kernel's read-ahead requests are up to 1 MiB and already
		 * overlap with the reader: 2 MiB windows serve them as well as
		 * larger ones (measured), with less memory per reader.
		 */
		if (f->use.fuse_cached && f->stream->ra_cap)
			f->stream->ra_cap = FRA_WINDOW;
	}
	return 0;
}

/*
 * Streaming handles take part in write coalescing; every handle of a
 * regular file in deferred errors (write_pipe.c): a failed background
 * write is reported to all handles open at the time, whatever their class.
 */
static int attach_wpipe(struct dcfs_file *f, const struct dcfs_config *cfg)
{
	struct wpipe_limits lim = {
		.writeback = cfg->writeback_limit,
		.inflight = cfg->inflight,
		.inflight_mount = cfg->inflight_mount,
		.expire_ms = cfg->write_expire_ms,
	};

	return wpipe_open(f, &lim);
}

int io_select_policy(fuse_req_t req, struct dcfs_inode *inode, int64_t size, bool writable,
		     struct dcfs_decision *d, struct dcfs_config **cfgp)
{
	struct dcfs_config *cfg = config_get();
	char path[4096], comm[16];

	/* Only rules that use them cost a readlink or a /proc read per open. */
	if (!(cfg->n_dirs || cfg->n_classes) || inode_backing_path(inode, path, sizeof(path)) < 0)
		strcpy(path, "/");
	if (!cfg->n_procs || io_select_comm(req, comm) < 0)
		comm[0] = '\0';
	policy_decide(cfg, path, comm[0] ? comm : NULL, size, writable, d);
	*cfgp = cfg;
	return 0;
}

/*
 * known: the file's stat, if the caller just took it (a create): one
 * fstat less per create.  It was taken before the generation is read
 * here, so a write through the mount in between can only make the next
 * look see a change from outside that was none (a needless cache drop),
 * never miss one.
 */
int io_select(fuse_req_t req, struct dcfs_file *f, struct fuse_file_info *fi,
	      const struct stat *known)
{
	struct dcfs_decision d;
	struct dcfs_config *cfg;
	struct stat st;
	bool writable = (f->flags & O_ACCMODE) != O_RDONLY, outside;
	uint64_t gen;
	int err;

	/* The open has just truncated it, through the mount. */
	if (f->flags & O_TRUNC)
		stamp_changed_inside(f->inode);
	gen = stamp_gen(f->inode);
	if (known)
		st = *known;
	else if (fstat(f->fd, &st) < 0)
		return -errno;
	/* For passthrough.c: what a kernel writer adds is counted from here. */
	f->pt.size0 = st.st_size;
	f->pt.setid0 = st.st_mode & (S_ISUID | S_ISGID);
	outside = stamp_changed_outside(f->inode, &st, gen);
	outside |= stamp_take_outside(f->inode);
	coherence_saw_mode(f->inode, st.st_mode);
	if (!S_ISREG(st.st_mode)) {
		f->io = &io_plain;
		return 0;
	}
	io_select_policy(req, f->inode, st.st_size, writable, &d, &cfg);
	err = file_stats_open(req, f, &d);
	if (err) {
		config_put(cfg);
		return err;
	}
	err = apply_decision(f, &d, cfg, fi);
	if (err) {
		config_put(cfg);
		return err;
	}
	/*
	 * Close-to-open: the kernel drops what it cached before open returns,
	 * and the attributes with it: a read through the FUSE page cache
	 * stops at the size the kernel holds, which stays the old one until
	 * the attribute timeout (a native append read back short).
	 */
	if (outside) {
		fi->keep_cache = 0;
		notify_inval_attr_now(f->inode->nodeid);
	}
	err = attach_wpipe(f, cfg);
	config_put(cfg);
	if (err)
		return err;
	stats_add(f->policy, ST_OPENED, 1);
	if (log_enabled(FUSE_LOG_DEBUG)) {
		char why[256];

		policy_describe(&d, why, sizeof(why));
		log_debug("open ino %llu: %s\n", (unsigned long long)st.st_ino, why);
	}
	return 0;
}
