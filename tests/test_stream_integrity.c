/* Suite "stream", data integrity: every write path across unmount,
 * drop_caches and remount, O_DIRECT callers, mmap, a random-operation
 * exerciser compared with an in-memory model, and kill -9 mid-stream. */
#include "stream.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/quota.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- every write path, across unmount, drop_caches and remount ------------------ */
static const char *const paths_rel[] = { "c.dat", "d.mkv", "r.flac", "w.rec", "auto/a.bin" };
static const char *const paths_cls[] = { "cache", "dontcache", "dontcache-read", "dontcache-write",
					 "auto" };
#define NPATHS 5

static void remount_cleanup(void)
{
	char mnt[PATH_MAX];
	snprintf(mnt, sizeof mnt, "%s/mnt-remount-%s", g_tmpdir, sk_names[g_sk]);
	if (is_mounted(mnt, NULL, 0)) {
		run_cmd(NULL, 0, "fusermount3 -u -z '%s' 2>/dev/null || umount -l '%s'", mnt, mnt);
		sleep_ms(200);
	}
}

START_TEST(stream_integrity_remount)
{
	st_begin();
	char tag[64], err[4096];
	snprintf(tag, sizeof tag, "remount-%s", sk_names[g_sk]);
	struct own_mount m;
	ck_assert_msg(own_mount_start(&m, g_sm_root, tag, STREAM_CONF) == 0, "mount: %s", m.err);
	ck_assert_int_eq(mkdir(path_at(m.mnt, "%s", "auto"), 0755) == 0 || errno == EEXIST, 1);
	size_t len = 6 << 20;
	unsigned char *want[NPATHS];
	long long op0[NPATHS];
	for (int i = 0; i < NPATHS; i++)
		op0[i] = stats_get(m.mnt, paths_cls[i], "opened");
	uint32_t rng = 777 + (uint32_t)g_sk;
	for (int i = 0; i < NPATHS; i++) {
		want[i] = malloc(len + (256 << 10));
		fill_pattern(want[i], len, 5000 + (unsigned)i);
		int fd = open(path_at(m.mnt, "%s", paths_rel[i]), O_CREAT | O_TRUNC | O_WRONLY,
			      0644);
		ck_assert_msg(fd >= 0, "create %s: %s", paths_rel[i], strerror(errno));
		/* sequential, odd request sizes */
		for (size_t off = 0; off < len;) {
			size_t n = 1 + xs32(&rng) % (512 << 10);
			if (n > len - off)
				n = len - off;
			ck_assert_int_eq(write(fd, want[i] + off, n), (ssize_t)n);
			off += n;
		}
		/* some overwrites at random places */
		for (int k = 0; k < 64; k++) {
			size_t n = 1 + xs32(&rng) % 70000;
			size_t off = xs32(&rng) % (len - n);
			fill_pattern(want[i] + off, n, xs32(&rng));
			ck_assert_int_eq(pwrite(fd, want[i] + off, n, (off_t)off), (ssize_t)n);
		}
		close(fd);
		/* an O_APPEND tail */
		fd = open(path_at(m.mnt, "%s", paths_rel[i]), O_WRONLY | O_APPEND);
		ck_assert_int_ge(fd, 0);
		fill_pattern(want[i] + len, 256 << 10, 77);
		ck_assert_int_eq(write(fd, want[i] + len, 100000), 100000);
		ck_assert_int_eq(pwrite(fd, want[i] + len + 100000, 162144, 0), 162144);
		close(fd);
	}
	size_t flen = len + (256 << 10);
	for (int i = 0; i < NPATHS; i++)
		ck_assert_msg(stats_get(m.mnt, paths_cls[i], "opened") == op0[i] + 2,
			      "%s: %s.opened grew by %lld, expected 2", paths_rel[i], paths_cls[i],
			      stats_get(m.mnt, paths_cls[i], "opened") - op0[i]);
	int rc = own_mount_stop(&m, err, sizeof err);
	ck_assert_msg(rc == 0, "unmount: %s", err);
	drop_caches();
	ck_assert_msg(own_mount_start(&m, g_sm_root, tag, STREAM_CONF) == 0, "remount: %s", m.err);
	for (int i = 0; i < NPATHS; i++) {
		read_compare(path_at(m.mnt, "%s", paths_rel[i]), want[i], flen, 1 << 20);
		read_compare(path_at(m.exp, "%s", paths_rel[i]), want[i], flen, 1 << 20);
		unlink(path_at(m.exp, "%s", paths_rel[i]));
		free(want[i]);
	}
	rc = own_mount_stop(&m, err, sizeof err);
	ck_assert_msg(rc == 0, "unmount after remount: %s", err);
}
END_TEST

