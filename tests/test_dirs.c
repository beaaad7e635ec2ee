/* Directory operations through dcfs: mkdir/rmdir, readdir (incl. 10k
 * entries and concurrent modification), statfs, st_dev consistency. */
#include "own_mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

struct ent {
	char name[256];
	uint64_t ino;
	unsigned char type;
};

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ent *)a)->name, ((const struct ent *)b)->name);
}

/* Read up to max entries with getdents64 using a bufsize buffer per call.
 * If cb is set it is called once after the first call returned entries. */
static int list_fd(int fd, struct ent **out, size_t bufsize, void (*cb)(void *), void *cbarg)
{
	size_t cap = 1024, n = 0;
	struct ent *v = malloc(cap * sizeof *v);
	char *buf = malloc(bufsize);
	int calls = 0;
	for (;;) {
		long r = syscall(SYS_getdents64, fd, buf, bufsize);
		if (r < 0) {
			int e = errno;
			free(buf);
			free(v);
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		for (long off = 0; off < r;) {
			struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
			if (n == cap) {
				cap *= 2;
				v = realloc(v, cap * sizeof *v);
			}
			snprintf(v[n].name, sizeof v[n].name, "%s", d->d_name);
			v[n].ino = d->d_ino;
			v[n].type = d->d_type;
			n++;
			off += d->d_reclen;
		}
		if (++calls == 1 && cb)
			cb(cbarg);
	}
	free(buf);
	*out = v;
	return (int)n;
}

static int list_dir(const char *path, struct ent **out, size_t bufsize)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -1;
	int n = list_fd(fd, out, bufsize, NULL, NULL);
	close(fd);
	return n;
}

START_TEST(dirs_mkdir_rmdir)
{
	T_BEGIN();
	DUAL(mkdir(P("d"), 0755));
	DUAL_EXPECT(mkdir(P("d"), 0755), -EEXIST);
	DUAL_EXPECT(mkdir(P("nope/d"), 0755), -ENOENT);
	DUAL(mkdir(P("d/sub"), 0700));
	DUAL(mkdir(P("m"), 07777)); /* sticky/setgid bits with umask */
	check_dual_stat("m");
	check_dual_stat("d");
	check_dual_stat("d/sub");
	check_identity("d");
	check_identity("d/sub");
	DUAL(close(open(P("d/f"), O_CREAT | O_WRONLY, 0644)));
	DUAL_EXPECT(mkdir(P("d/f"), 0755), -EEXIST);
	DUAL_EXPECT(mkdir(P("d/f/x"), 0755), -ENOTDIR);
	DUAL_EXPECT(rmdir(P("d")), -ENOTEMPTY);
	DUAL_EXPECT(rmdir(P("d/f")), -ENOTDIR);
	DUAL_EXPECT(unlink(P("d/sub")), -EISDIR);
	DUAL_EXPECT(rmdir(P("d/sub/.")), -EINVAL);
	DUAL_EXPECT(rmdir(P("d/missing")), -ENOENT);
	DUAL(rmdir(P("d/sub")));
	DUAL_EXPECT(access(P("d/sub"), F_OK), -ENOENT);
	DUAL(unlink(P("d/f")));
	DUAL(rmdir(P("d")));
	/* nlink of parent follows subdirs */
	DUAL(mkdir(P("p"), 0755));
	for (int i = 0; i < 5; i++)
		DUAL(mkdir(P("p/c%d", i), 0755));
	check_dual_stat("p");
	check_identity("p");
	DUAL(rmdir(P("p/c0")));
	check_dual_stat("p");
	/* dot-dot resolves to the parent inode */
	struct stat a, b;
	ck_assert_int_eq(stat(PM("p/c1/.."), &a), 0);
	ck_assert_int_eq(stat(PM("p"), &b), 0);
	ck_assert_uint_eq(a.st_ino, b.st_ino);
	/* long names */
	char nm[300];
	memset(nm, 'd', 255);
	nm[255] = 0;
	DUAL(mkdir(P("%s", nm), 0755));
	nm[255] = 'd';
	nm[256] = 0;
	DUAL_EXPECT(mkdir(P("%s", nm), 0755), -ENAMETOOLONG);
}
END_TEST

