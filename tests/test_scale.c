/* Scale suite: a tree far larger than the daemon's fd limit.
 *
 * The daemon is started with RLIMIT_NOFILE of SCALE_FDS (inherited from the
 * forked test process), and walks, opens, renames (also behind its back),
 * hard links and unlinks of a 50 000-entry tree must give the backing
 * tree's results with no EMFILE anywhere; then a bounded random-churn
 * stress by four processes, after which the tree walks and is removed
 * through the mount.  Set DCFS_SCALE_ENTRIES / DCFS_CHURN_SECONDS to
 * change the sizes. */
#include "harness.h"
#include "own_mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define SCALE_FDS 400
#define PER_DIR 500

static struct own_mount g_s;

/* Paths in the exported backing dir and through the mount. */
#define PE_S(rel) path_at(g_s.exp, "%s", rel)
#define PM_S(rel) path_at(g_s.mnt, "%s", rel)

static long env_long(const char *name, long def)
{
	const char *s = getenv(name);
	return s && atol(s) > 0 ? atol(s) : def;
}

static void limit_fds(rlim_t n)
{
	struct rlimit rl = { n, n };
	OK(setrlimit(RLIMIT_NOFILE, &rl));
}

static void scale_mount(const char *tag)
{
	limit_fds(SCALE_FDS);
	own_mount_ck_with(&g_s, tag, "[global]\ndefault = cache\n",
			  &(struct own_mount_how){ .fs = FS_XFS });
}

static void scale_unmount(void)
{
	char *log = read_file_str(g_s.d.log);
	ck_assert_msg(!strstr(log, "out of file descriptors") && !strstr(log, "EMFILE"),
		      "daemon ran out of fds: %.2000s", log);
	free(log);
	own_unmount_ck(&g_s);
}

/* Counts entries below dir and sums their inode numbers (a fingerprint
 * that is equal for the backing tree and the mount). */
static void walk(const char *dir, long *n, unsigned long long *inos, int *errs)
{
	DIR *d = opendir(dir);
	if (!d) {
		(*errs)++;
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			(*errs)++;
			continue;
		}
		(*n)++;
		*inos += st.st_ino;
		if (S_ISDIR(st.st_mode)) {
			char sub[PATH_MAX];
			snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
			walk(sub, n, inos, errs);
		}
	}
	closedir(d);
}

static void expect_same_tree(const char *what, const char *rel)
{
	char a[PATH_MAX], b[PATH_MAX];
	snprintf(a, sizeof a, "%s/%s", g_s.exp, rel);
	snprintf(b, sizeof b, "%s/%s", g_s.mnt, rel);
	long na = 0, nb = 0;
	unsigned long long ia = 0, ib = 0;
	int ea = 0, eb = 0;
	walk(a, &na, &ia, &ea);
	walk(b, &nb, &ib, &eb);
	ck_assert_msg(eb == 0, "%s: %d errors walking the mount (%s)", what, eb, strerror(errno));
	ck_assert_msg(na == nb && ia == ib,
		      "%s: backing %ld entries (ino sum %llu), mount %ld (%llu)", what, na, ia, nb,
		      ib);
}

static void make_tree(const char *root, long entries)
{
	char p[PATH_MAX];
	int rfd = open(root, O_PATH | O_DIRECTORY);
	ck_assert_int_ge(rfd, 0);
	for (long i = 0; i < entries; i += PER_DIR) {
		char dn[32];
		snprintf(dn, sizeof dn, "d%05ld", i / PER_DIR);
		OK(mkdirat(rfd, dn, 0755));
		int dfd = openat(rfd, dn, O_PATH | O_DIRECTORY);
		ck_assert_int_ge(dfd, 0);
		for (long j = 0; j < PER_DIR - 1 && i + j < entries; j++) {
			char fn[32];
			snprintf(fn, sizeof fn, "f%03ld", j);
			int fd = openat(dfd, fn, O_CREAT | O_EXCL | O_WRONLY, 0644);
			ck_assert_int_ge(fd, 0);
			ck_assert_int_eq(write(fd, fn, strlen(fn)), (ssize_t)strlen(fn));
			close(fd);
		}
		close(dfd);
	}
	close(rfd);
	(void)p;
}

