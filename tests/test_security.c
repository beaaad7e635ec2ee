/* Security suite: dcfs runs as root with allow_other over directories that
 * ordinary users also write directly. Every test here runs an attack as an
 * unprivileged user (TEST_UID, with TEST_UID2 as the victim) against a real
 * mount and asserts that it never succeeds. Races are bounded loops in C
 * (DCFS_RACE_SECONDS, default 8 s each).
 *
 * Each test mounts a dcfs of its own over <ext4>/export-sec-<test> with
 * -o allow_other (and the variant's options), and unmounts it at the end
 * requiring a clean exit. */
#include "harness.h"
#include "own_mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define ATTACKER TEST_UID
#define ATTACKER_G TEST_GID
#define VICTIM TEST_UID2
#define VICTIM_G TEST_GID2

static const char *const variant_opts[] = { NULL, "nodefault_permissions" };
static const char *const variant_names[] = { "", "-ndp" };

static double race_seconds(void)
{
	const char *s = getenv("DCFS_RACE_SECONDS");
	double v = s ? atof(s) : 8.0;
	return v > 0 ? v : 8.0;
}

static struct own_mount g_m;

/* The test's mount in the variant's options (and more), its export emptied. */
static void sec_mount(const char *name, int variant, const char *more_opts)
{
	char tag[128], opts[256];
	snprintf(tag, sizeof tag, "sec-%s%s", name, variant_names[variant]);
	snprintf(opts, sizeof opts, "%s%s%s", variant_opts[variant] ? variant_opts[variant] : "",
		 variant_opts[variant] && more_opts ? "," : "", more_opts ? more_opts : "");
	own_mount_ck_with(&g_m, tag, "[global]\ndefault = cache\n",
			  &(struct own_mount_how){ .opts = opts[0] ? opts : NULL, .fresh = true });
}

#define EXPP(rel) path_at(g_m.exp, "%s", rel)
#define MNTP(rel) path_at(g_m.mnt, "%s", rel)

/* Fork a child that drops to uid/gid (no supplementary groups) and runs
 * fn(arg) until it returns; its return value is the exit status. */
static pid_t spawn_as(uid_t uid, gid_t gid, int (*fn)(void *), void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
		    setresuid(uid, uid, uid) < 0)
			_exit(100);
		umask(0);
		_exit(fn(arg));
	}
	return pid;
}

