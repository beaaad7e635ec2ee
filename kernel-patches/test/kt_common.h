/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the guest test programs (dontcache_test.c, fuse_pt_test.c) share:
 * PASS/FAIL lines and their count, a monotonic clock, a mixer for
 * deterministic file content, cachestat(2), which the host's C library
 * does not wrap, and /proc/vmstat counters.  Each program is one static binary including this.
 */
#ifndef KT_COMMON_H
#define KT_COMMON_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#define NR_CACHESTAT 451

static int passed, failed;

static void check(int ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", ok ? "PASS" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		passed++;
	else
		failed++;
}

static void die(const char *what)
{
	printf("FAIL: %s: %s\n", what, strerror(errno));
	printf("%d passed, %d failed\n", passed, failed + 1);
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

struct cs_range {
	uint64_t off;
	uint64_t len;
};

struct cs_stat {
	uint64_t nr_cache;
	uint64_t nr_dirty;
	uint64_t nr_writeback;
	uint64_t nr_evicted;
	uint64_t nr_recently_evicted;
};

/* cachestat(2) of [off, off + len) of fd (len 0: to the end) */
static int cachestat_range(int fd, uint64_t off, uint64_t len,
			   struct cs_stat *cs)
{
	struct cs_range r = { off, len };

	return syscall(NR_CACHESTAT, fd, &r, cs, 0);
}

/* a counter of /proc/vmstat, -1 if there is none */
static inline long long vmstat(const char *name)
{
	char line[256];
	long long v = -1;
	size_t n = strlen(name);
	FILE *f = fopen("/proc/vmstat", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ' ')
			v = atoll(line + n + 1);
	fclose(f);
	return v;
}

#endif
