/* Suite "coherence": what one process wrote is what every other reads, on
 * every I/O path of one file at once (fusefs/coherence.c, dcfs(8) "DATA
 * COHERENCE").
 *
 * TCases, each with a daemon of its own: coh-shipped (xfs) (the [global]
 * section of the shipped dcfs.conf: small files cached by the kernel, large
 * ones auto), coh-streamed (ext4, every file through the streaming
 * engine) and coh-auto (xfs, every file auto, switching to uncached I/O after 1 MiB).  In
 * each, [process] rules give the exerciser handles of every class on one
 * file.
 *
 *  - coh_aio_odirect: one process loops AIO O_DIRECT writes of 640 KiB with
 *    changing content, two others loop buffered preads; a read that began
 *    after a write completed must not return older data (issue 24 #2).
 *  - coh_mmap_pwrite: holetest -w: a thread pwrites 8 bytes into every page
 *    while another writes into the same pages through MAP_SHARED; no write
 *    may be lost (issue 24 #3).
 *  - coh_mode_side_effects: a mode changed by an ACL shows through the
 *    mount at once (issue 24 #6).
 *  - coh_setid_write_paths: set-id bits after a write by an unprivileged
 *    user on every write path and class (write in each class, O_DIRECT,
 *    AIO, adopted writes, splice, copy_file_range, fallocate, punch hole,
 *    zero range, ftruncate, O_TRUNC, a shared mapping), read at once,
 *    against the same write on a native file (issue 24 #6, issue 38 #3).
 *  - coh_size_after_listing: the size after extending writes while the
 *    directory is listed or the file linked (issue 38 #1).
 *  - coh_outside_append: a native append while the mount holds the
 *    attributes, then an open through the mount reads to the new end.
 *  - coh_exerciser: several handles of one file opened different ways
 *    (default class, O_DIRECT, streamed, auto, cached, shared mappings),
 *    random reads, writes, copy_file_range, truncate, fallocate, fsync and
 *    posix_fadvise(DONTNEED) on the mount and the backing file (also from a
 *    second process every 50 ms), a third process that only opens and
 *    closes the file, every read, size and mapping checked against a model,
 *    and the end of the file after every operation (issue 24 #1, issue 38
 *    #1 and the exerciser).  DCFS_COH_SECONDS sets its time per TCase
 *    (default 15 s), DCFS_COH_SEED its seed; it prints both and its counts.
 */
#include "own_mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/aio_abi.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The [global] section of the shipped dcfs.conf (min_size 16M, auto). */
#define COH_RULES                                     \
	"\n[process cohstream]\npolicy = dontcache\n" \
	"\n[process cohauto]\npolicy = auto\n"        \
	"\n[process cohcache]\npolicy = cache\n"
static const char SHIPPED_CONF[] =
	"[global]\ndefault = auto\nmin_size = 16M\nauto_threshold = 64M\nwindow = 8M\n"
	"readahead = 4M\nprefetch = yes\npassthrough_reads = yes\n"
	"passthrough_uncached = yes\nfuse_readahead = yes\nwriteback_limit = 8M\n"
	"inflight = 8M\ninflight_mount = 64M\n" COH_RULES;
/* Streamed: writes by the kernel with write-behind where it may (the default). */
static const char STREAMED_CONF[] = "[global]\ndefault = dontcache\nmin_size = 0\n" COH_RULES;
/* Streamed by the daemon's engine only. */
static const char ENGINE_CONF[] =
	"[global]\ndefault = dontcache\nmin_size = 0\npassthrough_writes = no\n" COH_RULES;
static const char AUTO_CONF[] =
	"[global]\ndefault = auto\nmin_size = 0\nauto_threshold = 1M\nreadahead = 256K\n" COH_RULES;

enum cohkind {
	CO_SHIPPED,
	CO_STREAMED,
	CO_AUTO,
	CO_ENGINE,
	CO_N
};
static const char *const co_names[] = { "coh-shipped", "coh-streamed", "coh-auto", "coh-engine" };
static const char *const co_confs[] = { SHIPPED_CONF, STREAMED_CONF, AUTO_CONF, ENGINE_CONF };
static enum cohkind g_co;
static struct own_mount g_cm;
static char g_root[PATH_MAX]; /* the backing filesystem's root, for native references */

/*
 * DCFS_COH_FREE_MIB=N (not set in make check): leave only N MiB free on the
 * backing filesystem, as later suites of a whole run find it, so the write
 * pipe works near its low-space threshold (write_pipe.c).
 */
static void co_fill(const char *root)
{
	const char *env = getenv("DCFS_COH_FREE_MIB");
	struct statvfs sv;
	char path[PATH_MAX];

	if (!env || statvfs(root, &sv) < 0)
		return;
	uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize, keep = strtoull(env, NULL, 0) << 20;
	if (avail <= keep)
		return;
	snprintf(path, sizeof path, "%s/filler-%d", root, (int)getpid());
	int fd = open(path, O_CREAT | O_WRONLY, 0600);
	if (fd >= 0) {
		if (fallocate(fd, 0, 0, (off_t)(avail - keep)) < 0)
			fprintf(stderr, "co_fill: fallocate: %s\n", strerror(errno));
		close(fd);
	}
}

static void co_setup(enum cohkind k)
{
	char err[512];
	/* streamed on ext4, the others on xfs: each engine on both kinds */
	const char *root = backing_root(k == CO_STREAMED ? FS_EXT4 : FS_XFS, err, sizeof err);

	g_co = k;
	memset(&g_cm, 0, sizeof g_cm);
	if (!root) {
		snprintf(g_cm.err, sizeof g_cm.err, "backing fs: %s", err);
		return;
	}
	snprintf(g_root, sizeof g_root, "%s", root);
	own_mount_start(&g_cm, root, co_names[k], co_confs[k]);
	chmod(g_cm.exp, 0777);
	co_fill(root);
}
static void co_setup_shipped(void)
{
	co_setup(CO_SHIPPED);
}
static void co_setup_streamed(void)
{
	co_setup(CO_STREAMED);
}
static void co_setup_auto(void)
{
	co_setup(CO_AUTO);
}
static void co_setup_engine(void)
{
	co_setup(CO_ENGINE);
}
static void co_teardown(void)
{
	own_mount_kill(&g_cm);
}

static void co_begin(const char *name)
{
	ck_assert_msg(!g_cm.err[0], "setup failed: %s", g_cm.err);
	ck_assert_msg(is_mounted(g_cm.mnt, NULL, 0), "%s is not mounted (daemon died?)", g_cm.mnt);
	int lfd = open(g_cm.d.log, O_WRONLY | O_APPEND);
	if (lfd >= 0) {
		dprintf(lfd, "=== dcfs-tests: begin %s (%s)\n", name, co_names[g_co]);
		close(lfd);
	}
	umask(022);
}
#define CO_BEGIN() co_begin(__func__)

#define CMNT(rel) path_at(g_cm.mnt, "%s", rel)
#define CEXP(rel) path_at(g_cm.exp, "%s", rel)

/* open(2) as a process named comm, whose [process] rule picks the class. */
static int open_named(const char *path, int flags, const char *comm)
{
	char saved[16] = "";
	int fd;

	prctl(PR_GET_NAME, saved, 0, 0, 0);
	if (comm)
		prctl(PR_SET_NAME, comm, 0, 0, 0);
	fd = open(path, flags);
	prctl(PR_SET_NAME, saved, 0, 0, 0);
	return fd;
}

static double co_seconds(double dflt)
{
	const char *s = getenv("DCFS_COH_SECONDS");
	double v = s ? atof(s) : 0;
	return (v > 0 ? v : dflt) * (g_sanitized ? 2 : 1);
}

/* ---- AIO O_DIRECT writer, buffered readers ------------------------------------------- */
#define AIO_LEN ((size_t)640 << 10)
#define AIO_BLK 4096

struct aio_shared {
	_Atomic unsigned done; /* generation of the last completed write */
	_Atomic int stop;
	_Atomic long reads, stale;
	char first[256];
};

static void aio_reader(struct aio_shared *sh, const char *path)
{
	int fd = open(path, O_RDONLY);
	unsigned char *b = malloc(AIO_LEN);

	if (fd < 0 || !b)
		_exit(2);
	while (!atomic_load(&sh->stop)) {
		unsigned g = atomic_load(&sh->done);
		if (pread(fd, b, AIO_LEN, 0) != (ssize_t)AIO_LEN)
			_exit(3);
		atomic_fetch_add(&sh->reads, 1);
		for (size_t o = 0; o < AIO_LEN; o += AIO_BLK) {
			unsigned v;
			memcpy(&v, b + o, sizeof v);
			if (v < g) {
				if (atomic_fetch_add(&sh->stale, 1) == 0)
					snprintf(
						sh->first, sizeof sh->first,
						"block at %zu holds write %u, write %u had completed",
						o, v, g);
				break;
			}
		}
	}
	_exit(0);
}

