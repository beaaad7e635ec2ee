// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Per-mount counters by I/O class (the policy decided at open), and the
 * probe results, rendered as JSON for the user.dcfs.stats xattr; `dcfs
 * stat` turns that into a table.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#include "dcfs_io.h"
#include "dcfs_policy.h"

#define NPOLICIES (POLICY_AUTO + 1)

static _Atomic uint64_t counters[NPOLICIES][ST__COUNT];

static const char *const kind_names[ST__COUNT] = {
	[ST_OPENED] = "opened",
	[ST_READ_DONTCACHE] = "read_dontcache",
	[ST_WRITE_DONTCACHE] = "written_dontcache",
	[ST_READ_FALLBACK] = "read_fallback",
	[ST_WRITE_FALLBACK] = "written_fallback",
	[ST_READ_CACHED] = "read_cached",
	[ST_WRITE_CACHED] = "written_cached",
	[ST_SWITCHED] = "switched",
	[ST_WRITE_REQUESTS] = "write_requests",
	[ST_COALESCED] = "writes_coalesced",
	[ST_BACKING_WRITES] = "backing_writes",
	[ST_BUFFERED] = "bytes_buffered",
	[ST_WRITEBACK_WAITS] = "writeback_waits",
	[ST_DEFERRED_ERRORS] = "deferred_errors",
	[ST_INFLIGHT] = "bytes_in_flight",
	[ST_QUEUE_WAITS] = "queue_waits",
	[ST_BACKGROUND_WRITES] = "background_writes",
	[ST_PREFETCHES] = "prefetches",
	[ST_PREFETCH_WAITS] = "prefetch_waits",
};

void stats_add(int policy, enum stat_kind k, uint64_t n)
{
	if (policy > 0 && policy < NPOLICIES)
		atomic_fetch_add_explicit(&counters[policy][k], n,
					  memory_order_relaxed);
}

static void json_classes(FILE *out)
{
	fputs("\"classes\":{", out);
	for (int p = POLICY_CACHE; p < NPOLICIES; p++) {
		fprintf(out, "%s\"%s\":{", p > POLICY_CACHE ? "," : "",
			policy_name(p));
		for (int k = 0; k < ST__COUNT; k++)
			fprintf(out, "%s\"%s\":%llu", k ? "," : "",
				kind_names[k],
				(unsigned long long)counters[p][k]);
		fputc('}', out);
	}
	fputc('}', out);
}

static void json_probes(FILE *out)
{
	struct probe probes[64];
	size_t n = probe_snapshot(probes, 64);

	fputs("\"probes\":[", out);
	for (size_t i = 0; i < n; i++)
		fprintf(out,
			"%s{\"dev\":\"%u:%u\",\"fstype\":\"%s\",\"read\":\"%s\",\"write\":\"%s\"}",
			i ? "," : "", major(probes[i].dev),
			minor(probes[i].dev), probes[i].fstype,
			probe_state_name(probes[i].rd),
			probe_state_name(probes[i].wr));
	fputc(']', out);
}

char *stats_json(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	if (!out)
		return NULL;
	fputc('{', out);
	json_classes(out);
	fputc(',', out);
	json_probes(out);
	fputs("}\n", out);
	if (fclose(out) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

char *stats_table(void)
{
	struct probe probes[64];
	size_t n = probe_snapshot(probes, 64);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	if (!out)
		return NULL;
	fprintf(out, "%-16s %8s %14s %14s %14s %14s %14s %14s %8s\n", "class",
		"opened", "read_dc", "written_dc", "read_fb", "written_fb",
		"read_cached", "written_cached", "switched");
	for (int p = POLICY_CACHE; p < NPOLICIES; p++)
		fprintf(out,
			"%-16s %8llu %14llu %14llu %14llu %14llu %14llu %14llu %8llu\n",
			policy_name(p),
			(unsigned long long)counters[p][ST_OPENED],
			(unsigned long long)counters[p][ST_READ_DONTCACHE],
			(unsigned long long)counters[p][ST_WRITE_DONTCACHE],
			(unsigned long long)counters[p][ST_READ_FALLBACK],
			(unsigned long long)counters[p][ST_WRITE_FALLBACK],
			(unsigned long long)counters[p][ST_READ_CACHED],
			(unsigned long long)counters[p][ST_WRITE_CACHED],
			(unsigned long long)counters[p][ST_SWITCHED]);
	/* The write engine (write_pipe.c); the cache class never uses it. */
	fprintf(out, "\n%-16s %10s %10s %10s %10s %12s %12s %8s %8s %8s\n",
		"uncached writes", "requests", "coalesced", "backing", "background",
		"buffered", "in_flight", "q_waits", "wb_waits", "errors");
	for (int p = POLICY_CACHE + 1; p < NPOLICIES; p++)
		fprintf(out,
			"%-16s %10llu %10llu %10llu %10llu %12llu %12llu %8llu %8llu %8llu\n",
			policy_name(p),
			(unsigned long long)counters[p][ST_WRITE_REQUESTS],
			(unsigned long long)counters[p][ST_COALESCED],
			(unsigned long long)counters[p][ST_BACKING_WRITES],
			(unsigned long long)counters[p][ST_BACKGROUND_WRITES],
			(unsigned long long)counters[p][ST_BUFFERED],
			(unsigned long long)counters[p][ST_INFLIGHT],
			(unsigned long long)counters[p][ST_QUEUE_WAITS],
			(unsigned long long)counters[p][ST_WRITEBACK_WAITS],
			(unsigned long long)counters[p][ST_DEFERRED_ERRORS]);
	fprintf(out, "\nbacking filesystems (RWF_DONTCACHE probe):\n");
	for (size_t i = 0; i < n; i++)
		fprintf(out, "  dev %u:%u %-8s read %-8s write %s\n",
			major(probes[i].dev), minor(probes[i].dev),
			probes[i].fstype, probe_state_name(probes[i].rd),
			probe_state_name(probes[i].wr));
	if (fclose(out) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
