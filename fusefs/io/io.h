/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fusefs/io/ -- Open files and their I/O.  io.c is what the handlers call:
 * the life of an open file (struct dcfs_file, declared here and nowhere
 * below) and every request on it.  Behind it: the I/O strategies
 * (io_plain, io_stream) chosen once per open by io_select, and what they
 * use: the write pipe, read-ahead, the fallback window, drop-behind, kernel
 * passthrough, the RWF_DONTCACHE probe, the coherence model and FUSE cache
 * invalidation.
 */
#ifndef DCFS_LAYER_IO_H
#define DCFS_LAYER_IO_H

#include "policy/policy.h"

struct dcfs_file;

/*
 * An I/O strategy, chosen once when a file is opened and kept in the
 * handle.  read() must reply to the request; write() returns the number of
 * bytes written or -errno.
 */
struct dcfs_io {
	const char *name;
	void (*read)(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off);
	ssize_t (*write)(struct dcfs_file *f, struct fuse_bufvec *in, off_t off);
	void (*release)(struct dcfs_file *f);
};

struct probe;
struct file_stats;
struct stream_state;
struct db_state;
struct wb_state;

/*
 * Where a handle's data may be held and how it reaches the backing file:
 * the inputs of the coherence model (io/coherence.c, dcfs(8) DATA
 * COHERENCE).
 */
struct data_use {
	bool read_uncached; /* current behaviour of the backing I/O */
	bool write_uncached;
	bool was_resident;  /* the file had cached pages at open */
	bool fuse_cached;   /* a streaming reader served through the FUSE cache */
	bool cached_writer; /* writes through the FUSE page cache (notify.c counts it) */
	bool direct_io;	    /* opened FOPEN_DIRECT_IO */
};

/* How the kernel and the daemon share a handle's I/O (io/passthrough.c). */
struct pt_handle {
	int kind;		   /* who does this handle's I/O */
	uint32_t uncached;	   /* the uncached FOPEN flags sent */
	bool dropbehind_wish;	   /* io_select.c: a read-only stream dropbehind.c may trail */
	bool kernel_uncached_wish; /* the kernel may read and write it uncached */
	bool writebehind_wish; /* io_select.c: a write stream the kernel may serve, written behind */
	const char *write_mode; /* how a write stream's writes are served, and why */
	off_t size0;		/* size at a kernel writer's open (written_kernel) */
	bool setid0;		/* the file had a set-id bit at open */
};

/*
 * One open of a file: what every handle has, whatever its strategy.  The
 * state of a strategy or of a mechanism used by some handles only lives in
 * a struct of its own, allocated when the handle starts using it and freed
 * with it: the streaming engine's (struct stream_state, io/io_stream.c),
 * drop-behind's (struct db_state, io/dropbehind.c), write-behind's
 * (struct wb_state, io/writebehind.c), the write pipe's
 * (struct wpipe, io/write_pipe.c).
 */
struct dcfs_file {
	int fd; /* backing fd opened with the caller's flags */
	int flags;
	struct dcfs_inode *inode;
	const struct dcfs_io *io;
	_Atomic int refs;     /* release + requests in progress */
	pthread_mutex_t lock; /* the fields below */

	int policy;		       /* enum dcfs_policy decided at open */
	struct dcfs_file *prev, *next; /* open handles, for teardown */
	struct file_stats *stats;      /* stats.c: who opened it, why, bytes moved */
	struct probe *probe;	       /* RWF_DONTCACHE support of its filesystem */

	struct data_use use; /* who holds its data (io/coherence.c) */

	struct pt_handle pt;	     /* io/passthrough.c: who does this handle's I/O */
	struct stream_state *stream; /* io/io_stream.c; NULL: not a stream */
	struct db_state *db;	     /* io/dropbehind.c; NULL: not trailed */
	struct wb_state *wb;	     /* io/writebehind.c; NULL: not written behind */
	struct wpipe *wp;	     /* write coalescing and deferred errors (write_pipe.c) */
};