START_TEST(dirs_readdir_types)
{
	T_BEGIN();
	DUAL(mkdir(P("dir"), 0755));
	DUAL(close(open(P("reg"), O_CREAT | O_WRONLY, 0644)));
	DUAL(symlink("reg", P("lnk")));
	DUAL(mkfifo(P("fifo"), 0644));
	DUAL(mknod(P("sock"), S_IFSOCK | 0644, 0));
	DUAL(mknod(P("chr"), S_IFCHR | 0644, makedev(1, 3)));
	DUAL(mknod(P("blk"), S_IFBLK | 0644, makedev(7, 200)));
	DUAL(link(P("reg"), P("hard")));
	struct ent *r, *m, *e;
	int nr = list_dir(ROOTS[0], &r, 32768);
	int nm = list_dir(ROOTS[1], &m, 32768);
	int ne = list_dir(EROOT, &e, 32768);
	ck_assert_int_eq(nr, 10);
	ck_assert_int_eq(nm, nr);
	ck_assert_int_eq(ne, nr);
	qsort(r, nr, sizeof *r, ent_cmp);
	qsort(m, nm, sizeof *m, ent_cmp);
	qsort(e, ne, sizeof *e, ent_cmp);
	for (int i = 0; i < nm; i++) {
		ck_assert_str_eq(m[i].name, r[i].name);
		ck_assert_msg(m[i].type == e[i].type, "%s: d_type dcfs %d backing %d", m[i].name,
			      m[i].type, e[i].type);
		if (strcmp(m[i].name, "..") == 0)
			continue; /* parent of the test dir: fine either way */
		ck_assert_msg(m[i].ino == e[i].ino, "%s: d_ino dcfs %llu backing %llu", m[i].name,
			      (unsigned long long)m[i].ino, (unsigned long long)e[i].ino);
		struct stat st;
		ck_assert_int_eq(lstat(PM("%s", m[i].name), &st), 0);
		ck_assert_msg(st.st_ino == m[i].ino, "%s: d_ino %llu != st_ino %llu", m[i].name,
			      (unsigned long long)m[i].ino, (unsigned long long)st.st_ino);
		if (strcmp(m[i].name, ".") != 0)
			check_identity(m[i].name);
	}
	free(r);
	free(m);
	free(e);
	/* readdir through libc (opendir/readdir) too */
	DIR *d = opendir(ROOTS[1]);
	ck_assert_ptr_nonnull(d);
	int cnt = 0;
	while (readdir(d))
		cnt++;
	closedir(d);
	ck_assert_int_eq(cnt, 10);
	DUAL_EXPECT(open(P("reg"), O_RDONLY | O_DIRECTORY), -ENOTDIR);
}
END_TEST

#define BIG 10000

