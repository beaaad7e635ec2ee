/* Permission checks and ownership of files created by unprivileged callers.
 * dcfs is mounted with allow_other; children switch to uid/gid 65534
 * (nobody/nogroup) or 64001 (a synthetic user without passwd entry). Each
 * operation is run as that user on the reference dir and through dcfs, and
 * the results / errno must be identical. */
#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

enum op {
	OP_CREATE,
	OP_OPEN_R,
	OP_OPEN_W,
	OP_OPEN_RW_TRUNC,
	OP_MKDIR,
	OP_SYMLINK,
	OP_MKFIFO,
	OP_MKSOCK,
	OP_CHMOD,
	OP_CHOWN,
	OP_CHGRP,
	OP_TRUNCATE,
	OP_UTIMES_SET,
	OP_UTIMES_NOW,
	OP_SETXATTR,
	OP_GETXATTR,
	OP_UNLINK,
	OP_RENAME,
	OP_RMDIR,
	OP_ACCESS,
	OP_OPENDIR,
	OP_STAT,
	OP_WRITE_EXISTING,
	OP_LINK,
	OP_MKNOD_CHR,
	OP_READ_CONTENT,
	OP_FUTIMENS_NOW,
	OP_FUTIMENS_SET,
	OP_FTRUNCATE,
	OP_FCHMOD,
	OP_FCHOWN,
	OP_LIST,
	OP_CHDIR,
	OP_FCHDIR,
	OP_FSTATAT,
	OP_OPENAT,
	OP_EXEC,
	OP_MKNOD_FIFO,
};

struct opspec {
	enum op op;
	const char *a;
	const char *b;
	long n;
};

/* A name and its d_type, order-independent: equal listings, equal sums. */
static unsigned long entry_hash(const struct dirent *de)
{
	unsigned long h = 1469598103934665603UL;
	for (const char *p = de->d_name; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211UL;
	return (h ^ de->d_type) * 1099511628211UL;
}

/* The names and types readdir gives, hashed; -1 with errno on failure. */
static long list_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	unsigned long sum = 0;
	long n = 0;
	if (!d)
		return -1;
	errno = 0;
	while ((de = readdir(d))) {
		sum += entry_hash(de);
		n++;
	}
	int e = errno;
	closedir(d);
	if (e) {
		errno = e;
		return -1;
	}
	return (long)((sum & 0xffffffffUL) << 8 | (unsigned long)(n & 0xff));
}

/* Runs path in a child; its exit status, or -1 and the errno of execv. */
static long exec_status(const char *path)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 1);
		dup2(nul, 2);
		execl(path, path, (char *)NULL);
		int e = errno;
		if (write(pfd[1], &e, sizeof e) != sizeof e)
			_exit(126);
		_exit(127);
	}
	close(pfd[1]);
	int e = 0, st;
	ssize_t n = read(pfd[0], &e, sizeof e);
	close(pfd[0]);
	waitpid(pid, &st, 0);
	if (n == sizeof e) {
		errno = e;
		return -1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

/* Opens directory a (O_RDONLY: needs read permission only), then runs the
 * *at call on name b in it: the fd does not bypass search permission. */
static long in_dir_fd(enum op op, const char *dir, const char *name)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		return -1000 - errno;
	struct stat st;
	long r;
	if (op == OP_FCHDIR)
		r = fchdir(dfd);
	else if (op == OP_FSTATAT)
		r = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW);
	else {
		r = openat(dfd, name, O_RDONLY);
		if (r >= 0)
			r = close((int)r);
	}
	int e = errno;
	if (op == OP_FCHDIR && r == 0)
		r = chdir("/");
	close(dfd);
	errno = e;
	return r;
}

