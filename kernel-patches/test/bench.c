// SPDX-License-Identifier: GPL-2.0
/*
 * Sequential write / read benchmark, normal buffered vs RWF_DONTCACHE, run
 * inside the UML guest (test/bench-guest.sh).
 *
 *   bench write FILE MIB REQ normal|dontcache [CGROUP_DIR]
 *   bench read  FILE REQ normal|dontcache [CGROUP_DIR]
 *
 * write: writes MIB MiB to FILE with REQ-byte requests, then fsync()s (the
 * throughput includes the fsync, so both modes pay for writeback), then
 * waits up to 10 s for drop-behind to finish.  read: reads FILE (which the
 * caller wrote and evicted) with REQ-byte requests.
 *
 * Prints one line of key=value pairs: MB/s, the target file's resident
 * pages at the end (cachestat), averages of /proc/meminfo Cached, Dirty,
 * Writeback, Active(file), Inactive(file) sampled every 100 ms (MiB),
 * kswapd0's CPU time and the pgscan/pgsteal kswapd/direct deltas from
 * /proc/vmstat; with CGROUP_DIR also the average of memory.current (MiB)
 * and the cgroup's memory.stat pgscan/pgsteal deltas.  The caller moves the
 * process into the cgroup.  Diagnostics of where the time goes: tw / tf
 * (seconds in the write loop / the fsync), the file's block device's
 * write requests, merges, sectors and busy ms (/sys/dev/block/M:m/stat),
 * nr_written / nr_dirtied (/proc/vmstat), context switches and the CPU's
 * user / system / idle / iowait / softirq ticks (/proc/stat) and the
 * writer's own CPU seconds and voluntary / involuntary switches; after a
 * normal write, tevict: seconds to evict its pages (fadvise DONTNEED).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif
#define NR_CACHESTAT 451

struct cs_range { uint64_t off, len; };
struct cs_stat { uint64_t c, d, w, e, re; };

static const char *const mem_keys[] = {
	"Cached", "Dirty", "Writeback", "Active(file)", "Inactive(file)",
};
#define NKEYS 5

static volatile int running = 1;
static double mem_sum[NKEYS], cg_sum;
static long nsamples;
static const char *cgdir;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void meminfo(double *mib)
{
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");
	int i;

	for (i = 0; i < NKEYS; i++)
		mib[i] = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		for (i = 0; i < NKEYS; i++) {
			size_t kl = strlen(mem_keys[i]);

			if (!strncmp(line, mem_keys[i], kl) && line[kl] == ':')
				mib[i] = atol(line + kl + 1) / 1024.0;
		}
	fclose(f);
}

/* value of KEY in a "key value" file such as /proc/vmstat or memory.stat */
static long long keyval(const char *file, const char *key)
{
	char name[128];
	long long v, r = 0;
	FILE *f = fopen(file, "r");

	if (!f)
		return 0;
	while (fscanf(f, "%127s %lld", name, &v) == 2)
		if (!strcmp(name, key))
			r = v;
	fclose(f);
	return r;
}