START_TEST(scale_tree_under_low_fd_limit)
{
	long entries = env_long("DCFS_SCALE_ENTRIES", 50000);
	scale_mount("scale-tree");
	OK(mkdir(PE_S("t"), 0755));
	make_tree(PE_S("t"), entries);
	double t0 = now_s();
	/* 1. the whole tree, twice (the second walk reopens evicted inodes) */
	expect_same_tree("first walk", "t");
	expect_same_tree("second walk", "t");
	/* 2. open and read files spread over the tree */
	for (long i = 0; i < entries; i += 997) {
		char rel[64], buf[16];
		snprintf(rel, sizeof rel, "t/d%05ld/f%03ld", i / PER_DIR, i % (PER_DIR - 1));
		int fd = open(PM_S(rel), O_RDONLY);
		ck_assert_msg(fd >= 0, "open %s: %s", rel, strerror(errno));
		ssize_t n = read(fd, buf, sizeof buf);
		ck_assert_msg(n > 0, "read %s", rel);
		close(fd);
	}
	/* 3. many files open at once, beyond the O_PATH budget: their backing
	 * fds are the reserve, and lookups still work meanwhile */
	int held[SCALE_FDS / 4];
	for (int i = 0; i < SCALE_FDS / 4; i++) {
		char rel[64];
		snprintf(rel, sizeof rel, "t/d00000/f%03d", i);
		held[i] = open(PM_S(rel), O_RDONLY);
		ck_assert_msg(held[i] >= 0, "holding open %s: %s", rel, strerror(errno));
	}
	expect_same_tree("walk with files held open", "t/d00001");
	for (int i = 0; i < SCALE_FDS / 4; i++)
		close(held[i]);
	/* 4. renames behind dcfs's back, then through the mount */
	struct stat st, sb;
	OK(stat(PM_S("t/d00002/f001"), &st));
	OK(rename(PE_S("t/d00002/f001"), PE_S("t/d00003/moved")));
	/* changes behind dcfs's back show once the kernel's entry times out */
	sleep_ms(1100);
	OK(stat(PM_S("t/d00003/moved"), &sb));
	ck_assert_int_eq(st.st_ino, sb.st_ino);
	ck_assert_msg(stat(PM_S("t/d00002/f001"), &sb) < 0 && errno == ENOENT,
		      "renamed-away name still there");
	OK(rename(PM_S("t/d00003/moved"), PM_S("t/d00004/back")));
	OK(stat(PE_S("t/d00004/back"), &sb));
	ck_assert_int_eq(st.st_ino, sb.st_ino);
	/* a directory renamed in the backing tree while the kernel holds it */
	OK(stat(PM_S("t/d00005/f002"), &st));
	OK(rename(PE_S("t/d00005"), PE_S("t/renamed5")));
	sleep_ms(1100);
	OK(stat(PM_S("t/renamed5/f002"), &sb));
	ck_assert_int_eq(st.st_ino, sb.st_ino);
	/* 5. hard links */
	OK(link(PM_S("t/d00006/f000"), PM_S("t/d00007/hl")));
	OK(stat(PE_S("t/d00006/f000"), &sb));
	ck_assert_int_eq(sb.st_nlink, 2);
	OK(stat(PM_S("t/d00007/hl"), &st));
	ck_assert_int_eq(st.st_ino, sb.st_ino);
	/* 6. deleted while looked up: file, and a whole directory */
	OK(stat(PM_S("t/d00008/f003"), &st));
	OK(unlink(PE_S("t/d00008/f003")));
	sleep_ms(1100);
	ck_assert_msg(stat(PM_S("t/d00008/f003"), &sb) < 0 && errno == ENOENT,
		      "stat of a file deleted behind dcfs: %s", strerror(errno));
	OK(stat(PM_S("t/d00009/f004"), &st));
	ck_assert_int_eq(rm_rf(PE_S("t/d00009")), 0);
	sleep_ms(1100);
	ck_assert_msg(stat(PM_S("t/d00009/f004"), &sb) < 0 && errno == ENOENT,
		      "stat in a directory deleted behind dcfs: %s", strerror(errno));
	ck_assert_msg(mkdir(PM_S("t/d00009"), 0755) == 0, "re-create a deleted dir: %s",
		      strerror(errno));
	/* 7. unlink through the mount, then compare again */
	for (int i = 0; i < 200; i++) {
		char rel[64];
		snprintf(rel, sizeof rel, "t/d00010/f%03d", i);
		OK(unlink(PM_S(rel)));
	}
	expect_same_tree("after changes", "t");
	double secs = now_s() - t0;
	printf("scale: %ld entries with %d daemon fds: %.1fs\n", entries, SCALE_FDS, secs);
	scale_unmount();
	/* 8. a remount over the same tree */
	limit_fds(SCALE_FDS);
	char err[512];
	const char *root = backing_root(FS_XFS, err, sizeof err);
	ck_assert_int_eq(own_mount_start(&g_s, root, "scale-tree", "[global]\ndefault = cache\n"),
			 0);
	expect_same_tree("after remount", "t/d00011");
	ck_assert_int_eq(rm_rf(PM_S("t")), 0);
	scale_unmount();
}
END_TEST

/* ---- random churn ------------------------------------------------------- */

static int churn_worker(const char *root, unsigned seed, double end)
{
	char a[PATH_MAX], b[PATH_MAX];
	int bad = 0;
	while (now_s() < end) {
		unsigned r = rand_r(&seed);
		snprintf(a, sizeof a, "%s/d%u/n%u", root, r % 8, (r >> 3) % 64);
		snprintf(b, sizeof b, "%s/d%u/n%u", root, (r >> 9) % 8, (r >> 12) % 64);
		int fd;
		struct stat st;
		switch ((r >> 18) % 10) {
		case 0:
		case 1:
			fd = open(a, O_CREAT | O_WRONLY | O_APPEND, 0644);
			if (fd >= 0) {
				if (write(fd, a, 16) < 0)
					bad++;
				close(fd);
			}
			break;
		case 2: rename(a, b); break;
		case 3: link(a, b); break;
		case 4: unlink(a); break;
		case 5: mkdir(a, 0755); break;
		case 6: rmdir(a); break;
		case 7: symlink("target", a); break;
		default: lstat(a, &st); break;
		}
		if (errno == EMFILE || errno == ENFILE || errno == EIO || errno == ENOTCONN) {
			/* say which operation failed, so a rare failure can be chased */
			if (bad < 5)
				fprintf(stderr, "churn: op %u on %s (-> %s): %s\n", (r >> 18) % 10,
					a, b, strerror(errno));
			bad++;
		}
		errno = 0;
	}
	return bad > 100 ? 100 : bad;
}