/* What each open handle carries for user.dcfs.files (file_stats.c). */
struct file_stats {
	uid_t uid; /* of the opener: only they (and root) see the handle */
	pid_t pid;
	_Atomic uint64_t bytes[2]; /* read, written */
	char why[192];		   /* the rule that decided */
};

static inline struct dcfs_file *dcfs_file_of(struct fuse_file_info *fi)
{
	return (struct dcfs_file *)(uintptr_t)fi->fh;
}

enum probe_state {
	PROBE_UNKNOWN,
	PROBE_YES,
	PROBE_NO
};

/* What one backing filesystem (st_dev) answered to RWF_DONTCACHE. */
struct probe {
	dev_t dev;
	char fstype[16];
	_Atomic int rd; /* enum probe_state */
	_Atomic int wr;
	_Atomic int64_t max_size;   /* largest file allowed; 0: not known */
	_Atomic bool quota_on;	    /* quotas enforced (admit.c) ... */
	_Atomic int64_t quota_seen; /* ... as seen then (monotonic s), 0: never */
};

/*
 * The streaming engine's state of one handle (io/io_stream.c and what it
 * uses: io/readahead.c, io/fallback.c), allocated when a handle starts
 * streaming (io/io_select.c) and freed with the handle.  Plain handles have
 * none (f->stream == NULL).
 */
struct ra_next;

struct range {
	off_t lo, hi;
};

struct stream_state {
	int target;	       /* policy to switch to once switch_after is met */
	uint64_t switch_after; /* 0: no switch pending */
	off_t seq_next;	       /* sequential stream tracking */
	uint64_t seq_run;
	off_t seq_start;
	off_t inval_done;	 /* FUSE cache of this stream dropped up to here */
	unsigned int drops_seen; /* inode->cache_drops at its last request */
	off_t pre_lo, pre_hi;	 /* span cached before the switch */
	uint64_t window;
	bool fadv_random;

	/* read-ahead buffer (uncached reads, io/readahead.c) */
	char *ra_buf;
	size_t ra_cap;
	off_t ra_off;
	size_t ra_len;
	uint64_t ra_gen;
	off_t ra_last_end;	 /* where the last read ended */
	bool ra_prefetch;	 /* double buffering allowed */
	struct ra_next *ra_next; /* the second buffer */
	/* the window before, for late requests of the kernel's read-ahead */
	char *ra_prev_buf;
	off_t ra_prev_off;
	size_t ra_prev_len;
	uint64_t ra_prev_gen;

	/* fallback write-behind and residency protection (io/fallback.c) */
	off_t wb_lo, wb_hi;	      /* written, writeback not started */
	off_t wb_prev_lo, wb_prev_hi; /* writeback started, not yet dropped */
	off_t wb_old_lo, wb_old_hi;   /* dropped once: dropped again (btrfs) */
	off_t seen_lo, seen_hi;	      /* pages this handle touched */
	off_t ra_reach;	    /* how far the kernel may read ahead of a read; 0: not known yet */
	off_t dc_lo, dc_hi; /* span written with RWF_DONTCACHE */
	struct range prot[16];
	unsigned int nprot;
	bool prot_all; /* too many pre-resident ranges: drop nothing */
};

struct wpipe_limits {
	uint64_t writeback;	 /* writeback_limit */
	uint64_t inflight;	 /* per handle; 0: synchronous writes */
	uint64_t inflight_mount; /* all handles */
	uint64_t expire_ms;	 /* write_expire; 0: no bound */
};

/* Read-ahead window of a reader through the FUSE cache. */
#define FRA_WINDOW ((size_t)2 << 20)

/*
 * io.c: what the handlers call -- the life of an open file and its
 * requests (each replies or returns the answer), and the attribute
 * requests that must see the data as the mount holds it.
 */
