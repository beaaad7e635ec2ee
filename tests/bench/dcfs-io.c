// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dcfs-io: the measuring tool of the benchmarks and demo.
 *
 *   dcfs-io write FILE SIZE BS [dontcache] [fsync]   sequential write
 *   dcfs-io read FILE BS [dontcache]                 sequential read
 *   dcfs-io resident FILE                            cached pages (cachestat; mincore before 6.5)
 *   dcfs-io trail FILE [INTERVAL_MS [READY]]         peak resident pages of FILE until SIGTERM
 *   dcfs-io pages FILE OUT                           residency bitmap (mincore)
 *   dcfs-io survival FILE BEFORE                     pages of BEFORE still resident
 *   dcfs-io watch [INTERVAL_MS [READY]]              peak Cached/Dirty until SIGTERM
 *   dcfs-io filepeak FILE [INTERVAL_US [READY]]      peak cachestat of FILE until SIGTERM:
 *                                                    "cache dirty writeback samples" (pages)
 *   dcfs-io meta DIR N [SIZE [create|stat|unlink|probe]]  create/stat/unlink N files (one phase)
 *   dcfs-io tree DIR N [SIZE]                        N files, 1000 per subdirectory
 *   dcfs-io statloop FILE N                          N stat(2) of FILE
 *
 * It passes RWF_DONTCACHE as 0x80 itself: Debian 12's fio 3.33 sends 0x40
 * (RWF_ATOMIC today) for its uncached option.  write/read print
 * "bytes seconds MiB/s".
 *
 * pages writes one byte per page of FILE (1: resident) as mincore(2) sees
 * it, without faulting anything in; survival compares FILE now with such a
 * bitmap and prints "before still fraction".  watch samples /proc/meminfo
 * (creating READY once it has the first sample) and, on SIGTERM/SIGINT, prints "start_cached start_dirty peak_cached
 * peak_dirty end_cached" in KiB.  meta prints "create_s stat_s unlink_s";
 * statloop prints the microseconds per stat(2) (round-trip latency when
 * the mount is told to cache nothing).  resident prints "nr_cache nr_dirty
 * nr_writeback", "- -" for the last two where the kernel has no cachestat(2)
 * (before 6.5) and mincore(2) counted.  trail samples the resident pages of
 * FILE (which may not exist yet, and grow) every INTERVAL_MS (default 100)
 * and prints "peak_pages last_pages samples" on SIGTERM/SIGINT.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "dcfs_sys.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static unsigned long long parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k':
	case 'K': return v << 10;
	case 'm':
	case 'M': return v << 20;
	case 'g':
	case 'G': return v << 30;
	default: return v;
	}
}

static int has(int argc, char **argv, int from, const char *word)
{
	for (int i = from; i < argc; i++)
		if (strcmp(argv[i], word) == 0)
			return 1;
	return 0;
}

/* CPU seconds (user + system) this process has used so far. */
static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/*
 * bytes, seconds, MiB/s, and the CPU time the application itself spent
 * (with kernel passthrough the FUSE I/O is done in the application's
 * context, so this is the cost a shared machine does not blur).
 */
static void print_result(unsigned long long done, double t)
{
	printf("%llu %.3f %.1f %.3f\n", done, t, (double)done / t / 1048576.0, cpu_seconds());
}

static int do_write(const char *path, unsigned long long size, size_t bs, int flags, int do_fsync)
{
	char *buf = aligned_alloc(4096, bs);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	unsigned long long done = 0;
	double t0 = now(), t;

	if (fd < 0 || !buf) {
		perror(path);
		return 1;
	}
	for (size_t i = 0; i < bs; i++)
		buf[i] = (char)(i * 7 + 1);
	while (done < size) {
		struct iovec iov = { buf, bs };
		ssize_t n = pwritev2(fd, &iov, 1, (off_t)done, flags);

		if (n <= 0) {
			fprintf(stderr, "dcfs-io: write: %s\n", strerror(errno));
			return 1;
		}
		done += (unsigned long long)n;
	}
	if (do_fsync && fsync(fd) < 0) {
		perror("fsync");
		return 1;
	}
	close(fd);
	t = now() - t0;
	print_result(done, t);
	return 0;
}

static int do_read(const char *path, size_t bs, int flags)
{
	char *buf = aligned_alloc(4096, bs);
	int fd = open(path, O_RDONLY);
	unsigned long long done = 0;
	double t0 = now(), t;

	if (fd < 0 || !buf) {
		perror(path);
		return 1;
	}
	for (;;) {
		struct iovec iov = { buf, bs };
		ssize_t n = preadv2(fd, &iov, 1, (off_t)done, flags);

		if (n < 0) {
			fprintf(stderr, "dcfs-io: read: %s\n", strerror(errno));
			return 1;
		}
		if (n == 0)
			break;
		done += (unsigned long long)n;
	}
	close(fd);
	t = now() - t0;
	print_result(done, t);
	return 0;
}

