// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The counters (base/stats.c) and the state of every layer, rendered for the
 * user.dcfs.stats* xattrs: JSON (a stable interface, documented in
 * dcfs(8)), a table, and the Prometheus text format; and user.dcfs.files,
 * one line per open handle.  It sits with the handlers because it reads
 * the open-file list of handlers/fuse_file.c and the state of the I/O
 * layer below; the counters it reads know nothing of it.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "handlers/handlers.h"
#include "dcfs_version.h"

static void json_classes(FILE *out)
{
	fputs("\"classes\":{", out);
	for (int p = POLICY_CACHE; p < POLICY__COUNT; p++) {
		fprintf(out, "%s\"%s\":{", p > POLICY_CACHE ? "," : "", policy_name(p));
		for (int k = 0; k < ST__COUNT; k++)
			fprintf(out, "%s\"%s\":%llu", k ? "," : "", stats_kind_name(k),
				(unsigned long long)stats_get(p, k));
		fputc('}', out);
	}
	fputc('}', out);
}

/* force_fallback of the config in force (opens after a reload follow it). */
static bool force_fallback(void)
{
	struct dcfs_config *cfg = config_get();
	bool on = cfg && cfg->force_fallback;

	if (cfg)
		config_put(cfg);
	return on;
}

static void json_probes(FILE *out)
{
	struct probe probes[64];
	size_t n = probe_snapshot(probes, 64);

	fputs("\"probes\":[", out);
	for (size_t i = 0; i < n; i++)
		fprintf(out,
			"%s{\"dev\":\"%u:%u\",\"fstype\":\"%s\",\"read\":\"%s\",\"write\":\"%s\"}",
			i ? "," : "", major(probes[i].dev), minor(probes[i].dev), probes[i].fstype,
			probe_state_name(probes[i].rd), probe_state_name(probes[i].wr));
	fputc(']', out);
	fprintf(out, ",\"residency\":\"%s\",\"force_fallback\":%s", resident_method(),
		force_fallback() ? "true" : "false");
}

static const char *pt_fs_state(int state, int err)
{
	return state == PT_FS_YES	? "passthrough"
	       : state == PT_FS_REFUSED ? strerror(err)
					: "unknown";
}

static void passthrough_json(FILE *out)
{
	struct passthrough_stats p;
	struct wire_stats w;

	passthrough_stats(&p);
	wire_stats(&w);
	fprintf(out,
		"\"passthrough\":{\"state\":\"%s\",\"reason\":\"%s\",\"direct_io_mmap\":%s,"
		"\"uncached\":%s,\"opens_kernel_uncached\":%llu,"
		"\"backing_ids_open\":%llu,\"backing_ids_opened\":%llu,\"backing_ids_closed\":%llu,"
		"\"max_backing_id\":%llu,\"opens_kernel_io\":%llu,\"opens_daemon_io\":%llu,"
		"\"opens_forwarded\":%llu,\"fallbacks\":%llu,\"filesystems\":[",
		p.on ? "on" : "off", p.reason, w.allow_mmap ? "true" : "false",
		p.dontcache ? "true" : "false", (unsigned long long)p.opens_uncached,
		(unsigned long long)p.ids_open, (unsigned long long)p.ids_opened,
		(unsigned long long)p.ids_closed, (unsigned long long)p.max_id,
		(unsigned long long)p.opens_kernel, (unsigned long long)p.opens_daemon,
		(unsigned long long)p.opens_fwd, (unsigned long long)p.fallbacks);
	for (size_t i = 0; i < p.nfs; i++)
		fprintf(out, "%s{\"dev\":\"%u:%u\",\"fstype\":\"%s\",\"state\":\"%s\"}",
			i ? "," : "", major(p.fs[i].dev), minor(p.fs[i].dev), p.fs[i].fstype,
			pt_fs_state(p.fs[i].state, p.fs[i].err));
	fputs("]}", out);
}