static int wait_child(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- 1: set-id create racing a symlink renamed over the new name -------- */

struct swap_arg {
	const char *dir;    /* backing dir where the names live */
	const char *target; /* what the symlink points to */
	double end;
};

/* Backing side: keep renaming a fresh symlink over "x". */
static int swap_symlink_loop(void *a)
{
	struct swap_arg *s = a;
	int dfd = open(s->dir, O_PATH | O_DIRECTORY);
	if (dfd < 0)
		return 1;
	while (now_s() < s->end) {
		unlinkat(dfd, "s", 0);
		if (symlinkat(s->target, dfd, "s") == 0)
			renameat(dfd, "s", dfd, "x");
	}
	return 0;
}

struct create_arg {
	const char *dir; /* the same dir through the mount */
	double end;
	long tries;
};

/* Mount side: create "x" with set-id bits again and again, by open(2) and
 * by mknod(2). */
static int create_setid_loop(void *a)
{
	struct create_arg *c = a;
	char x[PATH_MAX];
	snprintf(x, sizeof x, "%s/x", c->dir);
	for (long i = 0; now_s() < c->end; i++) {
		unlink(x);
		if (i & 1) {
			mknod(x, S_IFREG | 06777, 0);
		} else {
			int fd = open(x, O_CREAT | O_EXCL | O_WRONLY, 06777);
			if (fd >= 0)
				close(fd);
		}
	}
	return 0;
}

static void create_chmod_race(int variant)
{
	sec_mount("chmod-race", variant, NULL);
	/* A root-owned 0600 decoy outside the attacker's reach. */
	char decoy[PATH_MAX];
	snprintf(decoy, sizeof decoy, "%s/decoy", g_m.exp);
	ck_assert_int_eq(write_file(decoy, "root secret\n", 12, 0600), 0);
	OK(chmod(decoy, 0600));
	/* The attacker's own directory, written both ways. */
	OK(mkdir(EXPP("att"), 0755));
	OK(chown(EXPP("att"), ATTACKER, ATTACKER_G));

	double end = now_s() + race_seconds();
	struct swap_arg sa = { EXPP("att"), decoy, end };
	struct create_arg ca = { MNTP("att"), end, 0 };
	pid_t p1 = spawn_as(ATTACKER, ATTACKER_G, swap_symlink_loop, &sa);
	pid_t p2 = spawn_as(ATTACKER, ATTACKER_G, create_setid_loop, &ca);
	pid_t p3 = spawn_as(ATTACKER, ATTACKER_G, create_setid_loop, &ca);
	ck_assert_int_eq(wait_child(p1), 0);
	ck_assert_int_eq(wait_child(p2), 0);
	ck_assert_int_eq(wait_child(p3), 0);

	struct stat st;
	OK(stat(decoy, &st));
	ck_assert_msg((st.st_mode & 07777) == 0600 && st.st_uid == 0 && st.st_gid == 0,
		      "root-owned 0600 decoy became mode %04o owner %u:%u through a create race",
		      st.st_mode & 07777, st.st_uid, st.st_gid);
	/* Whatever the attacker created belongs to the attacker. */
	if (lstat(EXPP("att/x"), &st) == 0 && !S_ISLNK(st.st_mode))
		ck_assert_msg(st.st_uid == ATTACKER, "attacker's x owned by %u", st.st_uid);
	own_unmount_ck(&g_m);
}

START_TEST(sec_create_chmod_race)
{
	create_chmod_race(_i);
}
END_TEST

/* ---- 2: O_CREAT without O_EXCL racing a backing-side create --------------- */

struct link_arg {
	const char *dir;
	double end;
};

/* A service (root) in the backing tree: make "y" appear and disappear as a
 * hard link of the victim's file. */
static int link_loop(void *a)
{
	struct link_arg *l = a;
	int dfd = open(l->dir, O_PATH | O_DIRECTORY);
	if (dfd < 0)
		return 1;
	while (now_s() < l->end) {
		if (linkat(dfd, "v", dfd, "y", 0) == 0)
			unlinkat(dfd, "y", 0);
	}
	return 0;
}

/* Attacker: open "y" with O_CREAT (no O_EXCL) through the mount; count the
 * opens that landed on someone else's file. */
static int creat_open_loop(void *a)
{
	struct create_arg *c = a;
	char y[PATH_MAX];
	snprintf(y, sizeof y, "%s/y", c->dir);
	int stolen = 0;
	while (now_s() < c->end) {
		int fd = open(y, O_CREAT | O_RDWR | ((stolen & 1) ? O_TRUNC : 0), 0644);
		if (fd < 0)
			continue;
		struct stat st;
		if (fstat(fd, &st) == 0 && st.st_uid != getuid())
			stolen++;
		close(fd);
		if (st.st_uid == getuid())
			unlink(y);
	}
	return stolen > 100 ? 100 : stolen;
}

static void create_open_race(int variant)
{
	sec_mount("creat-race", variant, NULL);
	OK(mkdir(EXPP("shared"), 01777));
	OK(chmod(EXPP("shared"), 01777));
	ck_assert_int_eq(write_file(EXPP("shared/v"), "victim data\n", 12, 0600), 0);
	OK(chown(EXPP("shared/v"), VICTIM, VICTIM_G));

	double end = now_s() + race_seconds();
	struct link_arg la = { EXPP("shared"), end };
	struct create_arg ca = { MNTP("shared"), end, 0 };
	pid_t p1 = fork();
	ck_assert_int_ge(p1, 0);
	if (p1 == 0)
		_exit(link_loop(&la));
	pid_t p2 = spawn_as(ATTACKER, ATTACKER_G, creat_open_loop, &ca);
	pid_t p3 = spawn_as(ATTACKER, ATTACKER_G, creat_open_loop, &ca);
	ck_assert_int_eq(wait_child(p1), 0);
	int s2 = wait_child(p2), s3 = wait_child(p3);
	ck_assert_msg(s2 == 0 && s3 == 0,
		      "attacker opened the victim's 0600 file %d times through O_CREAT", s2 + s3);
	size_t len;
	char *data = slurp(EXPP("shared/v"), &len);
	ck_assert_msg(data && len == 12 && memcmp(data, "victim data\n", 12) == 0,
		      "victim's file was changed (%zu bytes)", data ? len : 0);
	free(data);
	own_unmount_ck(&g_m);
}

START_TEST(sec_create_open_race)
{
	create_open_race(_i);
}
END_TEST

/* ---- 2b: an open is checked with the caller's identity, even when the
 * kernel's cached attributes are stale ------------------------------------- */

static long open_rdonly(void *p)
{
	int fd = open(p, O_RDONLY);
	if (fd >= 0)
		close(fd);
	return fd < 0 ? -1 : 0;
}

static long open_wr_trunc(void *p)
{
	int fd = open(p, O_WRONLY | O_TRUNC);
	if (fd >= 0)
		close(fd);
	return fd < 0 ? -1 : 0;
}

START_TEST(sec_open_stale_attrs)
{
	/* Long attribute cache: the kernel keeps believing the old mode (names
	 * are never cached with nodefault_permissions, dcfs(8)). */
	sec_mount("stale-open", _i, _i ? "attr_timeout=300" : "attr_timeout=300,entry_timeout=300");
	ck_assert_int_eq(write_file(EXPP("f"), "private\n", 8, 0666), 0);
	OK(chmod(EXPP("f"), 0666));
	OK(chown(EXPP("f"), VICTIM, VICTIM_G));
	struct stat st;
	OK(stat(MNTP("f"), &st)); /* the kernel caches 0666 */
	/* The owner locks the file down directly in the backing tree. */
	OK(chmod(EXPP("f"), 0600));
	struct res r = run_as(ATTACKER, ATTACKER_G, open_rdonly, (void *)MNTP("f"));
	ck_assert_msg(r.ret < 0 && r.err == EACCES,
		      "open of a 0600 file of another user with stale 0666 attrs: %s", res_str(r));
	r = run_as(ATTACKER, ATTACKER_G, open_wr_trunc, (void *)MNTP("f"));
	ck_assert_msg(r.ret < 0 && r.err == EACCES, "O_TRUNC open with stale attrs: %s",
		      res_str(r));
	OK(stat(EXPP("f"), &st));
	ck_assert_int_eq(st.st_size, 8);
	own_unmount_ck(&g_m);
}
END_TEST

/* ---- cross-user hard links and renames ----------------------------------- */

struct two_paths {
	const char *a, *b;
};

static long do_link(void *p)
{
	struct two_paths *t = p;
	return link(t->a, t->b);
}

static long do_rename(void *p)
{
	struct two_paths *t = p;
	return rename(t->a, t->b);
}

static long do_unlink(void *p)
{
	return unlink(p);
}

START_TEST(sec_cross_user_links_renames)
{
	sec_mount("xuser", _i, NULL);
	/* victim's private dir and file, attacker's dir, a shared sticky dir */
	OK(mkdir(EXPP("vdir"), 0755));
	OK(chown(EXPP("vdir"), VICTIM, VICTIM_G));
	ck_assert_int_eq(write_file(EXPP("vdir/secret"), "s\n", 2, 0600), 0);
	OK(chown(EXPP("vdir/secret"), VICTIM, VICTIM_G));
	OK(mkdir(EXPP("adir"), 0755));
	OK(chown(EXPP("adir"), ATTACKER, ATTACKER_G));
	OK(mkdir(EXPP("tmp"), 01777));
	OK(chmod(EXPP("tmp"), 01777));
	ck_assert_int_eq(write_file(EXPP("tmp/vfile"), "v\n", 2, 0644), 0);
	OK(chown(EXPP("tmp/vfile"), VICTIM, VICTIM_G));

	/* Each attack, natively on the backing tree and through the mount:
	 * the same refusal. */
	struct {
		const char *what;
		long (*fn)(void *);
		const char *a, *b;
	} cases[] = {
		{ "hard link of another user's 0600 file", do_link, "vdir/secret", "adir/l" },
		{ "rename out of another user's dir", do_rename, "vdir/secret", "adir/s" },
		{ "rename of another user's file in a sticky dir", do_rename, "tmp/vfile",
		  "tmp/mine" },
		{ "rename over another user's file in a sticky dir", do_rename, "adir/none",
		  "tmp/vfile" },
		{ "unlink of another user's file in a sticky dir", do_unlink, "tmp/vfile", NULL },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char na[PATH_MAX], nb[PATH_MAX], ma[PATH_MAX], mb[PATH_MAX];
		snprintf(na, sizeof na, "%s", EXPP(cases[i].a));
		snprintf(ma, sizeof ma, "%s", MNTP(cases[i].a));
		if (cases[i].b) {
			snprintf(nb, sizeof nb, "%s", EXPP(cases[i].b));
			snprintf(mb, sizeof mb, "%s", MNTP(cases[i].b));
		}
		struct two_paths tn = { na, nb }, tm = { ma, mb };
		if (cases[i].fn == do_rename && strcmp(cases[i].a, "adir/none") == 0) {
			ck_assert_int_eq(write_file(na, "a\n", 2, 0644), 0);
			OK(chown(na, ATTACKER, ATTACKER_G));
		}
		struct res rn = run_as(ATTACKER, ATTACKER_G, cases[i].fn,
				       cases[i].b ? (void *)&tn : (void *)na);
		struct res rm = run_as(ATTACKER, ATTACKER_G, cases[i].fn,
				       cases[i].b ? (void *)&tm : (void *)ma);
		ck_assert_msg(rn.ret < 0, "%s: natively allowed?", cases[i].what);
		ck_assert_msg(rm.ret == rn.ret && rm.err == rn.err, "%s: native %s, dcfs %s",
			      cases[i].what, res_str(rn), res_str(rm));
	}
	struct stat st;
	OK(stat(EXPP("vdir/secret"), &st));
	ck_assert_int_eq(st.st_nlink, 1);
	OK(stat(EXPP("tmp/vfile"), &st));
	ck_assert_int_eq(st.st_uid, VICTIM);
	own_unmount_ck(&g_m);
}
END_TEST

/* Objects created by an unprivileged caller belong to the caller from the
 * start, with the group rules of the backing directory. */
static long make_all(void *p)
{
	const char *d = p;
	char b[PATH_MAX];
	snprintf(b, sizeof b, "%s/f", d);
	int fd = open(b, O_CREAT | O_EXCL | O_WRONLY, 02755);
	if (fd < 0)
		return -1;
	close(fd);
	snprintf(b, sizeof b, "%s/d", d);
	if (mkdir(b, 0755) < 0)
		return -2;
	snprintf(b, sizeof b, "%s/l", d);
	if (symlink("f", b) < 0)
		return -3;
	snprintf(b, sizeof b, "%s/p", d);
	if (mknod(b, S_IFIFO | 0600, 0) < 0)
		return -4;
	snprintf(b, sizeof b, "%s/h", d);
	char f[PATH_MAX];
	snprintf(f, sizeof f, "%s/f", d);
	if (link(f, b) < 0)
		return -5;
	return 0;
}

START_TEST(sec_created_objects_owned_by_caller)
{
	sec_mount("owner", _i, NULL);
	OK(mkdir(EXPP("adir"), 0755));
	OK(chown(EXPP("adir"), ATTACKER, ATTACKER_G));
	struct res r = run_as(ATTACKER, ATTACKER_G, make_all, (void *)MNTP("adir"));
	ck_assert_msg(r.ret == 0, "creating as the attacker: step %ld: %s", -r.ret, res_str(r));
	const char *names[] = { "adir/f", "adir/d", "adir/l", "adir/p", "adir/h" };
	for (size_t i = 0; i < 5; i++) {
		struct stat st;
		OK(lstat(EXPP(names[i]), &st));
		ck_assert_msg(st.st_uid == ATTACKER && st.st_gid == ATTACKER_G, "%s owned by %u:%u",
			      names[i], st.st_uid, st.st_gid);
	}
	struct stat st;
	OK(stat(EXPP("adir/f"), &st));
	ck_assert_msg((st.st_mode & 07777) == 02755, "set-gid file created with mode %04o",
		      st.st_mode & 07777);
	/* a caller who is not in the directory's group gets no set-gid bit
	 * (as natively); the mount's view equals the backing view */
	struct stat sm;
	OK(stat(MNTP("adir/f"), &sm));
	ck_assert_int_eq(sm.st_ino, st.st_ino);
	ck_assert_int_eq(sm.st_mode, st.st_mode);
	own_unmount_ck(&g_m);
}
END_TEST

/* ---- 2b: directories without search permission, execute-only files ------- */

static long stat_path(void *p)
{
	struct stat st;
	return stat(p, &st);
}

static long open_path(void *p)
{
	int fd = open(p, O_RDONLY);
	return fd < 0 ? -1 : close(fd);
}

static long list_path(void *p)
{
	DIR *d = opendir(p);
	long n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static long exec_path(void *p)
{
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 1);
		dup2(nul, 2);
		execl(p, p, (char *)NULL);
		_exit(100 + errno);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		return -1;
	if (WEXITSTATUS(st) >= 100) {
		errno = WEXITSTATUS(st) - 100;
		return -1;
	}
	return WEXITSTATUS(st);
}

static void expect_as(long (*fn)(void *), const char *rel, int want_errno, const char *what)
{
	struct res r = run_as(ATTACKER, ATTACKER_G, fn, (void *)MNTP(rel));
	if (want_errno)
		ck_assert_msg(r.ret < 0 && r.err == want_errno, "%s %s: expected %s, got %s", what,
			      rel, strerror(want_errno), res_str(r));
	else
		ck_assert_msg(r.ret >= 0, "%s %s: %s", what, rel, res_str(r));
}

/*
 * Listing a directory the attacker may read but not search gives names
 * only: nothing in it becomes reachable, also not through what the listing
 * left in the kernel's caches (with nodefault_permissions the kernel checks
 * no search permission itself).  An exec open gets a read-only fd for a
 * file the attacker may execute, never for one it may not (0700 root's:
 * with nodefault_permissions the kernel lets any execute bit through and
 * the daemon decides).
 */
START_TEST(sec_no_search_and_exec_only)
{
	sec_mount("nosearch", _i, NULL);
	OK(mkdir(EXPP("closed"), 0755));
	OK(write_file(EXPP("closed/f"), "secret", 6, 0644));
	OK(mkdir(EXPP("closed/d"), 0755));
	OK(chmod(EXPP("closed"), 0744));
	for (int round = 0; round < 3; round++) {
		expect_as(list_path, "closed", 0, "list");
		expect_as(stat_path, "closed/f", EACCES, "stat");
		expect_as(open_path, "closed/f", EACCES, "open");
		expect_as(stat_path, "closed/d", EACCES, "stat");
		expect_as(list_path, "closed/d", EACCES, "list");
	}
	size_t len;
	void *bin = slurp("/bin/true", &len);
	ck_assert_ptr_nonnull(bin);
	OK(write_file(EXPP("x711"), bin, len, 0755));
	OK(write_file(EXPP("x700"), bin, len, 0755));
	free(bin);
	OK(chmod(EXPP("x711"), 0711));
	OK(chmod(EXPP("x700"), 0700));
	for (int round = 0; round < 2; round++) {
		expect_as(exec_path, "x711", 0, "exec");
		expect_as(open_path, "x711", EACCES, "open");
		expect_as(exec_path, "x700", EACCES, "exec");
		expect_as(open_path, "x700", EACCES, "open");
	}
	own_unmount_ck(&g_m);
}
END_TEST

/*
 * What an unprivileged user learns and reaches through access(2), chdir(2),
 * readlink(2) and xattr reads is what the backing filesystem gives it
 * natively (issue 38 #2): with nodefault_permissions dcfs(8) promises that
 * the backing filesystem alone decides.  Every operation runs as the
 * attacker on the backing path and through the mount; rounds 1 and 2 run
 * after root walked, listed and read everything through the mount, so the
 * kernel holds dentries, attributes and symlink targets the attacker could
 * not have looked up itself.
 */
enum probe_op {
	PR_ACC_R,
	PR_ACC_W,
	PR_ACC_X,
	PR_CHDIR,
	PR_READLINK,
	PR_GETXATTR,
	PR_LISTXATTR,
	PR_STAT,
	PR_OPEN,
	PR_NOPS
};
static const char *const probe_names[] = { "access(R_OK)", "access(W_OK)", "access(X_OK)",
					   "chdir",	   "readlink",	   "getxattr(user.t)",
					   "listxattr",	   "stat",	   "open(O_RDONLY)" };

struct probe_arg {
	const char *path;
	enum probe_op op;
};

static long probe_as(void *p)
{
	const struct probe_arg *a = p;
	char buf[4096];
	struct stat st;
	switch (a->op) {
	case PR_ACC_R: return access(a->path, R_OK);
	case PR_ACC_W: return access(a->path, W_OK);
	case PR_ACC_X: return access(a->path, X_OK);
	case PR_CHDIR: return chdir(a->path);
	case PR_READLINK: return readlink(a->path, buf, sizeof buf);
	case PR_GETXATTR: return getxattr(a->path, "user.t", buf, sizeof buf);
	case PR_LISTXATTR:
		/* the list itself differs where only the mount adds names */
		return listxattr(a->path, buf, sizeof buf) < 0 ? -1 : 0;
	case PR_STAT: return stat(a->path, &st);
	case PR_OPEN: {
		int fd = open(a->path, O_RDONLY);
		return fd < 0 ? -1 : close(fd);
	}
	default: return -1;
	}
}

/* Root walks, lists, stats, reads links and xattrs of the tree through
 * the mount, leaving all of it in the kernel's caches. */
static void root_warms(const char *const *rels, size_t n)
{
	char buf[4096];
	struct stat st;
	for (size_t i = 0; i < n; i++) {
		const char *m = MNTP(rels[i]);
		lstat(m, &st);
		stat(m, &st);
		readlink(m, buf, sizeof buf);
		getxattr(m, "user.t", buf, sizeof buf);
		listxattr(m, buf, sizeof buf);
		access(m, R_OK);
		DIR *d = opendir(m);
		if (d) {
			while (readdir(d))
				;
			closedir(d);
		}
	}
}

START_TEST(sec_unpriv_probes_like_native)
{
	sec_mount("probes", _i, NULL);
	/* root's private and public files, directories and links */
	OK(write_file(EXPP("f600"), "secret\n", 7, 0600));
	OK(write_file(EXPP("f644"), "public\n", 7, 0644));
	OK(write_file(EXPP("x755"), "#!/bin/sh\n", 10, 0755));
	OK(write_file(EXPP("x700"), "#!/bin/sh\n", 10, 0700));
	OK(mkdir(EXPP("d700"), 0700));
	OK(mkdir(EXPP("d711"), 0711));
	OK(mkdir(EXPP("d744"), 0744));
	OK(mkdir(EXPP("d755"), 0755));
	const char *inner[] = { "d700", "d711", "d744" };
	for (int i = 0; i < 3; i++) {
		char p[64];
		snprintf(p, sizeof p, "%s/g", inner[i]);
		OK(write_file(EXPP(p), "inner\n", 6, 0644));
		OK(setxattr(EXPP(p), "user.t", "v", 1, 0));
		snprintf(p, sizeof p, "%s/lnk", inner[i]);
		OK(symlink("g", EXPP(p)));
		snprintf(p, sizeof p, "%s/sub", inner[i]);
		OK(mkdir(EXPP(p), 0755));
	}
	OK(symlink("f600", EXPP("lnk")));
	OK(setxattr(EXPP("f600"), "user.t", "v", 1, 0));
	OK(setxattr(EXPP("f644"), "user.t", "v", 1, 0));
	/* the attacker's own private file */
	OK(write_file(EXPP("mine"), "mine\n", 5, 0600));
	OK(chown(EXPP("mine"), ATTACKER, ATTACKER_G));
	static const char *const rels[] = {
		"f600",	    "f644",    "x755",	       "x700",	   "d700",   "d711",
		"d744",	    "d755",    "lnk",	       "mine",	   "d700/g", "d700/lnk",
		"d700/sub", "d711/g",  "d711/lnk",     "d711/sub", "d744/g", "d744/lnk",
		"d744/sub", "missing", "d700/missing",
	};
	const size_t n = sizeof rels / sizeof rels[0];
	char diffs[4096] = "";
	for (int round = 0; round < 3; round++) {
		if (round > 0)
			root_warms(rels, n);
		for (size_t i = 0; i < n; i++)
			for (int op = 0; op < PR_NOPS; op++) {
				char nat[PATH_MAX], mnt[PATH_MAX];
				snprintf(nat, sizeof nat, "%s", EXPP(rels[i]));
				snprintf(mnt, sizeof mnt, "%s", MNTP(rels[i]));
				struct probe_arg an = { nat, op }, am = { mnt, op };
				struct res rn = run_as(ATTACKER, ATTACKER_G, probe_as, &an);
				struct res rm = run_as(ATTACKER, ATTACKER_G, probe_as, &am);
				/* a value's length is the value: compare success only */
				if (rn.ret > 0 && rm.ret > 0)
					rn.ret = rm.ret = 0;
				if (rn.ret == rm.ret && rn.err == rm.err)
					continue;
				size_t l = strlen(diffs);
				snprintf(diffs + l, sizeof diffs - l,
					 "\n  round %d: %s %s: native %s, dcfs %s", round,
					 probe_names[op], rels[i], res_str(rn), res_str(rm));
			}
	}
	ck_assert_msg(!diffs[0], "as uid %d, dcfs%s answers differently:%s", ATTACKER,
		      variant_names[_i], diffs);
	own_unmount_ck(&g_m);
}
END_TEST

/* Creates f (0666), d (0777) and p (FIFO 0666) in dir with umask 022. */
static long make_three(void *p)
{
	char b[PATH_MAX + 8];
	umask(022);
	snprintf(b, sizeof b, "%s/f", (const char *)p);
	int fd = open(b, O_CREAT | O_WRONLY, 0666);
	if (fd < 0 || close(fd) < 0)
		return -1;
	snprintf(b, sizeof b, "%s/d", (const char *)p);
	if (mkdir(b, 0777) < 0)
		return -2;
	snprintf(b, sizeof b, "%s/p", (const char *)p);
	return mkfifo(b, 0666) < 0 ? -3 : 0;
}

/*
 * The umask or a default ACL (issue 24 #7) on the /dev/fuse transport too
 * (-o nouring; the other suites run over io_uring where the kernel has it):
 * the objects made through the mount get the modes of those made directly
 * in a directory with the same default ACL.
 */
START_TEST(sec_umask_acl_dev_fuse)
{
	sec_mount("umask", _i, "nouring");
	char out[512];
	const char *dirs[] = { "native", "viamount" };
	for (int i = 0; i < 2; i++) {
		OK(mkdir(EXPP(dirs[i]), 0777));
		OK(chmod(EXPP(dirs[i]), 0777));
		ck_assert_msg(run_cmd(out, sizeof out, "setfacl -d -m u::rwx,g::rwx,o::r-x '%s'",
				      EXPP(dirs[i])) == 0,
			      "setfacl: %s", out);
	}
	struct res r = run_as(ATTACKER, ATTACKER_G, make_three, (void *)EXPP("native"));
	ck_assert_msg(r.ret == 0, "native creates: step %ld: %s", -r.ret, res_str(r));
	r = run_as(ATTACKER, ATTACKER_G, make_three, (void *)MNTP("viamount"));
	ck_assert_msg(r.ret == 0, "creates through the mount: step %ld: %s", -r.ret, res_str(r));
	const char *names[] = { "f", "d", "p" };
	for (int i = 0; i < 3; i++) {
		char a[64], b[64];
		struct stat sa, sb, sm;
		snprintf(a, sizeof a, "native/%s", names[i]);
		snprintf(b, sizeof b, "viamount/%s", names[i]);
		OK(lstat(EXPP(a), &sa));
		OK(lstat(EXPP(b), &sb));
		OK(lstat(MNTP(b), &sm));
		ck_assert_msg(sa.st_mode == sb.st_mode && sb.st_mode == sm.st_mode,
			      "%s: native 0%o, through dcfs 0%o (seen through dcfs 0%o)", names[i],
			      sa.st_mode, sb.st_mode, sm.st_mode);
	}
	own_unmount_ck(&g_m);
}
END_TEST

/* ---- 3: the mount point inside the backing tree --------------------------- */

START_TEST(sec_mount_inside_backing_refused)
{
	char err[512];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	char exp[PATH_MAX], mnt[PATH_MAX], sub[PATH_MAX];
	snprintf(exp, sizeof exp, "%s/export-sec-inside", root);
	rm_rf(exp);
	OK(mkdir(exp, 0755));
	snprintf(sub, sizeof sub, "%s/a", exp);
	OK(mkdir(sub, 0755));
	snprintf(mnt, sizeof mnt, "%s/a/mnt", exp);
	OK(mkdir(mnt, 0755));
	track_mount(mnt);
	char out[4096];
	int rc = run_cmd(out, sizeof out, "timeout 10 '%s' -f -o allow_other '%s' '%s' 2>&1",
			 g_dcfs_bin, exp, mnt);
	ck_assert_msg(rc == 1, "dcfs with the mount point inside the backing dir: exit %d: %s", rc,
		      out);
	ck_assert_msg(strstr(out, "inside") != NULL, "unclear error: %s", out);
	ck_assert_msg(!is_mounted(mnt, NULL, 0), "mounted anyway");
	/* also through a bind mount of the backing dir elsewhere */
	char bind[PATH_MAX], bmnt[PATH_MAX];
	snprintf(bind, sizeof bind, "%s/sec-bind", g_tmpdir);
	mkdir(bind, 0755);
	OK(mount(exp, bind, NULL, MS_BIND, NULL));
	track_mount(bind);
	snprintf(bmnt, sizeof bmnt, "%s/a/mnt", bind);
	rc = run_cmd(out, sizeof out, "timeout 10 '%s' -f -o allow_other '%s' '%s' 2>&1",
		     g_dcfs_bin, exp, bmnt);
	ck_assert_msg(rc == 1, "mount point under a bind mount of the backing dir: exit %d: %s", rc,
		      out);
	ck_assert_msg(!is_mounted(bmnt, NULL, 0), "mounted anyway (bind)");
	OK(umount2(bind, MNT_DETACH));
}
END_TEST

/* Runs fn(arg) in a child; its return value (0..255), or -2 if it did not
 * finish within secs (the child is then killed: a caller stuck in a FUSE
 * request dies with SIGKILL once the connection is aborted). */
static int bounded(long (*fn)(void *), void *arg, double secs)
{
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit((int)fn(arg) & 0xff);
	double end = now_s() + secs * deadline_scale();
	int st;
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now_s() > end) {
			kill(pid, SIGKILL);
			return -2;
		}
		sleep_ms(10);
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* SIGSTOP takes effect when each thread of pid next runs: wait until all
 * of them are stopped (up to 5 s), so that nothing it serves gets an
 * answer after this returns.  1 if they are. */
static int stop_fully(pid_t pid)
{
	char out[64];
	if (kill(pid, SIGSTOP) < 0)
		return 0;
	double end = now_s() + 5 * deadline_scale();
	do {
		run_cmd(out, sizeof out,
			"for t in /proc/%d/task/*; do cut -d' ' -f3 $t/stat; done | grep -cv '^[tT]$'",
			(int)pid);
		if (atoi(out) == 0)
			return 1;
		sleep_ms(10);
	} while (now_s() < end);
	return 0;
}

/* The device of the FUSE mount on mnt from /proc/self/mountinfo (a stat
 * would wait for a daemon that may not answer), 0 if none. */
static dev_t fuse_mount_dev(const char *mnt)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	dev_t dev = 0;
	while (f && fgets(line, sizeof line, f)) {
		unsigned maj, min;
		char mp[PATH_MAX];
		const char *sep = strstr(line, " - ");
		if (sscanf(line, "%*s %*s %u:%u %*s %4095s", &maj, &min, mp) == 3 &&
		    strcmp(mp, mnt) == 0 && sep && strncmp(sep + 3, "fuse", 4) == 0)
			dev = makedev(maj, min);
	}
	if (f)
		fclose(f);
	return dev;
}