int io_start(struct fuse_session *se);
void io_stop(void);
void io_open_prepare(struct dcfs_inode *inode, int flags);
int io_open(fuse_req_t req, struct dcfs_inode *inode, int fd, struct fuse_file_info *fi,
	    const struct stat *st);
struct dcfs_file *io_get(struct fuse_file_info *fi);
void io_put(struct dcfs_file *f);
void io_release(struct dcfs_file *f);
void io_release_all(void);
size_t io_open_count(void);
struct io_file_view {
	struct dcfs_inode *inode;
	int policy; /* the class decided at open */
	uid_t uid;  /* of the opener */
	pid_t pid;
	uint64_t bytes[2]; /* read, written */
	const char *why;   /* the rule that decided */
	bool streamed;	   /* io_stream, else io_plain */
	bool read_uncached, write_uncached;
	int probe_rd, probe_wr; /* enum probe_state of its filesystem */
	uint64_t switch_after;	/* uncached after this many bytes; 0: no switch */
};
void io_foreach(void (*fn)(const struct io_file_view *v, void *arg), void *arg);
int io_fd(struct fuse_file_info *fi);
void io_read(fuse_req_t req, struct dcfs_file *f, const struct fuse_file_info *fi, size_t size,
	     off_t off);
ssize_t io_write(fuse_req_t req, struct dcfs_file *f, const struct fuse_file_info *fi,
		 struct fuse_bufvec *in, off_t off);
int io_flush(struct dcfs_file *f);
int io_fsync(struct dcfs_file *f, int datasync);
int io_fallocate(fuse_req_t req, struct dcfs_file *f, int mode, off_t off, off_t len);
off_t io_lseek(struct dcfs_file *f, off_t off, int whence);
ssize_t io_copy_file_range(fuse_req_t req, struct dcfs_file *fin, off_t off_in,
			   struct dcfs_file *fout, off_t off_out, size_t len, int flags);
int io_getattr(struct dcfs_inode *inode, struct fuse_file_info *fi, struct stat *st);
void io_setattr_prepare(struct dcfs_inode *inode);
int io_truncate(struct dcfs_inode *inode, int pfd, int fd, off_t size);
void io_setattr_done(struct dcfs_inode *inode, int valid);
uint64_t io_entry_mark(void);
bool io_entry_settle(struct dcfs_inode *inode, uint64_t mark);
void io_mode_changed(struct dcfs_inode *inode);
void io_describe_cached(struct dcfs_inode *inode, char *buf, size_t size);
void io_describe_writes(struct dcfs_inode *inode, const struct dcfs_config *cfg, bool deferred,
			pid_t asker, char *buf, size_t size);

/* copy.c */
ssize_t copy_uncached(struct dcfs_file *fin, off_t in, struct dcfs_file *fout, off_t out,
		      size_t len);

/* file_stats.c: the handle's own counters, and the class counters */
void file_stats_io(struct dcfs_file *f, enum stat_kind k, uint64_t n);
void file_stats_bytes(struct dcfs_file *f, bool read, uint64_t n);
int file_stats_open(fuse_req_t req, struct dcfs_file *f, const struct dcfs_decision *d);
void file_stats_close(struct dcfs_file *f);

/* coherence.c: changes of a file's data made outside the mount */
uint64_t stamp_gen(struct dcfs_inode *inode);
bool stamp_changed_outside(struct dcfs_inode *inode, const struct stat *st, uint64_t gen);
void stamp_changed_inside(struct dcfs_inode *inode);
void stamp_landed(struct dcfs_inode *inode, int fd);
bool stamp_take_outside(struct dcfs_inode *inode);
void coherence_opened(struct dcfs_file *f, const struct fuse_file_info *fi);
void coherence_read_seen(struct dcfs_file *f, const struct fuse_file_info *fi);
void coherence_write_seen(struct dcfs_file *f, const struct fuse_file_info *fi);
void coherence_saw_mode(struct dcfs_inode *inode, mode_t mode);
void coherence_mode_may_change(struct dcfs_inode *inode, int fd);
void coherence_mode_changed(struct dcfs_inode *inode);
bool coherence_read_overlaid(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off);
ssize_t coherence_write(struct dcfs_file *f, const struct fuse_file_info *fi,
			struct fuse_bufvec *in, off_t off);