static void passthrough_table(FILE *out)
{
	struct passthrough_stats p;
	struct wire_stats w;

	passthrough_stats(&p);
	wire_stats(&w);
	fprintf(out,
		"\npassthrough: %s%s%s%s; uncached passthrough %s; direct-I/O shared mmap %s\n",
		p.on ? "on" : "off", p.on ? "" : " (", p.reason, p.on ? "" : ")",
		p.dontcache ? "on" : "off", w.allow_mmap ? "allowed" : "off");
	fprintf(out,
		"  opens: %llu kernel I/O (%llu uncached), %llu daemon I/O, %llu forwarded,\n"
		"         %llu fallbacks\n"
		"  backing ids: %llu open, %llu opened, %llu closed\n",
		(unsigned long long)p.opens_kernel, (unsigned long long)p.opens_uncached,
		(unsigned long long)p.opens_daemon, (unsigned long long)p.opens_fwd,
		(unsigned long long)p.fallbacks, (unsigned long long)p.ids_open,
		(unsigned long long)p.ids_opened, (unsigned long long)p.ids_closed);
	for (size_t i = 0; i < p.nfs; i++)
		fprintf(out, "  dev %u:%u %-8s %s\n", major(p.fs[i].dev), minor(p.fs[i].dev),
			p.fs[i].fstype, pt_fs_state(p.fs[i].state, p.fs[i].err));
}

static void uring_json(FILE *out)
{
	struct uring_stats u;

	uring_stats(&u);
	fprintf(out,
		"\"uring\":{\"state\":\"%s\",\"reason\":\"%s\",\"queues\":%u,"
		"\"threads_per_queue\":%d,\"requests\":%llu,\"spliced_replies\":%llu,"
		"\"in_place_replies\":%llu,\"per_cpu\":[",
		u.state, u.reason, u.queues, u.threads_per_queue, (unsigned long long)u.requests,
		(unsigned long long)u.splices, (unsigned long long)u.in_place);
	for (unsigned int i = 0; i < u.queues; i++)
		fprintf(out, "%s%llu", i ? "," : "", (unsigned long long)u.per_queue[i]);
	fputs("]}", out);
}

static void uring_table(FILE *out)
{
	struct uring_stats u;

	uring_stats(&u);
	fprintf(out, "\nio_uring transport: %s%s%s%s\n", u.state, u.on ? "" : " (", u.reason,
		u.on ? "" : ")");
	if (!u.accepted)
		return;
	fprintf(out,
		"  %u queues x %d threads, %llu requests (%llu replies read in place, %llu spliced)\n  per queue:",
		u.queues, u.threads_per_queue, (unsigned long long)u.requests,
		(unsigned long long)u.in_place, (unsigned long long)u.splices);
	for (unsigned int i = 0; i < u.queues; i++)
		fprintf(out, "%s cpu%u %llu", i && i % 6 == 0 ? "\n           " : "", i,
			(unsigned long long)u.per_queue[i]);
	fputc('\n', out);
}

/* "requests":{"lookup":N,...}: the opcodes seen at least once. */
static void requests_json(FILE *out)
{
	struct reqstats r;
	bool first = true;

	reqstats_snapshot(&r);
	fputs("\"requests\":{", out);
	for (int op = 0; op < REQSTATS_NOPCODES; op++) {
		if (!r.n[op])
			continue;
		fprintf(out, "%s\"%s\":%llu", first ? "" : ",", reqstats_op_name(op),
			(unsigned long long)r.n[op]);
		first = false;
	}
	fputc('}', out);
}

static void requests_table(FILE *out)
{
	struct reqstats r;
	int col = 0;

	reqstats_snapshot(&r);
	fputs("\nrequests from the kernel:\n", out);
	for (int op = 0; op < REQSTATS_NOPCODES; op++) {
		if (!r.n[op])
			continue;
		fprintf(out, "  %-14s %12llu%s", reqstats_op_name(op), (unsigned long long)r.n[op],
			++col % 3 ? "" : "\n");
	}
	if (col % 3)
		fputc('\n', out);
}

