/* Permission checks and ownership of files created by unprivileged callers.
 * dcfs is mounted with allow_other; children switch to uid/gid 65534
 * (nobody/nogroup) or 64001 (a synthetic user without passwd entry). Each
 * operation is run as that user on the reference dir and through dcfs, and
 * the results / errno must be identical. */
#include "harness.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

enum op {
	OP_CREATE, OP_OPEN_R, OP_OPEN_W, OP_OPEN_RW_TRUNC, OP_MKDIR, OP_SYMLINK, OP_MKFIFO,
	OP_MKSOCK, OP_CHMOD, OP_CHOWN, OP_CHGRP, OP_TRUNCATE, OP_UTIMES_SET, OP_UTIMES_NOW,
	OP_SETXATTR, OP_GETXATTR, OP_UNLINK, OP_RENAME, OP_RMDIR, OP_ACCESS, OP_OPENDIR,
	OP_STAT, OP_WRITE_EXISTING, OP_LINK, OP_MKNOD_CHR, OP_READ_CONTENT,
	OP_FUTIMENS_NOW, OP_FUTIMENS_SET, OP_FTRUNCATE, OP_FCHMOD, OP_FCHOWN,
};

struct opspec {
	enum op op;
	const char *a;
	const char *b;
	long n;
};

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
		fd = open(pa, o->op == OP_OPEN_R ? O_RDONLY : o->op == OP_OPEN_W ? O_WRONLY
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
	case OP_MKDIR:
		return mkdir(pa, o->n ? (mode_t)o->n : 0755);
	case OP_SYMLINK:
		return symlink("target", pa);
	case OP_MKFIFO:
		return mkfifo(pa, 0644);
	case OP_MKSOCK:
		return mknod(pa, S_IFSOCK | 0644, 0);
	case OP_MKNOD_CHR:
		return mknod(pa, S_IFCHR | 0644, makedev(1, 3));
	case OP_CHMOD:
		return chmod(pa, (mode_t)o->n);
	case OP_CHOWN:
		return chown(pa, (uid_t)o->n, -1);
	case OP_CHGRP:
		return chown(pa, -1, (gid_t)o->n);
	case OP_TRUNCATE:
		return truncate(pa, o->n);
	case OP_UTIMES_SET: {
		struct timespec ts[2] = { { 1000, 0 }, { 2000, 0 } };
		return utimensat(AT_FDCWD, pa, ts, 0);
	}
	case OP_UTIMES_NOW:
		return utimensat(AT_FDCWD, pa, NULL, 0);
	case OP_SETXATTR:
		return setxattr(pa, "user.p", "v", 1, 0);
	case OP_GETXATTR: {
		char v[16];
		return getxattr(pa, "user.p", v, sizeof v);
	}
	case OP_UNLINK:
		return unlink(pa);
	case OP_RMDIR:
		return rmdir(pa);
	case OP_RENAME:
		return rename(pa, pb);
	case OP_LINK:
		return link(pa, pb);
	case OP_ACCESS:
		return access(pa, (int)o->n);
	case OP_OPENDIR:
		fd = open(pa, O_RDONLY | O_DIRECTORY);
		return fd < 0 ? -1 : close(fd);
	case OP_STAT:
		return stat(pa, &st);
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
	"create", "open_r", "open_w", "open_rw_trunc", "mkdir", "symlink", "mkfifo", "mksock",
	"chmod", "chown", "chgrp", "truncate", "utimes_set", "utimes_now", "setxattr",
	"getxattr", "unlink", "rename", "rmdir", "access", "opendir", "stat", "write",
	"link", "mknod_chr", "read", "futimens_now", "futimens_set", "ftruncate", "fchmod",
	"fchown",
};

/* run op as uid on both sides, compare, and check expected (0 = success,
 * >0 = that errno, -1 = don't care beyond equality) */
static void as(uid_t uid, gid_t gid, enum op op, const char *a, const char *b, long n, int want)
{
	struct opspec o = { op, a, b, n };
	char what[PATH_MAX + 64];
	snprintf(what, sizeof what, "%s(%s%s%s, %ld)", opnames[op], a, b ? ", " : "", b ? b : "", n);
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
	make_pub("ro", 0755);   /* root owned, not writable by others */
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
	as(U1, OP_CHOWN, "pub/f", NULL, 0, EPERM);          /* give away */
	as(U1, OP_CHGRP, "pub/f", NULL, 0, EPERM);          /* not a member */
	as(U1, OP_CHGRP, "pub/f", NULL, TEST_GID, 0);       /* own group: ok */
	as(U1, OP_CHOWN, "pub/f", NULL, TEST_UID, 0);       /* no-op chown: ok */
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
	if (sv.f_bfree - sv.f_bavail < 2048)
		return; /* no (or too small a) root reserve on this fs: nothing to test */
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
	ck_assert_msg(r0.ret < 0 && r0.err == ENOSPC, "backing: unprivileged write into root reserve: %s",
		      res_str(r0));
	ck_assert_msg(r1.ret == r0.ret && r1.err == r0.err,
		      "write 4M + fsync as uid %d with only root-reserved space left: backing gave %s, "
		      "dcfs gave %s", TEST_UID, res_str(r0), res_str(r1));
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
}