static long long read_ll(const char *file)
{
	long long v = 0;
	FILE *f = fopen(file, "r");

	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* utime + stime of kswapd0 in clock ticks */
static long long kswapd_ticks(void)
{
	static char statpath[300];
	char buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;

	if (!statpath[0]) {
		DIR *d = opendir("/proc");
		struct dirent *e;

		while (d && (e = readdir(d))) {
			char cp[300], comm[64] = "";
			FILE *c;

			snprintf(cp, sizeof(cp), "/proc/%s/comm", e->d_name);
			c = fopen(cp, "r");
			if (!c)
				continue;
			if (fgets(comm, sizeof(comm), c) &&
			    !strcmp(comm, "kswapd0\n"))
				snprintf(statpath, sizeof(statpath),
					 "/proc/%s/stat", e->d_name);
			fclose(c);
		}
		if (d)
			closedir(d);
	}
	f = fopen(statpath, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	p = strrchr(buf, ')');
	/* fields after ")": state ppid pgrp session tty tpgid flags minflt
	 * cminflt majflt cmajflt utime stime */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

static void *sampler(void *arg)
{
	char cur[300];
	double m[NKEYS];
	int i;

	(void)arg;
	if (cgdir)
		snprintf(cur, sizeof(cur), "%s/memory.current", cgdir);
	while (running) {
		meminfo(m);
		for (i = 0; i < NKEYS; i++)
			mem_sum[i] += m[i];
		if (cgdir)
			cg_sum += read_ll(cur) / 1048576.0;
		nsamples++;
		usleep(100000);
	}
	return NULL;
}

/* write ios, merges, sectors, ticks of the device holding FILE's fd */
static void devstat(const char *path, long long *v)
{
	unsigned long long f[11];
	FILE *f_ = fopen(path, "r");
	int i;

	for (i = 0; i < 4; i++)
		v[i] = 0;
	if (!f_)
		return;
	if (fscanf(f_, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
		   &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7],
		   &f[8], &f[9], &f[10]) == 11)
		for (i = 0; i < 4; i++)
			v[i] = f[4 + i];
	fclose(f_);
}

/* ctxt and cpu user, system, idle, iowait, softirq ticks from /proc/stat */
static void cpustat(long long *v)
{
	char line[512];
	unsigned long long u, n, sy, id, io, irq, sirq;
	FILE *f = fopen("/proc/stat", "r");

	memset(v, 0, 6 * sizeof(*v));
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "cpu %llu %llu %llu %llu %llu %llu %llu", &u,
			   &n, &sy, &id, &io, &irq, &sirq) == 7) {
			v[1] = u + n;
			v[2] = sy + irq;
			v[3] = id;
			v[4] = io;
			v[5] = sirq;
		}
		sscanf(line, "ctxt %lld", &v[0]);
	}
	fclose(f);
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
	static const char *const keys[] = {
		"pgscan_kswapd", "pgsteal_kswapd", "pgscan_direct",
		"pgsteal_direct",
	};
	long long before[4], after[4], cg0[2] = { 0, 0 }, cg1[2] = { 0, 0 };
	long long k0, k1;
	char cgstat[300] = "";
	size_t total = 0, req, done;
	int fd, flags, i, wr;
	unsigned char *buf;
	const char *mode;
	pthread_t th;
	double t0, t, tw, tevict = 0;
	uint64_t evicted = 0;
	uint64_t res;
	char devpath[128] = "";
	long long d0[4], d1[4], c0[6], c1[6], w0[2], w1[2];
	struct rusage ru0, ru1;
	struct stat st;

	wr = argc >= 6 && !strcmp(argv[1], "write");
	if (!wr && !(argc >= 5 && !strcmp(argv[1], "read"))) {
		fprintf(stderr, "usage: %s write FILE MIB REQ normal|dontcache [CG]\n"
			"       %s read FILE REQ normal|dontcache [CG]\n",
			argv[0], argv[0]);
		return 2;
	}
	if (wr) {
		total = strtoul(argv[3], NULL, 0) << 20;
		req = strtoul(argv[4], NULL, 0);
		mode = argv[5];
		cgdir = argc > 6 ? argv[6] : NULL;
	} else {
		req = strtoul(argv[3], NULL, 0);
		mode = argv[4];
		cgdir = argc > 5 ? argv[5] : NULL;
	}
	flags = strcmp(mode, "dontcache") ? 0 : RWF_DONTCACHE;
	buf = aligned_alloc(4096, req);
	if (!buf)
		return 1;
	for (done = 0; done < req; done++)
		buf[done] = (unsigned char)(done * 131 + 7);

	fd = open(argv[2], wr ? O_RDWR | O_CREAT | O_TRUNC : O_RDONLY, 0644);
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	if (!wr) {
		total = lseek(fd, 0, SEEK_END);
		lseek(fd, 0, SEEK_SET);
	}
	if (cgdir) {
		snprintf(cgstat, sizeof(cgstat), "%s/memory.stat", cgdir);
		cg0[0] = keyval(cgstat, "pgscan");
		cg0[1] = keyval(cgstat, "pgsteal");
	}
	for (i = 0; i < 4; i++)
		before[i] = keyval("/proc/vmstat", keys[i]);
	if (!fstat(fd, &st))
		snprintf(devpath, sizeof(devpath), "/sys/dev/block/%u:%u/stat",
			 major(st.st_dev), minor(st.st_dev));
	devstat(devpath, d0);
	cpustat(c0);
	w0[0] = keyval("/proc/vmstat", "nr_written");
	w0[1] = keyval("/proc/vmstat", "nr_dirtied");
	getrusage(RUSAGE_SELF, &ru0);
	k0 = kswapd_ticks();
	pthread_create(&th, NULL, sampler, NULL);
	t0 = now();
	for (done = 0; done < total; done += req) {
		struct iovec iov = { buf, req };
		ssize_t n = wr ? pwritev2(fd, &iov, 1, done, flags) :
				 preadv2(fd, &iov, 1, done, flags);

		if (n != (ssize_t)req) {
			perror(wr ? "pwritev2" : "preadv2");
			return 1;
		}
	}
	tw = now() - t0;
	if (wr && fsync(fd)) {
		perror("fsync");
		return 1;
	}
	t = now() - t0;
	getrusage(RUSAGE_SELF, &ru1);
	devstat(devpath, d1);
	cpustat(c1);
	w1[0] = keyval("/proc/vmstat", "nr_written");
	w1[1] = keyval("/proc/vmstat", "nr_dirtied");
	running = 0;
	pthread_join(th, NULL);
	if (!nsamples) {	/* shorter than one sampling interval */
		double m[NKEYS];

		meminfo(m);
		for (i = 0; i < NKEYS; i++)
			mem_sum[i] = m[i];
		nsamples = 1;
	}
	/* drop-behind completes asynchronously after writeback */
	for (i = 0; i < 500 && flags && resident(fd) != 0; i++)
		usleep(20000);
	res = resident(fd);
	k1 = kswapd_ticks();
	for (i = 0; i < 4; i++)
		after[i] = keyval("/proc/vmstat", keys[i]);
	if (cgdir) {
		cg1[0] = keyval(cgstat, "pgscan");
		cg1[1] = keyval(cgstat, "pgsteal");
	}
	if (!nsamples)
		nsamples = 1;
	printf("req=%zu mode=%s mbps=%.1f resident=%llu cached=%.1f dirty=%.1f "
	       "writeback=%.1f active_file=%.1f inactive_file=%.1f "
	       "kswapd_cpu=%.2f kswapd_scan=%lld kswapd_steal=%lld "
	       "direct_scan=%lld direct_steal=%lld",
	       req, mode, total / 1e6 / t, (unsigned long long)res,
	       mem_sum[0] / nsamples, mem_sum[1] / nsamples,
	       mem_sum[2] / nsamples, mem_sum[3] / nsamples,
	       mem_sum[4] / nsamples,
	       (double)(k1 - k0) / sysconf(_SC_CLK_TCK),
	       after[0] - before[0], after[1] - before[1],
	       after[2] - before[2], after[3] - before[3]);
	/*
	 * What a buffered write leaves to be paid later: the time to evict
	 * its (clean, written back) pages, which uncached writes pay within
	 * the measured time.  Batched (fadvise), so a lower bound.
	 */
	if (wr && !flags) {
		double te = now();

		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		tevict = now() - te;
		evicted = res - resident(fd);
	}
	printf(" tevict=%.3f evicted=%llu", tevict,
	       (unsigned long long)evicted);
	printf(" tw=%.3f tf=%.3f dev_wios=%lld dev_wmerges=%lld "
	       "dev_wsect=%lld dev_wms=%lld nr_written=%lld nr_dirtied=%lld "
	       "ctxt=%lld cpu_user=%lld cpu_sys=%lld cpu_idle=%lld "
	       "cpu_iowait=%lld cpu_softirq=%lld self_user=%.2f self_sys=%.2f "
	       "self_nvcsw=%ld self_nivcsw=%ld",
	       tw, t - tw, d1[0] - d0[0], d1[1] - d0[1], d1[2] - d0[2],
	       d1[3] - d0[3], w1[0] - w0[0], w1[1] - w0[1], c1[0] - c0[0],
	       c1[1] - c0[1], c1[2] - c0[2], c1[3] - c0[3], c1[4] - c0[4],
	       c1[5] - c0[5],
	       (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) +
	       (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6,
	       (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
	       (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6,
	       ru1.ru_nvcsw - ru0.ru_nvcsw, ru1.ru_nivcsw - ru0.ru_nivcsw);
	if (cgdir)
		printf(" memcg_current=%.1f memcg_scan=%lld memcg_steal=%lld",
		       cg_sum / nsamples, cg1[0] - cg0[0], cg1[1] - cg0[1]);
	printf("\n");
	close(fd);
	return 0;
}