START_TEST(scale_random_churn)
{
	scale_mount("scale-churn");
	OK(mkdir(PM_S("c"), 0755));
	for (int i = 0; i < 8; i++) {
		char rel[32];
		snprintf(rel, sizeof rel, "c/d%d", i);
		OK(mkdir(PM_S(rel), 0755));
	}
	double end = now_s() + env_long("DCFS_CHURN_SECONDS", 15);
	pid_t pids[4];
	for (int i = 0; i < 4; i++) {
		fflush(NULL);
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0)
			_exit(churn_worker(PM_S("c"), 1234u + (unsigned)i, end));
	}
	/* a fifth process churns the backing tree directly */
	fflush(NULL);
	pid_t direct = fork();
	if (direct == 0) {
		churn_worker(PE_S("c"), 99u, end);
		_exit(0);
	}
	int bad = 0;
	for (int i = 0; i < 4; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		bad += WIFEXITED(st) ? WEXITSTATUS(st) : 100;
	}
	waitpid(direct, NULL, 0);
	if (bad) {
		char *log = read_file_str(g_s.d.log);
		ck_assert_msg(bad == 0,
			      "%d operations failed with EMFILE/EIO/ENOTCONN; daemon log: %.3000s",
			      bad, log);
	}
	expect_same_tree("after churn", "c");
	ck_assert_msg(rm_rf(PM_S("c")) == 0, "rm -rf through the mount: %s", strerror(errno));
	struct stat st;
	ck_assert_msg(lstat(PE_S("c"), &st) < 0, "tree left behind");
	scale_unmount();
}
END_TEST

/* ---- re-export: file handles of the mount itself -------------------------- */

static int open_handle_of(int mfd, struct file_handle *fh)
{
	return open_by_handle_at(mfd, fh, O_RDONLY);
}

/* What an NFS server does with the mount: encode a file handle, and decode
 * it again later, also after the kernel has forgotten the inode; a forged
 * or stale handle is refused with ESTALE, and the daemon survives. */
START_TEST(scale_export_handles)
{
	scale_mount("scale-export");
	ck_assert_int_eq(write_file(PM_S("f"), "exported\n", 9, 0644), 0);
	struct file_handle *fh = malloc(sizeof(*fh) + MAX_HANDLE_SZ);
	fh->handle_bytes = MAX_HANDLE_SZ;
	int mnt_id;
	OK(name_to_handle_at(AT_FDCWD, PM_S("f"), fh, &mnt_id, 0));
	int mfd = open(g_s.mnt, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(mfd, 0);
	char buf[16];
	for (int round = 0; round < 2; round++) {
		int fd = open_handle_of(mfd, fh);
		ck_assert_msg(fd >= 0, "open_by_handle_at (round %d): %s", round, strerror(errno));
		ck_assert_int_eq(read(fd, buf, sizeof buf), 9);
		ck_assert(memcmp(buf, "exported\n", 9) == 0);
		close(fd);
		/* let the kernel forget the inode: the daemon gets FORGET */
		drop_caches();
		sleep_ms(200);
	}
	/* a forged handle (another node id) */
	struct file_handle *bad = malloc(sizeof(*bad) + fh->handle_bytes);
	memcpy(bad, fh, sizeof(*fh) + fh->handle_bytes);
	for (unsigned i = 0; i < bad->handle_bytes && i < 8; i++)
		bad->f_handle[i] ^= 0x5a;
	int fd = open_handle_of(mfd, bad);
	ck_assert_msg(fd < 0 && (errno == ESTALE || errno == ENOENT), "forged handle: fd %d, %s",
		      fd, strerror(errno));
	/* the file deleted behind dcfs: the handle is stale */
	OK(unlink(PE_S("f")));
	drop_caches();
	sleep_ms(200);
	fd = open_handle_of(mfd, fh);
	ck_assert_msg(fd < 0 && (errno == ESTALE || errno == ENOENT),
		      "handle of a deleted file: fd %d, %s", fd, strerror(errno));
	close(mfd);
	free(bad);
	free(fh);
	struct stat st;
	OK(stat(g_s.mnt, &st));
	scale_unmount();
}
END_TEST

/* ---- export handles across a restart ------------------------------------- */

struct fh_buf {
	struct file_handle fh;
	unsigned char bytes[MAX_HANDLE_SZ];
};

static void handle_of(const char *path, struct fh_buf *h)
{
	int mnt_id;

	h->fh.handle_bytes = MAX_HANDLE_SZ;
	ck_assert_msg(name_to_handle_at(AT_FDCWD, path, &h->fh, &mnt_id, 0) == 0,
		      "name_to_handle_at %s: %s", path, strerror(errno));
}

/* The node id in a handle of the FUSE mount (the kernel's fuse_encode_fh). */
static uint64_t handle_nodeid(const struct fh_buf *h)
{
	uint32_t w[3];

	ck_assert_int_eq(h->fh.handle_bytes, sizeof w);
	memcpy(w, h->fh.f_handle, sizeof w);
	return (uint64_t)w[0] << 32 | w[1];
}

static ino_t ino_of(const char *path)
{
	struct stat st;

	OK(lstat(path, &st));
	return st.st_ino;
}

/* Creates files in dir until one gets inode number ino; its name, or NULL. */
static const char *reuse_ino(const char *dir, ino_t ino)
{
	static char found[PATH_MAX];
	char name[PATH_MAX];

	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof name, "%s/new%04d", dir, i);
		ck_assert_int_eq(write_file(name, "other\n", 6, 0644), 0);
		if (ino_of(name) == ino) {
			snprintf(found, sizeof found, "%s", name);
			return found;
		}
	}
	return NULL;
}