static long io_setup_(unsigned n, aio_context_t *ctx)
{
	return syscall(SYS_io_setup, n, ctx);
}
static long io_destroy_(aio_context_t ctx)
{
	return syscall(SYS_io_destroy, ctx);
}
static long io_submit_(aio_context_t ctx, long n, struct iocb **v)
{
	return syscall(SYS_io_submit, ctx, n, v);
}
static long io_getevents_(aio_context_t ctx, long min, long max, struct io_event *ev)
{
	return syscall(SYS_io_getevents, ctx, min, max, ev, NULL);
}

/* Returns the stale reads seen; fills what with a description. */
static long aio_round(const char *path, size_t fsize, int writes, char *what, size_t wlen)
{
	struct aio_shared *sh =
		mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	unsigned char *buf;
	aio_context_t ctx = 0;
	pid_t kids[2];
	int fd;

	ck_assert(sh != MAP_FAILED);
	memset(sh, 0, sizeof *sh);
	buf = calloc(1, fsize);
	ck_assert_int_eq(write_file(path, buf, fsize, 0644), 0);
	free(buf);
	ck_assert_int_eq(posix_memalign((void **)&buf, AIO_BLK, AIO_LEN), 0);
	fd = open(path, O_RDWR | O_DIRECT);
	ck_assert_msg(fd >= 0, "open O_DIRECT: %s", strerror(errno));
	ck_assert_int_eq(io_setup_(4, &ctx), 0);
	fflush(NULL);
	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			aio_reader(sh, path);
	}
	double end = now_s() + 15 * deadline_scale();
	int done = 0;
	for (unsigned g = 1; (int)g <= writes && now_s() < end; g++) {
		for (size_t o = 0; o < AIO_LEN; o += sizeof g)
			memcpy(buf + o, &g, sizeof g);
		struct iocb cb = { 0 }, *cbs[1] = { &cb };
		struct io_event ev;
		cb.aio_fildes = (uint32_t)fd;
		cb.aio_lio_opcode = IOCB_CMD_PWRITE;
		cb.aio_buf = (uint64_t)(uintptr_t)buf;
		cb.aio_nbytes = AIO_LEN;
		cb.aio_offset = 0;
		ck_assert_int_eq(io_submit_(ctx, 1, cbs), 1);
		ck_assert_int_eq(io_getevents_(ctx, 1, 1, &ev), 1);
		ck_assert_msg(ev.res == (int64_t)AIO_LEN, "aio write: %lld", (long long)ev.res);
		atomic_store(&sh->done, g);
		done++;
		/* let the readers fill the cache between writes */
		usleep(200);
	}
	atomic_store(&sh->stop, 1);
	for (int i = 0; i < 2; i++) {
		int st;
		waitpid(kids[i], &st, 0);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reader failed: %d", st);
	}
	io_destroy_(ctx);
	close(fd);
	free(buf);
	long stale = atomic_load(&sh->stale);
	snprintf(what, wlen, "%s: %d writes, %ld reads, %ld stale; first: %s", path, done,
		 atomic_load(&sh->reads), stale, sh->first);
	munmap(sh, sizeof *sh);
	return stale;
}

START_TEST(coh_aio_odirect)
{
	CO_BEGIN();
	char a[600], b[600];
	int writes = g_sanitized ? 100 : 300;
	/* a small file (cache class where shipped) and a large one (auto) */
	long s1 = aio_round(CMNT("aio-small.dat"), 1u << 20, writes, a, sizeof a);
	long s2 = aio_round(CMNT("aio-large.dat"), 17u << 20, writes, b, sizeof b);
	printf("coh_aio_odirect %s: %s | %s\n", co_names[g_co], a, b);
	char *log = read_file_str(g_cm.d.log);
	int late = strstr(log, "answered before the FUSE cache") != NULL;
	free(log);
	ck_assert_msg(s1 == 0 && s2 == 0,
		      "stale buffered reads after AIO O_DIRECT writes: %s | %s%s", a, b,
		      late ? " (the daemon logged a late invalidation)" : "");
}
END_TEST

/* ---- holetest -w: pwrite and MAP_SHARED writes into the same pages ------------------ */
struct hole_arg {
	int fd;
	unsigned char *map;
	long npages;
	uint64_t id;
};

static void *hole_pwrite(void *p)
{
	struct hole_arg *a = p;
	for (long i = 0; i < a->npages; i++)
		if (pwrite(a->fd, &a->id, sizeof a->id, i * 4096 + 1024) != sizeof a->id)
			return (void *)1;
	return NULL;
}

static void *hole_mapwrite(void *p)
{
	struct hole_arg *a = p;
	for (long i = 0; i < a->npages; i++)
		memcpy(a->map + i * 4096 + 3072, &a->id, sizeof a->id);
	return NULL;
}

static long hole_check(const unsigned char *d, long npages, const uint64_t id[2], char *first,
		       size_t flen)
{
	long errs = 0;
	for (long i = 0; i < npages; i++) {
		for (int t = 0; t < 2; t++) {
			uint64_t v;
			memcpy(&v, d + i * 4096 + (t ? 3072 : 1024), sizeof v);
			if (v != id[t] && errs++ == 0)
				snprintf(first, flen, "page %ld: %s marker %#llx != %#llx", i,
					 t ? "mapped" : "pwrite", (unsigned long long)v,
					 (unsigned long long)id[t]);
		}
	}
	return errs;
}

/* One holetest pass with the file sized one of three ways; returns errors. */
static long hole_pass(int how, size_t sz, char *first, size_t flen)
{
	const char *path = CMNT("hole.dat");
	unlink(path);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
	ck_assert_msg(fd >= 0, "create: %s", strerror(errno));
	if (how == 1)
		ck_assert_int_eq(posix_fallocate(fd, 0, (off_t)sz), 0);
	else
		ck_assert_int_eq(ftruncate(fd, (off_t)sz), 0);
	unsigned char *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_msg(m != MAP_FAILED, "mmap: %s", strerror(errno));
	if (how == 0) {
		memset(m, 0, sz);
		ck_assert_int_eq(msync(m, sz, MS_SYNC), 0);
	}
	struct hole_arg a[2] = { { fd, m, (long)(sz / 4096), 0x1111111111111111ULL },
				 { fd, m, (long)(sz / 4096), 0x2222222222222222ULL } };
	pthread_t t[2];
	ck_assert_int_eq(pthread_create(&t[0], NULL, hole_pwrite, &a[0]), 0);
	ck_assert_int_eq(pthread_create(&t[1], NULL, hole_mapwrite, &a[1]), 0);
	void *r0, *r1;
	pthread_join(t[0], &r0);
	pthread_join(t[1], &r1);
	ck_assert_msg(!r0, "pwrite failed");
	uint64_t id[2] = { a[0].id, a[1].id };
	long errs = hole_check(m, a[0].npages, id, first, flen);
	munmap(m, sz);
	ck_assert_int_eq(close(fd), 0);
	/* and what reached the file, seen through the mount and the backing file */
	size_t n = 0;
	unsigned char *d = slurp(path, &n);
	ck_assert(d && n == sz);
	errs += hole_check(d, a[0].npages, id, first[0] ? first + strlen(first) : first,
			   first[0] ? 0 : flen);
	free(d);
	d = slurp(CEXP("hole.dat"), &n);
	ck_assert(d && n == sz);
	errs += hole_check(d, a[0].npages, id, first, first[0] ? 0 : flen);
	free(d);
	unlink(path);
	return errs;
}

START_TEST(coh_mmap_pwrite)
{
	CO_BEGIN();
	size_t sz = (size_t)(g_sanitized ? 2 : 8) << 20;
	long errs = 0;
	int bad = 0, runs = 0;
	char first[256] = "";
	int first_how = -1;
	for (int round = 0; round < 2; round++)
		for (int how = 0; how < 3; how++) {
			long e = hole_pass(how, sz, first, sizeof first);
			if (e && first_how < 0)
				first_how = how;
			errs += e;
			bad += e != 0;
			runs++;
		}
	printf("coh_mmap_pwrite %s: %d of %d passes lost writes (%ld markers)\n", co_names[g_co],
	       bad, runs, errs);
	/* how: 0 written and synced through the mapping first, 1 fallocated, 2 sparse */
	ck_assert_msg(errs == 0, "%d of %d passes lost writes (%ld markers); first (how %d): %s",
		      bad, runs, errs, first_how, first);
}
END_TEST

/* ---- copy_file_range while the file is read and its cache dropped ------------------- */
struct cfr_reader {
	int fd, bfd;
	_Atomic int stop;
};