/* Ends the FUSE connection of the mount with device dev (found before the
 * mount was detached): callers and its daemon blocked on it return. */
static void abort_fuse(dev_t dev)
{
	char out[512];
	if (dev)
		run_cmd(out, sizeof out, "echo 1 > /sys/fs/fuse/connections/%u/abort", minor(dev));
}

/* What a user does first on a mount in place: list it, read a file below
 * a submount, create, rename and remove a file. 0 or the failed step. */
static long use_in_place(void *p)
{
	const char *m = p;
	char a[PATH_MAX], b[PATH_MAX];
	struct stat st;
	DIR *d = opendir(m);
	if (!d)
		return 1;
	while (readdir(d))
		;
	closedir(d);
	snprintf(a, sizeof a, "%s/sub/inner", m);
	size_t len;
	char *data = slurp(a, &len);
	int ok = data && len == 6 && memcmp(data, "inner\n", 6) == 0;
	free(data);
	if (!ok)
		return 2;
	snprintf(a, sizeof a, "%s/new", m);
	snprintf(b, sizeof b, "%s/renamed", m);
	if (write_file(a, "through the mount\n", 18, 0644) < 0)
		return 3;
	if (rename(a, b) < 0 || stat(b, &st) < 0 || st.st_size != 18)
		return 4;
	snprintf(a, sizeof a, "%s/gone", m);
	if (write_file(a, "x", 1, 0644) < 0 || unlink(a) < 0)
		return 5;
	return 0;
}

