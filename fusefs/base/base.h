/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fusefs/base/ -- Leaves every layer may call: logging, the counters, the
 * draining flag. Nothing declared here calls back up.
 */
#ifndef DCFS_LAYER_BASE_H
#define DCFS_LAYER_BASE_H

#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#define log_err(...) log_msg(FUSE_LOG_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(FUSE_LOG_WARNING, __VA_ARGS__)
#define log_info(...) log_msg(FUSE_LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(FUSE_LOG_DEBUG, __VA_ARGS__)

enum stat_kind {
	ST_OPENED,
	ST_READ_DONTCACHE,
	ST_WRITE_DONTCACHE,
	ST_READ_FALLBACK,
	ST_WRITE_FALLBACK,
	ST_READ_CACHED,
	ST_WRITE_CACHED,
	ST_SWITCHED,
	ST_PASSTHROUGH,	      /* opens whose I/O the kernel does (passthrough.c) */
	ST_WRITE_REQUESTS,    /* FUSE write requests of uncached handles */
	ST_COALESCED,	      /* writes acknowledged from the buffer */
	ST_BACKING_WRITES,    /* backing write syscalls */
	ST_BUFFERED,	      /* bytes acknowledged, not yet written (gauge) */
	ST_WRITEBACK_WAITS,   /* waits for writeback behind a stream */
	ST_DEFERRED_ERRORS,   /* failed writes of acknowledged data */
	ST_DEFERRED_REPORTED, /* such errors returned to a handle */
	ST_INFLIGHT,	      /* bytes queued for background writes (gauge) */
	ST_QUEUE_WAITS,	      /* requests that waited for room in the queue */
	ST_BACKGROUND_WRITES, /* backing writes made by a handle's worker */
	ST_PREFETCHES,	      /* read-ahead windows read in the background */
	ST_PREFETCH_WAITS,    /* requests that waited for one */
	ST_ADOPTED,	      /* background writes from the request's own memory */
	ST_FUSE_READAHEAD,    /* read-only opens through the FUSE cache */
	ST_DROPPED_BEHIND,    /* bytes dropped behind passthrough readers */
	/*
	 * Bytes the kernel moved itself (passthrough): dcfs sees no request,
	 * so these are estimates from what it can observe (io/dropbehind.c,
	 * io/passthrough.c).
	 */
	ST_READ_KERNEL,
	ST_WRITE_KERNEL,
	/* Write streams the kernel serves, with write-behind (io/writebehind.c) */
	ST_WRITE_BEHIND,       /* such opens */
	ST_WRITE_BEHIND_PACED, /* times a writer was held for writeback */
	ST_WRITE_BEHIND_PEAK,  /* most page cache one such stream held (bytes) */
	ST__COUNT
};

/* log.c */
void log_init(bool foreground, int debug);
void log_msg(enum fuse_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool log_enabled(enum fuse_log_level level);
void log_set_level(int level);

/* drain.c */
bool drain_active(void);
void drain_begin(void);

/* stats.c */
void stats_add(int policy, enum stat_kind k, uint64_t n);
void stats_max(int policy, enum stat_kind k, uint64_t v);
uint64_t stats_get(int policy, enum stat_kind k);
const char *stats_kind_name(enum stat_kind k);

/* reqstats.c */
#define REQSTATS_NOPCODES 64
struct reqstats {
	uint64_t n[REQSTATS_NOPCODES]; /* by opcode; [0]: any other */
};
void reqstats_count(uint32_t opcode);
void reqstats_snapshot(struct reqstats *st);
const char *reqstats_op_name(int op);

#endif