static long do_op(struct as_ctx *c)
{
	const struct opspec *o = c->arg;
	char pa[PATH_MAX], pb[PATH_MAX];
	snprintf(pa, sizeof pa, "%s/%s", c->root, o->a);
	snprintf(pb, sizeof pb, "%s/%s", c->root, o->b ? o->b : "");
	int fd;
	struct stat st;
	switch (o->op) {
	case OP_CREATE:
		fd = open(pa, O_CREAT | O_EXCL | O_WRONLY, o->n ? (mode_t)o->n : 0644);
		if (fd < 0)
			return -1;
		if (write(fd, "data", 4) != 4)
			return -1;
		return close(fd);
	case OP_OPEN_R:
	case OP_OPEN_W:
	case OP_OPEN_RW_TRUNC:
		fd = open(pa, o->op == OP_OPEN_R   ? O_RDONLY
			      : o->op == OP_OPEN_W ? O_WRONLY
						   : O_RDWR | O_TRUNC);
		return fd < 0 ? -1 : close(fd);
	case OP_READ_CONTENT: {
		char buf[64];
		fd = open(pa, O_RDONLY);
		if (fd < 0)
			return -1;
		ssize_t r = read(fd, buf, sizeof buf);
		close(fd);
		return r;
	}
	case OP_WRITE_EXISTING:
		fd = open(pa, O_WRONLY);
		if (fd < 0)
			return -1;
		if (write(fd, "w", 1) != 1) {
			close(fd);
			return -1;
		}
		return close(fd);
	case OP_MKDIR: return mkdir(pa, o->n ? (mode_t)o->n : 0755);
	case OP_SYMLINK: return symlink("target", pa);
	case OP_MKFIFO: return mkfifo(pa, 0644);
	case OP_MKSOCK: return mknod(pa, S_IFSOCK | 0644, 0);
	case OP_MKNOD_CHR: return mknod(pa, S_IFCHR | 0644, makedev(1, 3));
	case OP_CHMOD: return chmod(pa, (mode_t)o->n);
	case OP_CHOWN: return chown(pa, (uid_t)o->n, -1);
	case OP_CHGRP: return chown(pa, -1, (gid_t)o->n);
	case OP_TRUNCATE: return truncate(pa, o->n);
	case OP_UTIMES_SET: {
		struct timespec ts[2] = { { 1000, 0 }, { 2000, 0 } };
		return utimensat(AT_FDCWD, pa, ts, 0);
	}
	case OP_UTIMES_NOW: return utimensat(AT_FDCWD, pa, NULL, 0);
	case OP_SETXATTR: return setxattr(pa, "user.p", "v", 1, 0);
	case OP_GETXATTR: {
		char v[16];
		return getxattr(pa, "user.p", v, sizeof v);
	}
	case OP_UNLINK: return unlink(pa);
	case OP_RMDIR: return rmdir(pa);
	case OP_RENAME: return rename(pa, pb);
	case OP_LINK: return link(pa, pb);
	case OP_ACCESS: return access(pa, (int)o->n);
	case OP_OPENDIR: fd = open(pa, O_RDONLY | O_DIRECTORY); return fd < 0 ? -1 : close(fd);
	case OP_STAT: return stat(pa, &st);
	case OP_LIST: return list_dir(pa);
	case OP_CHDIR: {
		long r = chdir(pa);
		int e = errno;
		if (r == 0 && chdir("/") < 0)
			return -1;
		errno = e;
		return r;
	}
	case OP_FCHDIR:
	case OP_FSTATAT:
	case OP_OPENAT: return in_dir_fd(o->op, pa, o->b);
	case OP_EXEC: return exec_status(pa);
	case OP_MKNOD_FIFO: return mknod(pa, S_IFIFO | (mode_t)o->n, 0);
	case OP_FUTIMENS_NOW:
	case OP_FUTIMENS_SET:
	case OP_FTRUNCATE:
	case OP_FCHMOD:
	case OP_FCHOWN: {
		fd = open(pa, O_WRONLY);
		if (fd < 0)
			return -1000 - errno; /* distinguishable from the fd op failing */
		struct timespec ts[2] = { { 3000, 0 }, { 4000, 0 } };
		long r;
		if (o->op == OP_FUTIMENS_NOW)
			r = futimens(fd, NULL);
		else if (o->op == OP_FUTIMENS_SET)
			r = futimens(fd, ts);
		else if (o->op == OP_FTRUNCATE)
			r = ftruncate(fd, o->n);
		else if (o->op == OP_FCHMOD)
			r = fchmod(fd, (mode_t)o->n);
		else
			r = fchown(fd, (uid_t)o->n, -1);
		int e = errno;
		close(fd);
		errno = e;
		return r;
	}
	}
	return -1;
}

static const char *opnames[] = {
	"create",     "open_r",	    "open_w",	    "open_rw_trunc", "mkdir",	  "symlink",
	"mkfifo",     "mksock",	    "chmod",	    "chown",	     "chgrp",	  "truncate",
	"utimes_set", "utimes_now", "setxattr",	    "getxattr",	     "unlink",	  "rename",
	"rmdir",      "access",	    "opendir",	    "stat",	     "write",	  "link",
	"mknod_chr",  "read",	    "futimens_now", "futimens_set",  "ftruncate", "fchmod",
	"fchown",     "list",	    "chdir",	    "fchdir",	     "fstatat",	  "openat",
	"exec",	      "mknod_fifo",
};

/* run op as uid on both sides, compare, and check expected (0 = success,
 * >0 = that errno, -1 = don't care beyond equality) */
static void as(uid_t uid, gid_t gid, enum op op, const char *a, const char *b, long n, int want)
{
	struct opspec o = { op, a, b, n };
	char what[PATH_MAX + 64];
	snprintf(what, sizeof what, "%s(%s%s%s, %ld)", opnames[op], a, b ? ", " : "", b ? b : "",
		 n);
	struct res r = dual_as(what, uid, gid, do_op, &o);
	if (want == 0)
		ck_assert_msg(r.ret >= 0, "%s as %u: expected success, got %s", what, uid,
			      strerror(r.err));
	else if (want > 0)
		ck_assert_msg(r.ret < 0 && r.err == want, "%s as %u: expected %s, got %s", what,
			      uid, strerror(want), res_str(r));
}

#define U1 TEST_UID, TEST_GID
#define U2 TEST_UID2, TEST_GID2

static void owned_by(const char *rel, uid_t uid, gid_t gid)
{
	check_dual_stat(rel);
	check_identity(rel);
	struct stat m, b;
	ck_assert_int_eq(lstat(PM("%s", rel), &m), 0);
	ck_assert_int_eq(lstat(PE("%s", rel), &b), 0);
	ck_assert_msg(m.st_uid == uid && m.st_gid == gid,
		      "%s created through dcfs by %u:%u is owned by %u:%u", rel, uid, gid, m.st_uid,
		      m.st_gid);
	ck_assert_msg(b.st_uid == uid && b.st_gid == gid,
		      "%s created through dcfs by %u:%u is owned by %u:%u on the backing fs", rel,
		      uid, gid, b.st_uid, b.st_gid);
}