/*
 * A mount over its own backing directory (issue 38 #4): `dcfs -o nonempty
 * DIR DIR`, what an operator does so that applications keep their paths.
 * Everything the daemon opens after the mount must go through what it
 * holds from before (the backing directory's fd), never through a path,
 * which would now be a request to itself before INIT is answered: the
 * start-up probes of the backing directory and of a filesystem mounted
 * below it; a reload of a config kept in that directory is read through
 * the mount, served by the daemon itself.
 */
START_TEST(sec_mount_in_place)
{
	char err[512], out[4096];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	char dir[PATH_MAX], sub[PATH_MAX], conf[PATH_MAX], inner[PATH_MAX + 8];
	snprintf(dir, sizeof dir, "%s/export-sec-inplace", root);
	rm_rf(dir);
	OK(mkdir(dir, 0755));
	snprintf(sub, sizeof sub, "%s/sub", dir);
	OK(mkdir(sub, 0755));
	/* a filesystem of its own below the backing dir (probed at start) */
	OK(mount("sec-inplace", sub, "tmpfs", 0, "size=1m"));
	track_mount(sub);
	snprintf(inner, sizeof inner, "%s/inner", sub);
	OK(write_file(inner, "inner\n", 6, 0644));
	snprintf(conf, sizeof conf, "%s/in.conf", dir);
	OK(write_file(conf, "[global]\ndefault = cache\n", 25, 0644));
	struct daemon d;
	memset(&d, 0, sizeof d);
	snprintf(d.mnt, sizeof d.mnt, "%s", dir);
	track_mount(dir);
	char opts[PATH_MAX + 64];
	snprintf(opts, sizeof opts, "allow_other,nonempty,stop_timeout=5,config=%s", conf);
	char *argv[] = { "dcfs", "-f", "-o", opts, dir, dir, NULL };
	ck_assert_int_eq(daemon_spawn(&d, "sec-inplace", argv), 0);
	ck_assert_msg(daemon_wait_mounted(&d, err, sizeof err) == 0, "mount: %s", err);
	dev_t dev = fuse_mount_dev(dir);
	int r = bounded(use_in_place, dir, 10);
	if (r != 0) {
		char *log = read_file_str(d.log);
		abort_fuse(dev);
		umount2(dir, MNT_DETACH);
		daemon_kill(&d);
		umount2(sub, MNT_DETACH);
		ck_abort_msg("using a mount over its own backing dir: %s; log: %.1500s",
			     r == -2 ? "hung (10 s)" : "failed", log);
	}
	/* the config is read through the mount, by the daemon's own reader */
	OK(write_file(conf, "[global]\ndefault = cache\nmin_size = 1M\n", 39, 0644));
	char *log0 = read_file_str(d.log);
	size_t n0 = strlen(log0);
	free(log0);
	OK(kill(d.pid, SIGHUP));
	double end = now_s() + 10 * deadline_scale();
	int reloaded = 0;
	while (!reloaded && now_s() < end) {
		char *log = read_file_str(d.log);
		reloaded = strlen(log) > n0 && strstr(log + n0, "reloaded ");
		free(log);
		sleep_ms(20);
	}
	ck_assert_msg(reloaded, "no reload of %s through the mount within 10 s", conf);
	int rc = run_cmd(out, sizeof out, "fusermount3 -u -z '%s'", dir);
	ck_assert_msg(rc == 0, "fusermount3 -u -z: %s", out);
	int st = daemon_wait_unmounted(&d, 0, dev, 10);
	char *log = read_file_str(d.log);
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "daemon status %#x after unmount; log: %.1500s", st, log);
	const char *p = log_problem(log);
	ck_assert_msg(!p, "daemon log contains '%s': %.1500s", p, log);
	ck_assert_msg(strstr(log, "backing tmpfs"), "submount not probed: %.1500s", log);
	free(log);
	/* what was written through the mount is in the directory itself */
	struct stat sb;
	char renamed[PATH_MAX + 16];
	snprintf(renamed, sizeof renamed, "%s/renamed", dir);
	ck_assert_msg(stat(renamed, &sb) == 0 && sb.st_size == 18, "renamed file: %s",
		      strerror(errno));
	OK(umount2(sub, 0));
}
END_TEST

