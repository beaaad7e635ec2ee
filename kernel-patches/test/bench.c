// SPDX-License-Identifier: GPL-2.0
/*
 * Sequential write benchmark, normal buffered vs RWF_DONTCACHE.
 *
 *   bench FILE MIB REQ_BYTES normal|dontcache
 *
 * Writes MIB MiB to FILE with REQ_BYTES requests, then fsync()s it (the
 * throughput includes the fsync, so both modes pay for writeback), then
 * waits up to 10 s for drop-behind to finish.  Prints one table row:
 *   req mode MB/s resident_pages avg_Cached_MiB kswapd_scan kswapd_steal
 *   direct_scan direct_steal
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif
#define NR_CACHESTAT 451

struct cs_range { uint64_t off, len; };
struct cs_stat { uint64_t c, d, w, e, re; };

static volatile int running = 1;
static double cached_sum;
static long cached_n;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static long meminfo_kb(const char *key)
{
	char line[256];
	long v = -1;
	size_t kl = strlen(key);
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			v = atol(line + kl + 1);
			break;
		}
	fclose(f);
	return v;
}

static long long vmstat(const char *key)
{
	char name[128];
	long long v, r = 0;
	FILE *f = fopen("/proc/vmstat", "r");

	if (!f)
		return 0;
	while (fscanf(f, "%127s %lld", name, &v) == 2)
		if (!strcmp(name, key))
			r = v;
	fclose(f);
	return r;
}

static void *sampler(void *arg)
{
	(void)arg;
	while (running) {
		cached_sum += meminfo_kb("Cached") / 1024.0;
		cached_n++;
		usleep(100000);
	}
	return NULL;
}

static uint64_t resident(int fd)
{
	struct cs_range r = { 0, 0 };
	struct cs_stat cs;

	if (syscall(NR_CACHESTAT, fd, &r, &cs, 0))
		return (uint64_t)-1;
	return cs.c;
}

int main(int argc, char **argv)
{
	const char *keys[] = { "pgscan_kswapd", "pgsteal_kswapd",
			       "pgscan_direct", "pgsteal_direct" };
	long long before[4], after[4];
	size_t total, req, done;
	unsigned char *buf;
	pthread_t th;
	double t0, t;
	uint64_t res;
	int fd, flags, i;

	if (argc != 5) {
		fprintf(stderr, "usage: %s FILE MIB REQ normal|dontcache\n",
			argv[0]);
		return 2;
	}
	total = strtoul(argv[2], NULL, 0) << 20;
	req = strtoul(argv[3], NULL, 0);
	flags = strcmp(argv[4], "dontcache") ? 0 : RWF_DONTCACHE;
	buf = aligned_alloc(4096, req);
	if (!buf)
		return 1;
	for (i = 0; (size_t)i < req; i++)
		buf[i] = (unsigned char)(i * 131 + 7);

	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	for (i = 0; i < 4; i++)
		before[i] = vmstat(keys[i]);
	pthread_create(&th, NULL, sampler, NULL);
	t0 = now();
	for (done = 0; done < total; done += req) {
		struct iovec iov = { buf, req };

		if (pwritev2(fd, &iov, 1, done, flags) != (ssize_t)req) {
			perror("pwritev2");
			return 1;
		}
	}
	if (fsync(fd)) {
		perror("fsync");
		return 1;
	}
	t = now() - t0;
	running = 0;
	pthread_join(th, NULL);
	/* drop-behind completes asynchronously after writeback */
	for (i = 0; i < 500 && (res = resident(fd)) != 0 && flags; i++)
		usleep(20000);
	res = resident(fd);
	for (i = 0; i < 4; i++)
		after[i] = vmstat(keys[i]);
	printf("%8zu %-9s %8.1f %10llu %10.1f %12lld %12lld %12lld %12lld\n",
	       req, argv[4], total / 1e6 / t, (unsigned long long)res,
	       cached_n ? cached_sum / cached_n : 0.0,
	       after[0] - before[0], after[1] - before[1],
	       after[2] - before[2], after[3] - before[3]);
	close(fd);
	return 0;
}