/* Resident pages of fd by mincore(2), for kernels without cachestat(2). */
static long long mincore_pages(int fd)
{
	long psz = sysconf(_SC_PAGESIZE);
	unsigned char *vec;
	long long res = 0;
	struct stat st;
	size_t n;
	void *map;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size == 0)
		return 0;
	n = ((size_t)st.st_size + (size_t)psz - 1) / (size_t)psz;
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	vec = malloc(n);
	if (vec && mincore(map, (size_t)st.st_size, vec) == 0)
		for (size_t i = 0; i < n; i++)
			res += vec[i] & 1;
	else
		res = vec ? -errno : -ENOMEM;
	free(vec);
	munmap(map, (size_t)st.st_size);
	return res;
}

/* cachestat(2) where the kernel has it, else mincore(2): -1 on error. */
static long long resident_pages(int fd, struct dcfs_cachestat *cs, int *exact)
{
	long err = dcfs_cachestat(fd, 0, 0, cs);

	*exact = err == 0;
	if (err == 0)
		return (long long)cs->nr_cache;
	if (err != -ENOSYS) {
		fprintf(stderr, "dcfs-io: cachestat: %s\n", strerror((int)-err));
		return -1;
	}
	return mincore_pages(fd);
}

static int do_resident(const char *path)
{
	struct dcfs_cachestat cs;
	int fd = open(path, O_RDONLY), exact;
	long long n;

	if (fd < 0) {
		perror(path);
		return 1;
	}
	n = resident_pages(fd, &cs, &exact);
	close(fd);
	if (n < 0) {
		fprintf(stderr, "dcfs-io: %s: %s\n", path, strerror((int)-n));
		return 1;
	}
	if (exact)
		printf("%llu %llu %llu\n", (unsigned long long)cs.nr_cache,
		       (unsigned long long)cs.nr_dirty, (unsigned long long)cs.nr_writeback);
	else
		printf("%lld - -\n", n);
	return 0;
}

/* The residency bitmap of the whole file, one byte per page (bit 0). */
static unsigned char *residency(const char *path, size_t *npages)
{
	long psz = sysconf(_SC_PAGESIZE);
	int fd = open(path, O_RDONLY);
	unsigned char *vec = NULL;
	struct stat st;
	void *map;

	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(path);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	*npages = ((size_t)st.st_size + (size_t)psz - 1) / (size_t)psz;
	vec = calloc(*npages ? *npages : 1, 1);
	if (!vec || !*npages) {
		close(fd);
		return vec;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		perror("mmap");
		free(vec);
		return NULL;
	}
	if (mincore(map, (size_t)st.st_size, vec) < 0) {
		perror("mincore");
		free(vec);
		vec = NULL;
	}
	munmap(map, (size_t)st.st_size);
	return vec;
}

static int do_pages(const char *path, const char *out)
{
	size_t n = 0, res = 0;
	unsigned char *vec = residency(path, &n);
	FILE *f;

	if (!vec)
		return 1;
	for (size_t i = 0; i < n; i++) {
		vec[i] &= 1;
		res += vec[i];
	}
	f = fopen(out, "w");
	if (!f || fwrite(vec, 1, n, f) != n || fclose(f) != 0) {
		perror(out);
		return 1;
	}
	free(vec);
	printf("%zu %zu\n", n, res);
	return 0;
}

static int do_survival(const char *path, const char *before)
{
	size_t n = 0, m, had = 0, still = 0;
	unsigned char *vec = residency(path, &n), *old;
	FILE *f = fopen(before, "r");

	if (!vec || !f) {
		if (!f)
			perror(before);
		return 1;
	}
	old = calloc(n ? n : 1, 1);
	m = old ? fread(old, 1, n, f) : 0;
	fclose(f);
	for (size_t i = 0; i < m; i++) {
		if (!(old[i] & 1))
			continue;
		had++;
		still += vec[i] & 1;
	}
	printf("%zu %zu %.4f\n", had, still, had ? (double)still / (double)had : 0.0);
	free(old);
	free(vec);
	return 0;
}

static volatile sig_atomic_t stop_watch;

static void on_stop(int sig)
{
	(void)sig;
	stop_watch = 1;
}