int coherence_start(void);
void coherence_stop(void);

/* passthrough.c */
/*
 * passthrough.c: kernel FUSE passthrough (the state table of mixed opens,
 * the backing ids); it adds its part to the INIT reply and arms the
 * OPEN/CREATE replies through transport/wire.c.  passthrough_open() runs
 * after io_select(), just before the open/create reply, and may change
 * the handle's FUSE open flags.
 */
int passthrough_install(struct fuse_session *se, bool disabled);
void passthrough_open(fuse_req_t req, struct dcfs_file *f, struct fuse_file_info *fi);
void passthrough_release(struct dcfs_file *f);
bool passthrough_bypassed(const struct dcfs_inode *inode);
bool passthrough_backed(const struct dcfs_inode *inode);
bool passthrough_by_kernel(const struct dcfs_file *f);
bool passthrough_reaches_backing(const struct dcfs_file *f);
bool passthrough_shared(const struct dcfs_inode *inode);
unsigned int passthrough_handles(const struct dcfs_inode *inode);
void passthrough_describe(const struct dcfs_inode *inode, char *buf, size_t size);
void passthrough_summary(char *buf, size_t size);
/* What passthrough_stats() reports (handlers/report.c renders it). */
#define PT_MAX_FS 32
enum {
	PT_FS_UNKNOWN,
	PT_FS_YES,
	PT_FS_REFUSED
};
struct passthrough_stats {
	bool on, dontcache;
	char reason[96]; /* why it is off; "" while on */
	uint64_t opens_kernel, opens_uncached, opens_daemon, opens_fwd;
	uint64_t fallbacks;
	uint64_t ids_open, ids_opened, ids_closed, max_id;
	size_t nfs;
	struct {
		dev_t dev;
		char fstype[16];
		int state; /* PT_FS_* */
		int err;   /* PT_FS_REFUSED: why */
	} fs[PT_MAX_FS];
};
void passthrough_stats(struct passthrough_stats *st);

/* io_plain.c */
extern const struct dcfs_io io_plain;
void io_plain_read(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off);
ssize_t io_plain_write(struct dcfs_file *f, struct fuse_bufvec *in, off_t off);

/* io_stream.c */
extern const struct dcfs_io io_stream;
void io_stream_account(struct dcfs_file *f, off_t off, size_t n);
int io_stream_alloc(struct dcfs_file *f);
void io_stream_free(struct dcfs_file *f);
void io_stream_set_uncached(struct dcfs_file *f, int policy);

/* io_select.c */
int io_select(fuse_req_t req, struct dcfs_file *f, struct fuse_file_info *fi,
	      const struct stat *known);
void io_select_fs_inherit(struct dcfs_inode *inode, struct dcfs_inode *dir, int dirfd);
bool io_select_has_cached_pages(int fd);
int io_select_policy(fuse_req_t req, struct dcfs_inode *inode, int64_t size, bool writable,
		     struct dcfs_decision *d, struct dcfs_config **cfgp);

/* admit.c */
bool admit_held(struct dcfs_file *f, off_t end);

/* resident.c: cachestat(2), or mincore(2) before Linux 6.5 */
long long resident_count(int fd, off_t off, off_t len); /* len 0: to EOF */
const char *resident_method(void);
void resident_runs(int fd, off_t off, off_t len, void (*fn)(void *arg, off_t lo, off_t hi),
		   void *arg);
off_t resident_end(int fd, off_t size, off_t step, bool dirty);