/* Reads the copies' destination half and drops the caches, unchecked. */
static void *cfr_read_loop(void *p)
{
	struct cfr_reader *r = p;
	char *b = malloc(256 << 10);
	uint64_t x = 88172645463325252ULL;
	while (!atomic_load(&r->stop)) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		off_t off = (off_t)(4u << 20) + (off_t)((x % 16) << 18);
		if (pread(r->fd, b, 256 << 10, off) < 0)
			break;
		posix_fadvise(r->fd, 0, 0, POSIX_FADV_DONTNEED);
		posix_fadvise(r->bfd, 0, 0, POSIX_FADV_DONTNEED);
	}
	free(b);
	return NULL;
}

START_TEST(coh_cfr_reread)
{
	CO_BEGIN();
	const size_t sz = 8u << 20, len = 1u << 20;
	char *src = malloc(len), *got = malloc(len), *init = malloc(sz);
	fill_pattern(init, sz, 7);
	ck_assert_int_eq(write_file(CMNT("cfr.dat"), init, sz, 0644), 0);
	/* an auto handle switches to uncached I/O after a megabyte streamed */
	int fd = open_named(CMNT("cfr.dat"), O_RDWR, "cohauto");
	ck_assert(fd >= 0);
	for (size_t o = 0; o < (2u << 20); o += len)
		ck_assert_int_eq(pread(fd, got, len, (off_t)o), (ssize_t)len);
	struct cfr_reader r = { fd, open(CEXP("cfr.dat"), O_RDONLY), 0 };
	ck_assert(r.bfd >= 0);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, cfr_read_loop, &r), 0);
	int copies = 0, stale = 0;
	char first[256] = "";
	double end = now_s() + 10 * deadline_scale();
	for (unsigned i = 0; i < 400 && now_s() < end; i++) {
		off_t from = (off_t)((i % 3) << 20),
		      to = (off_t)(4u << 20) + (off_t)((i % 4) << 20);
		fill_pattern(src, len, 1000 + i);
		ck_assert_int_eq(pwrite(fd, src, len, from), (ssize_t)len);
		loff_t li = from, lo = to;
		ssize_t n = copy_file_range(fd, &li, fd, &lo, len, 0);
		ck_assert_msg(n == (ssize_t)len, "copy_file_range: %zd (%s)", n, strerror(errno));
		copies++;
		ck_assert_int_eq(pread(fd, got, len, to), (ssize_t)len);
		if (memcmp(got, src, len) != 0 && stale++ == 0) {
			size_t b = 0;
			while (got[b] == src[b])
				b++;
			snprintf(first, sizeof first, "copy %u to %lld: byte %zu differs", i,
				 (long long)to, b);
		}
	}
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	close(r.bfd);
	close(fd);
	printf("coh_cfr_reread %s: %d copies, %d read back stale\n", co_names[g_co], copies, stale);
	ck_assert_msg(!stale, "%d of %d copies read back stale; first: %s", stale, copies, first);
	free(src);
	free(got);
	free(init);
}
END_TEST

/* ---- the mode after side effects of the backing filesystem ---------------------------- */
/*
 * Appends to out what differs between the mode the mount shows and the
 * backing file's.  statx() for the mode alone, as `stat -c %a` and
 * `test -u` ask: the kernel refreshes only what it knows to be stale.
 */
static void mode_compare(const char *what, const char *rel, char *out, size_t olen)
{
	struct statx sx;
	struct stat sb;
	ck_assert_int_eq(statx(AT_FDCWD, CMNT(rel), 0, STATX_MODE, &sx), 0);
	ck_assert_int_eq(stat(CEXP(rel), &sb), 0);
	if ((sx.stx_mode & 07777) != (sb.st_mode & 07777)) {
		size_t l = strlen(out);
		snprintf(out + l, olen - l, "%s%s: mount %o, backing %o", l ? "; " : "", what,
			 sx.stx_mode & 07777, sb.st_mode & 07777);
	}
}

/* Set-id bits after another user's writes: coh_setid_write_paths. */
START_TEST(coh_mode_side_effects)
{
	CO_BEGIN();
	char out[2048] = "";
	/* an ACL that changes the group class bits */
	ck_assert_int_eq(write_file(CMNT("acl.dat"), "a", 1, 0644), 0);
	struct stat st;
	ck_assert_int_eq(stat(CMNT("acl.dat"), &st), 0);
	char cmd_out[512];
	int rc = run_cmd(cmd_out, sizeof cmd_out, "setfacl -m u:%d:rw,m::rwx '%s'", TEST_UID2,
			 CMNT("acl.dat"));
	ck_assert_msg(rc == 0, "setfacl: %s", cmd_out);
	mode_compare("setfacl", "acl.dat", out, sizeof out);
	ck_assert_msg(!out[0], "mode differs right after the change: %s", out);
}
END_TEST

/* ---- set-id bits after a write by an unprivileged user, on every write path ------------- */
/*
 * Each way a file is written, made by an unprivileged user through the
 * mount and on a native file of the backing filesystem: the mode the mount
 * shows right after (statx(STATX_MODE), as `stat -c %A` asks; no sleep)
 * must be the native file's and the backing file's (issue 38 #3).  The
 * class comes from the [process] rules of COH_RULES; "cache" is kernel
 * passthrough where the kernel offers it.
 */
enum sp {
	SP_WRITE,
	SP_STREAM,
	SP_AUTO,
	SP_CACHE,
	SP_ODIRECT,
	SP_AIO,
	SP_ADOPT,
	SP_SPLICE,
	SP_CFR,
	SP_FALLOC,
	SP_PUNCH,
	SP_ZERO,
	SP_FTRUNC,
	SP_OTRUNC,
	SP_MAPWRITE,
	SP_HANDOFF,
	SP_N
};
static const char *const sp_names[] = { "write",
					"write (stream)",
					"write (auto)",
					"write (cache)",
					"O_DIRECT write",
					"AIO O_DIRECT write",
					"4000 + 1 MiB writes (stream)",
					"splice",
					"copy_file_range",
					"fallocate",
					"punch hole",
					"zero range",
					"ftruncate",
					"O_TRUNC open",
					"MAP_SHARED write",
					"write (cache) after root's open and setuid" };
static const char *const sp_comm[] = { NULL, "cohstream", "cohauto",   "cohcache",
				       NULL, "cohstream", "cohstream", "cohcache",
				       NULL, NULL,	  NULL,	       NULL,
				       NULL, NULL,	  "cohcache",  "cohcache" };

struct sp_arg {
	const char *path, *src;
	enum sp op;
};

static long sp_aio_write(int fd, void *buf, size_t len)
{
	aio_context_t ctx = 0;
	struct iocb cb = { 0 }, *cbs[1] = { &cb };
	struct io_event ev;
	long r = -1;

	if (io_setup_(1, &ctx) < 0)
		return -1;
	cb.aio_fildes = (uint32_t)fd;
	cb.aio_lio_opcode = IOCB_CMD_PWRITE;
	cb.aio_buf = (uint64_t)(uintptr_t)buf;
	cb.aio_nbytes = len;
	if (io_submit_(ctx, 1, cbs) == 1 && io_getevents_(ctx, 1, 1, &ev) == 1)
		r = ev.res == (int64_t)len ? 0 : (errno = ev.res < 0 ? (int)-ev.res : EIO, -1);
	io_destroy_(ctx);
	return r;
}

/* The write, in a child running as the unprivileged user. */
static long sp_op_as_user(void *p)
{
	struct sp_arg *a = p;
	static char big[(1 << 20) + 4000];
	int flags = a->op == SP_OTRUNC			     ? O_WRONLY | O_TRUNC
		    : a->op == SP_ODIRECT || a->op == SP_AIO ? O_RDWR | O_DIRECT
							     : O_RDWR;
	int fd = open_named(a->path, flags, sp_comm[a->op]), pfd[2];
	void *al = NULL;
	long r = 0;

	if (fd < 0)
		return -1;
	if (posix_memalign(&al, 4096, 4096))
		return -1;
	memset(al, 'd', 4096);
	switch (a->op) {
	case SP_WRITE:
	case SP_STREAM:
	case SP_AUTO:
	case SP_CACHE: r = pwrite(fd, "w", 1, 100) == 1 ? 0 : -1; break;
	case SP_ODIRECT: r = pwrite(fd, al, 4096, 0) == 4096 ? 0 : -1; break;
	case SP_AIO: r = sp_aio_write(fd, al, 4096); break;
	case SP_ADOPT:
		memset(big, 'a', sizeof big);
		r = pwrite(fd, big, 4000, 0) == 4000 &&
				    pwrite(fd, big + 4000, 1 << 20, 4000) == 1 << 20
			    ? 0
			    : -1;
		break;
	case SP_SPLICE: {
		loff_t off = 10;
		r = pipe(pfd);
		if (!r) {
			r = write(pfd[1], "splice", 6) == 6 &&
					    splice(pfd[0], NULL, fd, &off, 6, 0) == 6
				    ? 0
				    : -1;
			close(pfd[0]);
			close(pfd[1]);
		}
		break;
	}
	case SP_CFR: {
		int in = open(a->src, O_RDONLY);
		loff_t li = 0, lo = 0;
		r = in >= 0 && copy_file_range(in, &li, fd, &lo, 4096, 0) == 4096 ? 0 : -1;
		if (in >= 0)
			close(in);
		break;
	}
	case SP_FALLOC: r = fallocate(fd, 0, 0, 65536); break;
	case SP_PUNCH:
		r = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096);
		break;
	case SP_ZERO: r = fallocate(fd, FALLOC_FL_ZERO_RANGE, 0, 4096); break;
	case SP_FTRUNC: r = ftruncate(fd, 2048); break;
	case SP_MAPWRITE: {
		char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED && errno == ENODEV) {
			r = 0; /* streamed files without FUSE_DIRECT_IO_ALLOW_MMAP */
			break;
		}
		r = m == MAP_FAILED ? -1 : 0;
		if (!r) {
			m[200] = 'm';
			r = msync(m, 4096, MS_SYNC);
			munmap(m, 4096);
		}
		break;
	}
	default: break;
	}
	int e = errno;
	free(al);
	close(fd);
	errno = e;
	return r;
}