/* Cached and Dirty of /proc/meminfo, in KiB. */
static int meminfo(unsigned long long *cached, unsigned long long *dirty)
{
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "Cached: %llu", cached);
		sscanf(line, "Dirty: %llu", dirty);
	}
	fclose(f);
	return 0;
}

static int do_watch(long ms, const char *ready)
{
	struct sigaction sa = { .sa_handler = on_stop };
	unsigned long long c = 0, d = 0, c0, d0, pc, pd;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (meminfo(&c, &d) < 0) {
		perror("/proc/meminfo");
		return 1;
	}
	c0 = pc = c;
	d0 = pd = d;
	if (ready) {
		int fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd >= 0)
			close(fd);
	}
	while (!stop_watch) {
		nanosleep(&ts, NULL);
		meminfo(&c, &d);
		if (c > pc)
			pc = c;
		if (d > pd)
			pd = d;
	}
	printf("%llu %llu %llu %llu %llu\n", c0, d0, pc, pd, c);
	return 0;
}

static void touch_ready(const char *ready)
{
	int fd = ready ? open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;

	if (fd >= 0)
		close(fd);
}

/* Peak resident pages of a file (absent: 0) until SIGTERM/SIGINT. */
static int do_trail(const char *path, long ms, const char *ready)
{
	struct sigaction sa = { .sa_handler = on_stop };
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	long long peak = 0, last = 0, samples = 0;
	struct dcfs_cachestat cs;
	int exact;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	touch_ready(ready);
	while (!stop_watch) {
		int fd = open(path, O_RDONLY);

		if (fd >= 0) {
			long long n = resident_pages(fd, &cs, &exact);

			close(fd);
			if (n >= 0) {
				last = n;
				if (n > peak)
					peak = n;
				samples++;
			}
		}
		nanosleep(&ts, NULL);
	}
	printf("%lld %lld %lld\n", peak, last, samples);
	return 0;
}

/*
 * The page cache one file holds while it is written: cachestat of PATH every
 * US microseconds (the file may not exist yet) until SIGTERM; prints the
 * most resident, dirty and under-writeback pages seen, and the samples.
 */
static int do_filepeak(const char *path, long us, const char *ready)
{
	struct sigaction sa = { .sa_handler = on_stop };
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000L };
	unsigned long long pc = 0, pd = 0, pw = 0, n = 0;
	struct dcfs_cachestat cs;
	int fd = -1;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (ready) {
		int r = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (r >= 0)
			close(r);
	}
	while (!stop_watch) {
		if (fd < 0)
			fd = open(path, O_RDONLY);
		if (fd >= 0 && dcfs_cachestat(fd, 0, 0, &cs) == 0) {
			n++;
			if (cs.nr_cache > pc)
				pc = cs.nr_cache;
			if (cs.nr_dirty > pd)
				pd = cs.nr_dirty;
			if (cs.nr_writeback > pw)
				pw = cs.nr_writeback;
		}
		nanosleep(&ts, NULL);
	}
	if (fd >= 0)
		close(fd);
	printf("%llu %llu %llu %llu\n", pc, pd, pw, n);
	return 0;
}

/*
 * phase: 0 all three, else 'c'reate, 's'tat or 'u'nlink only, or 'p'robe:
 * create each file after a stat(2) that finds it missing, with O_TRUNC
 * instead of O_EXCL (a make, cp or installer checks before it creates).
 */
static int do_meta(const char *dir, long n, size_t size, int phase)
{
	char name[64], *buf = calloc(1, size ? size : 1);
	double t0, t1, t2, t3;
	struct stat st;

	if (!buf)
		return 1;
	memset(buf, 'x', size);
	t0 = now();
	for (long i = 0; (!phase || phase == 'c' || phase == 'p') && i < n; i++) {
		int fd;

		snprintf(name, sizeof(name), "%s/f%07ld", dir, i);
		if (phase == 'p' && (stat(name, &st) == 0 || errno != ENOENT)) {
			fprintf(stderr, "%s: not missing\n", name);
			return 1;
		}
		/* as cp or a shell redirection (O_EXCL would look the name up again) */
		fd = open(name, O_WRONLY | O_CREAT | (phase == 'p' ? O_TRUNC : O_EXCL), 0644);
		if (fd < 0 || (size && write(fd, buf, size) != (ssize_t)size)) {
			perror(name);
			return 1;
		}
		close(fd);
	}
	t1 = now();
	for (long i = 0; (!phase || phase == 's') && i < n; i++) {
		snprintf(name, sizeof(name), "%s/f%07ld", dir, i);
		if (stat(name, &st) < 0) {
			perror(name);
			return 1;
		}
	}
	t2 = now();
	for (long i = 0; (!phase || phase == 'u') && i < n; i++) {
		snprintf(name, sizeof(name), "%s/f%07ld", dir, i);
		if (unlink(name) < 0) {
			perror(name);
			return 1;
		}
	}
	t3 = now();
	free(buf);
	printf("%.3f %.3f %.3f\n", t1 - t0, t2 - t1, t3 - t2);
	return 0;
}