/* ---- O_DIRECT callers ---------------------------------------------------------------- */
START_TEST(stream_odirect)
{
	st_begin();
	const char *rels[] = { "od.mkv", "od.dat" };
	for (int f = 0; f < 2; f++) {
		size_t len = 16 << 20;
		unsigned char *src, *back;
		ck_assert_int_eq(posix_memalign((void **)&src, 4096, len), 0);
		ck_assert_int_eq(posix_memalign((void **)&back, 4096, len), 0);
		fill_pattern(src, len, 6000 + (unsigned)f);
		int fd = open(SM("%s", rels[f]), O_CREAT | O_TRUNC | O_RDWR | O_DIRECT, 0644);
		ck_assert_msg(fd >= 0, "open %s O_DIRECT: %s", rels[f], strerror(errno));
		/* first 4M in 4K requests, the rest in 1M requests */
		for (size_t off = 0; off < len;) {
			size_t n = off < (4 << 20) ? 4096 : 1 << 20;
			ssize_t w = pwrite(fd, src + off, n, (off_t)off);
			ck_assert_msg(w == (ssize_t)n, "%s: O_DIRECT pwrite %zu at %zu: %zd (%s)",
				      rels[f], n, off, w, strerror(errno));
			off += n;
		}
		memset(back, 0, len);
		for (size_t off = 0; off < len; off += 4096) {
			ssize_t r = pread(fd, back + off, 4096, (off_t)off);
			ck_assert_msg(r == 4096, "%s: O_DIRECT pread 4K at %zu: %zd (%s)", rels[f],
				      off, r, strerror(errno));
		}
		ck_assert_msg(memcmp(src, back, len) == 0, "%s: O_DIRECT 4K reads differ", rels[f]);
		memset(back, 0, len);
		for (size_t off = 0; off < len; off += 1 << 20) {
			ssize_t r = pread(fd, back + off, 1 << 20, (off_t)off);
			ck_assert_msg(r == 1 << 20, "%s: O_DIRECT pread 1M at %zu: %zd (%s)",
				      rels[f], off, r, strerror(errno));
		}
		ck_assert_msg(memcmp(src, back, len) == 0, "%s: O_DIRECT 1M reads differ", rels[f]);
		/* a read across EOF */
		ssize_t r = pread(fd, back, 1 << 20, (off_t)len - 8192);
		ck_assert_int_eq(r, 8192);
		close(fd);
		read_compare(SM("%s", rels[f]), src, len, 65536);
		read_compare(SE("%s", rels[f]), src, len, 1 << 20);
		unlink(SE("%s", rels[f]));
		free(src);
		free(back);
	}
}
END_TEST

