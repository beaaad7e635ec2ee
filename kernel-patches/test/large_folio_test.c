// SPDX-License-Identifier: GPL-2.0
/*
 * Uncached I/O on large page-cache folios (x86-64 guest, xfs, THP built in),
 * the largefolio stage of test-x86:
 *
 *   large_folio_test MNT [ROUNDS]
 *   large_folio_test pressure MNT MIB
 *
 *  1. large folios exist: a buffered 2 MiB write is mapped and its first
 *     page's /proc/kpageflags entry must be a compound head (else the rest
 *     proves nothing and fails);
 *  2. a 2 MiB RWF_DONTCACHE write leaves 0 pages resident after its
 *     writeback; read back with RWF_DONTCACHE it is right and leaves 0;
 *  3. B1: a dirty drop-behind 2 MiB folio split before its writeback
 *     (an uncached overwrite of data already on disk, then ftruncate() to
 *     1 MiB + 4 KiB: xfs logs no size and writes nothing back first, so
 *     the truncate splits the dirty folio) must leave 0 pages resident
 *     once written back: without "keep PG_dropbehind across a folio
 *     split" the tails lose the mark and stay cached.  (The debugfs
 *     split_huge_pages knob is no trigger: its lookup is a cached one,
 *     which takes the mark off the folio first.)  While the overwrite and the
 *     split run, both CPUs are held by SCHED_FIFO threads (the writer on
 *     one, a spinner on the other), so the flusher cannot start the
 *     writeback in between; vmstat's thp_split_page shows the split
 *     happened (a case whose split did not happen fails: it shows
 *     nothing);
 *  4. a hole punched into an uncached 2 MiB write (xfs writes the range
 *     back first, so this splits a clean folio or none): 0 resident.
 *
 * Output: one PASS/FAIL line per check and "N passed, N failed".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "kt_common.h"

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif
#define MIB (1024UL * 1024UL)
#define PAGE 4096UL
#define FOLIO (2 * MIB)
#define KPF_COMPOUND_HEAD 15
#define KPF_THP 22

static const char *mnt;
static unsigned char *buf;

static char *path(const char *name)
{
	static char p[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(p[i], sizeof(p[i]), "%s/%s", mnt, name);
	return p[i];
}

static uint64_t resident(int fd)
{
	struct cs_stat cs;

	if (cachestat_range(fd, 0, 0, &cs))
		die("cachestat");
	return cs.nr_cache;
}

/* poll until fd has 0 resident pages or secs pass; returns what is left */
static uint64_t wait_zero(int fd, double secs)
{
	double t0 = now();
	uint64_t r;

	while ((r = resident(fd)) && now() - t0 < secs)
		usleep(20000);
	return r;
}

static void pattern(unsigned char *p, size_t len, uint64_t seed)
{
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint64_t v = mix64(seed ^ (i / 8));

		memcpy(p + i, &v, 8);
	}
}

static int uwrite(int fd, const void *p, size_t len, off_t off)
{
	struct iovec iov = { (void *)p, len };

	return pwritev2(fd, &iov, 1, off, RWF_DONTCACHE) == (ssize_t)len;
}

static int uread(int fd, void *p, size_t len, off_t off)
{
	struct iovec iov = { p, len };

	return preadv2(fd, &iov, 1, off, RWF_DONTCACHE) == (ssize_t)len;
}