static void make_pub(const char *name, mode_t mode)
{
	DUAL(mkdir(P("%s", name), 0755));
	DUAL(chmod(P("%s", name), mode));
}

START_TEST(perms_created_owner)
{
	T_BEGIN();
	make_pub("pub", 0777);
	as(U1, OP_CREATE, "pub/f", NULL, 0640, 0);
	as(U1, OP_MKDIR, "pub/d", NULL, 0750, 0);
	as(U1, OP_SYMLINK, "pub/l", NULL, 0, 0);
	as(U1, OP_MKFIFO, "pub/p", NULL, 0, 0);
	as(U1, OP_MKSOCK, "pub/s", NULL, 0, 0);
	as(U1, OP_MKNOD_CHR, "pub/c", NULL, 0, EPERM);
	as(U2, OP_CREATE, "pub/f2", NULL, 0600, 0);
	as(U2, OP_MKDIR, "pub/d/x", NULL, 0, EACCES); /* d is 0750 owned by U1 */
	as(U1, OP_CREATE, "pub/d/inner", NULL, 0, 0);
	as(U1, OP_LINK, "pub/f", "pub/f.link", 0, 0);
	owned_by("pub/f", TEST_UID, TEST_GID);
	owned_by("pub/d", TEST_UID, TEST_GID);
	owned_by("pub/l", TEST_UID, TEST_GID);
	owned_by("pub/p", TEST_UID, TEST_GID);
	owned_by("pub/s", TEST_UID, TEST_GID);
	owned_by("pub/d/inner", TEST_UID, TEST_GID);
	owned_by("pub/f2", TEST_UID2, TEST_GID2);
	/* rename by owner keeps owner */
	as(U1, OP_RENAME, "pub/f", "pub/d/moved", 0, 0);
	owned_by("pub/d/moved", TEST_UID, TEST_GID);
	/* root creates -> root owned */
	DUAL(write_file(P("pub/rootfile"), "r", 1, 0644));
	owned_by("pub/rootfile", 0, 0);
}
END_TEST

