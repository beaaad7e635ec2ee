// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Per-mount counters by I/O class (the policy decided at open).  The
 * per-handle part (struct file_stats) is kept by core/file_stats.c.
 *
 * A leaf: every layer adds to the counters, nothing here calls back up.
 * Rendering them (with the state of the other layers) is
 * handlers/report.c's job.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "dcfs_policy.h"
#include "base/base.h"

static _Atomic uint64_t counters[POLICY__COUNT][ST__COUNT];

static const char *const kind_names[ST__COUNT] = {
	[ST_OPENED] = "opened",
	[ST_READ_DONTCACHE] = "read_dontcache",
	[ST_WRITE_DONTCACHE] = "written_dontcache",
	[ST_READ_FALLBACK] = "read_fallback",
	[ST_WRITE_FALLBACK] = "written_fallback",
	[ST_READ_CACHED] = "read_cached",
	[ST_WRITE_CACHED] = "written_cached",
	[ST_SWITCHED] = "switched",
	[ST_PASSTHROUGH] = "opened_passthrough",
	[ST_WRITE_REQUESTS] = "write_requests",
	[ST_COALESCED] = "writes_coalesced",
	[ST_BACKING_WRITES] = "backing_writes",
	[ST_BUFFERED] = "bytes_buffered",
	[ST_WRITEBACK_WAITS] = "writeback_waits",
	[ST_DEFERRED_ERRORS] = "deferred_errors",
	[ST_DEFERRED_REPORTED] = "deferred_reported",
	[ST_INFLIGHT] = "bytes_in_flight",
	[ST_QUEUE_WAITS] = "queue_waits",
	[ST_BACKGROUND_WRITES] = "background_writes",
	[ST_PREFETCHES] = "prefetches",
	[ST_PREFETCH_WAITS] = "prefetch_waits",
	[ST_ADOPTED] = "writes_adopted",
	[ST_FUSE_READAHEAD] = "opened_fuse_readahead",
	[ST_DROPPED_BEHIND] = "dropped_behind",
	[ST_READ_KERNEL] = "read_kernel",
	[ST_WRITE_KERNEL] = "written_kernel",
	[ST_WRITE_BEHIND] = "opened_write_behind",
	[ST_WRITE_BEHIND_PACED] = "write_behind_paced",
	[ST_WRITE_BEHIND_PEAK] = "write_behind_peak",
};

void stats_add(int policy, enum stat_kind k, uint64_t n)
{
	if (policy > 0 && policy < POLICY__COUNT)
		atomic_fetch_add_explicit(&counters[policy][k], n, memory_order_relaxed);
}

/* For the counters that are a most-seen value (a high-water mark). */
void stats_max(int policy, enum stat_kind k, uint64_t v)
{
	uint64_t old;

	if (policy <= 0 || policy >= POLICY__COUNT)
		return;
	old = atomic_load_explicit(&counters[policy][k], memory_order_relaxed);
	while (v > old && !atomic_compare_exchange_weak(&counters[policy][k], &old, v))
		;
}

uint64_t stats_get(int policy, enum stat_kind k)
{
	if (policy <= 0 || policy >= POLICY__COUNT)
		return 0;
	return atomic_load_explicit(&counters[policy][k], memory_order_relaxed);
}

const char *stats_kind_name(enum stat_kind k)
{
	return kind_names[k];
}