static int open_new(const char *name)
{
	int fd = open(path(name), O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		die(name);
	return fd;
}

/* 1. a buffered 2 MiB write is held in a large folio */
static void test_large_exists(void)
{
	int fd = open_new("lf-buffered"), pm, kf;
	unsigned char *m;
	uint64_t ent, flags = 0;
	int ok;

	pattern(buf, FOLIO, 1);
	if (pwrite(fd, buf, FOLIO, 0) != (ssize_t)FOLIO)
		die("buffered write");
	m = mmap(NULL, FOLIO, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		die("mmap");
	ok = m[0] == buf[0];
	pm = open("/proc/self/pagemap", O_RDONLY);
	kf = open("/proc/kpageflags", O_RDONLY);
	if (pm < 0 || kf < 0)
		die("pagemap/kpageflags");
	if (pread(pm, &ent, 8, (uintptr_t)m / PAGE * 8) != 8)
		die("pagemap");
	if (!(ent >> 63) || pread(kf, &flags, 8, (ent & ((1ULL << 55) - 1)) * 8) != 8)
		die("kpageflags");
	check(ok && (flags >> KPF_COMPOUND_HEAD & 1),
	      "large folios: the first page of a buffered 2 MiB write is a compound head (kpageflags %#llx, thp %d)",
	      (unsigned long long)flags, (int)(flags >> KPF_THP & 1));
	munmap(m, FOLIO);
	close(pm);
	close(kf);
	close(fd);
	unlink(path("lf-buffered"));
}

/* 2. a 2 MiB uncached write, read back uncached */
static void test_uncached_2m(void)
{
	int fd = open_new("lf-uncached");
	unsigned char *rb = aligned_alloc(PAGE, FOLIO);
	uint64_t r;

	pattern(buf, FOLIO, 2);
	if (!uwrite(fd, buf, FOLIO, 0))
		die("uncached 2 MiB write");
	r = wait_zero(fd, 30);
	check(r == 0, "2 MiB RWF_DONTCACHE write: %llu pages resident after writeback (want 0)",
	      (unsigned long long)r);
	memset(rb, 0, FOLIO);
	if (!uread(fd, rb, FOLIO, 0))
		die("uncached 2 MiB read");
	check(!memcmp(rb, buf, FOLIO), "2 MiB RWF_DONTCACHE read back: content right");
	r = wait_zero(fd, 10);
	check(r == 0, "2 MiB RWF_DONTCACHE read: %llu pages resident after it (want 0)",
	      (unsigned long long)r);
	free(rb);
	close(fd);
}

/* both CPUs busy with SCHED_FIFO threads while the racy part runs */
static volatile int spin;

static void *spinner(void *arg)
{
	cpu_set_t set;
	struct sched_param sp = { .sched_priority = 50 };

	CPU_ZERO(&set);
	CPU_SET((long)arg, &set);
	sched_setaffinity(0, sizeof(set), &set);
	sched_setscheduler(0, SCHED_FIFO, &sp);
	while (spin)
		;
	return NULL;
}

static void hold_cpus(pthread_t *t, int on)
{
	static cpu_set_t saved;
	static int saved_policy;
	cpu_set_t set;
	struct sched_param sp = { .sched_priority = 60 };
	long i, n = sysconf(_SC_NPROCESSORS_ONLN);

	if (on) {
		sched_getaffinity(0, sizeof(saved), &saved);
		saved_policy = sched_getscheduler(0);
		CPU_ZERO(&set);
		CPU_SET(0, &set);
		sched_setaffinity(0, sizeof(set), &set);
		if (sched_setscheduler(0, SCHED_FIFO, &sp))
			die("SCHED_FIFO");
		spin = 1;
		for (i = 1; i < n && i < 8; i++)
			pthread_create(&t[i], NULL, spinner, (void *)i);
		usleep(1000);
		return;
	}
	spin = 0;
	for (i = 1; i < n && i < 8; i++)
		pthread_join(t[i], NULL);
	sp.sched_priority = 0;
	sched_setscheduler(0, saved_policy, &sp);
	sched_setaffinity(0, sizeof(saved), &saved);
}

/*
 * 3. B1: an uncached overwrite of a written-back 2 MiB range makes one
 * dirty drop-behind 2 MiB folio; a truncate splits it before any
 * writeback.
 */
static void test_split(const char *how, int rounds)
{
	pthread_t t[8];
	int i, fd, splits = 0, fails = 0;
	long long s0, f0, s1, f1;
	uint64_t r, left = 0, dirty_at_split = 0;
	struct cs_stat cs;
	char name[64];

	for (i = 0; i < rounds; i++) {
		snprintf(name, sizeof(name), "lf-split-%s-%d", how, i);
		fd = open_new(name);
		pattern(buf, FOLIO, 10 + i);
		/* on disk first, and nothing cached: the overwrite below
		 * then creates the folio, drop-behind, and xfs's truncate
		 * has no size to log and writes nothing back first
		 */
		if (pwrite(fd, buf, FOLIO, 0) != (ssize_t)FOLIO || fsync(fd))
			die("prepare");
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		if (resident(fd))
			printf("note: %s: %llu pages still cached before the overwrite\n",
			       name, (unsigned long long)resident(fd));
		pattern(buf, FOLIO, 20 + i);
		s0 = vmstat("thp_split_page");
		f0 = vmstat("thp_split_page_failed");
		hold_cpus(t, 1);
		if (!uwrite(fd, buf, FOLIO, 0)) {
			hold_cpus(t, 0);
			die("uncached overwrite");
		}
		if (ftruncate(fd, MIB + PAGE)) {
			hold_cpus(t, 0);
			die("ftruncate");
		}
		cachestat_range(fd, 0, 0, &cs);
		hold_cpus(t, 0);
		s1 = vmstat("thp_split_page");
		f1 = vmstat("thp_split_page_failed");
		splits += s1 > s0;
		fails += f1 > f0;
		dirty_at_split += cs.nr_dirty;
		r = wait_zero(fd, 20);
		left += r;
		printf("  %s round %d: thp_split_page +%lld, _failed +%lld, dirty after split %llu, resident after writeback %llu\n",
		       how, i, s1 - s0, f1 - f0, (unsigned long long)cs.nr_dirty,
		       (unsigned long long)r);
		close(fd);
		unlink(path(name));
	}
	check(splits > 0,
	      "B1 (%s): a dirty drop-behind 2 MiB folio was split in %d of %d rounds (failed splits %d; dirty pages at the splits %llu)",
	      how, splits, rounds, fails, (unsigned long long)dirty_at_split);
	check(left == 0,
	      "B1 (%s): %llu pages resident after writeback of the split folios (want 0)",
	      how, (unsigned long long)left);
}

/* 4. a hole punched into an uncached 2 MiB write */
static void test_punch(void)
{
	int fd = open_new("lf-punch");
	long long s0 = vmstat("thp_split_page"), f0 = vmstat("thp_split_page_failed");
	uint64_t r;

	pattern(buf, FOLIO, 3);
	if (!uwrite(fd, buf, FOLIO, 0))
		die("uncached write");
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, MIB, 64 * 1024))
		die("punch hole");
	r = wait_zero(fd, 30);
	check(r == 0,
	      "hole punched into a 2 MiB uncached write: %llu pages resident (want 0; thp_split_page +%lld, _failed +%lld)",
	      (unsigned long long)r, vmstat("thp_split_page") - s0,
	      vmstat("thp_split_page_failed") - f0);
	close(fd);
}