START_TEST(dirs_large_10k)
{
	T_BEGIN();
	DUAL(mkdir(P("big"), 0755));
	/* half created through the mount, half on the backing dir */
	for (int i = 0; i < BIG; i++) {
		const char *p = (i % 2) ? PM("big/file-%05d-with-a-longish-name", i)
					: PE("big/file-%05d-with-a-longish-name", i);
		int fd = open(p, O_CREAT | O_WRONLY | O_EXCL, 0644);
		ck_assert_msg(fd >= 0, "create %s: %s", p, strerror(errno));
		close(fd);
	}
	struct ent *m, *e;
	int ne = list_dir(PE("big"), &e, 1 << 16);
	ck_assert_int_eq(ne, BIG + 2);
	size_t bufs[] = { 1024, 1 << 16 };
	for (int b = 0; b < 2; b++) {
		int nm = list_dir(PM("big"), &m, bufs[b]);
		ck_assert_msg(nm == BIG + 2, "listing with %zu byte buffer: %d entries, want %d",
			      bufs[b], nm, BIG + 2);
		qsort(m, nm, sizeof *m, ent_cmp);
		if (b == 0)
			qsort(e, ne, sizeof *e, ent_cmp);
		for (int i = 0; i < nm; i++) {
			ck_assert_msg(strcmp(m[i].name, e[i].name) == 0,
				      "entry %d: dcfs '%s' backing '%s' (duplicate or missing)", i,
				      m[i].name, e[i].name);
			if (strcmp(m[i].name, ".."))
				ck_assert_msg(m[i].ino == e[i].ino, "%s: d_ino %llu vs %llu",
					      m[i].name, (unsigned long long)m[i].ino,
					      (unsigned long long)e[i].ino);
		}
		free(m);
	}
	free(e);
	/* telldir/seekdir: resuming from a cookie replays the same tail */
	DIR *d = opendir(PM("big"));
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	for (int i = 0; i < 4000; i++)
		ck_assert_ptr_nonnull(readdir(d));
	long pos = telldir(d);
	char names[50][256];
	for (int i = 0; i < 50; i++) {
		de = readdir(d);
		ck_assert_ptr_nonnull(de);
		snprintf(names[i], 256, "%s", de->d_name);
	}
	while (readdir(d))
		;
	seekdir(d, pos);
	for (int i = 0; i < 50; i++) {
		de = readdir(d);
		ck_assert_ptr_nonnull(de);
		ck_assert_str_eq(de->d_name, names[i]);
	}
	rewinddir(d);
	int cnt = 0;
	while (readdir(d))
		cnt++;
	ck_assert_int_eq(cnt, BIG + 2);
	closedir(d);
	/* stat all through the mount (lookup of many inodes) */
	struct stat st;
	for (int i = 0; i < BIG; i += 7)
		ck_assert_int_eq(lstat(PM("big/file-%05d-with-a-longish-name", i), &st), 0);
	/* unlink all through the mount, then rmdir */
	for (int i = 0; i < BIG; i++)
		ck_assert_int_eq(unlink(PM("big/file-%05d-with-a-longish-name", i)), 0);
	ck_assert_int_eq(rmdir(PM("big")), 0);
	ck_assert_int_eq(access(PE("big"), F_OK), -1);
}
END_TEST

/* Entries added / removed while a listing is in progress. */
#define MUT_N 3000
struct mut_arg {
	const char *dir; /* where to mutate */
};

static void mutate(void *a)
{
	const char *dir = ((struct mut_arg *)a)->dir;
	char p[PATH_MAX];
	for (int i = 0; i < MUT_N; i += 3) {
		snprintf(p, sizeof p, "%s/e%05d", dir, i);
		unlink(p);
	}
	for (int i = 0; i < 1000; i++) {
		snprintf(p, sizeof p, "%s/new%05d", dir, i);
		close(open(p, O_CREAT | O_WRONLY, 0644));
	}
}