/* ---- mmap ---------------------------------------------------------------------------- */
START_TEST(stream_mmap)
{
	st_begin();
	size_t len = 1 << 20;
	unsigned char *src = malloc(len);
	fill_pattern(src, len, 7000);
	const char *rels[] = { "m.mkv", "m.flac", "m.rec", "m.dat", "auto/m.bin" };
	/* streaming files map shared where the kernel lets dcfs (see dcfs.conf(5)) */
	const int allowed = stream_mmap_allowed(g_sm.mnt);
	const int streaming[] = { !allowed, !allowed, !allowed, 0, 0 };
	mkdir(SE("auto"), 0755);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(write_file(SE("%s", rels[i]), src, len, 0644), 0);
		int fd = open(SM("%s", rels[i]), O_RDWR);
		ck_assert_int_ge(fd, 0);
		errno = 0;
		void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		int e = errno;
		if (streaming[i]) {
			ck_assert_msg(p == MAP_FAILED && e == ENODEV,
				      "%s: MAP_SHARED PROT_READ: expected ENODEV, got %s", rels[i],
				      p == MAP_FAILED ? strerror(e) : "success");
			errno = 0;
			p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			ck_assert_msg(p == MAP_FAILED && errno == ENODEV,
				      "%s: MAP_SHARED RW: expected ENODEV, got %s", rels[i],
				      p == MAP_FAILED ? strerror(errno) : "success");
		} else {
			ck_assert_msg(p != MAP_FAILED, "%s: MAP_SHARED: %s", rels[i], strerror(e));
			ck_assert(memcmp(p, src, len) == 0);
			munmap(p, len);
			unsigned char *w =
				mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			ck_assert_msg(w != MAP_FAILED, "%s: MAP_SHARED RW: %s", rels[i],
				      strerror(errno));
			memset(w + 4096, 0xA5, 8192);
			ck_assert_int_eq(msync(w, len, MS_SYNC), 0);
			munmap(w, len);
			memset(src + 4096, 0xA5, 8192);
			char b[8192];
			ck_assert_int_eq(pread(fd, b, sizeof b, 4096), (ssize_t)sizeof b);
			ck_assert(memcmp(b, src + 4096, sizeof b) == 0);
		}
		/* MAP_PRIVATE works for every class; private writes stay private */
		unsigned char *q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		ck_assert_msg(q != MAP_FAILED, "%s: MAP_PRIVATE: %s", rels[i], strerror(errno));
		ck_assert_msg(memcmp(q, src, len) == 0, "%s: MAP_PRIVATE content differs", rels[i]);
		q[100] ^= 0xff;
		munmap(q, len);
		close(fd);
		read_compare(SM("%s", rels[i]), src, len, 65536);
		read_compare(SE("%s", rels[i]), src, len, 65536);
		if (!streaming[i])
			fill_pattern(src, len, 7000); /* undo the shared-map change */
		unlink(SE("%s", rels[i]));
	}
	free(src);
}
END_TEST

/* ---- random operations against a model ------------------------------------------------- */
#define RCAP (4u << 20)
#define NTRACE 64
struct mfile {
	const char *rel;
	unsigned char *m;
	size_t size;
	int rw, ro, ap;
	/* the file's last operations, printed with a mismatch */
	struct {
		long op;
		char kind;
		size_t off, len, size;
	} tr[NTRACE];
	unsigned long ntr;
};

static void mf_trace(struct mfile *f, long op, char kind, size_t off, size_t len)
{
	unsigned long i = f->ntr++ % NTRACE;
	f->tr[i].op = op;
	f->tr[i].kind = kind;
	f->tr[i].off = off;
	f->tr[i].len = len;
	f->tr[i].size = f->size;
}

/* to stderr: w write, r read (o: ro handle), t truncate, f fallocate, k keep-size
 * fallocate, p punch, a append, s fsync, S stat, O reopen; size after the op */
static void mf_trace_dump(const struct mfile *f, size_t bad)
{
	unsigned long from = f->ntr > NTRACE ? f->ntr - NTRACE : 0;
	fprintf(stderr, "%s: last %lu operations (* covers offset %zu):\n", f->rel, f->ntr - from,
		bad);
	for (unsigned long n = from; n < f->ntr; n++) {
		unsigned long i = n % NTRACE;
		int covers = bad >= f->tr[i].off && bad < f->tr[i].off + f->tr[i].len;
		fprintf(stderr, "  %c op %ld %c off %zu len %zu size %zu\n", covers ? '*' : ' ',
			f->tr[i].op, f->tr[i].kind, f->tr[i].off, f->tr[i].len, f->tr[i].size);
	}
}

static uint64_t rstate;
static uint64_t rnd(void)
{
	rstate ^= rstate >> 12;
	rstate ^= rstate << 25;
	rstate ^= rstate >> 27;
	return rstate * 2685821657736338717ULL;
}
static size_t rnd_len(void)
{
	unsigned r = (unsigned)(rnd() % 100);
	if (r < 70)
		return 1 + rnd() % 16384;
	if (r < 95)
		return 1 + rnd() % (256 << 10);
	return 1 + rnd() % (1 << 20);
}