/*
 * A start-up that blocks in the kernel -- here INIT's probes of a backing
 * directory that lives on a second FUSE mount whose daemon is stopped --
 * still ends at SIGTERM within stop_timeout: the daemon detaches its
 * mount and exits (status 1), it never waits for the blocked thread.
 */
START_TEST(sec_sigterm_blocked_startup)
{
	char err[512];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	struct own_mount host;
	/* over /dev/fuse: a request a stopped daemon never read can be killed
	 * (one it took over io_uring cannot, until it answers) */
	ck_assert_msg(own_mount_start_opts(&host, root, "sec-hanghost", "[global]\n",
					   "attr_timeout=3600,entry_timeout=3600,nouring") == 0,
		      "host: %s", host.err);
	char bdir[PATH_MAX + 8];
	snprintf(bdir, sizeof bdir, "%s/b", host.mnt);
	OK(mkdir(bdir, 0755));
	/* everything the new daemon resolves before mounting is now cached */
	struct stat st;
	OK(stat(host.mnt, &st));
	OK(stat(bdir, &st));
	DIR *dd = opendir(bdir);
	ck_assert_ptr_nonnull(dd);
	closedir(dd);
	ck_assert_msg(stop_fully(host.d.pid), "the host daemon did not stop");
	struct daemon d;
	memset(&d, 0, sizeof d);
	snprintf(d.mnt, sizeof d.mnt, "%s/mnt-sec-blocked", g_tmpdir);
	mkdir(d.mnt, 0755);
	track_mount(d.mnt);
	char *argv[] = { "dcfs", "-f", "-o", "allow_other,stop_timeout=3", bdir, d.mnt, NULL };
	ck_assert_int_eq(daemon_spawn(&d, "sec-blocked", argv), 0);
	int mounted = daemon_wait_mounted(&d, err, sizeof err) == 0;
	dev_t dev = fuse_mount_dev(d.mnt);
	/* the start-up is blocked: a thread of the daemon waits in the kernel
	 * on the stopped host, and the mount answers nothing */
	int blocked = 0;
	double end = now_s() + 5 * deadline_scale();
	while (mounted && !blocked && now_s() < end) {
		char out[4096];
		run_cmd(out, sizeof out,
			"grep -l 'request_wait_answer\\|fuse_get_req' /proc/%d/task/*/wchan 2>/dev/null",
			d.pid);
		blocked = out[0] != 0;
		if (!blocked)
			sleep_ms(20);
	}
	int probe = mounted && blocked ? bounded(stat_path, d.mnt, 0.5) : 0;
	double t0 = now_s();
	if (mounted)
		kill(d.pid, SIGTERM);
	int status = mounted ? daemon_wait_exit(&d, 15) : -1;
	double secs = now_s() - t0;
	int still = is_mounted(d.mnt, NULL, 0);
	char *log = read_file_str(d.log);
	/* recover whatever is left before judging */
	kill(host.d.pid, SIGCONT);
	if (status == -1) {
		abort_fuse(dev);
		daemon_kill(&d);
	}
	if (is_mounted(d.mnt, NULL, 0))
		umount2(d.mnt, MNT_DETACH);
	char e2[2048];
	int hstop = own_mount_stop(&host, e2, sizeof e2);
	ck_assert_msg(mounted, "no mount: %s", err);
	ck_assert_msg(blocked && probe == -2, "start-up not blocked (thread waiting: %d, stat: %d)",
		      blocked, probe);
	ck_assert_msg(status != -1, "dcfs still running 15 s after SIGTERM; log: %.1500s", log);
	ck_assert_msg(secs < 3 + 1.5 * deadline_scale(), "exit took %.1f s (stop_timeout=3)", secs);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
		      "status %#x, want exit 1 (stop forced); log: %.1500s", status, log);
	ck_assert_msg(!still, "%s still mounted after the daemon exited", d.mnt);
	ck_assert_msg(strstr(log, "a request is blocked in the kernel"),
		      "the forced stop is not logged: %.1500s", log);
	free(log);
	ck_assert_msg(hstop == 0, "host: %s", e2);
}
END_TEST