/*
 * The write in a child running as the unprivileged user; SP_HANDOFF: the
 * child opens the file as root and writes after giving its privileges up,
 * as a daemon that drops them after opening its files does.
 */
static struct res sp_run(struct sp_arg *a)
{
	if (a->op != SP_HANDOFF)
		return run_as(TEST_UID, TEST_GID, sp_op_as_user, a);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open_named(a->path, O_WRONLY, sp_comm[a->op]);
		if (fd < 0 || setgroups(0, NULL) < 0 ||
		    setresgid(TEST_GID, TEST_GID, TEST_GID) < 0 ||
		    setresuid(TEST_UID, TEST_UID, TEST_UID) < 0)
			_exit(2);
		_exit(pwrite(fd, "h", 1, 100) == 1 && close(fd) == 0 ? 0 : 3);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	struct res r = { WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1, EIO };
	return r;
}

/* A file of 8 KiB with mode, owned by the test user or by root. */
static void sp_make(const char *path, mode_t mode, bool users)
{
	static char data[8192];
	memset(data, 'i', sizeof data);
	unlink(path);
	ck_assert_int_eq(write_file(path, data, sizeof data, 0644), 0);
	if (users)
		ck_assert_int_eq(chown(path, TEST_UID, TEST_GID), 0);
	ck_assert_int_eq(chmod(path, mode), 0);
}

START_TEST(coh_setid_write_paths)
{
	CO_BEGIN();
	/* owner's files (writer in the group) and root's (writer not in it) */
	static const struct {
		mode_t mode;
		bool users;
	} modes[] = {
		{ 04755, true },  { 06744, true },  { 06775, true },
		{ 06777, false }, { 06646, false },
	};
	char native[PATH_MAX], out[8192] = "", src[PATH_MAX];
	int n = 0, bad = 0;

	snprintf(native, sizeof native, "%s/setid-native-%s", g_root, co_names[g_co]);
	rm_rf(native);
	ck_assert_int_eq(mkdir(native, 0755), 0);
	ck_assert_int_eq(mkdir(CMNT("sid"), 0755), 0);
	snprintf(src, sizeof src, "%s/src", native);
	static char sbuf[4096];
	ck_assert_int_eq(write_file(src, sbuf, sizeof sbuf, 0644), 0);
	ck_assert_int_eq(write_file(CMNT("sid/src"), sbuf, sizeof sbuf, 0644), 0);
	for (int op = 0; op < SP_N; op++) {
		for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++, n++) {
			char rel[64], nat[PATH_MAX];
			snprintf(rel, sizeof rel, "sid/f%d-%zu.dat", op, m);
			snprintf(nat, sizeof nat, "%s/f%d-%zu.dat", native, op, m);
			sp_make(CMNT(rel), modes[m].mode, modes[m].users);
			sp_make(nat, modes[m].mode, modes[m].users);
			/* the mount has the mode cached */
			ck_assert_int_eq(mode_only(CMNT(rel)), modes[m].mode);
			ck_assert_int_eq(mode_only(CMNT(rel)), modes[m].mode);
			struct sp_arg a = { CMNT(rel), CMNT("sid/src"), (enum sp)op };
			struct res r = sp_run(&a);
			ck_assert_msg(r.ret >= 0, "%s as %d through the mount: %s", sp_names[op],
				      TEST_UID, res_str(r));
			mode_t got = mode_only(CMNT(rel)), bk = mode_only(CEXP(rel));
			a = (struct sp_arg){ nat, src, (enum sp)op };
			r = sp_run(&a);
			ck_assert_msg(r.ret >= 0, "%s as %d natively: %s", sp_names[op], TEST_UID,
				      res_str(r));
			mode_t want = mode_only(nat);
			if (got != want || bk != want) {
				size_t l = strlen(out);
				if (l < sizeof out - 200)
					snprintf(
						out + l, sizeof out - l,
						"%s%s on %s%04o: mount %04o, backing %04o, native %04o",
						l ? "; " : "", sp_names[op],
						modes[m].users ? "the writer's " : "root's ",
						modes[m].mode, got, bk, want);
				bad++;
			}
		}
	}
	rm_rf(native);
	printf("coh_setid_write_paths %s: %d of %d modes differ from native%s%s\n", co_names[g_co],
	       bad, n, bad ? ": " : "", out);
	fflush(stdout);
	ck_assert_msg(!bad, "%d of %d modes differ right after an unprivileged write: %s", bad, n,
		      out);
}
END_TEST

/* ---- the size the kernel keeps after an extending write --------------------------------- */
/*
 * What another process does beside a writer that makes the kernel take a
 * file's attributes from the daemon: list the directory (READDIRPLUS) or
 * give the file another name (LINK, whose reply the kernel applies
 * whatever it holds).  A reply carrying a size without a write the daemon
 * had acknowledged replaced the newer size for the attribute timeout:
 * lseek(SEEK_END) and reads then stopped at the old end (issue 38 #1).
 */
enum sz_look {
	SZ_LIST,
	SZ_LINK,
	SZ_N
};
static const char *const sz_names[] = { "directory listing", "link" };

static void sz_look(enum sz_look how, const char *dir, const char *path, const char *lnk)
{
	if (how == SZ_LIST) {
		DIR *d = opendir(dir);
		ck_assert_msg(d, "opendir: %s", strerror(errno));
		while (readdir(d))
			;
		closedir(d);
	} else {
		ck_assert_msg(link(path, lnk) == 0, "link: %s", strerror(errno));
	}
}

/* What the kernel says the size is, three ways; "" if all say want. */
static void sz_check(int fd, off_t want, char *out, size_t olen)
{
	struct stat st;
	char c[2];
	off_t e = lseek(fd, 0, SEEK_END);
	ssize_t last = want ? pread(fd, c, 2, want - 1) : 1;
	int r = fstat(fd, &st);

	out[0] = 0;
	if (e != want || last != 1 || r != 0 || st.st_size != want)
		snprintf(out, olen,
			 "lseek(SEEK_END) %lld, a read of the last byte %zd, fstat %lld; "
			 "the file has %lld",
			 (long long)e, last, (long long)st.st_size, (long long)want);
}

START_TEST(coh_size_after_listing)
{
	CO_BEGIN();
	static char buf[100000];
	const char *const comms[] = { NULL, "cohstream", "cohauto", "cohcache" };
	char first[512] = "", what[256], per[512] = "";
	int bad = 0, rounds = 0;
	uint64_t x = 0x2545f4914f6cdd1dULL;

	fill_pattern(buf, sizeof buf, 38);
	ck_assert_int_eq(mkdir(CMNT("sz"), 0755), 0);
	for (int c = 0; c < 4; c++) {
		for (int how = 0; how < SZ_N; how++) {
			char rel[64], lrel[64];
			snprintf(rel, sizeof rel, "sz/f%d-%d.dat", c, how);
			snprintf(lrel, sizeof lrel, "sz/f%d-%d.lnk", c, how);
			/* past the shipped min_size: each handle gets its class's engine */
			off_t size = 17 << 20;
			int cfd = open(CMNT(rel), O_RDWR | O_CREAT | O_EXCL, 0644);
			ck_assert_msg(cfd >= 0, "create: %s", strerror(errno));
			ck_assert_int_eq(ftruncate(cfd, size), 0);
			close(cfd);
			int fd = open_named(CMNT(rel), O_RDWR, comms[c]);
			ck_assert_msg(fd >= 0, "open: %s", strerror(errno));
			int bad0 = bad;
			for (int i = 0; i < 40; i++, rounds++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				size_t n = 1 + (size_t)(x % sizeof buf);
				ck_assert_int_eq(pwrite(fd, buf, n, size), (ssize_t)n);
				size += (off_t)n;
				sz_look((enum sz_look)how, CMNT("sz"), CMNT(rel), CMNT(lrel));
				sz_check(fd, size, what, sizeof what);
				if (how == SZ_LINK)
					ck_assert_int_eq(unlink(CMNT(lrel)), 0);
				if (what[0] && bad++ == 0)
					snprintf(first, sizeof first,
						 "%s handle, write %d, after a %s: %s",
						 comms[c] ? comms[c] : "default", i, sz_names[how],
						 what);
			}
			close(fd);
			size_t l = strlen(per);
			snprintf(per + l, sizeof per - l, "%s%s/%s %d of 40", l ? ", " : "",
				 comms[c] ? comms[c] : "default", sz_names[how], bad - bad0);
		}
	}
	printf("coh_size_after_listing %s: %d of %d sizes wrong (%s)\n", co_names[g_co], bad,
	       rounds, per);
	ck_assert_msg(!bad, "%d of %d extending writes: the size went back (%s); first: %s", bad,
		      rounds, per, first);
}
END_TEST