static void mf_open(struct mfile *f)
{
	f->rw = open(SM("%s", f->rel), O_RDWR | O_CREAT, 0644);
	f->ro = open(SM("%s", f->rel), O_RDONLY);
	f->ap = open(SM("%s", f->rel), O_WRONLY | O_APPEND);
	ck_assert_msg(f->rw >= 0 && f->ro >= 0 && f->ap >= 0, "open %s: %s", f->rel,
		      strerror(errno));
}

static void mf_close(struct mfile *f)
{
	close(f->rw);
	close(f->ro);
	close(f->ap);
}

static void grow_zero(struct mfile *f, size_t newsize)
{
	if (newsize > f->size)
		memset(f->m + f->size, 0, newsize - f->size);
}

static unsigned char rbuf[(1 << 20) + 4096];
/* write data: slices of a random pool (cheaper than generating per write) */
#define POOL (3u << 20)
static unsigned char *pool;
static const unsigned char *pool_slice(size_t len)
{
	return pool + rnd() % (POOL - len);
}

/* one byte at off, or -1 on error or EOF */
static int byte_at(int fd, size_t off)
{
	unsigned char c;
	return pread(fd, &c, 1, (off_t)off) == 1 ? c : -1;
}

static void check_read(struct mfile *f, int fd, size_t off, size_t len, long op, unsigned seed,
		       const char *what)
{
	ssize_t want = off >= f->size ? 0 : (ssize_t)(len < f->size - off ? len : f->size - off);
	ssize_t r = pread(fd, rbuf, len, (off_t)off);
	mf_trace(f, op, fd == f->ro ? 'o' : 'r', off, len);
	ck_assert_msg(r == want,
		      "seed %u op %ld %s %s: pread(%zu @ %zu) = %zd (%s), model size %zu -> %zd",
		      seed, op, what, f->rel, len, off, r, r < 0 ? strerror(errno) : "", f->size,
		      want);
	if (want > 0 && memcmp(rbuf, f->m + off, (size_t)want) != 0) {
		size_t i = 0;
		while (rbuf[i] == f->m[off + i])
			i++;
		/* tell a stale page cache from lost data: read the byte again through
		 * the same handle, a fresh handle and the backing file */
		int again = byte_at(fd, off + i), fresh = -1, backing = -1;
		int nfd = open(SM("%s", f->rel), O_RDONLY);
		if (nfd >= 0) {
			fresh = byte_at(nfd, off + i);
			close(nfd);
		}
		nfd = open(SE("%s", f->rel), O_RDONLY);
		if (nfd >= 0) {
			backing = byte_at(nfd, off + i);
			close(nfd);
		}
		mf_trace_dump(f, off + i);
		ck_abort_msg(
			"seed %u op %ld %s %s: pread(%zu @ %zu) differs from the model at offset %zu "
			"(got %#x, want %#x), size %zu; read again: same handle %#x, fresh handle %#x, "
			"backing file %#x",
			seed, op, what, f->rel, len, off, off + i, rbuf[i], f->m[off + i], f->size,
			again, fresh, backing);
	}
}

static void do_write(struct mfile *f, size_t off, size_t len, long op, unsigned seed)
{
	const unsigned char *wbuf = pool_slice(len);
	ssize_t w = pwrite(f->rw, wbuf, len, (off_t)off);
	ck_assert_msg(w == (ssize_t)len, "seed %u op %ld %s: pwrite(%zu @ %zu) = %zd (%s)", seed,
		      op, f->rel, len, off, w, strerror(errno));
	grow_zero(f, off);
	memcpy(f->m + off, wbuf, len);
	if (off + len > f->size)
		f->size = off + len;
	mf_trace(f, op, 'w', off, len);
}

/* A reader thread with handles of its own: its reads must never fail or
 * hang while the exerciser's writes are buffered or in flight (what they
 * return is checked by the exerciser's own reads against the model). */
struct reader_ctx {
	char *paths[8];
	int nf;
	_Atomic int stop;
	long reads;
	char failed[256];
};