static long walk_deep(void *p)
{
	const char *m = p;
	char b[PATH_MAX];
	struct stat st;
	snprintf(b, sizeof b, "%s/loop/loop/loop/loop/loop", m);
	int r = stat(b, &st);
	return r;
}

/* A lookup never crosses into dcfs's own mount: a bind mount of the mount
 * point placed inside the backing tree answers an error, at once. */
START_TEST(sec_lookup_into_own_mount)
{
	sec_mount("selfloop", _i, NULL);
	OK(mkdir(EXPP("loop"), 0755));
	OK(mount(g_m.mnt, EXPP("loop"), NULL, MS_BIND, NULL));
	double t0 = now_s();
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(walk_deep(g_m.mnt) == 0 ? 0 : errno == ELOOP ? 1 : 100 + errno % 100);
	int st = 0, done = 0;
	while (now_s() - t0 < 10 * deadline_scale()) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			done = 1;
			break;
		}
		sleep_ms(20);
	}
	if (!done) {
		/* recover the mount (its connection only), then fail */
		abort_fuse(fuse_mount_dev(g_m.mnt));
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		umount2(EXPP("loop"), MNT_DETACH);
		ck_abort_msg("lookup through a bind mount of the mount itself hung");
	}
	OK(umount2(EXPP("loop"), MNT_DETACH));
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1,
		      "lookup into dcfs's own mount: %s, want ELOOP",
		      !WIFEXITED(st)	     ? "killed"
		      : WEXITSTATUS(st) == 0 ? "succeeded"
					     : strerror(WEXITSTATUS(st) - 100));
	struct stat sb;
	OK(stat(MNTP("loop"), &sb));
	own_unmount_ck(&g_m);
}
END_TEST

/* ---- 4: config input is bounded and never blocks -------------------------- */

static int run_check_config(const char *path, char *out, size_t outlen, double *secs)
{
	double t0 = now_s();
	int rc = run_cmd(out, outlen, "timeout 20 '%s' --check-config '%s' 2>&1", g_dcfs_bin, path);
	*secs = now_s() - t0;
	return rc;
}

START_TEST(sec_check_config_bounded)
{
	char fifo[PATH_MAX], big[PATH_MAX], dir[PATH_MAX], out[4096];
	snprintf(fifo, sizeof fifo, "%s/sec-fifo.conf", g_tmpdir);
	snprintf(big, sizeof big, "%s/sec-big.conf", g_tmpdir);
	snprintf(dir, sizeof dir, "%s/sec-dir.conf", g_tmpdir);
	unlink(fifo);
	OK(mkfifo(fifo, 0644));
	mkdir(dir, 0755);
	/* 2 MiB of comments: valid syntax, over the size cap */
	FILE *fp = fopen(big, "w");
	ck_assert_ptr_nonnull(fp);
	for (int i = 0; i < 2 * 1024 * 16; i++)
		fprintf(fp, "; %61d\n", i);
	fclose(fp);
	struct {
		const char *path, *want;
	} cases[] = {
		{ "/dev/zero", "not a regular file" },
		{ fifo, "not a regular file" },
		{ dir, "directory" },
		{ big, "larger than" },
	};
	for (size_t i = 0; i < 4; i++) {
		double secs;
		int rc = run_check_config(cases[i].path, out, sizeof out, &secs);
		ck_assert_msg(rc != 0 && rc != 124, "--check-config %s: exit %d (%.1fs): %s",
			      cases[i].path, rc, secs, out);
		ck_assert_msg(secs < 5, "--check-config %s took %.1fs", cases[i].path, secs);
		ck_assert_msg(strstr(out, cases[i].path) && strstr(out, cases[i].want),
			      "--check-config %s: message lacks '%s': %s", cases[i].path,
			      cases[i].want, out);
	}
	unlink(fifo);
	unlink(big);
	rmdir(dir);
}
END_TEST