/* probe.c */
struct probe *probe_get(int fd);
struct probe *probe_dir(int dirfd);
struct probe *probe_forced_fallback(void);
ssize_t probe_pread(struct probe *p, int fd, void *buf, size_t len, off_t off);
ssize_t probe_pwrite(struct probe *p, int fd, const void *buf, size_t len, off_t off);
ssize_t probe_pwritev(struct probe *p, int fd, const struct iovec *iov, int cnt, off_t off);
size_t probe_snapshot(struct probe *out, size_t max);
const char *probe_state_name(int s);

/* fallback.c */
ssize_t fallback_read(struct dcfs_file *f, void *buf, size_t len, off_t off);
ssize_t fallback_write(struct dcfs_file *f, const void *buf, size_t len, off_t off);
void fallback_finish(struct dcfs_file *f);
void fallback_drop(struct dcfs_file *f, off_t lo, off_t hi);

/* write_pipe.c */
int wpipe_open(struct dcfs_file *f, const struct wpipe_limits *lim);
ssize_t wpipe_write(struct dcfs_file *f, const void *data, size_t len, off_t off);
bool wpipe_sync_inode(struct dcfs_inode *inode);
uint64_t wpipe_landings(void);
bool wpipe_settle(struct dcfs_inode *inode, uint64_t since);
void wpipe_sync_others(struct dcfs_file *f);
void wpipe_sync_all(void);
int wpipe_check(struct dcfs_file *f);
int wpipe_flush(struct dcfs_file *f);
void wpipe_synced(struct dcfs_file *f);
void wpipe_land(struct dcfs_file *f);
void wpipe_close(struct dcfs_file *f);

/* readahead.c */
bool ra_account(size_t n);
void ra_unaccount(size_t n);
void ra_prefetch(struct dcfs_file *f, off_t off, uint64_t gen);
void ra_quiesce(struct dcfs_file *f);
bool ra_take(struct dcfs_file *f, off_t off, uint64_t gen);
void ra_stop(struct dcfs_file *f);

/* notify.c */
int notify_start(struct fuse_session *se);
void notify_stop(void);
void notify_inval(fuse_ino_t ino, off_t off, off_t len, unsigned int allowed);
void notify_inval_range_now(fuse_ino_t ino, off_t off, off_t len);
void notify_inval_attr_now(fuse_ino_t ino);
void notify_cache_dropped(struct dcfs_inode *inode);
bool notify_writer_open(fuse_ino_t ino);
void notify_writer_mixed(fuse_ino_t ino);
void notify_writer_close(fuse_ino_t ino);

/* memcg.c: the least room (limit - usage, bytes) of pid's memory cgroup and
 * those above it; -ENOENT where none has a limit. */
int memcg_room(pid_t pid, uint64_t *room);

/* writewatch.c: a call of wake(arg) at the next write to a file, once */
struct write_watch {
	int wd; /* the inotify watch, -1: not armed */
	void (*wake)(void *arg);
	void *arg;
	struct write_watch *next; /* armed ones */
};
void writewatch_init(struct write_watch *w, void (*wake)(void *), void *arg);
int writewatch_arm(struct write_watch *w, int fd);
void writewatch_cancel(struct write_watch *w);

/* writebehind.c */
const char *writebehind_refusal(const struct dcfs_file *f, pid_t writer);
int writebehind_prepare(struct dcfs_file *f);
void writebehind_decided(struct dcfs_file *f);
void writebehind_flush(struct dcfs_file *f);
void writebehind_quiesce(struct dcfs_file *f);
void writebehind_stop(struct dcfs_file *f);
unsigned int writebehind_streams(void);
void writebehind_describe(struct dcfs_inode *inode, const struct dcfs_config *cfg, bool deferred,
			  pid_t asker, char *buf, size_t size);

/* dropbehind.c */
int dropbehind_start(void);
void dropbehind_stop(void);
void dropbehind_add(struct dcfs_file *f);
void dropbehind_remove(struct dcfs_file *f);

#endif