/* A JSON string: quotes and backslashes escaped, control characters as \u. */
static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(out, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(out, "\\u%04x", *s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

static void reload_json(FILE *out)
{
	struct reload_stats r;

	reload_stats(&r);
	fprintf(out, "\"reload\":{\"failures\":%lu,\"last_failed\":%s,\"error\":", r.failures,
		r.failed ? "true" : "false");
	json_string(out, r.failed ? r.error : "");
	fputc('}', out);
}

static void reload_table(FILE *out)
{
	struct reload_stats r;

	reload_stats(&r);
	if (r.failed)
		fprintf(out, "LAST RELOAD %s\n  (the rules loaded before stay in force)\n\n",
			r.error);
}

static void fdcache_json(FILE *out)
{
	struct fdcache_stats s;

	fdcache_stats(&s);
	fprintf(out,
		"\"fdcache\":{\"cached\":%zu,\"peak\":%zu,\"budget\":%zu,\"reopens\":%lu,\"evictions\":%lu,\"deleted_closed\":%lu}",
		s.cached, s.peak, s.budget, s.reopens, s.evictions, s.reaped);
}

static void fdcache_table(FILE *out)
{
	struct fdcache_stats s;

	fdcache_stats(&s);
	fprintf(out,
		"\nO_PATH fd cache: %zu cached (peak %zu) of %zu, %lu reopens, %lu evictions, %lu of deleted files closed\n",
		s.cached, s.peak, s.budget, s.reopens, s.evictions, s.reaped);
}

char *report_json(void)
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
	fputc(',', out);
	passthrough_json(out);
	fputc(',', out);
	uring_json(out);
	fputc(',', out);
	fdcache_json(out);
	fputc(',', out);
	requests_json(out);
	fputc(',', out);
	reload_json(out);
	fputs("}\n", out);
	if (fclose(out) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* 1536 -> "1.5K": seven characters at most up to 1023.9 PiB. */
static const char *human(uint64_t n, char buf[16])
{
	static const char units[] = "BKMGTP";
	double v = (double)n;
	int u = 0;

	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, 16, "%lluB", (unsigned long long)n);
	else
		snprintf(buf, 16, "%.1f%c", v, units[u]);
	return buf;
}

/*
 * Within 100 columns: bytes by backing I/O mode in human units, the write
 * engine's main counters.  `dcfs stat --wide` (user.dcfs.stats.table.wide)
 * has every counter, exact.
 */
static void table_narrow(FILE *out)
{
	static const enum stat_kind bytes[] = {
		ST_READ_DONTCACHE, ST_WRITE_DONTCACHE, ST_READ_FALLBACK, ST_WRITE_FALLBACK,
		ST_READ_CACHED,	   ST_WRITE_CACHED,    ST_READ_KERNEL,	 ST_WRITE_KERNEL,
	};
	char h[16];

	fputs("bytes read (rd) and written (wr) by backing I/O: dc RWF_DONTCACHE,\n"
	      "fb fallback window, c page cache, k by the kernel (passthrough, estimated)\n",
	      out);
	fprintf(out, "%-15s %7s %7s %7s %7s %7s %7s %7s %7s %7s %8s\n", "class", "opened", "dc_rd",
		"dc_wr", "fb_rd", "fb_wr", "c_rd", "c_wr", "k_rd", "k_wr", "switched");
	for (int p = POLICY_CACHE; p < POLICY__COUNT; p++) {
		fprintf(out, "%-15s %7llu", policy_name(p),
			(unsigned long long)stats_get(p, ST_OPENED));
		for (size_t i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++)
			fprintf(out, " %7s", human(stats_get(p, bytes[i]), h));
		fprintf(out, " %8llu\n", (unsigned long long)stats_get(p, ST_SWITCHED));
	}
	fprintf(out, "\n%-15s %9s %9s %9s %9s %9s %8s %8s\n", "uncached writes", "requests",
		"coalesced", "backing", "backgrnd", "in_flight", "wb_waits", "errors");
	for (int p = POLICY_CACHE + 1; p < POLICY__COUNT; p++)
		fprintf(out, "%-15s %9llu %9llu %9llu %9llu %9s %8llu %8llu\n", policy_name(p),
			(unsigned long long)stats_get(p, ST_WRITE_REQUESTS),
			(unsigned long long)stats_get(p, ST_COALESCED),
			(unsigned long long)stats_get(p, ST_BACKING_WRITES),
			(unsigned long long)stats_get(p, ST_BACKGROUND_WRITES),
			human(stats_get(p, ST_INFLIGHT), h),
			(unsigned long long)stats_get(p, ST_WRITEBACK_WAITS),
			(unsigned long long)stats_get(p, ST_DEFERRED_ERRORS));
}

static void table_wide(FILE *out)
{
	fprintf(out, "%-16s %8s %14s %14s %14s %14s %14s %14s %14s %14s %8s %8s %8s %14s\n",
		"class", "opened", "read_dc", "written_dc", "read_fb", "written_fb", "read_cached",
		"written_cached", "read_kernel", "written_kernel", "switched", "pt", "fuse_ra",
		"dropped_behind");
	for (int p = POLICY_CACHE; p < POLICY__COUNT; p++)
		fprintf(out,
			"%-16s %8llu %14llu %14llu %14llu %14llu %14llu %14llu %14llu %14llu %8llu %8llu %8llu %14llu\n",
			policy_name(p), (unsigned long long)stats_get(p, ST_OPENED),
			(unsigned long long)stats_get(p, ST_READ_DONTCACHE),
			(unsigned long long)stats_get(p, ST_WRITE_DONTCACHE),
			(unsigned long long)stats_get(p, ST_READ_FALLBACK),
			(unsigned long long)stats_get(p, ST_WRITE_FALLBACK),
			(unsigned long long)stats_get(p, ST_READ_CACHED),
			(unsigned long long)stats_get(p, ST_WRITE_CACHED),
			(unsigned long long)stats_get(p, ST_READ_KERNEL),
			(unsigned long long)stats_get(p, ST_WRITE_KERNEL),
			(unsigned long long)stats_get(p, ST_SWITCHED),
			(unsigned long long)stats_get(p, ST_PASSTHROUGH),
			(unsigned long long)stats_get(p, ST_FUSE_READAHEAD),
			(unsigned long long)stats_get(p, ST_DROPPED_BEHIND));
	/* The write engine (write_pipe.c); the cache class never uses it. */
	fprintf(out, "\n%-16s %10s %10s %10s %10s %10s %12s %12s %8s %8s %8s\n", "uncached writes",
		"requests", "coalesced", "backing", "background", "adopted", "buffered",
		"in_flight", "q_waits", "wb_waits", "errors");
	for (int p = POLICY_CACHE + 1; p < POLICY__COUNT; p++)
		fprintf(out,
			"%-16s %10llu %10llu %10llu %10llu %10llu %12llu %12llu %8llu %8llu %8llu\n",
			policy_name(p), (unsigned long long)stats_get(p, ST_WRITE_REQUESTS),
			(unsigned long long)stats_get(p, ST_COALESCED),
			(unsigned long long)stats_get(p, ST_BACKING_WRITES),
			(unsigned long long)stats_get(p, ST_BACKGROUND_WRITES),
			(unsigned long long)stats_get(p, ST_ADOPTED),
			(unsigned long long)stats_get(p, ST_BUFFERED),
			(unsigned long long)stats_get(p, ST_INFLIGHT),
			(unsigned long long)stats_get(p, ST_QUEUE_WAITS),
			(unsigned long long)stats_get(p, ST_WRITEBACK_WAITS),
			(unsigned long long)stats_get(p, ST_DEFERRED_ERRORS));
}

char *report_table(bool wide)
{
	struct probe probes[64];
	size_t n = probe_snapshot(probes, 64);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	if (!out)
		return NULL;
	reload_table(out);
	if (wide)
		table_wide(out);
	else
		table_narrow(out);
	fprintf(out, "\nbacking filesystems (RWF_DONTCACHE probe):\n");
	for (size_t i = 0; i < n; i++)
		fprintf(out, "  dev %u:%u %-8s read %-8s write %s\n", major(probes[i].dev),
			minor(probes[i].dev), probes[i].fstype, probe_state_name(probes[i].rd),
			probe_state_name(probes[i].wr));
	if (force_fallback())
		fprintf(out,
			"  force_fallback: streams take the fallback windows on all of them\n");
	fprintf(out, "  page residency: %s\n",
		!strcmp(resident_method(), "cachestat")
			? "cachestat(2)"
			: "mincore(2) (the kernel has no cachestat(2), Linux < 6.5)");
	passthrough_table(out);
	uring_table(out);
	fdcache_table(out);
	requests_table(out);
	if (fclose(out) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* Prometheus label values: backslash, double quote and newline escaped. */
static void prom_label(FILE *out, const char *name, const char *v)
{
	fprintf(out, "%s=\"", name);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(out, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", out);
		else
			fputc(*v, out);
	}
	fputc('"', out);
}

static void prom_head(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{mountpoint="..."[,class="..."] */
static void prom_start(FILE *out, const char *name, int policy)
{
	fprintf(out, "%s{", name);
	prom_label(out, "mountpoint", dcfs.opt.mountpoint);
	if (policy) {
		fputc(',', out);
		prom_label(out, "class", policy_name(policy));
	}
}

static const struct {
	enum stat_kind kind;
	const char *direction, *mode;
} byte_kinds[] = {
	{ ST_READ_DONTCACHE, "read", "dontcache" }, { ST_READ_FALLBACK, "read", "fallback" },
	{ ST_READ_CACHED, "read", "cached" },	    { ST_WRITE_DONTCACHE, "write", "dontcache" },
	{ ST_WRITE_FALLBACK, "write", "fallback" }, { ST_WRITE_CACHED, "write", "cached" },
	{ ST_READ_KERNEL, "read", "kernel" },	    { ST_WRITE_KERNEL, "write", "kernel" },
};

/* One counter metric with a series per I/O class. */
static void prom_per_class(FILE *out, const char *metric, enum stat_kind k, const char *help)
{
	prom_head(out, metric, "counter", help);
	for (int p = POLICY_CACHE; p < POLICY__COUNT; p++) {
		prom_start(out, metric, p);
		fprintf(out, "} %llu\n", (unsigned long long)stats_get(p, k));
	}
}

static void prom_requests(FILE *out)
{
	struct reqstats r;

	reqstats_snapshot(&r);
	for (int op = 0; op < REQSTATS_NOPCODES; op++) {
		if (!r.n[op])
			continue;
		prom_start(out, "dcfs_requests_total", 0);
		fprintf(out, ",opcode=\"%s\"} %llu\n", reqstats_op_name(op),
			(unsigned long long)r.n[op]);
	}
}

static void prom_counters(FILE *out)
{
	prom_head(
		out, "dcfs_bytes_total", "counter",
		"Bytes moved through the mount by I/O class (the policy decided at open), direction and backing I/O mode (dontcache: RWF_DONTCACHE, fallback: write-behind/drop-behind window, cached: page cache, kernel: served by the kernel through passthrough without a request to dcfs, estimated: reads of drop-behind streams by their read-ahead front, writes by the file's growth from open to close).");
	for (int p = POLICY_CACHE; p < POLICY__COUNT; p++)
		for (size_t i = 0; i < sizeof(byte_kinds) / sizeof(byte_kinds[0]); i++) {
			prom_start(out, "dcfs_bytes_total", p);
			fprintf(out, ",direction=\"%s\",mode=\"%s\"} %llu\n",
				byte_kinds[i].direction, byte_kinds[i].mode,
				(unsigned long long)stats_get(p, byte_kinds[i].kind));
		}
	prom_per_class(out, "dcfs_opens_total", ST_OPENED, "Regular files opened, by I/O class.");
	prom_per_class(
		out, "dcfs_passthrough_opens_total", ST_PASSTHROUGH,
		"Opens served by kernel FUSE passthrough, by I/O class (their reads and writes never reach the daemon: dcfs_bytes_total counts them with mode kernel, estimated).");
	prom_per_class(
		out, "dcfs_dropped_behind_bytes_total", ST_DROPPED_BEHIND,
		"Backing page-cache bytes dropped behind streams the kernel serves (passthrough_reads, passthrough_writes, and at close passthrough_uncached), by I/O class.");
	prom_per_class(
		out, "dcfs_switches_total", ST_SWITCHED,
		"Handles that switched from cached to uncached I/O (class auto, or held back by min_size).");
	prom_head(
		out, "dcfs_requests_total", "counter",
		"Requests received from the kernel, by FUSE opcode (the round trips metadata costs).");
	prom_requests(out);
}

static int probe_gauge(int state)
{
	return state == PROBE_YES ? 1 : state == PROBE_NO ? 0 : -1;
}

static void prom_gauges(FILE *out)
{
	struct probe probes[64];
	size_t n = probe_snapshot(probes, 64);
	char dev[32];

	prom_head(
		out, "dcfs_dontcache_supported", "gauge",
		"RWF_DONTCACHE probe of each backing filesystem: 1 supported, 0 not (the fallback is used), -1 not probed yet.");
	for (size_t i = 0; i < n; i++) {
		for (int d = 0; d < 2; d++) {
			prom_start(out, "dcfs_dontcache_supported", 0);
			snprintf(dev, sizeof(dev), "%u:%u", major(probes[i].dev),
				 minor(probes[i].dev));
			fputc(',', out);
			prom_label(out, "dev", dev);
			fputc(',', out);
			prom_label(out, "fstype", probes[i].fstype);
			fprintf(out, ",direction=\"%s\"} %d\n", d ? "write" : "read",
				probe_gauge(d ? probes[i].wr : probes[i].rd));
		}
	}
	prom_head(out, "dcfs_open_files", "gauge", "File handles open now.");
	prom_start(out, "dcfs_open_files", 0);
	fprintf(out, "} %zu\n", io_open_count());
	prom_head(out, "dcfs_stopping", "gauge",
		  "1 while a graceful stop waits for open files (new opens get EBUSY).");
	prom_start(out, "dcfs_stopping", 0);
	fprintf(out, "} %d\n", drain_active() ? 1 : 0);
	prom_head(out, "dcfs_info", "gauge", "dcfs version and backing directory.");
	prom_start(out, "dcfs_info", 0);
	fputc(',', out);
	prom_label(out, "backing", dcfs.opt.backing);
	fputs(",version=\"" DCFS_VERSION "\"} 1\n", out);
}

char *report_prometheus(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	if (!out)
		return NULL;
	prom_counters(out);
	prom_gauges(out);
	if (fclose(out) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/*
 * user.dcfs.files: one tab-separated line per open regular file, for `dcfs
 * stat --files`.  A getxattr value is limited to 64 KiB by the kernel, so
 * the listing stops short of that and says how many it left out.
 */
#define FILES_MAX_TEXT 60000

struct files_ctx {
	FILE *out;
	uid_t who;
	long pos; /* bytes written so far */
	size_t left_out;
};

/* Tab, newline and backslash of a path escaped, so a line stays a line. */
static void tsv_field(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\t')
			fputs("\\t", out);
		else if (*s == '\n')
			fputs("\\n", out);
		else if (*s == '\\')
			fputs("\\\\", out);
		else
			fputc(*s, out);
	}
}

static const char *dir_mode(const struct io_file_view *v, bool uncached, int probe_state)
{
	if (!v->streamed || !uncached)
		return "cached";
	return probe_state == PROBE_NO ? "fallback" : "dontcache";
}

static void handle_mode(const struct io_file_view *v, char *buf, size_t size)
{
	const char *r = dir_mode(v, v->read_uncached, v->probe_rd);
	const char *w = dir_mode(v, v->write_uncached, v->probe_wr);

	if (strcmp(r, w) == 0)
		snprintf(buf, size, "%s", r);
	else
		snprintf(buf, size, "read %s, write %s", r, w);
	if (v->switch_after)
		snprintf(buf + strlen(buf), size - strlen(buf), " (uncached after %llu bytes)",
			 (unsigned long long)v->switch_after);
}

static void list_one(const struct io_file_view *v, void *arg)
{
	struct files_ctx *c = arg;
	char path[4096], mode[96];

	if (c->who != 0 && v->uid != c->who)
		return;
	if (c->pos > FILES_MAX_TEXT) {
		c->left_out++;
		return;
	}
	if (inode_backing_path(v->inode, path, sizeof(path)) < 0)
		snprintf(path, sizeof(path), "/(ino %llu, unreachable)",
			 (unsigned long long)v->inode->ino);
	handle_mode(v, mode, sizeof(mode));
	fprintf(c->out, "%u\t%d\t%s\t%s\t%llu\t%llu\t", (unsigned int)v->uid, (int)v->pid,
		policy_name(v->policy), mode, (unsigned long long)v->bytes[0],
		(unsigned long long)v->bytes[1]);
	tsv_field(c->out, dcfs.opt.mountpoint);
	if (strcmp(path, "/") != 0)
		tsv_field(c->out, path);
	fputc('\t', c->out);
	tsv_field(c->out, v->why);
	fputc('\n', c->out);
	c->pos = ftell(c->out);
}

char *report_files(uid_t who)
{
	struct files_ctx c = { .who = who };
	char *buf = NULL;
	size_t len = 0;

	c.out = open_memstream(&buf, &len);
	if (!c.out)
		return NULL;
	fputs("uid\tpid\tclass\tmode\tread\twritten\tpath\trule\n", c.out);
	io_foreach(list_one, &c);
	if (c.left_out)
		fprintf(c.out, "# %zu more open files not shown (a listing is limited to 64 KiB)\n",
			c.left_out);
	if (fclose(c.out) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