static void *reader_main(void *arg)
{
	struct reader_ctx *c = arg;
	static unsigned char b[256 << 10];
	uint32_t s = 99;
	int fds[8];
	for (int i = 0; i < c->nf; i++)
		fds[i] = open(c->paths[i], O_RDONLY);
	while (!atomic_load(&c->stop)) {
		int i = (int)(xs32(&s) % (uint32_t)c->nf);
		if (fds[i] < 0)
			continue;
		size_t len = 1 + xs32(&s) % sizeof b;
		off_t off = (off_t)(xs32(&s) % RCAP);
		if (pread(fds[i], b, len, off) < 0) {
			snprintf(c->failed, sizeof c->failed, "pread(%zu @ %lld) of %s: %s", len,
				 (long long)off, c->paths[i], strerror(errno));
			break;
		}
		c->reads++;
		if (c->reads % 64 == 0)
			sleep_ms(1); /* a reader, not a load generator */
	}
	for (int i = 0; i < c->nf; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return NULL;
}

static void random_ops(unsigned seed, long nops)
{
	static struct mfile files[] = { { .rel = "x.mkv" },	 { .rel = "x.dat" },
					{ .rel = "x.flac" },	 { .rel = "x.rec" },
					{ .rel = "auto/x.bin" }, { .rel = "auto/y.mkv" } };
	const int nf = (int)(sizeof files / sizeof files[0]);
	rstate = 0x9E3779B97F4A7C15ULL ^ seed;
	pool = malloc(POOL);
	fill_pattern(pool, POOL, seed);
	mkdir(SE("auto"), 0755);
	for (int i = 0; i < nf; i++) {
		unlink(SE("%s", files[i].rel));
		files[i].m = calloc(1, RCAP);
		files[i].size = 0;
		files[i].ntr = 0;
		mf_open(&files[i]);
	}
	long counts[12] = { 0 };
	/* readers on handles of their own, while writes are in flight */
	struct reader_ctx rc = { .nf = nf };
	for (int i = 0; i < nf; i++)
		rc.paths[i] = strdup(SM("%s", files[i].rel));
	pthread_t rt;
	ck_assert_int_eq(pthread_create(&rt, NULL, reader_main, &rc), 0);
	for (long op = 0; op < nops; op++) {
		struct mfile *f = &files[rnd() % (unsigned)nf];
		unsigned r = (unsigned)(rnd() % 1000);
		if (r < 280) { /* write */
			size_t len = rnd_len();
			size_t lim = f->size + (64 << 10);
			if (lim > RCAP - len)
				lim = RCAP - len;
			do_write(f, rnd() % (lim + 1), len, op, seed);
			counts[0]++;
		} else if (r < 580) { /* read, through either handle */
			size_t len = rnd_len();
			size_t off = rnd() % (f->size + 8192);
			check_read(f, rnd() % 2 ? f->ro : f->rw, off, len, op, seed, "read");
			counts[1]++;
		} else if (r < 590) { /* sequential burst: 1.5M in 128K pieces */
			int wr = rnd() % 2;
			size_t off = (rnd() % (RCAP - (3 << 19))) & ~4095UL;
			if (!wr && off > f->size)
				off = f->size & ~4095UL;
			for (int k = 0; k < 12; k++) {
				if (wr)
					do_write(f, off, 128 << 10, op, seed);
				else
					check_read(f, f->ro, off, 128 << 10, op, seed, "seq-read");
				off += 128 << 10;
			}
			counts[2]++;
		} else if (r < 680) { /* truncate */
			size_t ns = rnd() % 4 == 0 ? 0 : rnd() % RCAP;
			ck_assert_msg(ftruncate(f->rw, (off_t)ns) == 0,
				      "seed %u op %ld %s: ftruncate %zu: %s", seed, op, f->rel, ns,
				      strerror(errno));
			grow_zero(f, ns);
			f->size = ns;
			mf_trace(f, op, 't', ns, 0);
			counts[3]++;
		} else if (r < 730) { /* fallocate, extending */
			size_t len = rnd_len();
			size_t off = rnd() % (RCAP - len);
			ck_assert_msg(fallocate(f->rw, 0, (off_t)off, (off_t)len) == 0,
				      "seed %u op %ld %s: fallocate(0, %zu, %zu): %s", seed, op,
				      f->rel, off, len, strerror(errno));
			grow_zero(f, off + len);
			if (off + len > f->size)
				f->size = off + len;
			mf_trace(f, op, 'f', off, len);
			counts[4]++;
		} else if (r < 750) { /* fallocate KEEP_SIZE */
			size_t len = rnd_len();
			size_t off = rnd() % (RCAP - len);
			ck_assert_msg(
				fallocate(f->rw, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0,
				"seed %u op %ld %s: fallocate(KEEP_SIZE, %zu, %zu): %s", seed, op,
				f->rel, off, len, strerror(errno));
			mf_trace(f, op, 'k', off, len);
			counts[5]++;
		} else if (r < 830) { /* punch hole */
			size_t len = rnd_len();
			size_t off = rnd() % (f->size + 4096);
			if (off + len > RCAP)
				len = RCAP - off;
			ck_assert_msg(fallocate(f->rw, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
						(off_t)off, (off_t)len) == 0,
				      "seed %u op %ld %s: punch hole(%zu, %zu): %s", seed, op,
				      f->rel, off, len, strerror(errno));
			if (off < f->size)
				memset(f->m + off, 0,
				       (off + len < f->size ? off + len : f->size) - off);
			mf_trace(f, op, 'p', off, len);
			counts[6]++;
		} else if (r < 880) { /* append */
			size_t len = rnd() % 3 ? 1 + rnd() % 8192 : rnd_len();
			if (f->size + len > RCAP) {
				ck_assert_int_eq(ftruncate(f->rw, 0), 0);
				f->size = 0;
				mf_trace(f, op, 't', 0, 0);
			}
			const unsigned char *wbuf = pool_slice(len);
			ssize_t w = write(f->ap, wbuf, len);
			ck_assert_msg(w == (ssize_t)len, "seed %u op %ld %s: append %zu: %zd (%s)",
				      seed, op, f->rel, len, w, strerror(errno));
			memcpy(f->m + f->size, wbuf, len);
			f->size += len;
			mf_trace(f, op, 'a', f->size - len, len);
			counts[7]++;
		} else if (r < 940) { /* fsync on any handle: in-flight writes land first */
			int which = (int)(rnd() % 3);
			int fd = which == 0 ? f->rw : which == 1 ? f->ro : f->ap;
			ck_assert_msg((rnd() % 2 ? fdatasync(fd) : fsync(fd)) == 0,
				      "seed %u op %ld %s: fsync: %s", seed, op, f->rel,
				      strerror(errno));
			mf_trace(f, op, 's', 0, 0);
			counts[11]++;
		} else if (r < 960) { /* size */
			struct stat st;
			ck_assert_int_eq(fstat(rnd() % 2 ? f->ro : f->rw, &st), 0);
			ck_assert_msg((size_t)st.st_size == f->size,
				      "seed %u op %ld %s: st_size %lld, model %zu", seed, op,
				      f->rel, (long long)st.st_size, f->size);
			counts[8]++;
		} else if (r < 985) { /* reopen: classified again */
			mf_close(f);
			mf_open(f);
			mf_trace(f, op, 'O', 0, 0);
			counts[9]++;
		} else { /* whole-file check */
			check_read(f, f->ro, 0, f->size < (1 << 20) ? f->size + 1 : 1 << 20, op,
				   seed, "head");
			if (f->size > (1 << 20))
				check_read(f, f->rw, f->size - (1 << 20), 1 << 20, op, seed,
					   "tail");
			counts[10]++;
		}
	}
	atomic_store(&rc.stop, 1);
	pthread_join(rt, NULL);
	for (int i = 0; i < nf; i++)
		free(rc.paths[i]);
	ck_assert_msg(!rc.failed[0], "concurrent reader: %s", rc.failed);
	/* final: every file through a fresh handle and on the backing fs */
	for (int i = 0; i < nf; i++) {
		struct mfile *f = &files[i];
		mf_close(f);
		read_compare(SM("%s", f->rel), f->m, f->size, 65536);
		read_compare(SE("%s", f->rel), f->m, f->size, 1 << 20);
		unlink(SE("%s", f->rel));
		free(f->m);
	}
	free(pool);
	printf("stream-%s random ops seed %u: %ld ops (write %ld read %ld seq %ld trunc %ld falloc %ld "
	       "keep %ld punch %ld append %ld stat %ld reopen %ld check %ld fsync %ld), "
	       "concurrent reader: %ld reads\n",
	       sk_names[g_sk], seed, nops, counts[0], counts[1], counts[2], counts[3], counts[4],
	       counts[5], counts[6], counts[7], counts[8], counts[9], counts[10], counts[11],
	       (long)rc.reads);
	fflush(stdout);
}

START_TEST(stream_random_ops)
{
	st_begin();
	/* 100k operations over the three filesystems */
	static const long nops[] = { 25000, 25000, 50000 };
	long long sw0 = stats_get(g_sm.mnt, "auto", "switched");
	random_ops(0xdc0 + (unsigned)g_sk, nops[g_sk]);
	long long sw1 = stats_get(g_sm.mnt, "auto", "switched");
	ck_assert_msg(sw1 > sw0, "the exerciser never switched an auto handle (auto.switched %lld)",
		      sw1);
}
END_TEST

/* ---- kill -9 mid-stream: what fsync returned success for is on disk ---------------- */
START_TEST(stream_kill9)
{
	st_begin();
	char tag[64];
	snprintf(tag, sizeof tag, "kill9-%s", sk_names[g_sk]);
	struct own_mount m;
	ck_assert_msg(own_mount_start(&m, g_sm_root, tag, STREAM_CONF) == 0, "mount: %s", m.err);
	size_t len = 24 << 20, synced = 0, off = 0;
	unsigned char *src = malloc(len);
	fill_pattern(src, len, 4400);
	int fd = open(path_at(m.mnt, "%s", "k.mkv"), O_CREAT | O_TRUNC | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	uint32_t rng = 4401;
	/* odd sizes and 1 MiB ones: buffered, pipelined and in flight */
	for (int round = 0; round < 3; round++) {
		size_t until = off + (6 << 20);
		while (off < until) {
			size_t n = xs32(&rng) % 2 ? 1 << 20 : 1 + xs32(&rng) % 70000;
			if (n > until - off)
				n = until - off;
			ck_assert_int_eq(write(fd, src + off, n), (ssize_t)n);
			off += n;
		}
		if (round < 2) {
			ck_assert_int_eq(fsync(fd), 0);
			synced = off;
		}
	}
	/* the daemon dies with the last 6 MiB acknowledged, not synced */
	pid_t pid = find_daemon_for(m.mnt);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(kill(pid, SIGKILL), 0);
	close(fd);
	own_mount_kill(&m);
	size_t got_len = 0;
	unsigned char *got = slurp(path_at(m.exp, "%s", "k.mkv"), &got_len);
	ck_assert_ptr_nonnull(got);
	printf("stream-%s kill -9: %zu bytes fsynced, %zu written, %zu on disk\n", sk_names[g_sk],
	       synced, off, got_len);
	fflush(stdout);
	ck_assert_msg(got_len >= synced, "%zu bytes on disk, %zu fsynced", got_len, synced);
	ck_assert_msg(memcmp(got, src, synced) == 0, "fsynced data differs after kill -9");
	free(got);
	free(src);
	unlink(path_at(m.exp, "%s", "k.mkv"));
}
END_TEST

void stream_integrity_tests(TCase *tc, enum skind k)
{
	(void)k;
	ADD_STREAM_TEST(tc, stream_integrity_remount);
	ADD_STREAM_TEST(tc, stream_odirect);
	ADD_STREAM_TEST(tc, stream_mmap);
	ADD_STREAM_TEST(tc, stream_random_ops);
}

void stream_kill9_tests(TCase *tc, enum skind k)
{
	if (k != SK_BTRFS)
		ADD_STREAM_TEST(tc, stream_kill9);
}

void stream_integrity_cleanup(void)
{
	remount_cleanup();
}