/*
 * pressure MNT MIB: run by largefolio-guest.sh inside a memory cgroup far
 * smaller than the file.  The file is written and synced first, then
 * overwritten with 1 MiB RWF_DONTCACHE writes: on xfs an overwrite's
 * writeback completes in interrupt context, so every drop goes through
 * patch 4's deferral queue, which holds a folio reference until its
 * worker runs.  Reports what reclaim and the queue did (vmstat deltas) and
 * checks that nothing is left cached and the data is right.
 */
static const char *const pressure_stats[] = {
	"dropbehind_defer", "dropbehind_defer_fail", "pgscan_direct",
	"pgscan_kswapd", "pgsteal_direct", "pgsteal_kswapd", "allocstall_movable",
	"oom_kill", "thp_split_page",
};
#define NSTATS (sizeof(pressure_stats) / sizeof(pressure_stats[0]))

static int pressure(size_t mib)
{
	long long before[NSTATS];
	int fd = open_new("lf-pressure");
	unsigned char *rb = aligned_alloc(PAGE, MIB);
	double t0;
	size_t i, bad = 0;
	uint64_t r;

	for (i = 0; i < mib; i++) {
		pattern(buf, MIB, 1000 + i);
		if (pwrite(fd, buf, MIB, i * MIB) != (ssize_t)MIB)
			die("prepare");
	}
	if (fsync(fd))
		die("fsync");
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	for (i = 0; i < NSTATS; i++)
		before[i] = vmstat(pressure_stats[i]);
	t0 = now();
	for (i = 0; i < mib; i++) {
		pattern(buf, MIB, 5000 + i);
		if (!uwrite(fd, buf, MIB, i * MIB))
			die("uncached overwrite");
	}
	r = wait_zero(fd, 60);
	printf("pressure: %zu MiB overwritten uncached in %.1f s; resident after: %llu pages\n",
	       mib, now() - t0, (unsigned long long)r);
	for (i = 0; i < NSTATS; i++)
		printf("  %s +%lld\n", pressure_stats[i],
		       vmstat(pressure_stats[i]) - before[i]);
	check(r == 0, "pressure: %llu pages of the %zu MiB uncached overwrite resident after writeback (want 0)",
	      (unsigned long long)r, mib);
	for (i = 0; i < mib; i++) {
		if (!uread(fd, rb, MIB, i * MIB))
			die("uncached read back");
		pattern(buf, MIB, 5000 + i);
		bad += !!memcmp(rb, buf, MIB);
	}
	check(!bad, "pressure: content of the %zu MiB right (%zu MiB differ)",
	      mib, bad);
	free(rb);
	close(fd);
	unlink(path("lf-pressure"));
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[2]) : 3;

	if (argc == 4 && !strcmp(argv[1], "pressure")) {
		setvbuf(stdout, NULL, _IOLBF, 0);
		mnt = argv[2];
		buf = aligned_alloc(PAGE, FOLIO);
		return pressure(strtoul(argv[3], NULL, 0));
	}

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: %s MNT [ROUNDS]\n", argv[0]);
		return 2;
	}
	mnt = argv[1];
	buf = aligned_alloc(PAGE, FOLIO);
	if (!buf)
		die("malloc");
	printf("large folios: %ld CPUs, THP %s", sysconf(_SC_NPROCESSORS_ONLN),
	       "enabled=");
	fflush(stdout);
	if (system("cat /sys/kernel/mm/transparent_hugepage/enabled"))
		printf("\n");
	test_large_exists();
	test_uncached_2m();
	test_split("truncate", rounds);
	test_punch();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