static void expect_stale(int mfd, struct fh_buf *h, const char *what)
{
	int fd = open_by_handle_at(mfd, &h->fh, O_RDONLY);

	ck_assert_msg(fd < 0 && errno == ESTALE, "%s: fd %d, %s", what, fd,
		      fd < 0 ? strerror(errno) : "opened");
}

static void restart_on(enum fs_kind fs, const char *tag)
{
	char err[2048], buf[32];
	const char *root = backing_root(fs, err, sizeof err);
	struct fh_buf keep, dir, sub, gone, reused, reused_late;
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	ck_assert_msg(own_mount_start(&g_s, root, tag, "[global]\ndefault = cache\n") == 0,
		      "mount: %s", g_s.err);
	OK(mkdir(PM_S("d"), 0755));
	/* the files whose numbers come back in one directory with their
	 * successors: xfs puts a new directory in another allocation group */
	OK(mkdir(PM_S("fill"), 0755));
	ck_assert_int_eq(write_file(PM_S("keep"), "kept\n", 5, 0644), 0);
	ck_assert_int_eq(write_file(PM_S("d/sub"), "below\n", 6, 0644), 0);
	ck_assert_int_eq(write_file(PM_S("gone"), "gone\n", 5, 0644), 0);
	ck_assert_int_eq(write_file(PM_S("fill/reused"), "old\n", 4, 0644), 0);
	ck_assert_int_eq(write_file(PM_S("fill/reused-late"), "old\n", 4, 0644), 0);
	handle_of(PM_S("keep"), &keep);
	handle_of(PM_S("d"), &dir);
	handle_of(PM_S("d/sub"), &sub);
	handle_of(PM_S("gone"), &gone);
	handle_of(PM_S("fill/reused"), &reused);
	handle_of(PM_S("fill/reused-late"), &reused_late);
	/* node id == backing st_ino on BACKING_DIR's own filesystem */
	ck_assert_uint_eq(handle_nodeid(&keep), ino_of(PE_S("keep")));
	ck_assert_uint_eq(handle_nodeid(&sub), ino_of(PE_S("d/sub")));
	ino_t old_ino = ino_of(PE_S("fill/reused")), late_ino = ino_of(PE_S("fill/reused-late"));
	ck_assert_msg(own_mount_stop(&g_s, err, sizeof err) == 0, "unmount: %s", err);

	/* Meanwhile, in the backing tree. */
	OK(unlink(PE_S("gone")));
	OK(unlink(PE_S("fill/reused")));
	OK(unlink(PE_S("fill/reused-late")));
	/* xfs frees unlinked inodes in the background: let it, so that the
	 * numbers can come back */
	int bfd = open(PE_S("."), O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(bfd, 0);
	OK(syncfs(bfd));
	close(bfd);
	const char *other = reuse_ino(PE_S("fill"), old_ino);
	const char *late = reuse_ino(PE_S("fill"), late_ino);

	ck_assert_msg(own_mount_start(&g_s, root, tag, "[global]\ndefault = cache\n") == 0,
		      "mount again: %s", g_s.err);
	int mfd = open(g_s.mnt, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(mfd, 0);
	/* another file under the inode number, looked up through the mount first */
	if (late) {
		char rel[PATH_MAX];
		snprintf(rel, sizeof rel, "fill/%s", strrchr(late, '/') + 1);
		ck_assert_uint_eq(ino_of(PM_S(rel)), late_ino);
	}
	int fd = open_by_handle_at(mfd, &keep.fh, O_RDONLY);
	ck_assert_msg(fd >= 0, "open_by_handle_at of a file after the restart: %s",
		      strerror(errno));
	ck_assert_int_eq(read(fd, buf, sizeof buf), 5);
	ck_assert(memcmp(buf, "kept\n", 5) == 0);
	struct stat a, b;
	OK(fstat(fd, &a));
	OK(stat(PM_S("keep"), &b));
	ck_assert_uint_eq(a.st_ino, b.st_ino);
	close(fd);
	fd = open_by_handle_at(mfd, &sub.fh, O_RDONLY);
	ck_assert_msg(fd >= 0, "open_by_handle_at of d/sub: %s", strerror(errno));
	ck_assert_int_eq(read(fd, buf, sizeof buf), 6);
	close(fd);
	fd = open_by_handle_at(mfd, &dir.fh, O_RDONLY | O_DIRECTORY);
	ck_assert_msg(fd >= 0, "open_by_handle_at of the directory: %s", strerror(errno));
	OK(fstat(fd, &a));
	OK(stat(PM_S("d"), &b));
	ck_assert_uint_eq(a.st_ino, b.st_ino);
	close(fd);
	expect_stale(mfd, &gone, "handle of a file deleted while dcfs was stopped");
	/* Without a reused number the two checks below would prove nothing. */
	ck_assert_msg(other && late, "%s: inode numbers not reused in 2000 creates (%s, %s)", tag,
		      other ? "found" : "not found", late ? "found" : "not found");
	expect_stale(mfd, &reused, "handle of a deleted file whose inode number another file has");
	expect_stale(mfd, &reused_late, "the same, the other file looked up first");
	/* the daemon still answers */
	OK(stat(PM_S("keep"), &a));
	close(mfd);
	ck_assert_msg(rm_rf(PM_S("fill")) == 0 && rm_rf(PM_S("d")) == 0 &&
			      unlink(PM_S("keep")) == 0,
		      "cleanup: %s", strerror(errno));
	ck_assert_msg(own_mount_stop(&g_s, err, sizeof err) == 0, "unmount: %s", err);
}

/* A handle taken through the mount (as an NFS server or open_by_handle_at()
 * caller keeps it) opens the same file after dcfs was stopped and started
 * again over the same tree; a file deleted meanwhile, and another file that
 * got the inode number, are stale (ESTALE), never opened instead. */
START_TEST(scale_export_restart)
{
	restart_on(FS_EXT4, "restart-ext4");
	restart_on(FS_XFS, "restart-xfs");
}
END_TEST

/* ---- node ids saved for one filesystem only ------------------------------ */

struct remade {
	char img[PATH_MAX], dev[64], fsdir[PATH_MAX], mnt[PATH_MAX], fstype[16];
	struct daemon d;
};

static int remade_mkfs(struct remade *r)
{
	char out[4096];
	return run_cmd(out, sizeof out, "mkfs.%s -q %s '%s' && mount '%s' '%s'", r->fstype,
		       strcmp(r->fstype, "xfs") ? "-F" : "-f", r->dev, r->dev, r->fsdir);
}

/* dcfs over the filesystem's root directory; n files created and stat'ed
 * through it; unmounted.  Returns the daemon's log (malloc'd), NULL if it
 * did not run and stop cleanly. */
static char *remade_run(struct remade *r, int n)
{
	char err[512], opts[64] = "allow_other";
	char *argv[] = { "dcfs", "-f", "-o", opts, r->fsdir, r->mnt, NULL };
	snprintf(r->d.mnt, sizeof r->d.mnt, "%s", r->mnt);
	if (daemon_spawn(&r->d, "remade", argv) < 0 ||
	    daemon_wait_mounted(&r->d, err, sizeof err) < 0) {
		daemon_kill(&r->d);
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		char p[PATH_MAX + 16];
		struct stat st;
		snprintf(p, sizeof p, "%s/f%d", r->mnt, i);
		if (write_file(p, "x", 1, 0644) < 0 || stat(p, &st) < 0)
			break;
	}
	dev_t dev = mount_dev(r->mnt);
	run_cmd(NULL, 0, "fusermount3 -u -z '%s'", r->mnt);
	int st = daemon_wait_unmounted(&r->d, 0, dev, 10);
	if (st == -1)
		daemon_kill(&r->d);
	char *log = read_file_str(r->d.log);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "remade-%s: daemon status %#x: %s\n", r->fstype, st, log);
		free(log);
		return NULL;
	}
	return log;
}