START_TEST(perms_other_users_file)
{
	T_BEGIN();
	make_pub("pub", 0777);
	as(U2, OP_CREATE, "pub/secret", NULL, 0600, 0);
	as(U2, OP_SETXATTR, "pub/secret", NULL, 0, 0);
	/* owner can do everything */
	as(U2, OP_READ_CONTENT, "pub/secret", NULL, 0, 0);
	as(U2, OP_WRITE_EXISTING, "pub/secret", NULL, 0, 0);
	as(U2, OP_GETXATTR, "pub/secret", NULL, 0, 0);
	/* another user cannot read, write, chmod... */
	as(U1, OP_OPEN_R, "pub/secret", NULL, 0, EACCES);
	as(U1, OP_OPEN_W, "pub/secret", NULL, 0, EACCES);
	as(U1, OP_OPEN_RW_TRUNC, "pub/secret", NULL, 0, EACCES);
	as(U1, OP_CHMOD, "pub/secret", NULL, 0666, EPERM);
	as(U1, OP_CHOWN, "pub/secret", NULL, TEST_UID, EPERM);
	as(U1, OP_CHGRP, "pub/secret", NULL, TEST_GID, EPERM);
	as(U1, OP_TRUNCATE, "pub/secret", NULL, 0, EACCES);
	as(U1, OP_UTIMES_SET, "pub/secret", NULL, 0, EPERM);
	as(U1, OP_UTIMES_NOW, "pub/secret", NULL, 0, EACCES);
	as(U1, OP_SETXATTR, "pub/secret", NULL, 0, -1);
	as(U1, OP_GETXATTR, "pub/secret", NULL, 0, -1);
	as(U1, OP_ACCESS, "pub/secret", NULL, R_OK, EACCES);
	as(U1, OP_ACCESS, "pub/secret", NULL, W_OK, EACCES);
	as(U1, OP_ACCESS, "pub/secret", NULL, F_OK, 0);
	as(U1, OP_STAT, "pub/secret", NULL, 0, 0);
	/* root-owned 0600 file too */
	DUAL(write_file(P("pub/rootsecret"), "s", 1, 0600));
	as(U1, OP_OPEN_R, "pub/rootsecret", NULL, 0, EACCES);
	as(U1, OP_WRITE_EXISTING, "pub/rootsecret", NULL, 0, EACCES);
	as(U1, OP_CHMOD, "pub/rootsecret", NULL, 0644, EPERM);
	check_dual_stat("pub/secret");
	check_dual_stat("pub/rootsecret");
	/* content and mode were not changed */
	struct stat st;
	ck_assert_int_eq(stat(PE("pub/secret"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(st.st_size, 4);
	/* group permission: file readable by group only */
	DUAL(write_file(P("pub/grp"), "g", 1, 0640));
	DUAL(chown(P("pub/grp"), 0, TEST_GID));
	as(U1, OP_OPEN_R, "pub/grp", NULL, 0, 0);
	as(U1, OP_OPEN_W, "pub/grp", NULL, 0, EACCES);
	as(U2, OP_OPEN_R, "pub/grp", NULL, 0, EACCES);
}
END_TEST

START_TEST(perms_directories)
{
	T_BEGIN();
	make_pub("ro", 0755);	/* root owned, not writable by others */
	make_pub("priv", 0700); /* not searchable */
	make_pub("xonly", 0711);
	make_pub("sticky", 01777);
	DUAL(write_file(P("priv/f"), "x", 1, 0644));
	DUAL(write_file(P("xonly/f"), "x", 1, 0644));
	DUAL(write_file(P("ro/f"), "x", 1, 0666));
	DUAL(chmod(P("ro/f"), 0666));
	as(U1, OP_CREATE, "ro/new", NULL, 0, EACCES);
	as(U1, OP_MKDIR, "ro/newd", NULL, 0, EACCES);
	as(U1, OP_SYMLINK, "ro/sl", NULL, 0, EACCES);
	as(U1, OP_UNLINK, "ro/f", NULL, 0, EACCES);
	as(U1, OP_RENAME, "ro/f", "ro/g", 0, EACCES);
	as(U1, OP_WRITE_EXISTING, "ro/f", NULL, 0, 0); /* file itself is 0666 */
	as(U1, OP_STAT, "priv/f", NULL, 0, EACCES);
	as(U1, OP_OPENDIR, "priv", NULL, 0, EACCES);
	as(U1, OP_STAT, "xonly/f", NULL, 0, 0);
	as(U1, OP_OPENDIR, "xonly", NULL, 0, EACCES);
	as(U1, OP_READ_CONTENT, "xonly/f", NULL, 0, 0);
	/* sticky dir: others cannot remove or rename U2's file */
	as(U2, OP_CREATE, "sticky/mine", NULL, 0644, 0);
	as(U2, OP_MKDIR, "sticky/mydir", NULL, 0777, 0);
	as(U1, OP_UNLINK, "sticky/mine", NULL, 0, EPERM);
	as(U1, OP_RENAME, "sticky/mine", "sticky/stolen", 0, EPERM);
	as(U1, OP_RMDIR, "sticky/mydir", NULL, 0, EPERM);
	as(U1, OP_CREATE, "sticky/u1", NULL, 0644, 0);
	as(U2, OP_RENAME, "sticky/mine", "sticky/u1", 0, EPERM); /* target owned by U1 */
	as(U2, OP_UNLINK, "sticky/mine", NULL, 0, 0);
	as(U1, OP_UNLINK, "sticky/u1", NULL, 0, 0);
	/* access() as unprivileged */
	as(U1, OP_ACCESS, "ro", NULL, W_OK, EACCES);
	as(U1, OP_ACCESS, "ro", NULL, X_OK, 0);
	as(U1, OP_ACCESS, "priv", NULL, R_OK, EACCES);
	as(U1, OP_ACCESS, "sticky", NULL, R_OK | W_OK | X_OK, 0);
}
END_TEST

START_TEST(perms_chown_chmod_unpriv)
{
	T_BEGIN();
	make_pub("pub", 0777);
	as(U1, OP_CREATE, "pub/f", NULL, 0644, 0);
	as(U1, OP_CHOWN, "pub/f", NULL, 0, EPERM);    /* give away */
	as(U1, OP_CHGRP, "pub/f", NULL, 0, EPERM);    /* not a member */
	as(U1, OP_CHGRP, "pub/f", NULL, TEST_GID, 0); /* own group: ok */
	as(U1, OP_CHOWN, "pub/f", NULL, TEST_UID, 0); /* no-op chown: ok */
	as(U1, OP_CHMOD, "pub/f", NULL, 0600, 0);
	as(U1, OP_UTIMES_SET, "pub/f", NULL, 0, 0);
	as(U1, OP_TRUNCATE, "pub/f", NULL, 1, 0);
	check_dual_stat("pub/f");
	check_identity("pub/f");
	/* setgid on a file whose group is not ours is silently dropped */
	DUAL(chown(P("pub/f"), TEST_UID, 4242));
	as(U1, OP_CHMOD, "pub/f", NULL, 02755, 0);
	check_dual_stat("pub/f");
	struct stat st;
	ck_assert_int_eq(stat(PM("pub/f"), &st), 0);
	ck_assert_msg(!(st.st_mode & S_ISGID), "S_ISGID kept: mode 0%o", st.st_mode);
	/* setuid by owner is fine */
	as(U1, OP_CHMOD, "pub/f", NULL, 04755, 0);
	check_dual_stat("pub/f");
}
END_TEST

/* Writes / truncates by an unprivileged user clear setuid/setgid bits. */
START_TEST(perms_killpriv)
{
	T_BEGIN();
	make_pub("pub", 0777);
	DUAL(write_file(P("pub/suid"), "x", 1, 0644));
	DUAL(chmod(P("pub/suid"), 04777));
	DUAL(write_file(P("pub/sgid"), "x", 1, 0644));
	DUAL(chmod(P("pub/sgid"), 02777));
	DUAL(write_file(P("pub/both"), "x", 1, 0644));
	DUAL(chmod(P("pub/both"), 06777));
	as(U1, OP_WRITE_EXISTING, "pub/suid", NULL, 0, 0);
	as(U1, OP_WRITE_EXISTING, "pub/sgid", NULL, 0, 0);
	as(U1, OP_TRUNCATE, "pub/both", NULL, 0, 0);
	check_dual_stat("pub/suid");
	check_dual_stat("pub/sgid");
	check_dual_stat("pub/both");
	check_identity("pub/suid");
	struct stat st;
	ck_assert_int_eq(stat(PM("pub/suid"), &st), 0);
	ck_assert_msg(!(st.st_mode & S_ISUID), "S_ISUID survived a write by another user (0%o)",
		      st.st_mode);
}
END_TEST

/* setattr on an fd opened by an unprivileged user on root's 0666 file:
 * write permission allows truncate and "touch", not explicit times, chmod
 * or chown; the file stays root's. */
START_TEST(perms_fd_setattr)
{
	T_BEGIN();
	make_pub("pub", 0777);
	DUAL(write_file(P("pub/shared"), "0123456789", 10, 0644));
	DUAL(chmod(P("pub/shared"), 0666));
	as(U1, OP_FUTIMENS_NOW, "pub/shared", NULL, 0, 0);
	as(U1, OP_FUTIMENS_SET, "pub/shared", NULL, 0, EPERM);
	as(U1, OP_FTRUNCATE, "pub/shared", NULL, 4, 0);
	as(U1, OP_FCHMOD, "pub/shared", NULL, 0777, EPERM);
	as(U1, OP_FCHOWN, "pub/shared", NULL, TEST_UID, EPERM);
	check_dual_stat("pub/shared");
	check_identity("pub/shared");
	owned_by("pub/shared", 0, 0);
	/* owner may do all of it on its own file through an fd */
	as(U1, OP_CREATE, "pub/own", NULL, 0644, 0);
	as(U1, OP_FUTIMENS_SET, "pub/own", NULL, 0, 0);
	as(U1, OP_FCHMOD, "pub/own", NULL, 0600, 0);
	as(U1, OP_FTRUNCATE, "pub/own", NULL, 100, 0);
	check_dual_stat("pub/own");
	owned_by("pub/own", TEST_UID, TEST_GID);
}
END_TEST

static long write_and_sync(struct as_ctx *c)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", c->root, (const char *)c->arg);
	int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	static char buf[1 << 20];
	memset(buf, 'z', sizeof buf);
	for (int i = 0; i < 4; i++) {
		if (write(fd, buf, sizeof buf) < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
	}
	if (fsync(fd) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return close(fd);
}

static long tramp_ctx(void *a)
{
	return write_and_sync(a);
}

/* ext4 keeps 5% of the blocks for root: once only reserved blocks are left,
 * an unprivileged writer gets ENOSPC. Through dcfs it must be the same
 * (the daemon must not spend root's reserve on behalf of other users). */
START_TEST(perms_enospc_reserved)
{
	T_BEGIN();
	make_pub("pub", 0777);
	struct statvfs sv;
	ck_assert_int_eq(statvfs(ROOTS[0], &sv), 0);
	/* xfs keeps no blocks for root; every ext4 made here keeps 5% */
	if (g_cfg->fs != FS_EXT4) {
		printf("perms_enospc_reserved %s: not run (no root reserve on xfs)\n", g_cfg->name);
		return;
	}
	ck_assert_msg(sv.f_bfree - sv.f_bavail >= 2048,
		      "ext4 without a root reserve (%llu blocks): the test would prove nothing",
		      (unsigned long long)(sv.f_bfree - sv.f_bavail));
	/* fill everything available to unprivileged users */
	int fd = open(PR("filler"), O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	off_t off = 0;
	for (int i = 0; i < 64; i++) {
		ck_assert_int_eq(statvfs(ROOTS[0], &sv), 0);
		if (sv.f_bavail == 0)
			break;
		off_t len = (off_t)sv.f_bavail * sv.f_frsize;
		while (len >= 4096 && fallocate(fd, 0, off, len) < 0)
			len /= 2;
		if (len < 4096)
			break;
		off += len;
	}
	close(fd);
	ck_assert_int_eq(statvfs(ROOTS[0], &sv), 0);
	ck_assert_msg(sv.f_bavail == 0 && sv.f_bfree > 1024,
		      "could not fill the fs up to the reserve: bavail %llu bfree %llu",
		      (unsigned long long)sv.f_bavail, (unsigned long long)sv.f_bfree);
	struct as_ctx c0 = { ROOTS[0], (void *)"pub/w" }, c1 = { ROOTS[1], (void *)"pub/w" };
	struct res r0 = run_as(U1, tramp_ctx, &c0);
	struct res r1 = run_as(U1, tramp_ctx, &c1);
	unlink(PR("filler")); /* before any assertion: later tests need the space */
	unlink(PR("pub/w"));
	unlink(PM("pub/w"));
	ck_assert_msg(r0.ret < 0 && r0.err == ENOSPC,
		      "backing: unprivileged write into root reserve: %s", res_str(r0));
	ck_assert_msg(
		r1.ret == r0.ret && r1.err == r0.err,
		"write 4M + fsync as uid %d with only root-reserved space left: backing gave %s, "
		"dcfs gave %s",
		TEST_UID, res_str(r0), res_str(r1));
}
END_TEST

/*
 * Issue 24 #4: a directory with read but no search permission lists (the
 * names, as getdents gives them), but nothing in it can be reached, not
 * even through an fd of the directory; pjdfstest-style, against native.
 */
START_TEST(perms_dir_read_no_search)
{
	T_BEGIN();
	make_pub("pub", 0777);
	/* the caller's own directory, made r-- (as in `chmod 0600 s; ls s`) */
	as(U1, OP_MKDIR, "pub/s", NULL, 0755, 0);
	as(U1, OP_CREATE, "pub/s/a", NULL, 0644, 0);
	as(U1, OP_MKDIR, "pub/s/sub", NULL, 0755, 0);
	as(U1, OP_SYMLINK, "pub/s/l", NULL, 0, 0);
	as(U1, OP_CHMOD, "pub/s", NULL, 0600, 0);
	/* root's directory, readable by others, not searchable */
	make_pub("r644", 0755);
	DUAL(write_file(P("r644/f"), "x", 1, 0644));
	DUAL(mkdir(P("r644/d"), 0755));
	DUAL(chmod(P("r644"), 0644));
	/* neither readable nor searchable */
	make_pub("r600", 0755);
	DUAL(write_file(P("r600/f"), "x", 1, 0644));
	DUAL(chmod(P("r600"), 0600));
	for (int round = 0; round < 2; round++) {
		/* the second round finds whatever the first left cached */
		as(U1, OP_OPENDIR, "pub/s", NULL, 0, 0);
		as(U1, OP_LIST, "pub/s", NULL, 0, 0);
		as(U1, OP_STAT, "pub/s", NULL, 0, 0);
		as(U1, OP_STAT, "pub/s/a", NULL, 0, EACCES);
		as(U1, OP_STAT, "pub/s/sub", NULL, 0, EACCES);
		as(U1, OP_OPEN_R, "pub/s/a", NULL, 0, EACCES);
		as(U1, OP_LIST, "pub/s/sub", NULL, 0, EACCES);
		as(U1, OP_CHDIR, "pub/s", NULL, 0, EACCES);
		as(U1, OP_FCHDIR, "pub/s", NULL, 0, EACCES);
		as(U1, OP_FSTATAT, "pub/s", "a", 0, EACCES);
		as(U1, OP_OPENAT, "pub/s", "a", 0, EACCES);
		as(U1, OP_ACCESS, "pub/s", NULL, R_OK, 0);
		as(U1, OP_ACCESS, "pub/s", NULL, X_OK, EACCES);
		as(U1, OP_ACCESS, "pub/s/a", NULL, F_OK, EACCES);
		as(U1, OP_LIST, "r644", NULL, 0, 0);
		as(U1, OP_STAT, "r644/f", NULL, 0, EACCES);
		as(U1, OP_OPEN_R, "r644/f", NULL, 0, EACCES);
		as(U1, OP_FSTATAT, "r644", "d", 0, EACCES);
		as(U2, OP_LIST, "r644", NULL, 0, 0);
		as(U1, OP_OPENDIR, "r600", NULL, 0, EACCES);
		as(U1, OP_LIST, "r600", NULL, 0, EACCES);
		/* the owner may still add search permission back */
		as(U1, OP_ACCESS, "pub/s", NULL, W_OK, 0);
	}
	as(U1, OP_CHMOD, "pub/s", NULL, 0700, 0);
	as(U1, OP_STAT, "pub/s/a", NULL, 0, 0);
	as(U1, OP_CHDIR, "pub/s", NULL, 0, 0);
	/* root lists and searches anything */
	DUAL(list_dir(P("r600")));
	DUAL(access(P("r600/f"), R_OK));
}
END_TEST

static void copy_true(const char *name, mode_t mode)
{
	size_t len;
	void *bin = slurp("/bin/true", &len);
	ck_assert_ptr_nonnull(bin);
	DUAL(write_file(P("%s", name), bin, len, 0755));
	DUAL(chmod(P("%s", name), mode));
	free(bin);
}

static void write_script(const char *name, mode_t mode)
{
	static const char script[] = "#!/bin/sh\nexit 3\n";
	DUAL(write_file(P("%s", name), script, sizeof script - 1, 0755));
	DUAL(chmod(P("%s", name), mode));
}

/*
 * Issue 24 #5: execute-only programs run for users who may execute but not
 * read them (the kernel's exec open carries __FMODE_EXEC; the daemon opens
 * such a file read-only for the exec after checking execute permission on
 * the inode).  Nothing more: reads stay refused, and a script still fails
 * for them because its interpreter must read it.
 */
START_TEST(perms_exec_only)
{
	T_BEGIN();
	make_pub("pub", 0755);
	copy_true("pub/t711", 0711);
	copy_true("pub/t701", 0701);
	copy_true("pub/t111", 0111);
	copy_true("pub/t710", 0710);
	copy_true("pub/t700", 0700);
	copy_true("pub/t644", 0644);
	copy_true("pub/t4711", 04711);
	DUAL(chown(P("pub/t710"), 0, TEST_GID));
	DUAL(symlink("t711", P("pub/link711")));
	write_script("pub/s711", 0711);
	write_script("pub/s755", 0755);
	write_script("pub/s111", 0111);
	for (int round = 0; round < 2; round++) {
		as(U1, OP_EXEC, "pub/t711", NULL, 0, 0);
		as(U1, OP_EXEC, "pub/t701", NULL, 0, 0);
		as(U1, OP_EXEC, "pub/t111", NULL, 0, 0);
		as(U1, OP_EXEC, "pub/t710", NULL, 0, 0); /* by group */
		as(U2, OP_EXEC, "pub/t710", NULL, 0, EACCES);
		as(U1, OP_EXEC, "pub/t700", NULL, 0, EACCES);
		as(U1, OP_EXEC, "pub/t644", NULL, 0, EACCES);
		as(U1, OP_EXEC, "pub/t4711", NULL, 0, 0);
		as(U1, OP_EXEC, "pub/link711", NULL, 0, 0);
		/* the interpreter cannot read the script: same status as native */
		as(U1, OP_EXEC, "pub/s711", NULL, 0, -1);
		as(U1, OP_EXEC, "pub/s111", NULL, 0, -1);
		as(U1, OP_EXEC, "pub/s755", NULL, 0, -1);
		/* execute permission grants nothing else */
		as(U1, OP_OPEN_R, "pub/t711", NULL, 0, EACCES);
		as(U1, OP_READ_CONTENT, "pub/t701", NULL, 0, EACCES);
		as(U1, OP_OPEN_W, "pub/t711", NULL, 0, EACCES);
		as(U1, OP_OPEN_R, "pub/s711", NULL, 0, EACCES);
		as(U1, OP_ACCESS, "pub/t711", NULL, X_OK, 0);
		as(U1, OP_ACCESS, "pub/t711", NULL, R_OK, EACCES);
	}
	/* root: any execute bit will do, none is refused */
	DUAL(exec_status(P("pub/t711")));
	DUAL(exec_status(P("pub/t700")));
	DUAL(exec_status(P("pub/t644")));
	DUAL(exec_status(P("pub/s711")));
	struct stat st;
	OK(stat(PM("pub/t711"), &st));
	ck_assert_uint_eq(st.st_mode & 07777, 0711);
	check_dual_stat("pub/t711");
	check_dual_stat("pub/t4711");
}
END_TEST

/* The access ACL of rel (what setfacl/getfacl see) is the same on both sides. */
static void same_acl(const char *rel)
{
	char a[512], b[512];
	errno = 0;
	ssize_t na = lgetxattr(PR("%s", rel), "system.posix_acl_access", a, sizeof a);
	int ea = errno;
	errno = 0;
	ssize_t nb = lgetxattr(PM("%s", rel), "system.posix_acl_access", b, sizeof b);
	int eb = errno;
	ck_assert_msg(na == nb && ea == eb && (na < 0 || memcmp(a, b, (size_t)na) == 0),
		      "%s: access ACL backing %zd (%s), dcfs %zd (%s)", rel, na, strerror(ea), nb,
		      strerror(eb));
}

struct um_op {
	struct opspec op;
	mode_t umask;
};

static long do_op_umask(struct as_ctx *c)
{
	const struct um_op *u = c->arg;
	struct as_ctx inner = { c->root, (void *)&u->op };
	umask(u->umask);
	return do_op(&inner);
}

static void as_umask(mode_t mask, enum op op, const char *a, long n)
{
	struct um_op u = { { op, a, NULL, n }, mask };
	char what[PATH_MAX + 64];
	snprintf(what, sizeof what, "%s(%s, 0%lo) with umask 0%o", opnames[op], a, n,
		 (unsigned)mask);
	struct res r = dual_as(what, U1, do_op_umask, &u);
	ck_assert_msg(r.ret >= 0, "%s: %s", what, res_str(r));
	check_dual_stat(a);
	same_acl(a);
}

/*
 * Issue 24 #7: in a directory with a default ACL the umask is not applied
 * (POSIX ACLs); elsewhere it is.  Created by another user and by root,
 * with several umasks, every kind of object.
 */
START_TEST(perms_umask_default_acl)
{
	T_BEGIN();
	char out[512];
	make_pub("d", 0777);
	make_pub("plain", 0777);
	int rc = DUAL(run_cmd(out, sizeof out, "setfacl -d -m u::rwx,g::rwx,o::r-x '%s'", P("d")));
	ck_assert_msg(rc == 0, "setfacl: %s", out);
	static const mode_t masks[] = { 022, 077, 0 };
	const char *dirs[] = { "d", "plain" };
	for (int i = 0; i < 2; i++) {
		for (int m = 0; m < 3; m++) {
			char f[64], dd[64], p[64], q[64];
			snprintf(f, sizeof f, "%s/f%o", dirs[i], (unsigned)masks[m]);
			snprintf(dd, sizeof dd, "%s/d%o", dirs[i], (unsigned)masks[m]);
			snprintf(p, sizeof p, "%s/p%o", dirs[i], (unsigned)masks[m]);
			snprintf(q, sizeof q, "%s/q%o", dirs[i], (unsigned)masks[m]);
			as_umask(masks[m], OP_CREATE, f, 0666);
			as_umask(masks[m], OP_MKDIR, dd, 0777);
			as_umask(masks[m], OP_MKNOD_FIFO, p, 0666);
			as_umask(masks[m], OP_CREATE, q, 0640);
		}
	}
	as_umask(022, OP_SYMLINK, "d/l", 0);
	/* inherited by a directory made in it, and used there */
	as_umask(022, OP_MKDIR, "d/sub", 0775);
	as_umask(077, OP_CREATE, "d/sub/f", 0666);
	/* root, with the test's own umask */
	mode_t old = umask(027);
	int fd0 = open(PR("d/rootf"), O_CREAT | O_WRONLY, 0666);
	int fd1 = open(PM("d/rootf"), O_CREAT | O_WRONLY, 0666);
	int e0 = mkdir(PR("d/rootd"), 0777), e1 = mkdir(PM("d/rootd"), 0777);
	int g0 = mkdir(PR("plain/rootd"), 0777), g1 = mkdir(PM("plain/rootd"), 0777);
	umask(old);
	ck_assert_msg(fd0 >= 0 && fd1 >= 0 && !e0 && !e1 && !g0 && !g1, "root creates failed");
	close(fd0);
	close(fd1);
	check_dual_stat("d/rootf");
	check_dual_stat("d/rootd");
	check_dual_stat("plain/rootd");
	same_acl("d/rootf");
	same_acl("d/rootd");
}
END_TEST

/*
 * With -o acl the kernel's checks honour named ACL entries as natively:
 * granting (a named user reads a 0600 file, lists a 0700 directory, a
 * named group writes), denying (a named user with no rights on a 0644
 * file), and the mask a chmod sets.  Without -o acl the kernel checks the
 * mode bits alone and refuses the granted cases (dcfs(8) "acl").
 */
static void setfacl_both(const char *spec, const char *rel)
{
	char out[512];
	int rc = DUAL(run_cmd(out, sizeof out, "setfacl -m '%s' '%s'", spec, P("%s", rel)));
	ck_assert_msg(rc == 0, "setfacl -m %s %s: %s", spec, rel, out);
}

START_TEST(perms_named_acl)
{
	T_BEGIN();
	char spec[64];
	make_pub("nacl", 0755);
	DUAL(write_file(P("nacl/f"), "secret\n", 7, 0600));
	snprintf(spec, sizeof spec, "u:%u:r", (unsigned)TEST_UID);
	setfacl_both(spec, "nacl/f");
	make_pub("nacl/d", 0700);
	DUAL(write_file(P("nacl/d/g"), "inside\n", 7, 0644));
	snprintf(spec, sizeof spec, "u:%u:rx", (unsigned)TEST_UID);
	setfacl_both(spec, "nacl/d");
	DUAL(write_file(P("nacl/deny"), "open\n", 5, 0644));
	snprintf(spec, sizeof spec, "u:%u:---", (unsigned)TEST_UID);
	setfacl_both(spec, "nacl/deny");
	DUAL(write_file(P("nacl/gw"), "group\n", 6, 0600));
	snprintf(spec, sizeof spec, "g:%u:rw", (unsigned)TEST_GID2);
	setfacl_both(spec, "nacl/gw");
	for (int round = 0; round < 2; round++) {
		as(U1, OP_READ_CONTENT, "nacl/f", NULL, 0, 0);
		as(U2, OP_READ_CONTENT, "nacl/f", NULL, 0, EACCES);
		as(U1, OP_OPEN_W, "nacl/f", NULL, 0, EACCES);
		as(U1, OP_LIST, "nacl/d", NULL, 0, 0);
		as(U1, OP_READ_CONTENT, "nacl/d/g", NULL, 0, 0);
		as(U2, OP_LIST, "nacl/d", NULL, 0, EACCES);
		as(U1, OP_OPEN_R, "nacl/deny", NULL, 0, EACCES);
		as(U2, OP_OPEN_R, "nacl/deny", NULL, 0, 0);
		as(U2, OP_WRITE_EXISTING, "nacl/gw", NULL, 0, 0);
		as(U1, OP_OPEN_W, "nacl/gw", NULL, 0, EACCES);
	}
	/* chmod sets the mask: the named entry no longer grants, then again */
	DUAL(chmod(P("nacl/f"), 0600));
	as(U1, OP_READ_CONTENT, "nacl/f", NULL, 0, EACCES);
	DUAL(chmod(P("nacl/f"), 0640));
	as(U1, OP_READ_CONTENT, "nacl/f", NULL, 0, 0);
	same_acl("nacl/f");
}
END_TEST

void add_perms_tests(TCase *tc)
{
	tcase_add_test(tc, perms_created_owner);
	tcase_add_test(tc, perms_other_users_file);
	tcase_add_test(tc, perms_directories);
	tcase_add_test(tc, perms_chown_chmod_unpriv);
	tcase_add_test(tc, perms_killpriv);
	tcase_add_test(tc, perms_fd_setattr);
	tcase_add_test(tc, perms_enospc_reserved);
	tcase_add_test(tc, perms_dir_read_no_search);
	tcase_add_test(tc, perms_exec_only);
	tcase_add_test(tc, perms_umask_default_acl);
	if (g_adding_cfg && g_adding_cfg->opts && strstr(g_adding_cfg->opts, "acl") &&
	    !strstr(g_adding_cfg->opts, "noacl"))
		tcase_add_test(tc, perms_named_acl);
}