/* A reload from a FIFO or /dev/zero is refused and the old rules stay. */
START_TEST(sec_reload_bad_inputs_keep_rules)
{
	char err[512];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	const char *conf = "[global]\ndefault = cache\n[class video]\nextensions = mkv\n"
			   "policy = dontcache\n";
	ck_assert_int_eq(own_mount_start(&g_m, root, "sec-reload", conf), 0);
	ck_assert_int_eq(write_file(EXPP("a.mkv"), "x", 1, 0644), 0);
	char *before = xattr_str(MNTP("a.mkv"), "user.dcfs.policy");
	ck_assert_ptr_nonnull(before);
	ck_assert_msg(strncmp(before, "dontcache", 9) == 0, "policy before: %s", before);
	for (int k = 0; k < 2; k++) {
		char *log0 = read_file_str(g_m.d.log);
		size_t n0 = strlen(log0);
		free(log0);
		unlink(g_m.conf);
		if (k == 0)
			OK(mkfifo(g_m.conf, 0644));
		else
			OK(symlink("/dev/zero", g_m.conf));
		OK(kill(g_m.d.pid, SIGHUP));
		double end = now_s() + 5 * deadline_scale();
		int failed = 0;
		while (now_s() < end && !failed) {
			char *log = read_file_str(g_m.d.log);
			failed = strlen(log) > n0 && strstr(log + n0, "reload of ") != NULL;
			ck_assert_msg(strlen(log) <= n0 || !strstr(log + n0, "reloaded "),
				      "a bad config was installed: %s", log + n0);
			free(log);
			sleep_ms(20);
		}
		ck_assert_msg(failed, "no 'reload of ... failed' for %s",
			      k ? "/dev/zero" : "a FIFO");
		char *after = xattr_str(MNTP("a.mkv"), "user.dcfs.policy");
		ck_assert_msg(after && strcmp(after, before) == 0, "rules changed: %s -> %s",
			      before, after ? after : "(null)");
		free(after);
	}
	free(before);
	unlink(g_m.conf);
	ck_assert_int_eq(own_write_conf(g_m.conf, conf), 0);
	own_unmount_ck(&g_m);
}
END_TEST

/* The `dcfs --read-config` process the daemon started for a reload, while
 * it waits in the kernel for a FUSE reply (wchan); 0 if there is none. */
static pid_t blocked_reader(pid_t daemon)
{
	char out[256];
	run_cmd(out, sizeof out,
		"for p in $(pgrep -P %d -f -- --read-config); do "
		"grep -q 'request_wait_answer\\|fuse_get_req' /proc/$p/wchan && echo $p; done",
		(int)daemon);
	return (pid_t)atoi(out);
}

/* Waits up to secs for text to appear in the log after offset from;
 * returns 1 if it did. */
static int log_shows(const char *logpath, size_t from, const char *text, double secs)
{
	double end = now_s() + secs * deadline_scale();
	for (;;) {
		char *log = read_file_str(logpath);
		int found = strlen(log) > from && strstr(log + from, text) != NULL;
		free(log);
		if (found || now_s() > end)
			return found;
		sleep_ms(50);
	}
}

static size_t log_len(const char *logpath)
{
	char *log = read_file_str(logpath);
	size_t n = strlen(log);
	free(log);
	return n;
}

/*
 * A reload stuck reading a config on a FUSE mount whose daemon is stopped
 * (its reader process provably waiting in the kernel): abandoned after
 * 10 s with the old rules kept, a second SIGHUP refused while the reader
 * is stuck, its late result discarded once the host runs again, reloads
 * working after that; and SIGTERM during a stuck reload unmounts and
 * exits 0 within seconds.
 */
START_TEST(sec_sigterm_with_stuck_reload)
{
	char err[512];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	/* the config lives on a second dcfs mount that caches no name */
	struct own_mount cm;
	ck_assert_msg(own_mount_start_opts(&cm, root, "sec-confhost", "[global]\n",
					   "entry_timeout=0,attr_timeout=0") == 0,
		      "host: %s", cm.err);
	char cpath[PATH_MAX];
	snprintf(cpath, sizeof cpath, "%s/live.conf", cm.mnt);
	ck_assert_int_eq(write_file(cpath, "[global]\ndefault = cache\n", 25, 0644), 0);
	char tag[] = "sec-stuck";
	memset(&g_m, 0, sizeof g_m);
	snprintf(g_m.exp, sizeof g_m.exp, "%s/export-%s", root, tag);
	snprintf(g_m.mnt, sizeof g_m.mnt, "%s/mnt-%s", g_tmpdir, tag);
	mkdir(g_m.exp, 0755);
	mkdir(g_m.mnt, 0755);
	track_mount(g_m.mnt);
	char opts[PATH_MAX + 64];
	snprintf(opts, sizeof opts, "allow_other,config=%s", cpath);
	char *argv[] = { "dcfs", "-f", "-o", opts, g_m.exp, g_m.mnt, NULL };
	snprintf(g_m.d.mnt, sizeof g_m.d.mnt, "%s", g_m.mnt);
	ck_assert_int_eq(daemon_spawn(&g_m.d, tag, argv), 0);
	ck_assert_msg(daemon_wait_mounted(&g_m.d, err, sizeof err) == 0, "mount: %s", err);
	const char *log = g_m.d.log;

	/* 1: a stuck reload is abandoned, and only that one */
	ck_assert_msg(stop_fully(cm.d.pid), "the config host did not stop");
	size_t at = log_len(log);
	OK(kill(g_m.d.pid, SIGHUP));
	pid_t reader = 0;
	double end = now_s() + 15 * deadline_scale();
	while (!(reader = blocked_reader(g_m.d.pid)) && now_s() < end)
		sleep_ms(50);
	char children[2048] = "";
	if (!reader)
		run_cmd(children, sizeof children,
			"for p in $(pgrep -P %d); do echo \"$p $(cat /proc/$p/wchan) $(tr '\\0' ' ' < /proc/$p/cmdline)\"; done; "
			"echo threads:; for t in /proc/%d/task/*; do echo \"$(cat $t/wchan) $(cut -d' ' -f1 $t/syscall)\"; done | sort | uniq -c",
			(int)g_m.d.pid, (int)g_m.d.pid);
	int abandoned = reader && log_shows(log, at, "not read within 10 s", 15);
	size_t at2 = log_len(log);
	if (abandoned)
		kill(g_m.d.pid, SIGHUP);
	int refused = abandoned && log_shows(log, at2, "has not finished yet", 5);
	kill(cm.d.pid, SIGCONT);
	int discarded = abandoned && log_shows(log, at2, "finished late: result discarded", 10);
	at2 = log_len(log);
	if (discarded)
		kill(g_m.d.pid, SIGHUP);
	int reloaded = discarded && log_shows(log, at2, "reloaded ", 10);

	/* 2: SIGTERM while a reload is stuck */
	pid_t reader2 = 0;
	if (reloaded) {
		ck_assert_msg(stop_fully(cm.d.pid), "the config host did not stop");
		OK(kill(g_m.d.pid, SIGHUP));
		end = now_s() + 15 * deadline_scale();
		while (!(reader2 = blocked_reader(g_m.d.pid)) && now_s() < end)
			sleep_ms(50);
	}
	double t0 = now_s(), secs = 0;
	int st = -1, still = 1;
	if (reader2) {
		OK(kill(g_m.d.pid, SIGTERM));
		st = daemon_wait_exit(&g_m.d, 10);
		secs = now_s() - t0;
		still = is_mounted(g_m.mnt, NULL, 0);
	}
	char *text = read_file_str(log);
	/* recover before judging */
	kill(cm.d.pid, SIGCONT);
	if (st == -1)
		daemon_kill(&g_m.d);
	if (is_mounted(g_m.mnt, NULL, 0))
		umount2(g_m.mnt, MNT_DETACH);
	char e2[2048];
	int cstop = own_mount_stop(&cm, e2, sizeof e2);
	ck_assert_msg(
		reader,
		"no reader process blocked on the stopped host within 15 s of SIGHUP; the daemon's children: %s; log: %.2000s",
		children, text);
	ck_assert_msg(abandoned, "the stuck reload was not abandoned within 15 s: %.2000s", text);
	ck_assert_msg(refused, "a SIGHUP during the stuck reload was not refused: %.2000s", text);
	ck_assert_msg(discarded, "the late result was not discarded: %.2000s", text);
	ck_assert_msg(reloaded, "no reload after the host ran again: %.2000s", text);
	ck_assert_msg(reader2, "second reload not blocked");
	ck_assert_msg(st != -1, "dcfs did not exit within 10 s of SIGTERM with a stuck reload");
	ck_assert_msg(secs < 8, "exit took %.1fs", secs);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %#x: %.2000s", st, text);
	ck_assert_msg(!still, "%s still mounted after the daemon exited", g_m.mnt);
	ck_assert_msg(strstr(text, "exiting with a reload still blocked in the kernel"),
		      "the stuck reload at exit is not logged: %.2000s", text);
	const char *p = log_problem(text);
	ck_assert_msg(!p, "daemon log contains '%s'", p);
	free(text);
	ck_assert_msg(cstop == 0, "config host: %s", e2);
}
END_TEST