/* "loaded N node ids" / "saved N node ids" of a log, -1 if absent. */
static long ids_in(const char *log, const char *verb)
{
	char key[32];
	snprintf(key, sizeof key, "%s ", verb);
	const char *p = strstr(log, key);
	return p && strstr(p, " node ids") ? atol(p + strlen(key)) : -1;
}

/*
 * The node ids a clean stop saves (dcfs(8), FILES) are tied to the
 * filesystem, not only to the device numbers and the root's handle, which
 * every freshly made ext4 repeats (inode 2, generation 0): over the same
 * loop device made anew, the next run must load none (issue 38 #7), and
 * ids must not pile up from one filesystem to the next.  A restart over
 * the same filesystem does load them (so the check is not vacuous).
 */
static void remade_on(const char *fstype)
{
	struct remade r;
	char out[4096];
	memset(&r, 0, sizeof r);
	snprintf(r.fstype, sizeof r.fstype, "%s", fstype);
	snprintf(r.img, sizeof r.img, "%s/remade-%s.img", g_tmpdir, fstype);
	snprintf(r.fsdir, sizeof r.fsdir, "%s/remade-%s", g_tmpdir, fstype);
	snprintf(r.mnt, sizeof r.mnt, "%s/mnt-remade-%s", g_tmpdir, fstype);
	mkdir(r.fsdir, 0755);
	mkdir(r.mnt, 0755);
	int fd = open(r.img, O_CREAT | O_RDWR | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	OK(ftruncate(fd, 320 << 20));
	close(fd);
	ck_assert_msg(run_cmd(out, sizeof out, "losetup -f --show '%s'", r.img) == 0, "losetup: %s",
		      out);
	out[strcspn(out, "\n")] = 0;
	snprintf(r.dev, sizeof r.dev, "%s", out);
	long saved1 = -1, loaded2 = -1, loaded3 = -1, saved3 = -1;
	char *log = NULL;
	int ok = remade_mkfs(&r) == 0;
	if (ok && (log = remade_run(&r, 40)))
		saved1 = ids_in(log, "saved");
	free(log);
	if (ok && (log = remade_run(&r, 0)))
		loaded2 = ids_in(log, "loaded");
	free(log);
	/* the same device made anew: another filesystem at the same place */
	ok = ok && umount(r.fsdir) == 0 && remade_mkfs(&r) == 0;
	char *log3 = ok ? remade_run(&r, 1) : NULL;
	if (log3) {
		loaded3 = ids_in(log3, "loaded");
		saved3 = ids_in(log3, "saved");
	}
	/* clean up before judging: the mount, the device, what was saved */
	umount2(r.fsdir, MNT_DETACH);
	struct stat st;
	if (stat(r.dev, &st) == 0)
		run_cmd(NULL, 0, "rm -f /run/dcfs/ids-%u.%u-*", major(st.st_rdev),
			minor(st.st_rdev));
	run_cmd(NULL, 0, "losetup -d '%s'", r.dev);
	unlink(r.img);
	ck_assert_msg(ok, "%s: mkfs/mount/umount of %s failed", fstype, r.dev);
	ck_assert_msg(saved1 >= 40, "%s: first run saved %ld node ids", fstype, saved1);
	ck_assert_msg(loaded2 >= 40, "%s: a restart over the same filesystem loaded %ld", fstype,
		      loaded2);
	ck_assert_msg(log3, "%s: the run over the new filesystem failed", fstype);
	ck_assert_msg(loaded3 <= 0,
		      "%s: %ld node ids of the old filesystem loaded into the new one: %.1500s",
		      fstype, loaded3, log3);
	ck_assert_msg(saved3 >= 0 && saved3 < 10,
		      "%s: %ld node ids saved after one file (piled up?)", fstype, saved3);
	free(log3);
}

START_TEST(scale_ids_remade_fs)
{
	remade_on("ext4");
	remade_on("xfs");
}
END_TEST

/* ---- re-export through Samba ------------------------------------------- */

static int wait_port(int port, double secs)
{
	double end = now_s() + secs * deadline_scale();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "ss -ltn 'sport = :%d' | grep -q LISTEN", port);
	while (now_s() < end) {
		if (run_cmd(NULL, 0, "%s", cmd) == 0)
			return 0;
		sleep_ms(100);
	}
	return -1;
}

