// SPDX-License-Identifier: GPL-2.0
/*
 * Uncached writes that end while another file of the same file system is
 * being fsync()ed (issue 23's dcfs-stage flake): are their pages written
 * back without any later write asking for it?
 *
 *   wbsync_race DIR ROUNDS WAIT_MS [nosync]
 *
 * Each round: a child rewrites DIR/sync.dat (1 MiB, buffered) and
 * fdatasync()s it in a loop, so WB_SYNC_ALL writeback of the file
 * system's data is in progress much of the time (F2FS then skips
 * WB_SYNC_NONE passes, sbi->wb_sync_req); meanwhile 1-32 x 64 KiB
 * RWF_DONTCACHE writes go to a new file DIR/dc.N; the child stops; after
 * WAIT_MS the dirty and resident pages of DIR/dc.N are counted
 * (cachestat).  Periodic writeback should be off (the caller's job), so
 * that only the uncached write's own request can write the pages back.
 * With "nosync" the child only sleeps (the control).  Prints one line per
 * round and a summary "rounds=R left=L pages=P"; W_SETTLE_MS: see
 * settle().
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "dcfs_sys.h" /* RWF_DONTCACHE and cachestat, as the daemon spells them */

static void syncer(const char *dir, int nosync)
{
	static char buf[1 << 20];
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/sync.dat", dir);
	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		_exit(1);
	memset(buf, 0x5a, sizeof(buf));
	while (nosync)
		pause();
	for (;;) {
		if (pwrite(fd, buf, sizeof(buf), 0) != sizeof(buf) ||
		    fdatasync(fd))
			_exit(1);
		buf[0]++;
	}
}

/*
 * W_SETTLE_MS (environment, default 0: skip): wait that long more, then
 * count again the files that are still dirty.  With periodic writeback
 * on, what the uncached writes' own requests left must be gone by then
 * (dirty_expire_centisecs plus a few flusher intervals): exit status 1 if
 * not.
 */
static int settle(const char *dir, int rounds)
{
	const char *env = getenv("W_SETTLE_MS");
	int ms = env ? atoi(env) : 0, r, left = 0;
	unsigned long long pages = 0;

	if (ms <= 0)
		return 0;
	usleep((useconds_t)ms * 1000);
	for (r = 0; r < rounds; r++) {
		struct dcfs_cachestat cs;
		char path[512];
		int fd;

		snprintf(path, sizeof(path), "%s/dc.%d", dir, r);
		fd = open(path, O_RDONLY);
		if (fd < 0 || dcfs_cachestat(fd, 0, 0, &cs) < 0) {
			perror(path);
			return 1;
		}
		if (cs.nr_dirty) {
			left++;
			pages += cs.nr_dirty;
		}
		close(fd);
	}
	printf("settled: %d ms later left=%d pages=%llu\n", ms, left, pages);
	return left ? 1 : 0;
}

int main(int argc, char **argv)
{
	static char buf[65536] __attribute__((aligned(4096)));
	int rounds, wait_ms, r, left = 0, nosync;
	unsigned long long pages = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: %s DIR ROUNDS WAIT_MS [nosync]\n",
			argv[0]);
		return 2;
	}
	nosync = argc > 4 && !strcmp(argv[4], "nosync");
	rounds = atoi(argv[2]);
	wait_ms = atoi(argv[3]);
	memset(buf, 0xa5, sizeof(buf));
	srand(23);
	for (r = 0; r < rounds; r++) {
		struct dcfs_cachestat cs;
		char path[512];
		int fd, n, i;
		pid_t pid;

		pid = fork();
		if (pid < 0)
			return 1;
		if (!pid)
			syncer(argv[1], nosync);
		usleep(20000 + rand() % 30000);
		snprintf(path, sizeof(path), "%s/dc.%d", argv[1], r);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			perror(path);
			return 1;
		}
		n = 1 + rand() % 32;
		for (i = 0; i < n; i++) {
			struct iovec iov = { buf, sizeof(buf) };

			if (pwritev2(fd, &iov, 1, (off_t)i * sizeof(buf),
				     DCFS_RWF_DONTCACHE) != sizeof(buf)) {
				perror("pwritev2");
				return 1;
			}
		}
		usleep(rand() % 5000);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		usleep(wait_ms * 1000);
		if (dcfs_cachestat(fd, 0, 0, &cs) < 0) {
			perror("cachestat");
			return 1;
		}
		printf("round %d: %d x 64 KiB, after %d ms cached=%llu dirty=%llu writeback=%llu\n",
		       r, n, wait_ms, (unsigned long long)cs.nr_cache,
		       (unsigned long long)cs.nr_dirty,
		       (unsigned long long)cs.nr_writeback);
		if (cs.nr_dirty) {
			left++;
			pages += cs.nr_dirty;
		}
		close(fd);
	}
	printf("rounds=%d left=%d pages=%llu\n", rounds, left, pages);
	return settle(argv[1], rounds);
}