static void check_mutation_listing(const char *listdir, const char *mutdir, const char *what)
{
	char p[PATH_MAX];
	for (int i = 0; i < MUT_N; i++) {
		snprintf(p, sizeof p, "%s/e%05d", listdir, i);
		int fd = open(p, O_CREAT | O_WRONLY, 0644);
		ck_assert_msg(fd >= 0, "%s: create %s: %s", what, p, strerror(errno));
		close(fd);
	}
	int fd = open(listdir, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(fd, 0);
	struct mut_arg ma = { mutdir };
	struct ent *v;
	int n = list_fd(fd, &v, 2048, mutate, &ma);
	ck_assert_msg(n >= 0, "%s: getdents failed: %s", what, strerror(errno));
	close(fd);
	static unsigned char seen[MUT_N];
	memset(seen, 0, sizeof seen);
	qsort(v, n, sizeof *v, ent_cmp);
	for (int i = 0; i < n; i++) {
		if (i > 0)
			ck_assert_msg(strcmp(v[i].name, v[i - 1].name) != 0,
				      "%s: entry '%s' listed twice", what, v[i].name);
		int k;
		if (sscanf(v[i].name, "e%d", &k) == 1 && k >= 0 && k < MUT_N)
			seen[k]++;
	}
	for (int i = 0; i < MUT_N; i++)
		if (i % 3 != 0)
			ck_assert_msg(seen[i] == 1, "%s: unchanged entry e%05d seen %d times", what,
				      i, seen[i]);
	free(v);
	/* a fresh listing shows exactly the current state */
	fd = open(listdir, O_RDONLY | O_DIRECTORY);
	n = list_fd(fd, &v, 4096, NULL, NULL);
	close(fd);
	ck_assert_msg(n == 2 + MUT_N - MUT_N / 3 + 1000, "%s: relisting gave %d entries, want %d",
		      what, n, 2 + MUT_N - MUT_N / 3 + 1000);
	free(v);
}

START_TEST(dirs_readdir_mutation)
{
	T_BEGIN();
	/* validate the expectation on the backing fs itself */
	DUAL(mkdir(P("m1"), 0755));
	DUAL(mkdir(P("m2"), 0755));
	check_mutation_listing(PR("m1"), PR("m1"), "backing");
	/* list through dcfs, mutate through dcfs */
	check_mutation_listing(PM("m1"), PM("m1"), "dcfs (mutations via dcfs)");
	/* list through dcfs, mutate directly on the backing dir */
	check_mutation_listing(PM("m2"), PE("m2"), "dcfs (mutations on backing)");
}
END_TEST

START_TEST(dirs_statfs)
{
	T_BEGIN();
	struct statvfs m, b;
	ck_assert_int_eq(statvfs(g_mnt, &m), 0);
	ck_assert_int_eq(statvfs(g_exp, &b), 0);
	ck_assert_uint_eq(m.f_bsize, b.f_bsize);
	ck_assert_uint_eq(m.f_frsize, b.f_frsize);
	ck_assert_uint_eq(m.f_blocks * m.f_frsize, b.f_blocks * b.f_frsize);
	ck_assert_uint_eq(m.f_files, b.f_files);
	ck_assert_uint_eq(m.f_namemax, b.f_namemax);
	/* free counts: allow some slack for concurrent activity */
	long long d = (long long)m.f_bfree - (long long)b.f_bfree;
	ck_assert_msg(llabs(d) < 2048, "f_bfree dcfs %llu backing %llu",
		      (unsigned long long)m.f_bfree, (unsigned long long)b.f_bfree);
	d = (long long)m.f_ffree - (long long)b.f_ffree;
	ck_assert_msg(llabs(d) < 64, "f_ffree dcfs %llu backing %llu",
		      (unsigned long long)m.f_ffree, (unsigned long long)b.f_ffree);
	/* statfs on a file inside the mount */
	DUAL(close(open(P("f"), O_CREAT | O_WRONLY, 0644)));
	struct statvfs mf;
	ck_assert_int_eq(statvfs(PM("f"), &mf), 0);
	ck_assert_uint_eq(mf.f_blocks, m.f_blocks);
	DUAL_EXPECT(statvfs(P("missing"), &mf), -ENOENT);
	/* fstatvfs on fd */
	int fd = open(PM("f"), O_RDONLY);
	ck_assert_int_eq(fstatvfs(fd, &mf), 0);
	close(fd);
	ck_assert_uint_eq(mf.f_files, m.f_files);
}
END_TEST

START_TEST(dirs_st_dev_consistent)
{
	T_BEGIN();
	DUAL(mkdir(P("a"), 0755));
	DUAL(mkdir(P("a/b"), 0755));
	DUAL(close(open(P("a/b/f"), O_CREAT | O_WRONLY, 0644)));
	DUAL(symlink("f", P("a/b/l")));
	DUAL(mkfifo(P("a/fifo"), 0600));
	const char *rels[] = { "", "a", "a/b", "a/b/f", "a/b/l", "a/fifo" };
	struct stat root;
	ck_assert_int_eq(lstat(g_mnt, &root), 0);
	for (size_t i = 0; i < sizeof rels / sizeof rels[0]; i++) {
		struct stat st;
		ck_assert_int_eq(lstat(PM("%s", rels[i]), &st), 0);
		ck_assert_msg(st.st_dev == root.st_dev, "%s: st_dev %#llx != mount root %#llx",
			      rels[i], (unsigned long long)st.st_dev,
			      (unsigned long long)root.st_dev);
		int fd = open(PM("%s", rels[i]), O_PATH | O_NOFOLLOW);
		ck_assert_int_ge(fd, 0);
		struct stat fst;
		ck_assert_int_eq(fstat(fd, &fst), 0);
		close(fd);
		ck_assert_uint_eq(fst.st_dev, st.st_dev);
		ck_assert_uint_eq(fst.st_ino, st.st_ino);
		if (rels[i][0])
			check_identity(rels[i]);
	}
	/* mount root itself maps to the exported dir */
	struct stat e;
	ck_assert_int_eq(lstat(g_exp, &e), 0);
	ck_assert_uint_eq(root.st_ino, e.st_ino);
}
END_TEST

START_TEST(dirs_setgid_inherit)
{
	T_BEGIN();
	DUAL(mkdir(P("sg"), 0775));
	DUAL(chown(P("sg"), 0, 4242));
	DUAL(chmod(P("sg"), 02775));
	DUAL(close(open(P("sg/f"), O_CREAT | O_WRONLY, 0644)));
	DUAL(mkdir(P("sg/sub"), 0755));
	DUAL(mkfifo(P("sg/fifo"), 0644));
	DUAL(symlink("f", P("sg/l")));
	check_dual_stat("sg");
	check_dual_stat("sg/f");
	check_dual_stat("sg/sub"); /* inherits gid and S_ISGID */
	check_dual_stat("sg/fifo");
	check_dual_stat("sg/l");
	check_identity("sg/sub");
	struct stat st;
	ck_assert_int_eq(stat(PM("sg/sub"), &st), 0);
	ck_assert_uint_eq(st.st_gid, 4242);
	ck_assert(st.st_mode & S_ISGID);
}
END_TEST

/* fsync(2) and fdatasync(2) of a directory: FSYNCDIR, after a change in
 * it; a read-only directory fd may be synced too. */
START_TEST(dirs_fsync)
{
	T_BEGIN();
	DUAL(mkdir(P("d"), 0755));
	struct fdp d = DUALFD(open(P("d"), O_RDONLY | O_DIRECTORY));
	DUAL(close(open(P("d/f"), O_CREAT | O_WRONLY, 0644)));
	DUAL(fsync(F(d)));
	DUAL(rename(P("d/f"), P("d/g")));
	DUAL(fdatasync(F(d)));
	close_fdp(d);
	check_dual_stat("d/g");
	/* the requests reached dcfs (not a bind mount of the self-test) */
	if (g_cfg->mm != MM_BIND)
		ck_assert_int_ge(stats_get(g_mnt, "requests", "fsyncdir"), 2);
}
END_TEST

void add_dirs_tests(TCase *tc)
{
	tcase_add_test(tc, dirs_mkdir_rmdir);
	tcase_add_test(tc, dirs_readdir_types);
	if (CFG_META_HEAVY()) {
		tcase_add_test(tc, dirs_large_10k);
		tcase_add_test(tc, dirs_readdir_mutation);
	}
	tcase_add_test(tc, dirs_statfs);
	tcase_add_test(tc, dirs_fsync);
	tcase_add_test(tc, dirs_st_dev_consistent);
	tcase_add_test(tc, dirs_setgid_inherit);
}
