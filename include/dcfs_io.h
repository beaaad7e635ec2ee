/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The streaming I/O engine: capability probes, the fallback window,
 * FUSE cache invalidation and counters.
 */
#ifndef DCFS_IO_H
#define DCFS_IO_H

#include <stdio.h>
#include <sys/uio.h>

#include "dcfs.h"

enum probe_state { PROBE_UNKNOWN, PROBE_YES, PROBE_NO };

/* What one backing filesystem (st_dev) answered to RWF_DONTCACHE. */
struct probe {
	dev_t dev;
	char fstype[16];
	_Atomic int rd; /* enum probe_state */
	_Atomic int wr;
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
	off_t inval_done;     /* FUSE cache of this stream dropped up to here */
	off_t pre_lo, pre_hi; /* span cached before the switch */
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
	off_t seen_lo, seen_hi;	      /* pages this handle touched */
	off_t ra_reach; /* how far the kernel may read ahead of a read; 0: not known yet */
	off_t dc_lo, dc_hi; /* span written with RWF_DONTCACHE */
	struct range prot[16];
	unsigned int nprot;
	bool prot_all; /* too many pre-resident ranges: drop nothing */
};

int stream_state_alloc(struct dcfs_file *f);
void stream_state_free(struct dcfs_file *f);

/* probe.c */
struct probe *probe_get(int fd);
struct probe *probe_dir(int dirfd);
ssize_t uncached_pread(struct probe *p, int fd, void *buf, size_t len,
		       off_t off);
ssize_t uncached_pwrite(struct probe *p, int fd, const void *buf, size_t len,
			off_t off);
ssize_t uncached_pwritev(struct probe *p, int fd, const struct iovec *iov,
			 int cnt, off_t off);
size_t probe_snapshot(struct probe *out, size_t max);
const char *probe_state_name(int s);

/* fallback.c */
ssize_t fallback_read(struct dcfs_file *f, void *buf, size_t len, off_t off);
ssize_t fallback_write(struct dcfs_file *f, const void *buf, size_t len,
		       off_t off);
void fallback_finish(struct dcfs_file *f);
void drop_written(struct dcfs_file *f, off_t lo, off_t hi);

/* write_pipe.c */
struct wpipe_limits {
	uint64_t writeback;	 /* writeback_limit */
	uint64_t inflight;	 /* per handle; 0: synchronous writes */
	uint64_t inflight_mount; /* all handles */
};
int wpipe_open(struct dcfs_file *f, const struct wpipe_limits *lim);
ssize_t wpipe_write(struct dcfs_file *f, const void *data, size_t len,
		    off_t off);
bool wpipe_sync_inode(struct dcfs_inode *inode);
void wpipe_sync_others(struct dcfs_file *f);
void wpipe_sync_all(void);
int wpipe_check(struct dcfs_file *f);
int wpipe_flush(struct dcfs_file *f);
void wpipe_synced(struct dcfs_file *f);
void wpipe_close(struct dcfs_file *f);

/* reqbuf.c: WRITE data read into blocks the write engine can adopt */
struct reqbuf;
ssize_t reqbuf_read(int fd, void *buf, size_t len);
int reqbuf_locate(struct fuse_bufvec *in);
struct reqbuf *reqbuf_adopt(const void *data, size_t len);
char *reqbuf_data(struct reqbuf *rb);
size_t reqbuf_room(void);
void reqbuf_release(struct reqbuf *rb);

/* readahead.c, io_stream.c */
bool ra_account(size_t n);
void ra_unaccount(size_t n);
void ra_prefetch(struct dcfs_file *f, off_t off, uint64_t gen);
void ra_quiesce(struct dcfs_file *f);
/* Read-ahead window of a reader through the FUSE cache. */
#define FRA_WINDOW ((size_t)2 << 20)
bool ra_take(struct dcfs_file *f, off_t off, uint64_t gen);
void ra_stop(struct dcfs_file *f);

/* conn_limits.c */
struct fuse_init_out;
void conn_limits_prepare(void);
void conn_limits_init_reply(struct fuse_init_out *out);
void conn_limits_after_init(void);
long long file_read_ahead_bytes(int fd);