/* ---- the randomized multi-handle exerciser -------------------------------------------- */
#define X_CAP ((size_t)4 << 20)
#define X_MAXIO ((size_t)256 << 10)
#define X_LOG 48

enum xh {
	XH_DEFAULT,
	XH_DIRECT,
	XH_STREAM,
	XH_AUTO,
	XH_CACHE,
	XH_RDONLY,
	XH_N
};
static const char *const xh_names[] = {
	"default", "O_DIRECT", "stream", "auto", "cache", "rdonly"
};
enum xop {
	XO_READ,
	XO_WRITE,
	XO_MREAD,
	XO_MWRITE,
	XO_CFR,
	XO_TRUNC,
	XO_PUNCH,
	XO_ZERO,
	XO_ALLOC,
	XO_FSYNC,
	XO_FADV,
	XO_FADV_BACK,
	XO_SIZE,
	XO_REOPEN,
	XO_VERIFY,
	XO_CHMOD,
	XO_N
};
static const char *const xo_names[] = { "read",	  "write",    "mapread", "mapwrite",
					"cfr",	  "truncate", "punch",	 "zero",
					"falloc", "fsync",    "fadvise", "fadvise-backing",
					"size",	  "reopen",   "verify",	 "chmod" };

struct xstate {
	int fd[XH_N];
	int bfd; /* the backing file, read-only: fadvise */
	unsigned char *model, *buf, *abuf;
	size_t size;
	uint64_t rng;
	char log[X_LOG][128];
	unsigned long nlog;
	unsigned long count[XO_N];
	unsigned long as_user; /* changes made by an unprivileged user */
	char fail[8192];
};

static uint64_t xnext(struct xstate *x)
{
	x->rng ^= x->rng >> 12;
	x->rng ^= x->rng << 25;
	x->rng ^= x->rng >> 27;
	return x->rng * 2685821657736338717ULL;
}

static void xlog(struct xstate *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void xlog(struct xstate *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->log[x->nlog % X_LOG], sizeof x->log[0], fmt, ap);
	va_end(ap);
	x->nlog++;
}