/* ---- 5: option and information hygiene ----------------------------------- */

START_TEST(sec_options_hygiene)
{
	char err[512];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	char exp[PATH_MAX], mnt[PATH_MAX], out[4096];
	snprintf(exp, sizeof exp, "%s/export-sec-opts", root);
	snprintf(mnt, sizeof mnt, "%s/mnt-sec-opts", g_tmpdir);
	rm_rf(exp);
	OK(mkdir(exp, 0755));
	mkdir(mnt, 0755);
	track_mount(mnt);
	int rc = run_cmd(out, sizeof out,
			 "timeout 10 '%s' -f -o allow_other,allow_root '%s' '%s' 2>&1", g_dcfs_bin,
			 exp, mnt);
	ck_assert_msg(rc == 1 && strstr(out, "allow_root"), "allow_other,allow_root: %d: %s", rc,
		      out);
	ck_assert_msg(!is_mounted(mnt, NULL, 0), "mounted with allow_other,allow_root");
	/* names the kernel holds would be walked through without a check */
	const char *ndp_cached[] = { "entry_timeout=1", "negative_timeout=1" };
	for (int i = 0; i < 2; i++) {
		rc = run_cmd(
			out, sizeof out,
			"timeout 10 '%s' -f -o allow_other,nodefault_permissions,%s '%s' '%s' 2>&1",
			g_dcfs_bin, ndp_cached[i], exp, mnt);
		ck_assert_msg(rc == 1 && strstr(out, "entry_timeout=0"),
			      "nodefault_permissions,%s: exit %d: %s", ndp_cached[i], rc, out);
		ck_assert_msg(!is_mounted(mnt, NULL, 0), "mounted with nodefault_permissions,%s",
			      ndp_cached[i]);
	}
	rc = run_cmd(out, sizeof out, "timeout 10 '%s' -f -o bogus_opt '%s' '%s' 2>&1", g_dcfs_bin,
		     exp, mnt);
	ck_assert_msg(rc == 1, "bogus_opt: exit %d", rc);
	ck_assert_msg(strstr(out, "bogus_opt") && !strstr(out, "dcfs: -o") &&
			      !strstr(out, "dcfs: bogus"),
		      "unknown option message: %s", out);
	/* a second dcfs over the same (empty) backing dir and mount point */
	struct own_mount m1;
	ck_assert_int_eq(own_mount_start(&m1, root, "sec-stack", "[global]\n"), 0);
	rc = run_cmd(out, sizeof out, "timeout 10 '%s' -f '%s' '%s' 2>&1", g_dcfs_bin, m1.exp,
		     m1.mnt);
	ck_assert_msg(rc == 1 && strstr(out, "already"), "second dcfs on %s: exit %d: %s", m1.mnt,
		      rc, out);
	char mi[8192];
	run_cmd(mi, sizeof mi, "grep -c ' %s ' /proc/self/mountinfo", m1.mnt);
	ck_assert_msg(atoi(mi) == 1, "%s mounted %d times", m1.mnt, atoi(mi));
	char e2[2048];
	ck_assert_msg(own_mount_stop(&m1, e2, sizeof e2) == 0, "%s", e2);
}
END_TEST

struct xattr_arg {
	const char *path, *name;
	char buf[8192];
};

static long get_xattr(void *p)
{
	struct xattr_arg *x = p;
	ssize_t n = getxattr(x->path, x->name, x->buf, sizeof x->buf - 1);
	if (n >= 0)
		x->buf[n] = 0;
	return n;
}

struct xattr_pipe {
	struct xattr_arg x;
	int fd;
};

static long get_xattr_send(void *p)
{
	struct xattr_pipe *xp = p;
	long n = get_xattr(&xp->x);
	if (n >= 0 && write(xp->fd, xp->x.buf, strlen(xp->x.buf)) < 0)
		return -1;
	return n;
}

/* What an unprivileged user may read of the daemon's own xattrs. */
START_TEST(sec_virtual_xattrs_privacy)
{
	sec_mount("xattr", 0, NULL);
	int pfd[2];
	OK(pipe(pfd));
	struct xattr_pipe xp = { { g_m.mnt, "user.dcfs.policy", "" }, pfd[1] };
	struct res r = run_as(ATTACKER, ATTACKER_G, get_xattr_send, &xp);
	close(pfd[1]);
	char got[8192] = "";
	ssize_t n = read(pfd[0], got, sizeof got - 1);
	close(pfd[0]);
	if (n > 0)
		got[n] = 0;
	ck_assert_msg(r.ret >= 0, "user.dcfs.policy on the root as a user: %s", res_str(r));
	ck_assert_msg(!strstr(got, g_m.conf), "unprivileged user sees the config path: %s", got);
	struct xattr_arg xs = { g_m.mnt, "user.dcfs.stats", "" };
	r = run_as(ATTACKER, ATTACKER_G, get_xattr, &xs);
	ck_assert_msg(r.ret < 0 && r.err == EACCES,
		      "mount-wide stats readable by an unprivileged user: %s", res_str(r));
	/* root sees both */
	char *p = xattr_str(g_m.mnt, "user.dcfs.policy");
	ck_assert_msg(p && strstr(p, g_m.conf), "root lacks the config path: %s", p ? p : "");
	free(p);
	p = xattr_str(g_m.mnt, "user.dcfs.stats");
	ck_assert_ptr_nonnull(p);
	free(p);
	own_unmount_ck(&g_m);
}
END_TEST

/* In the runner process, so every forked test shares one backing fs. */
static void sec_setup(void)
{
	char err[512];
	backing_root(FS_EXT4, err, sizeof err);
}

Suite *security_suite(void)
{
	Suite *s = suite_create("security");
	TCase *tc = tcase_create("security-ext4");
	tcase_add_unchecked_fixture(tc, sec_setup, NULL);
	tcase_set_timeout(tc, 120 * deadline_scale());
	tcase_add_loop_test(tc, sec_create_chmod_race, 0, 2);
	tcase_add_loop_test(tc, sec_create_open_race, 0, 2);
	tcase_add_loop_test(tc, sec_open_stale_attrs, 0, 2);
	tcase_add_loop_test(tc, sec_cross_user_links_renames, 0, 2);
	tcase_add_loop_test(tc, sec_created_objects_owned_by_caller, 0, 2);
	tcase_add_loop_test(tc, sec_no_search_and_exec_only, 0, 2);
	tcase_add_loop_test(tc, sec_umask_acl_dev_fuse, 0, 2);
	tcase_add_loop_test(tc, sec_unpriv_probes_like_native, 0, 2);
	tcase_add_test(tc, sec_mount_inside_backing_refused);
	tcase_add_test(tc, sec_mount_in_place);
	tcase_add_test(tc, sec_sigterm_blocked_startup);
	tcase_add_loop_test(tc, sec_lookup_into_own_mount, 0, 2);
	tcase_add_test(tc, sec_check_config_bounded);
	tcase_add_test(tc, sec_reload_bad_inputs_keep_rules);
	tcase_add_test(tc, sec_sigterm_with_stuck_reload);
	tcase_add_test(tc, sec_options_hygiene);
	tcase_add_test(tc, sec_virtual_xattrs_privacy);
	suite_add_tcase(s, tc);
	return s;
}