/* notify.c */
int notify_start(struct fuse_session *se);
void notify_stop(void);
void notify_inval(fuse_ino_t ino, off_t off, off_t len, unsigned int allowed);
bool notify_writer_open(fuse_ino_t ino);
void notify_writer_close(fuse_ino_t ino);

/* dropbehind.c */
int dropbehind_start(void);
void dropbehind_stop(void);
void dropbehind_add(struct dcfs_file *f);
void dropbehind_remove(struct dcfs_file *f);

/* io_select.c */
void set_uncached_flags(struct dcfs_file *f, int policy);
struct dcfs_decision;
struct dcfs_config;
int policy_for_inode(fuse_req_t req, struct dcfs_inode *inode, int64_t size,
		     bool writable, struct dcfs_decision *d,
		     struct dcfs_config **cfgp);

/* stats.c */
enum stat_kind {
	ST_OPENED,
	ST_READ_DONTCACHE,
	ST_WRITE_DONTCACHE,
	ST_READ_FALLBACK,
	ST_WRITE_FALLBACK,
	ST_READ_CACHED,
	ST_WRITE_CACHED,
	ST_SWITCHED,
	ST_PASSTHROUGH, /* opens whose I/O the kernel does (passthrough.c) */
	ST_WRITE_REQUESTS,   /* FUSE write requests of uncached handles */
	ST_COALESCED,	     /* writes acknowledged from the buffer */
	ST_BACKING_WRITES,   /* backing write syscalls */
	ST_BUFFERED,	     /* bytes acknowledged, not yet written (gauge) */
	ST_WRITEBACK_WAITS,  /* waits for writeback behind a stream */
	ST_DEFERRED_ERRORS,  /* failed writes of acknowledged data */
	ST_DEFERRED_REPORTED, /* such errors returned to a handle */
	ST_INFLIGHT,	     /* bytes queued for background writes (gauge) */
	ST_QUEUE_WAITS,	     /* requests that waited for room in the queue */
	ST_BACKGROUND_WRITES, /* backing writes made by a handle's worker */
	ST_PREFETCHES,	     /* read-ahead windows read in the background */
	ST_PREFETCH_WAITS,   /* requests that waited for one */
	ST_ADOPTED,	     /* background writes from the request's own memory */
	ST_FUSE_READAHEAD,   /* read-only opens through the FUSE cache */
	ST_DROPPED_BEHIND,   /* bytes dropped behind passthrough readers */
	ST__COUNT
};
void stats_add(int policy, enum stat_kind k, uint64_t n);
void stats_file_bytes(struct dcfs_file *f, bool read, uint64_t n);
void stats_io(struct dcfs_file *f, enum stat_kind k, uint64_t n);
int stats_file_open(fuse_req_t req, struct dcfs_file *f,
		    const struct dcfs_decision *d);
void stats_file_close(struct dcfs_file *f);
uint64_t stats_get(int policy, enum stat_kind k);
const char *stats_kind_name(enum stat_kind k);

struct file_stats {
	uid_t uid; /* of the opener: only they (and root) see the handle */
	pid_t pid;
	_Atomic uint64_t bytes[2]; /* read, written */
	char why[192];		   /* the rule that decided */
};

/* handlers/report.c */
char *stats_json(void);
char *stats_table(void);
char *stats_prometheus(void);
char *stats_files(uid_t who);

/* caps.c */
void caps_log_startup(void);

/* reqstats.c */
void reqstats_count(uint32_t opcode);
void reqstats_json(FILE *out);
void reqstats_table(FILE *out);
void reqstats_foreach(void (*fn)(const char *op, uint64_t n, void *arg),
		      void *arg);

/* passthrough.c */
void passthrough_json(FILE *out);
void passthrough_table(FILE *out);

/* uring.c: FUSE over io_uring, the default transport (-o nouring) */
void uring_prepare(bool wanted);
uint32_t uring_accept(int dev_fd, uint32_t offer, size_t max_payload);
void uring_start(struct fuse_session *se);
void uring_stop(void);
/* 0: not a reply of this thread's io_uring request (write it to /dev/fuse) */
ssize_t uring_reply(const struct iovec *iov, int count);
ssize_t uring_splice_reply(int fdin, size_t len, bool *handled);
void *uring_reply_buffer(size_t size);
/* This thread serves an io_uring queue. */
bool uring_thread(void);
void uring_json(FILE *out);
void uring_table(FILE *out);

#endif