/* Records the failure with the operations that led to it; returns -1. */
static int xfail(struct xstate *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int xfail(struct xstate *x, const char *fmt, ...)
{
	va_list ap;
	size_t l;
	va_start(ap, fmt);
	vsnprintf(x->fail, sizeof x->fail, fmt, ap);
	va_end(ap);
	l = strlen(x->fail);
	l += (size_t)snprintf(x->fail + l, sizeof x->fail - l, "\nlast operations (oldest first):");
	unsigned long from = x->nlog > X_LOG ? x->nlog - X_LOG : 0;
	for (unsigned long i = from; i < x->nlog && l < sizeof x->fail - 140; i++)
		l += (size_t)snprintf(x->fail + l, sizeof x->fail - l, "\n  #%lu %s", i,
				      x->log[i % X_LOG]);
	return -1;
}

static const char *const xh_comm[] = { NULL, NULL, "cohstream", "cohauto", "cohcache", NULL };

static int xopen(struct xstate *x, int h)
{
	int flags = h == XH_RDONLY ? O_RDONLY : O_RDWR;
	if (h == XH_DIRECT)
		flags |= O_DIRECT;
	x->fd[h] = open_named(CMNT("x.dat"), flags, xh_comm[h]);
	if (x->fd[h] < 0)
		return xfail(x, "open %s: %s", xh_names[h], strerror(errno));
	return 0;
}

/* Reopens every handle in a random order: the first open decides a lot. */
static int xreopen_all(struct xstate *x)
{
	int order[XH_N];
	for (int i = 0; i < XH_N; i++) {
		if (x->fd[i] >= 0)
			close(x->fd[i]);
		x->fd[i] = -1;
		order[i] = i;
	}
	for (int i = XH_N - 1; i > 0; i--) {
		int j = (int)(xnext(x) % (uint64_t)(i + 1)), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	xlog(x, "reopen all: %s %s %s %s %s %s", xh_names[order[0]], xh_names[order[1]],
	     xh_names[order[2]], xh_names[order[3]], xh_names[order[4]], xh_names[order[5]]);
	for (int i = 0; i < XH_N; i++)
		if (xopen(x, order[i]) < 0)
			return -1;
	return 0;
}

static int xcheck(struct xstate *x, const unsigned char *got, ssize_t n, size_t off, size_t len,
		  const char *what)
{
	size_t want = off >= x->size ? 0 : (x->size - off < len ? x->size - off : len);
	if (n != (ssize_t)want)
		return xfail(x, "%s of %zu at %zu returned %zd, the model has %zu (size %zu)", what,
			     len, off, n, want, x->size);
	for (size_t i = 0; i < want; i++)
		if (got[i] != x->model[off + i]) {
			size_t j = i;
			while (j < want && got[j] != x->model[off + j])
				j++;
			return xfail(x,
				     "%s of %zu at %zu: byte %zu (file offset %zu) is %#x, "
				     "the model has %#x; %zu bytes differ from there",
				     what, len, off, i, off + i, got[i], x->model[off + i], j - i);
		}
	return 0;
}

/* A random handle that may do this; the O_DIRECT one needs alignment. */
static int xpick(struct xstate *x, bool write, bool direct_ok)
{
	for (;;) {
		int h = (int)(xnext(x) % XH_N);
		if (write && h == XH_RDONLY)
			continue;
		if (!direct_ok && h == XH_DIRECT)
			continue;
		return h;
	}
}

static void xrange(struct xstate *x, int h, size_t *off, size_t *len, size_t limit)
{
	*off = (size_t)(xnext(x) % (limit < X_CAP ? limit : X_CAP));
	*len = 1 + (size_t)(xnext(x) % (xnext(x) % 4 ? 16384 : X_MAXIO));
	if (h == XH_DIRECT) {
		*off &= ~(size_t)4095;
		*len = (*len + 4095) & ~(size_t)4095;
	}
	if (*off + *len > X_CAP)
		*len = X_CAP - *off;
}

static void xmodel_write(struct xstate *x, size_t off, const unsigned char *d, size_t len)
{
	if (off > x->size)
		memset(x->model + x->size, 0, off - x->size);
	memcpy(x->model + off, d, len);
	if (off + len > x->size)
		x->size = off + len;
}

static int xdo_read(struct xstate *x)
{
	int h = xpick(x, false, true);
	size_t off, len;
	xrange(x, h, &off, &len, x->size + 8192);
	unsigned char *b = h == XH_DIRECT ? x->abuf : x->buf;
	xlog(x, "read %s %zu at %zu", xh_names[h], len, off);
	ssize_t n = pread(x->fd[h], b, len, (off_t)off);
	if (n < 0)
		return xfail(x, "read %s: %s", xh_names[h], strerror(errno));
	/* an O_DIRECT read of the tail may stop at the last full block */
	if (h == XH_DIRECT && n < (ssize_t)len && off + (size_t)n < x->size)
		return xcheck(x, b, n, off, (size_t)n, "O_DIRECT read (short)");
	return xcheck(x, b, n, off, len, h == XH_DIRECT ? "O_DIRECT read" : "read");
}

static int xdo_write(struct xstate *x, unsigned seq)
{
	int h = xpick(x, true, true);
	size_t off, len;
	xrange(x, h, &off, &len, x->size + 65536 < X_CAP ? x->size + 65536 : X_CAP);
	if (!len)
		return 0;
	unsigned char *b = h == XH_DIRECT ? x->abuf : x->buf;
	fill_pattern(b, len, seq);
	xlog(x, "write %s %zu at %zu (seed %u)", xh_names[h], len, off, seq);
	ssize_t n = pwrite(x->fd[h], b, len, (off_t)off);
	if (n != (ssize_t)len)
		return xfail(x, "write %s %zu at %zu: %zd (%s)", xh_names[h], len, off, n,
			     strerror(errno));
	xmodel_write(x, off, b, len);
	return 0;
}

/* A SIGBUS while touching a mapping becomes a failure with the operations
 * that led to it, not a crash without them: the kernel's idea of the size
 * (i_size of the FUSE inode) was below the model's. */
static sigjmp_buf x_bus_jmp;
static volatile sig_atomic_t x_bus_armed;
static void x_on_sigbus(int sig)
{
	if (!x_bus_armed) {
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	siglongjmp(x_bus_jmp, 1);
}

static int xmap_touch(unsigned char *map, unsigned char *buf, size_t len, bool write);

/* The daemon's log since the exerciser began, its last lines: a READ that
 * failed in the daemon would say so there. */
static size_t xdaemon_log_tail(char *out, size_t size)
{
	size_t n = 0, l = 0;
	char *log = slurp(g_cm.d.log, &n), *from, *p;
	int lines = 0;

	out[0] = 0;
	if (!log)
		return 0;
	from = strstr(log, "=== dcfs-tests: begin coh_exerciser");
	if (!from)
		from = log;
	for (p = log + n; p > from && lines < 16; p--)
		if (p[-1] == '\n' && p != log + n)
			lines++;
	l = (size_t)snprintf(out, size, "\ndaemon log (last lines since the exerciser began):\n%s",
			     p);
	free(log);
	return l < size ? l : size - 1;
}

/*
 * What the kernel thinks right after a SIGBUS, in an order that changes it
 * least: whether the same range faults again in a new mapping (a FUSE
 * inode size shrunk by a short READ does, until an attribute refresh; a
 * READ that failed once in the daemon normally does not), then what a
 * read(2) through the handle returns, then the sizes fstat reports (which
 * may refresh the inode's size).
 */
static int xbus_fail(struct xstate *x, int h, size_t pg, size_t len, bool write)
{
	struct stat hs = { 0 }, bs = { 0 };
	char again[64] = "not tried", rd[128], tail[3072];
	unsigned char *p = mmap(NULL, len, PROT_READ, MAP_SHARED, x->fd[h], (off_t)pg);
	unsigned char *tmp = malloc(len);
	ssize_t n;

	if (p != MAP_FAILED && tmp)
		snprintf(again, sizeof again, "%s",
			 xmap_touch(p, tmp, len, false) < 0 ? "SIGBUS again" : "no fault");
	if (p != MAP_FAILED)
		munmap(p, len);
	free(tmp);
	/* x->buf still holds what a written mapping was given */
	n = pread(x->fd[h], x->abuf, len, (off_t)pg);
	if (n < 0) {
		snprintf(rd, sizeof rd, "failed: %s", strerror(errno));
	} else {
		size_t odd = 0;
		for (size_t i = 0; i < (size_t)n; i++)
			odd += x->abuf[i] != x->model[pg + i] &&
			       !(write && x->abuf[i] == x->buf[i]);
		snprintf(rd, sizeof rd,
			 "%zd of %zu bytes, %zu of them neither the model's nor the mapping's", n,
			 len, odd);
	}
	fstat(x->fd[h], &hs);
	fstat(x->bfd, &bs);
	xdaemon_log_tail(tail, sizeof tail);
	return xfail(x,
		     "SIGBUS in a %s mapping of %zu at %zu through %s: the model has size %zu; "
		     "then a new mapping of the range, read: %s; pread of it through the "
		     "handle: %s; fstat of the handle %lld, of the backing file %lld%s",
		     write ? "written" : "read", len, pg, xh_names[h], x->size, again, rd,
		     (long long)hs.st_size, (long long)bs.st_size, tail);
}

/* Copies into (write) or out of a mapping; -1 if that raised SIGBUS. */
static int xmap_touch(unsigned char *map, unsigned char *buf, size_t len, bool write)
{
	if (sigsetjmp(x_bus_jmp, 1)) {
		x_bus_armed = 0;
		return -1;
	}
	x_bus_armed = 1;
	if (write)
		memcpy(map, buf, len);
	else
		memcpy(buf, map, len);
	x_bus_armed = 0;
	return 0;
}

/* Shared mappings of a page-aligned range inside the file. */
static int xdo_map(struct xstate *x, bool write, unsigned seq)
{
	if (x->size < 4096)
		return 0;
	int h = xpick(x, write, false);
	size_t pg = ((size_t)(xnext(x) % x->size)) & ~(size_t)4095;
	size_t len = 1 + (size_t)(xnext(x) % 65536);
	if (pg + len > x->size)
		len = x->size - pg;
	int prot = PROT_READ | (write ? PROT_WRITE : 0);
	unsigned char *p = mmap(NULL, len, prot, MAP_SHARED, x->fd[h], (off_t)pg);
	xlog(x, "map%s %s %zu at %zu (seed %u)%s", write ? "write" : "read", xh_names[h], len, pg,
	     seq, p == MAP_FAILED ? " refused" : "");
	if (p == MAP_FAILED) {
		if (errno == ENODEV)
			return 0; /* streamed files without FUSE_DIRECT_IO_ALLOW_MMAP */
		return xfail(x, "mmap %s: %s", xh_names[h], strerror(errno));
	}
	int r = 0;
	bool do_sync = write && xnext(x) % 2;
	if (write)
		fill_pattern(x->buf, len, seq);
	if (xmap_touch(p, x->buf, len, write) < 0) {
		munmap(p, len);
		return xbus_fail(x, h, pg, len, write);
	}
	if (write) {
		memcpy(x->model + pg, x->buf, len);
		if (do_sync && msync(p, len, MS_SYNC) < 0)
			r = xfail(x, "msync: %s", strerror(errno));
	} else {
		r = xcheck(x, x->buf, (ssize_t)len, pg, len, "mapped read");
	}
	munmap(p, len);
	return r;
}

static int xdo_cfr(struct xstate *x)
{
	if (!x->size)
		return 0;
	int hi = xpick(x, false, false), ho = xpick(x, true, false);
	size_t in = (size_t)(xnext(x) % x->size), len = 1 + (size_t)(xnext(x) % 131072);
	if (in + len > x->size)
		len = x->size - in;
	size_t out = (size_t)(xnext(x) % (x->size + 65536));
	if (out + len > X_CAP)
		return 0;
	/* copy_file_range(2) refuses overlapping ranges of one file */
	if (out < in + len && in < out + len)
		return 0;
	loff_t li = (loff_t)in, lo = (loff_t)out;
	xlog(x, "cfr %s->%s %zu from %zu to %zu", xh_names[hi], xh_names[ho], len, in, out);
	ssize_t n = copy_file_range(x->fd[hi], &li, x->fd[ho], &lo, len, 0);
	if (n < 0)
		return xfail(x, "copy_file_range: %s", strerror(errno));
	memcpy(x->buf, x->model + in, (size_t)n);
	xmodel_write(x, out, x->buf, (size_t)n);
	return 0;
}

static int xdo_trunc(struct xstate *x)
{
	int h = xpick(x, true, true);
	size_t to = (size_t)(xnext(x) % X_CAP);
	if (xnext(x) % 2)
		to = x->size ? (size_t)(xnext(x) % x->size) : 0;
	xlog(x, "truncate %s to %zu", xh_names[h], to);
	if (ftruncate(x->fd[h], (off_t)to) < 0)
		return xfail(x, "ftruncate: %s", strerror(errno));
	if (to > x->size)
		memset(x->model + x->size, 0, to - x->size);
	x->size = to;
	return 0;
}

static int xdo_falloc(struct xstate *x, enum xop op)
{
	int h = xpick(x, true, true);
	size_t off = (size_t)(xnext(x) % (x->size + 65536)), len = 1 + (size_t)(xnext(x) % 131072);
	int mode = op == XO_PUNCH  ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
		   : op == XO_ZERO ? FALLOC_FL_ZERO_RANGE | (xnext(x) % 2 ? FALLOC_FL_KEEP_SIZE : 0)
				   : (xnext(x) % 2 ? FALLOC_FL_KEEP_SIZE : 0);
	if (off >= X_CAP)
		return 0;
	if (off + len > X_CAP)
		len = X_CAP - off;
	xlog(x, "%s %s mode %#x %zu at %zu", xo_names[op], xh_names[h], mode, len, off);
	if (fallocate(x->fd[h], mode, (off_t)off, (off_t)len) < 0)
		return xfail(x, "fallocate %#x: %s", mode, strerror(errno));
	size_t end = off + len;
	/* the file grows: what was past the end reads as zeros */
	if (!(mode & FALLOC_FL_KEEP_SIZE) && end > x->size)
		memset(x->model + x->size, 0, end - x->size);
	if (op != XO_ALLOC) {
		size_t zend = mode & FALLOC_FL_KEEP_SIZE ? (end < x->size ? end : x->size) : end;
		if (off < zend)
			memset(x->model + off, 0, zend - off);
	}
	if (!(mode & FALLOC_FL_KEEP_SIZE) && end > x->size)
		x->size = end;
	return 0;
}

static int xdo_size(struct xstate *x)
{
	int h = xpick(x, false, true);
	struct stat st;
	xlog(x, "size %s", xh_names[h]);
	if (fstat(x->fd[h], &st) < 0)
		return xfail(x, "fstat: %s", strerror(errno));
	if ((size_t)st.st_size != x->size)
		return xfail(x, "fstat %s: size %lld, the model has %zu", xh_names[h],
			     (long long)st.st_size, x->size);
	off_t e = lseek(x->fd[h], 0, SEEK_END);
	if (e != (off_t)x->size)
		return xfail(x, "lseek(SEEK_END) %s: %lld, the model has %zu", xh_names[h],
			     (long long)e, x->size);
	return 0;
}

static int xdo_verify(struct xstate *x)
{
	int h = xpick(x, false, false);
	xlog(x, "verify %s (whole file, 1 MiB reads)", xh_names[h]);
	for (size_t off = 0; off <= x->size; off += X_MAXIO) {
		ssize_t n = pread(x->fd[h], x->buf, X_MAXIO, (off_t)off);
		if (xcheck(x, x->buf, n, off, X_MAXIO, "verify read") < 0)
			return -1;
	}
	return 0;
}

/*
 * After every operation: where the file ends as the kernel sees it through
 * a random handle, by lseek(SEEK_END) and by a read across the end (its
 * bytes and where it stops), against the model (issue 38 #1: an entry
 * reply of the opener's lookup took the size back).
 */
static int xcheck_end(struct xstate *x)
{
	int h = xpick(x, false, true);
	off_t e = lseek(x->fd[h], 0, SEEK_END);

	if (e != (off_t)x->size)
		return xfail(x, "after the operation, lseek(SEEK_END) %s: %lld, the model has %zu",
			     xh_names[h], (long long)e, x->size);
	h = xpick(x, false, false);
	size_t tail = x->size < 4096 ? x->size : 4096, off = x->size - tail;
	ssize_t n = pread(x->fd[h], x->buf, tail + 4096, (off_t)off);
	if (n < 0)
		return xfail(x, "after the operation, read %s: %s", xh_names[h], strerror(errno));
	return xcheck(x, x->buf, n, off, tail + 4096, "after the operation, a read across the end");
}

/* Set-id bits (and group execute) for the file, as root through the mount. */
static int xdo_chmod(struct xstate *x)
{
	static const mode_t modes[] = { 0666, 04666, 02666, 06666, 02676, 06676 };
	int h = xpick(x, false, true);
	mode_t m = modes[xnext(x) % 6];

	xlog(x, "chmod %04o %s", m, xh_names[h]);
	if (fchmod(x->fd[h], m) < 0)
		return xfail(x, "fchmod %04o: %s", m, strerror(errno));
	return 0;
}

/*
 * A change made as root, or (two in three) with the file system identity
 * of an unprivileged user, in the file's group (root) or not: the backing
 * filesystem then clears set-id bits as it would for that user.  Handles
 * stay root's opens.
 */
static int xuser_begin(struct xstate *x)
{
	int who = (int)(xnext(x) % 3);

	if (who) {
		syscall(SYS_setfsgid, who == 1 ? 0 : TEST_GID);
		syscall(SYS_setfsuid, TEST_UID);
		xlog(x, "as uid %d gid %d:", TEST_UID, who == 1 ? 0 : TEST_GID);
		x->as_user++;
	}
	return who;
}

/* ... and after it, the mode the mount shows (the mode alone, at once) is
 * the backing file's (issue 38 #3). */
static int xuser_end(struct xstate *x, int who, int rc)
{
	struct statx sx;
	struct stat bs;

	if (!who)
		return rc;
	syscall(SYS_setfsuid, 0);
	syscall(SYS_setfsgid, 0);
	if (rc)
		return rc;
	if (statx(AT_FDCWD, CMNT("x.dat"), 0, STATX_MODE, &sx) < 0 || fstat(x->bfd, &bs) < 0)
		return xfail(x, "statx of the mode: %s", strerror(errno));
	if ((sx.stx_mode & 07777) != (bs.st_mode & 07777))
		return xfail(x,
			     "after a change by uid %d, the mount shows mode %04o, the backing "
			     "file %04o",
			     TEST_UID, sx.stx_mode & 07777, bs.st_mode & 07777);
	return 0;
}

static int xstep(struct xstate *x, unsigned seq)
{
	unsigned r = (unsigned)(xnext(x) % 100);
	enum xop op = r < 24   ? XO_READ
		      : r < 46 ? XO_WRITE
		      : r < 54 ? XO_MREAD
		      : r < 62 ? XO_MWRITE
		      : r < 70 ? XO_CFR
		      : r < 74 ? XO_TRUNC
		      : r < 77 ? XO_PUNCH
		      : r < 80 ? XO_ZERO
		      : r < 82 ? XO_ALLOC
		      : r < 85 ? XO_FSYNC
		      : r < 89 ? XO_FADV
		      : r < 92 ? XO_FADV_BACK
		      : r < 96 ? XO_SIZE
		      : r < 97 ? XO_CHMOD
		      : r < 98 ? XO_REOPEN
			       : XO_VERIFY;
	int h, who;
	x->count[op]++;
	switch (op) {
	case XO_READ: return xdo_read(x);
	case XO_WRITE: who = xuser_begin(x); return xuser_end(x, who, xdo_write(x, seq));
	case XO_MREAD: return xdo_map(x, false, seq);
	case XO_MWRITE: return xdo_map(x, true, seq);
	case XO_CFR: who = xuser_begin(x); return xuser_end(x, who, xdo_cfr(x));
	case XO_TRUNC: who = xuser_begin(x); return xuser_end(x, who, xdo_trunc(x));
	case XO_PUNCH:
	case XO_ZERO:
	case XO_ALLOC: who = xuser_begin(x); return xuser_end(x, who, xdo_falloc(x, op));
	case XO_CHMOD: return xdo_chmod(x);
	case XO_FSYNC:
		h = xpick(x, true, true);
		xlog(x, "fsync %s", xh_names[h]);
		return (xnext(x) % 2 ? fdatasync(x->fd[h]) : fsync(x->fd[h])) < 0
			       ? xfail(x, "fsync: %s", strerror(errno))
			       : 0;
	case XO_FADV:
		h = xpick(x, false, true);
		xlog(x, "fadvise DONTNEED %s", xh_names[h]);
		posix_fadvise(x->fd[h], 0, 0, POSIX_FADV_DONTNEED);
		return 0;
	case XO_FADV_BACK:
		xlog(x, "fadvise DONTNEED backing");
		posix_fadvise(x->bfd, 0, 0, POSIX_FADV_DONTNEED);
		return 0;
	case XO_SIZE: return xdo_size(x);
	case XO_REOPEN: return xreopen_all(x);
	case XO_VERIFY: return xdo_verify(x);
	default: return 0;
	}
}

/* posix_fadvise(DONTNEED) of the mount and the backing file every 50 ms. */
static pid_t start_dropper(void)
{
	char mnt[PATH_MAX], bk[PATH_MAX];
	snprintf(mnt, sizeof mnt, "%s", CMNT("x.dat"));
	snprintf(bk, sizeof bk, "%s", CEXP("x.dat"));
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		double end = now_s() + 3600;
		while (now_s() < end && getppid() != 1) {
			int a = open(mnt, O_RDONLY), b = open(bk, O_RDONLY);
			if (a >= 0)
				posix_fadvise(a, 0, 0, POSIX_FADV_DONTNEED);
			if (b >= 0)
				posix_fadvise(b, 0, 0, POSIX_FADV_DONTNEED);
			if (a >= 0)
				close(a);
			if (b >= 0)
				close(b);
			usleep(50000);
		}
		_exit(0);
	}
	return pid;
}

/*
 * Another process that only opens and closes the file every 50 ms, and
 * lists its directory every tenth time: each is a LOOKUP or READDIRPLUS
 * whose reply carries the size (issue 38 #1).
 */
static pid_t start_opener(void)
{
	char mnt[PATH_MAX], dir[PATH_MAX];
	snprintf(mnt, sizeof mnt, "%s", CMNT("x.dat"));
	snprintf(dir, sizeof dir, "%s", g_cm.mnt);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		double end = now_s() + 3600;
		for (unsigned i = 0; now_s() < end && getppid() != 1; i++) {
			int fd = open(mnt, O_RDONLY);
			if (fd >= 0)
				close(fd);
			if (i % 10 == 9) {
				DIR *d = opendir(dir);
				while (d && readdir(d))
					;
				if (d)
					closedir(d);
			}
			usleep(50000);
		}
		_exit(0);
	}
	return pid;
}

START_TEST(coh_exerciser)
{
	CO_BEGIN();
	static struct xstate xs;
	struct xstate *x = &xs;
	memset(x, 0, sizeof *x);
	x->model = calloc(1, X_CAP);
	x->buf = malloc(X_MAXIO);
	ck_assert_int_eq(posix_memalign((void **)&x->abuf, 4096, X_MAXIO), 0);
	const char *seed_env = getenv("DCFS_COH_SEED");
	uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : (uint64_t)time(NULL);
	x->rng = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)g_co + 1;
	/* Now, so that a run that hangs or crashes can be replayed too. */
	printf("coh_exerciser %s: seed %llu (DCFS_COH_SEED=%llu replays it)\n", co_names[g_co],
	       (unsigned long long)seed, (unsigned long long)seed);
	fflush(stdout);
	for (int i = 0; i < XH_N; i++)
		x->fd[i] = -1;
	unlink(CMNT("x.dat"));
	ck_assert_int_eq(write_file(CMNT("x.dat"), "", 0, 0666), 0);
	x->bfd = open(CEXP("x.dat"), O_RDONLY);
	ck_assert(x->bfd >= 0);
	pid_t dropper = start_dropper(), opener = start_opener();
	struct sigaction sa = { .sa_handler = x_on_sigbus };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	double end = now_s() + co_seconds(15);
	int rc = xreopen_all(x);
	unsigned long ops = 0;
	while (!rc && now_s() < end) {
		for (int i = 0; i < 64 && !rc; i++, ops++) {
			rc = xstep(x, (unsigned)ops);
			if (!rc)
				rc = xcheck_end(x);
		}
	}
	if (!rc)
		rc = xdo_verify(x);
	signal(SIGBUS, SIG_DFL);
	kill(dropper, SIGKILL);
	waitpid(dropper, NULL, 0);
	kill(opener, SIGKILL);
	waitpid(opener, NULL, 0);
	for (int i = 0; i < XH_N; i++)
		if (x->fd[i] >= 0)
			close(x->fd[i]);
	close(x->bfd);
	if (!rc) {
		/* and what reached the backing file */
		size_t n = 0;
		unsigned char *d = slurp(CEXP("x.dat"), &n);
		ck_assert(d);
		rc = xcheck(x, d, (ssize_t)n, 0, X_CAP, "backing file after close");
		free(d);
	}
	char counts[1024];
	size_t l = 0;
	for (int i = 0; i < XO_N; i++)
		l += (size_t)snprintf(counts + l, sizeof counts - l, " %s %lu", xo_names[i],
				      x->count[i]);
	printf("coh_exerciser %s: seed %llu, %lu operations (%lu changes as uid %d):%s%s\n",
	       co_names[g_co], (unsigned long long)seed, ops, x->as_user, TEST_UID, counts,
	       rc ? " FAILED" : "");
	if (rc)
		printf("coh_exerciser %s: %s\n", co_names[g_co], x->fail);
	fflush(stdout);
	ck_assert_msg(!rc, "%s (seed %llu, after %lu operations)", x->fail,
		      (unsigned long long)seed, ops);
	free(x->model);
	free(x->buf);
	free(x->abuf);
}
END_TEST