/* The find test's tree: DIR/dNNNN/fNNNN, as a media library is laid out. */
static int do_tree(const char *dir, long n, size_t size)
{
	char name[PATH_MAX], *buf = calloc(1, size ? size : 1);

	if (!buf)
		return 1;
	memset(buf, 'x', size);
	for (long i = 0; i < n; i++) {
		int fd;

		if (i % 1000 == 0) {
			snprintf(name, sizeof(name), "%s/d%04ld", dir, i / 1000);
			if (mkdir(name, 0755) < 0 && errno != EEXIST) {
				perror(name);
				return 1;
			}
		}
		snprintf(name, sizeof(name), "%s/d%04ld/f%04ld", dir, i / 1000, i % 1000);
		fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || (size && write(fd, buf, size) != (ssize_t)size)) {
			perror(name);
			return 1;
		}
		close(fd);
	}
	free(buf);
	return 0;
}

static int do_statloop(const char *file, long n)
{
	struct stat st;
	double t0 = now();

	for (long i = 0; i < n; i++) {
		if (stat(file, &st) < 0) {
			perror(file);
			return 1;
		}
	}
	printf("%.2f\n", n > 0 ? (now() - t0) * 1e6 / (double)n : 0.0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && strcmp(argv[1], "write") == 0)
		return do_write(argv[2], parse_size(argv[3]), (size_t)parse_size(argv[4]),
				has(argc, argv, 5, "dontcache") ? DCFS_RWF_DONTCACHE : 0,
				has(argc, argv, 5, "fsync"));
	if (argc >= 4 && strcmp(argv[1], "read") == 0)
		return do_read(argv[2], (size_t)parse_size(argv[3]),
			       has(argc, argv, 4, "dontcache") ? DCFS_RWF_DONTCACHE : 0);
	if (argc == 3 && strcmp(argv[1], "resident") == 0)
		return do_resident(argv[2]);
	if (argc == 4 && strcmp(argv[1], "pages") == 0)
		return do_pages(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "survival") == 0)
		return do_survival(argv[2], argv[3]);
	if (argc >= 3 && argc <= 5 && strcmp(argv[1], "filepeak") == 0)
		return do_filepeak(argv[2], argc >= 4 ? atol(argv[3]) : 1000,
				   argc >= 5 ? argv[4] : NULL);
	if (argc <= 4 && argc >= 2 && strcmp(argv[1], "watch") == 0)
		return do_watch(argc >= 3 ? atol(argv[2]) : 50, argc == 4 ? argv[3] : NULL);
	if (argc >= 3 && argc <= 5 && strcmp(argv[1], "trail") == 0)
		return do_trail(argv[2], argc >= 4 ? atol(argv[3]) : 100,
				argc == 5 ? argv[4] : NULL);
	if (argc >= 4 && argc <= 6 && strcmp(argv[1], "meta") == 0)
		return do_meta(argv[2], atol(argv[3]), argc >= 5 ? (size_t)parse_size(argv[4]) : 0,
			       argc == 6 ? argv[5][0] : 0);
	if ((argc == 4 || argc == 5) && strcmp(argv[1], "tree") == 0)
		return do_tree(argv[2], atol(argv[3]), argc == 5 ? (size_t)parse_size(argv[4]) : 0);
	if (argc == 4 && strcmp(argv[1], "statloop") == 0)
		return do_statloop(argv[2], atol(argv[3]));
	fprintf(stderr, "usage: dcfs-io write FILE SIZE BS [dontcache] [fsync]\n"
			"       dcfs-io read FILE BS [dontcache]\n"
			"       dcfs-io resident FILE\n"
			"       dcfs-io trail FILE [INTERVAL_MS [READY]]\n"
			"       dcfs-io pages FILE OUT\n"
			"       dcfs-io survival FILE BEFORE\n"
			"       dcfs-io watch [INTERVAL_MS [READY]]\n"
			"       dcfs-io filepeak FILE [INTERVAL_US [READY]]\n"
			"       dcfs-io meta DIR N [SIZE [create|stat|unlink|probe]]\n"
			"       dcfs-io tree DIR N [SIZE]\n"
			"       dcfs-io statloop FILE N\n");
	return 2;
}