/* A NAS exports the mounted view: smbd on loopback serves the dcfs mount;
 * smbclient writes and reads back a streamed (dontcache) and a cached
 * file, and the backing files hold exactly what was sent. */
START_TEST(scale_samba_reexport)
{
	if (access("/usr/sbin/smbd", X_OK) != 0) {
		ck_abort_msg("smbd not installed (make deps installs samba)");
	}
	char err[512];
	const char *root = backing_root(FS_XFS, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	ck_assert_int_eq(own_mount_start(&g_s, root, "scale-smb",
					 "[global]\ndefault = cache\nmin_size = 0\n"
					 "[class video]\nextensions = mkv\npolicy = dontcache\n"),
			 0);
	OK(mkdir(PE_S("share"), 01777));
	OK(chmod(PE_S("share"), 01777));
	char dir[PATH_MAX], conf[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/smb", g_tmpdir);
	rm_rf(dir);
	OK(mkdir(dir, 0755));
	snprintf(conf, sizeof conf, "%s/smb.conf", dir);
	FILE *fp = fopen(conf, "w");
	ck_assert_ptr_nonnull(fp);
	const int port = 44539;
	fprintf(fp,
		"[global]\n server role = standalone server\n smb ports = %d\n"
		" interfaces = lo\n bind interfaces only = yes\n map to guest = Bad User\n"
		" disable netbios = yes\n load printers = no\n printing = bsd\n"
		" printcap name = /dev/null\n disable spoolss = yes\n"
		" pid directory = %s\n lock directory = %s\n state directory = %s\n"
		" cache directory = %s\n private dir = %s\n ncalrpc dir = %s/ncalrpc\n"
		" log file = %s/log.%%m\n\n"
		"[share]\n path = %s/share\n read only = no\n guest ok = yes\n"
		" force user = nobody\n",
		port, dir, dir, dir, dir, dir, dir, dir, g_s.mnt);
	fclose(fp);
	fflush(NULL);
	pid_t smbd = fork();
	ck_assert_int_ge(smbd, 0);
	if (smbd == 0) {
		setsid();
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		execl("/usr/sbin/smbd", "smbd", "--foreground", "--no-process-group", "-s", conf,
		      (char *)NULL);
		_exit(127);
	}
	int up = wait_port(port, 20);
	/* 8 MiB film and a small file, sent and fetched back */
	char film[PATH_MAX], small[PATH_MAX], out[8192];
	snprintf(film, sizeof film, "%s/film.src", dir);
	snprintf(small, sizeof small, "%s/small.src", dir);
	size_t flen = 8 << 20;
	char *data = malloc(flen);
	fill_pattern(data, flen, 42);
	ck_assert_int_eq(write_file(film, data, flen, 0644), 0);
	ck_assert_int_eq(write_file(small, "hello samba\n", 12, 0644), 0);
	int rc =
		up < 0 ? -1
		       : run_cmd(out, sizeof out,
				 "cd '%s' && timeout 60 smbclient //127.0.0.1/share -p %d -N -m SMB3 "
				 "-c 'put film.src film.mkv; put small.src small.txt; "
				 "get film.mkv film.back; get small.txt small.back' 2>&1",
				 dir, port);
	kill(-smbd, SIGTERM);
	kill(smbd, SIGTERM);
	waitpid(smbd, NULL, 0);
	ck_assert_msg(up == 0, "smbd did not listen on port %d", port);
	ck_assert_msg(rc == 0, "smbclient failed (%d): %s", rc, out);
	size_t n1, n2, n3, n4;
	char bpath[PATH_MAX];
	snprintf(bpath, sizeof bpath, "%s/film.back", dir);
	char *b1 = slurp(bpath, &n1);
	char *b2 = slurp(PE_S("share/film.mkv"), &n2);
	snprintf(bpath, sizeof bpath, "%s/small.back", dir);
	char *b3 = slurp(bpath, &n3);
	char *b4 = slurp(PE_S("share/small.txt"), &n4);
	ck_assert_msg(b1 && n1 == flen && memcmp(b1, data, flen) == 0, "film fetched back differs");
	ck_assert_msg(b2 && n2 == flen && memcmp(b2, data, flen) == 0, "backing film differs");
	ck_assert_msg(b3 && n3 == 12 && b4 && n4 == 12 && memcmp(b4, "hello samba\n", 12) == 0,
		      "small file differs");
	/* the film went through the streaming class, and belongs to nobody */
	char *pol = xattr_str(PM_S("share/film.mkv"), "user.dcfs.policy");
	ck_assert_msg(pol && strncmp(pol, "dontcache", 9) == 0, "film policy: %s", pol ? pol : "");
	struct stat st;
	OK(stat(PE_S("share/film.mkv"), &st));
	ck_assert_int_eq(st.st_uid, 65534);
	free(pol);
	free(b1);
	free(b2);
	free(b3);
	free(b4);
	free(data);
	scale_unmount();
}
END_TEST

static long long requests(const char *op)
{
	long long v = stats_get(g_s.mnt, "requests", op);
	return v < 0 ? 0 : v; /* an opcode not seen yet is not listed */
}

static void write_bytes(const char *path, size_t len)
{
	static char buf[65536];
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
	ck_assert_msg(fd >= 0, "create %s: %s", path, strerror(errno));
	memset(buf, 'x', sizeof buf);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	OK(close(fd));
}

/* Round trips dcfs saves (dcfs(8), METADATA ROUND TRIPS), counted by
 * `dcfs stat`: no FLUSH at the close of cache-class handles on a local
 * backing filesystem while streaming handles keep it (their close returns
 * deferred write errors), and READDIRPLUS for every batch of a listing, so
 * stat'ing what was listed costs no LOOKUP per name. */
START_TEST(scale_metadata_round_trips)
{
	char err[512], name[64];
	const char *root = backing_root(FS_XFS, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	ck_assert_msg(own_mount_start(&g_s, root, "round-trips",
				      "[global]\ndefault = cache\nmin_size = 0\n\n"
				      "[class bench]\nextensions = stream\npolicy = dontcache\n") ==
			      0,
		      "mount: %s", g_s.err);
	long long c0 = requests("create"), f0 = requests("flush");
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof name, "c%03d", i);
		write_bytes(PM_S(name), 1024);
	}
	ck_assert_int_eq(requests("create") - c0, 100);
	ck_assert_msg(requests("flush") == f0, "%lld FLUSH requests for 100 cache-class closes",
		      requests("flush") - f0);
	write_bytes(PM_S("s.stream"), 65536);
	ck_assert_msg(requests("flush") > f0, "no FLUSH at the close of a streaming handle");

	/* 2000 names made behind dcfs's back: the kernel knows none of them. */
	OK(mkdir(PE_S("list"), 0755));
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof name, "list/f%04d", i);
		write_bytes(PE_S(name), 10);
	}
	long long l0 = requests("lookup"), p0 = requests("readdirplus");
	long n = 0;
	unsigned long long inos = 0;
	int errs = 0;
	walk(PM_S("list"), &n, &inos, &errs);
	ck_assert_msg(n == 2000 && errs == 0, "listed %ld entries, %d errors", n, errs);
	ck_assert_msg(requests("readdirplus") - p0 > 10, "%lld READDIRPLUS for 2000 entries",
		      requests("readdirplus") - p0);
	ck_assert_msg(requests("lookup") - l0 < 20, "%lld LOOKUPs to stat 2000 listed entries",
		      requests("lookup") - l0);
	scale_unmount();
}
END_TEST