/*
 * One round of coh_outside_append on name: 0, or -1 with why set.  The
 * content is data (65536 + 5 bytes).
 */
#define OA_SIZE 65536
static int outside_append_round(const char *name, const char *data, char *why, size_t whylen)
{
	char exp[PATH_MAX], mnt[PATH_MAX];
	struct stat st;
	size_t n = 0;
	char *got;
	int fd, rc = 0;

	snprintf(exp, sizeof exp, "%s", CEXP(name));
	snprintf(mnt, sizeof mnt, "%s", CMNT(name));
	if (write_file(exp, data, OA_SIZE, 0644) != 0) {
		snprintf(why, whylen, "%s: native write: %s", name, strerror(errno));
		return -1;
	}
	got = slurp(mnt, &n);
	if (!got || n != OA_SIZE) {
		snprintf(why, whylen, "%s: %zu bytes before the append", name, n);
		free(got);
		return -1;
	}
	free(got);
	/* the kernel holds the attributes for attr_timeout (1 s) */
	if (stat(mnt, &st) != 0) {
		snprintf(why, whylen, "%s: stat: %s", name, strerror(errno));
		return -1;
	}
	fd = open(exp, O_WRONLY | O_APPEND);
	if (fd < 0 || write(fd, data + OA_SIZE, 5) != 5) {
		snprintf(why, whylen, "%s: native append: %s", name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	got = slurp(mnt, &n);
	if (!got || n != OA_SIZE + 5 || memcmp(got, data, n)) {
		snprintf(why, whylen,
			 "%s: %zu bytes read through the mount after a native append of 5 to %d",
			 name, n, OA_SIZE);
		rc = -1;
	} else if (stat(mnt, &st) != 0 || st.st_size != OA_SIZE + 5) {
		snprintf(why, whylen, "%s: size %lld through the mount after the append", name,
			 (long long)st.st_size);
		rc = -1;
	}
	free(got);
	return rc;
}

/*
 * Close-to-open after a change made in the backing tree while the kernel
 * still holds the file's attributes (a stat just before it): the next open
 * through the mount reads to the new end and stat shows it.  Reads through
 * the FUSE page cache (auto handles, streamed read-only handles with
 * fuse_readahead) stop at the size the kernel holds, so the open that sees
 * the change must drop the attributes too, not only the cached pages
 * (issue 41: on 6.18 a streamed file read after a native append came back
 * 5 bytes short, right until the attribute timeout).
 *
 * Then OA_ROUNDS rounds on fresh names: the first reader's RELEASE reaches
 * the daemon asynchronously, often after the second open, and the drop of
 * the FUSE cache it queued (an invalidation of the attributes too) made
 * the kernel discard the new reader's GETATTR, so its read stopped at the
 * old end (KNOWN_FAILURES #20: once in a loaded make check; the old daemon
 * failed 77-142 of 500 rounds in a loop at load 9).
 */
#define OA_ROUNDS 250
START_TEST(coh_outside_append)
{
	CO_BEGIN();
	static char data[OA_SIZE + 5];
	const char *exts[] = { "dat", "mkv" };
	char why[512], first[512] = "", name[64];
	int failed[2] = { 0, 0 };

	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (char)('a' + i % 26);
	for (int k = 0; k < 2; k++) {
		snprintf(name, sizeof name, "oa.%s", exts[k]);
		ck_assert_msg(outside_append_round(name, data, why, sizeof why) == 0, "%s", why);
		unlink(CEXP(name));
	}
	for (int r = 0; r < OA_ROUNDS; r++) {
		for (int k = 0; k < 2; k++) {
			snprintf(name, sizeof name, "oa-%d.%s", r, exts[k]);
			if (outside_append_round(name, data, why, sizeof why) != 0) {
				if (!failed[0] && !failed[1])
					snprintf(first, sizeof first, "%s", why);
				failed[k]++;
			}
			/* natively, so that the next round's open finds a new inode */
			unlink(CEXP(name));
		}
	}
	printf("coh_outside_append %s: %d rounds, %d and %d failed (.dat, .mkv)\n", co_names[g_co],
	       OA_ROUNDS, failed[0], failed[1]);
	ck_assert_msg(!failed[0] && !failed[1],
		      "of %d rounds each, %d failed on .dat and %d on .mkv files; the first: %s",
		      OA_ROUNDS, failed[0], failed[1], first);
}
END_TEST

START_TEST(coh_zz_unmount)
{
	char err[2048];
	ck_assert_msg(!g_cm.err[0], "setup failed: %s", g_cm.err);
	/* Each mode was what the TCase says it covers, at least once. */
	long long wb = stats_get(g_cm.mnt, "dontcache", "opened_write_behind");
	printf("%s: %lld write streams served by the kernel with write-behind\n", co_names[g_co],
	       wb);
	fflush(stdout);
	if (g_co == CO_STREAMED)
		ck_assert_msg(wb > 0,
			      "no write stream was served by the kernel (passthrough_writes)");
	if (g_co == CO_ENGINE)
		ck_assert_msg(wb == 0,
			      "passthrough_writes = no, yet %lld kernel-served write streams", wb);
	ck_assert_msg(own_mount_stop(&g_cm, err, sizeof err) == 0, "%s", err);
}
END_TEST

Suite *coherence_suite(void)
{
	Suite *s = suite_create("coherence");
	void (*setups[])(void) = { co_setup_shipped, co_setup_streamed, co_setup_auto,
				   co_setup_engine };
	for (int k = 0; k < CO_N; k++) {
		TCase *tc = tcase_create(co_names[k]);
		tcase_add_unchecked_fixture(tc, setups[k], co_teardown);
		tcase_set_timeout(tc, (90 + co_seconds(15)) * deadline_scale());
		tcase_add_test(tc, coh_aio_odirect);
		tcase_add_test(tc, coh_mmap_pwrite);
		tcase_add_test(tc, coh_cfr_reread);
		tcase_add_test(tc, coh_mode_side_effects);
		tcase_add_test(tc, coh_size_after_listing);
		tcase_add_test(tc, coh_setid_write_paths);
		tcase_add_test(tc, coh_outside_append);
		tcase_add_test(tc, coh_exerciser);
		tcase_add_test(tc, coh_zz_unmount);
		suite_add_tcase(s, tc);
	}
	return s;
}
