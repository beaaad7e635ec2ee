// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dcfs-io: the measuring tool of the benchmarks and demo.
 *
 *   dcfs-io write FILE SIZE BS [dontcache] [fsync]   sequential write
 *   dcfs-io read FILE BS [dontcache]                 sequential read
 *   dcfs-io resident FILE                            cached pages (cachestat)
 *
 * It passes RWF_DONTCACHE as 0x80 itself: Debian 12's fio 3.33 sends 0x40
 * (RWF_ATOMIC today) for its uncached option.  write/read print
 * "bytes seconds MiB/s".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	case 'k': case 'K': return v << 10;
	case 'm': case 'M': return v << 20;
	case 'g': case 'G': return v << 30;
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

static int do_write(const char *path, unsigned long long size, size_t bs,
		    int flags, int do_fsync)
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
	printf("%llu %.3f %.1f\n", done, t, (double)done / t / 1048576.0);
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
	printf("%llu %.3f %.1f\n", done, t, (double)done / t / 1048576.0);
	return 0;
}

static int do_resident(const char *path)
{
	struct dcfs_cachestat cs;
	int fd = open(path, O_RDONLY);
	long err;

	if (fd < 0) {
		perror(path);
		return 1;
	}
	err = dcfs_cachestat(fd, 0, 0, &cs);
	close(fd);
	if (err) {
		fprintf(stderr, "dcfs-io: cachestat: %s\n", strerror((int)-err));
		return 1;
	}
	printf("%llu %llu %llu\n", (unsigned long long)cs.nr_cache,
	       (unsigned long long)cs.nr_dirty,
	       (unsigned long long)cs.nr_writeback);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && strcmp(argv[1], "write") == 0)
		return do_write(argv[2], parse_size(argv[3]),
				(size_t)parse_size(argv[4]),
				has(argc, argv, 5, "dontcache") ? DCFS_RWF_DONTCACHE : 0,
				has(argc, argv, 5, "fsync"));
	if (argc >= 4 && strcmp(argv[1], "read") == 0)
		return do_read(argv[2], (size_t)parse_size(argv[3]),
			       has(argc, argv, 4, "dontcache") ? DCFS_RWF_DONTCACHE : 0);
	if (argc == 3 && strcmp(argv[1], "resident") == 0)
		return do_resident(argv[2]);
	fprintf(stderr,
		"usage: dcfs-io write FILE SIZE BS [dontcache] [fsync]\n"
		"       dcfs-io read FILE BS [dontcache]\n"
		"       dcfs-io resident FILE\n");
	return 2;
}