/* Missing names are remembered for negative_timeout, by default the
 * entry_timeout of any cache mode (long here, so that no expiry on a busy
 * machine changes the count): a create with O_TRUNC after a stat that
 * found the name missing costs no second LOOKUP; with negative_timeout=0
 * it does. */
static long long slab_drops(void)
{
	char *v = read_file_str("/proc/vmstat"), *p = v ? strstr(v, "drop_slab ") : NULL;
	long long n = p ? atoll(p + strlen("drop_slab ")) : -1;

	free(v);
	return n;
}

static long long probe_then_create(const char *opts)
{
	char err[512];
	struct stat st;
	const char *root = backing_root(FS_XFS, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	ck_assert_msg(own_mount_start_opts(&g_s, root, "negative", "[global]\ndefault = cache\n",
					   opts) == 0,
		      "mount: %s", g_s.err);
	long long n = -1;
	unlink(PE_S("probe"));
	/* someone's drop_caches in between drops the negative entry: again */
	for (int try = 0; try < 5; try++) {
		long long d0 = slab_drops();
		OK(stat(g_s.mnt, &st));
		long long l0 = requests("lookup");
		ck_assert_msg(stat(PM_S("probe"), &st) < 0 && errno == ENOENT, "probe exists");
		int fd = open(PM_S("probe"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
		ck_assert_msg(fd >= 0, "create: %s", strerror(errno));
		OK(close(fd));
		n = requests("lookup") - l0;
		OK(unlink(PM_S("probe")));
		if (slab_drops() == d0)
			break;
	}
	scale_unmount();
	return n;
}

START_TEST(scale_negative_entries)
{
	long long n = probe_then_create("entry_timeout=3600");
	ck_assert_msg(n == 1, "%lld LOOKUPs for a stat of a missing name and its create", n);
	n = probe_then_create("entry_timeout=3600,negative_timeout=0");
	ck_assert_msg(n == 2, "negative_timeout=0: %lld LOOKUPs for a stat and a create", n);
}
END_TEST

/* Descriptors of the daemon open on a deleted file whose path ends in tail. */
static int daemon_fds_on_deleted(pid_t pid, const char *tail)
{
	char dir[64], want[PATH_MAX];
	int n = 0;

	snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof want, "%s (deleted)", tail);
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	struct dirent *de;
	while ((de = readdir(d))) {
		char link[PATH_MAX];
		ssize_t len = readlinkat(dirfd(d), de->d_name, link, sizeof link - 1);
		if (len <= 0)
			continue;
		link[len] = 0;
		size_t ll = strlen(link), wl = strlen(want);
		if (ll >= wl && !strcmp(link + ll - wl, want))
			n++;
	}
	closedir(d);
	return n;
}

/*
 * A file deleted on the backing filesystem, not through the mount, must
 * give its space back: the daemon's cached O_PATH fd of it kept the inode
 * (and 64 MiB here; the write benchmark's 8 GiB streams filled its image)
 * until the kernel forgot the node, which may be never.  A file that is
 * still open through the mount keeps working, as natively.
 */
START_TEST(scale_deleted_outside_frees_space)
{
	scale_mount("outside-rm");
	int fd = open(PM_S("gone.dat"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_msg(fd >= 0, "create: %s", strerror(errno));
	char *buf = calloc(1, 1 << 20);
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(write(fd, buf, 1 << 20), 1 << 20);
	OK(fsync(fd));
	OK(close(fd));
	int kept = open(PM_S("kept.dat"), O_RDWR | O_CREAT | O_TRUNC, 0644);
	ck_assert_msg(kept >= 0, "create: %s", strerror(errno));
	ck_assert_int_eq(pwrite(kept, "still here", 10, 0), 10);
	struct stat st;
	OK(stat(PM_S("gone.dat"), &st)); /* the node stays known to the kernel */
	OK(unlink(PE_S("gone.dat")));
	OK(unlink(PE_S("kept.dat")));

	double end = now_s() + 20 * deadline_scale();
	int n;
	while ((n = daemon_fds_on_deleted(g_s.d.pid, "/gone.dat")) > 0 && now_s() < end)
		sleep_ms(100);
	ck_assert_msg(
		n == 0,
		"the daemon still holds %d fds of a file deleted on the backing fs after 20 s", n);
	errno = 0;
	ck_assert_msg(stat(PM_S("gone.dat"), &st) < 0 && errno == ENOENT,
		      "stat of the deleted name: %s", strerror(errno));

	/* open through the mount, deleted outside: it works on */
	char got[16] = { 0 };
	ck_assert_int_eq(pread(kept, got, 10, 0), 10);
	ck_assert_str_eq(got, "still here");
	OK(fchmod(kept, 0600));
	OK(fstat(kept, &st));
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(st.st_nlink, 0);
	OK(close(kept));
	free(buf);
	scale_unmount();
}
END_TEST

/* In the runner process, so every forked test shares one backing fs. */
static void scale_setup(void)
{
	char err[512];
	backing_root(FS_XFS, err, sizeof err);
}

static void restart_setup(void)
{
	char err[512];
	backing_root(FS_EXT4, err, sizeof err);
	backing_root(FS_XFS, err, sizeof err);
}

Suite *scale_suite(void)
{
	Suite *s = suite_create("scale");
	TCase *tc = tcase_create("scale-xfs");
	tcase_add_unchecked_fixture(tc, scale_setup, NULL);
	tcase_set_timeout(tc, 300 * deadline_scale());
	tcase_add_test(tc, scale_tree_under_low_fd_limit);
	tcase_add_test(tc, scale_random_churn);
	tcase_add_test(tc, scale_export_handles);
	tcase_add_test(tc, scale_samba_reexport);
	suite_add_tcase(s, tc);
	tc = tcase_create("restart");
	tcase_add_unchecked_fixture(tc, restart_setup, NULL);
	tcase_set_timeout(tc, 60 * deadline_scale());
	tcase_add_test(tc, scale_export_restart);
	tcase_add_test(tc, scale_ids_remade_fs);
	suite_add_tcase(s, tc);
	tc = tcase_create("round-trips");
	tcase_add_unchecked_fixture(tc, scale_setup, NULL);
	tcase_set_timeout(tc, 60 * deadline_scale());
	tcase_add_test(tc, scale_metadata_round_trips);
	tcase_add_test(tc, scale_negative_entries);
	tcase_add_test(tc, scale_deleted_outside_frees_space);
	suite_add_tcase(s, tc);
	return s;
}
