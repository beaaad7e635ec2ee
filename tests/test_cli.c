/* Command line of dcfs (negative cases, options, daemon mode) and the
 * mount(8) helper (mount -t dcfs / umount). */
#include "own_mount.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static char cbase[PATH_MAX]; /* backing area for cli tests */
static char cmnt[PATH_MAX];  /* mountpoint */
static char cback[PATH_MAX]; /* backing dir */

static void cli_begin(const char *name)
{
	char err[512];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	snprintf(cbase, sizeof cbase, "%s/cli", root);
	mkdir(cbase, 0755);
	snprintf(cback, sizeof cback, "%s/%s", cbase, name);
	snprintf(cmnt, sizeof cmnt, "%s/climnt-%s", g_tmpdir, name);
	rm_rf(cback);
	ck_assert_int_eq(mkdir(cback, 0755), 0);
	char p[PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/hello", cback);
	ck_assert_int_eq(write_file(p, "hello\n", 6, 0644), 0);
	if (!is_mounted(cmnt, NULL, 0)) {
		rm_rf(cmnt);
		ck_assert_int_eq(mkdir(cmnt, 0755), 0);
	}
	track_mount(cmnt);
}
#define C_BEGIN() cli_begin(__func__)

START_TEST(cli_missing_backing)
{
	C_BEGIN();
	char nb[PATH_MAX + 16];
	snprintf(nb, sizeof nb, "%s/does-not-exist", cbase);
	char *a1[] = { "dcfs", "-f", nb, cmnt, NULL };
	expect_cli_error("-f, missing backing dir", cmnt, a1);
	char *a2[] = { "dcfs", nb, cmnt, NULL };
	expect_cli_error("daemon mode, missing backing dir", cmnt, a2);
	char f[PATH_MAX + 16];
	snprintf(f, sizeof f, "%s/hello", cback);
	char *a3[] = { "dcfs", "-f", f, cmnt, NULL };
	expect_cli_error("backing is a regular file", cmnt, a3);
}
END_TEST

START_TEST(cli_missing_mountpoint)
{
	C_BEGIN();
	char nm[PATH_MAX + 16];
	snprintf(nm, sizeof nm, "%s/no-such-mnt", g_tmpdir);
	char *a1[] = { "dcfs", "-f", cback, nm, NULL };
	expect_cli_error("-f, missing mountpoint", nm, a1);
	char *a2[] = { "dcfs", cback, nm, NULL };
	expect_cli_error("daemon mode, missing mountpoint", nm, a2);
	char *a3[] = { "dcfs", "-f", cback, NULL };
	expect_cli_error("no mountpoint argument", cmnt, a3);
	char *a4[] = { "dcfs", NULL };
	expect_cli_error("no arguments", cmnt, a4);
}
END_TEST

static void unmount_and_expect_exit0(struct daemon *d)
{
	char out[1024];
	int rc = run_cmd(out, sizeof out, "fusermount3 -u -z '%s'", d->mnt);
	ck_assert_msg(rc == 0, "fusermount3 -u -z: %s", out);
	int st = daemon_wait_exit(d, 10);
	char *log = read_file_str(d->log);
	ck_assert_msg(st != -1, "daemon did not exit after unmount; log %s", log);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "daemon exit status %#x; log %s", st,
		      log);
	const char *rep = log_report(log);
	ck_assert_msg(!rep, "%s", rep);
	free(log);
	daemon_kill(d);
}

static void start_ok(struct daemon *d, char *const argv[])
{
	char err[2048];
	snprintf(d->mnt, sizeof d->mnt, "%s", cmnt);
	ck_assert_int_eq(daemon_spawn(d, "cli", argv), 0);
	if (daemon_wait_mounted(d, err, sizeof err) < 0) {
		daemon_kill(d);
		ck_abort_msg("dcfs did not mount: %s", err);
	}
}

START_TEST(cli_nonempty_mountpoint)
{
	C_BEGIN();
	char p[PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/occupant", cmnt);
	ck_assert_int_eq(write_file(p, "x", 1, 0644), 0);
	char *a1[] = { "dcfs", "-f", cback, cmnt, NULL };
	expect_cli_error("-f, non-empty mountpoint", cmnt, a1);
	char *a2[] = { "dcfs", cback, cmnt, NULL };
	expect_cli_error("daemon mode, non-empty mountpoint", cmnt, a2);
	/* with nonempty it mounts and hides the occupant */
	struct daemon d;
	char *a3[] = { "dcfs", "-f", "-o", "nonempty", cback, cmnt, NULL };
	start_ok(&d, a3);
	ck_assert_int_eq(access(p, F_OK), -1);
	snprintf(p, sizeof p, "%s/hello", cmnt);
	ck_assert_int_eq(access(p, F_OK), 0);
	unmount_and_expect_exit0(&d);
	snprintf(p, sizeof p, "%s/occupant", cmnt);
	ck_assert_int_eq(access(p, F_OK), 0);
	unlink(p);
}
END_TEST

START_TEST(cli_bad_option)
{
	C_BEGIN();
	char *a1[] = { "dcfs", "-f", "-o", "no_such_option_xyz", cback, cmnt, NULL };
	expect_cli_error("unknown -o option", cmnt, a1);
	char *a2[] = { "dcfs", "-o", "no_such_option_xyz", cback, cmnt, NULL };
	expect_cli_error("unknown -o option, daemon mode", cmnt, a2);
	char *a3[] = { "dcfs", "-f", "--no-such-flag", cback, cmnt, NULL };
	expect_cli_error("unknown flag", cmnt, a3);
	char *a4[] = { "dcfs", "-f", "-o", "attr_timeout=banana", cback, cmnt, NULL };
	expect_cli_error("non-numeric attr_timeout", cmnt, a4);
	char *a5[] = { "dcfs", "-f", cback, cmnt, "extra-arg", NULL };
	expect_cli_error("extra positional argument", cmnt, a5);
}
END_TEST

/* config=PATH: missing or invalid file is an error, nothing mounted */
START_TEST(cli_bad_config)
{
	C_BEGIN();
	char opt[PATH_MAX + 32], cpath[PATH_MAX + 16];
	snprintf(opt, sizeof opt, "config=%s/no-such.conf", g_tmpdir);
	char *a1[] = { "dcfs", "-f", "-o", opt, cback, cmnt, NULL };
	expect_cli_error("missing config file", cmnt, a1);
	snprintf(cpath, sizeof cpath, "%s/bad.conf", g_tmpdir);
	const char *bad = "[global]\nno_such_key = 1\n";
	ck_assert_int_eq(write_file(cpath, bad, strlen(bad), 0644), 0);
	snprintf(opt, sizeof opt, "config=%s", cpath);
	char *a2[] = { "dcfs", "-f", "-o", opt, cback, cmnt, NULL };
	expect_cli_error("config with unknown key", cmnt, a2);
	/* a valid config mounts */
	const char *good = "[global]\ndefault = auto\nmin_size = 1M\n";
	ck_assert_int_eq(write_file(cpath, good, strlen(good), 0644), 0);
	struct daemon d;
	start_ok(&d, a2);
	unmount_and_expect_exit0(&d);
}
END_TEST

START_TEST(cli_daemon_mode)
{
	C_BEGIN();
	char err[2048] = "";
	char *a[] = { "dcfs", cback, cmnt, NULL };
	int st = run_capture(g_dcfs_bin, a, err, sizeof err, 10);
	ck_assert_msg(st != -1, "dcfs without -f did not return (should daemonize)");
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "dcfs daemon mode: status %#x: %s", st,
		      err);
	char fstype[256] = "";
	ck_assert_msg(is_mounted(cmnt, fstype, sizeof fstype), "not mounted after dcfs returned");
	ck_assert_msg(strncmp(fstype, "fuse", 4) == 0, "fstype %s", fstype);
	char p[PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/hello", cmnt);
	size_t l;
	char *s = slurp(p, &l);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(l, 6);
	free(s);
	char out[512];
	ck_assert_int_eq(run_cmd(out, sizeof out, "umount '%s'", cmnt), 0);
	double end = now_s() + 5 * deadline_scale();
	while (is_mounted(cmnt, NULL, 0) && now_s() < end)
		sleep_ms(20);
	ck_assert(!is_mounted(cmnt, NULL, 0));
	/* daemon gone: no process has cmnt in its command line */
	end = now_s() + 10 * deadline_scale();
	pid_t alive;
	while ((alive = find_daemon_for(cmnt)) > 0 && now_s() < end)
		sleep_ms(50);
	ck_assert_msg(alive <= 0, "daemon (pid %d) still running after umount", alive);
}
END_TEST

START_TEST(cli_ro_and_fsname)
{
	C_BEGIN();
	struct daemon d;
	char *a[] = { "dcfs", "-f", "-o", "ro,fsname=dcfs-clitest", cback, cmnt, NULL };
	start_ok(&d, a);
	char p[PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/hello", cmnt);
	errno = 0;
	ck_assert_int_eq(open(p, O_WRONLY), -1);
	ck_assert_int_eq(errno, EROFS);
	snprintf(p, sizeof p, "%s/new", cmnt);
	errno = 0;
	ck_assert_int_eq(mkdir(p, 0755), -1);
	ck_assert_int_eq(errno, EROFS);
	snprintf(p, sizeof p, "%s/hello", cmnt);
	size_t l;
	char *s = slurp(p, &l);
	ck_assert_ptr_nonnull(s);
	free(s);
	char out[8192];
	run_cmd(out, sizeof out, "grep -F ' %s ' /proc/self/mountinfo", cmnt);
	ck_assert_msg(strstr(out, "dcfs-clitest"), "fsname not in mountinfo: %s", out);
	unmount_and_expect_exit0(&d);
}
END_TEST

/* attr_timeout=0 / entry_timeout=0: backing changes are visible at once */
START_TEST(cli_timeouts_zero)
{
	C_BEGIN();
	struct daemon d;
	char *a[] = { "dcfs", "-f", "-o", "attr_timeout=0,entry_timeout=0", cback, cmnt, NULL };
	start_ok(&d, a);
	char pm[PATH_MAX + 16], pb[PATH_MAX + 16];
	snprintf(pm, sizeof pm, "%s/hello", cmnt);
	snprintf(pb, sizeof pb, "%s/hello", cback);
	struct stat st;
	ck_assert_int_eq(stat(pm, &st), 0);
	ck_assert_int_eq(st.st_size, 6);
	ck_assert_int_eq(write_file(pb, "changed on backing\n", 19, 0644), 0);
	ck_assert_int_eq(stat(pm, &st), 0);
	ck_assert_int_eq(st.st_size, 19);
	ck_assert_int_eq(chmod(pb, 0600), 0);
	ck_assert_int_eq(stat(pm, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	/* entry: file renamed away on the backing is gone at once */
	char pb2[PATH_MAX + 16];
	snprintf(pb2, sizeof pb2, "%s/hello2", cback);
	ck_assert_int_eq(rename(pb, pb2), 0);
	errno = 0;
	ck_assert_int_eq(stat(pm, &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	unmount_and_expect_exit0(&d);
}
END_TEST

static long open_rd(void *p)
{
	int fd = open((const char *)p, O_RDONLY);
	return fd < 0 ? -1 : close(fd);
}

/* is opt one of the comma separated options of a mountinfo line? */
static int has_mount_opt(const char *line, const char *opt)
{
	size_t l = strlen(opt);
	for (const char *p = line; (p = strstr(p, opt)); p += l) {
		char before = p == line ? ' ' : p[-1];
		char after = p[l];
		if ((before == ',' || before == ' ') &&
		    (after == ',' || after == ' ' || after == '\n' || after == 0))
			return 1;
	}
	return 0;
}

/* nodefault_permissions is accepted and the mount works. dcfs.8 documents
 * that the kernel then no longer checks permissions (and recommends against
 * combining it with allow_other), so access by other users is NOT asserted. */
START_TEST(cli_nodefault_permissions)
{
	C_BEGIN();
	char pb[PATH_MAX + 16];
	snprintf(pb, sizeof pb, "%s/secret", cback);
	ck_assert_int_eq(write_file(pb, "s", 1, 0600), 0);
	struct daemon d;
	char *a[] = { "dcfs", "-f", "-o", "nodefault_permissions", cback, cmnt, NULL };
	start_ok(&d, a);
	char pm[PATH_MAX + 16];
	snprintf(pm, sizeof pm, "%s/secret", cmnt);
	struct res r = run_as(0, 0, open_rd, pm);
	ck_assert_msg(r.ret == 0, "root open with nodefault_permissions: %s", res_str(r));
	char out[8192];
	run_cmd(out, sizeof out, "grep -F ' %s ' /proc/self/mountinfo", cmnt);
	ck_assert_msg(!has_mount_opt(out, "default_permissions"),
		      "nodefault_permissions given but mount options still have it: %s", out);
	unmount_and_expect_exit0(&d);
	/* and by default the mount has default_permissions */
	char *b[] = { "dcfs", "-f", cback, cmnt, NULL };
	start_ok(&d, b);
	run_cmd(out, sizeof out, "grep -F ' %s ' /proc/self/mountinfo", cmnt);
	ck_assert_msg(has_mount_opt(out, "default_permissions"),
		      "default mount lacks default_permissions: %s", out);
	unmount_and_expect_exit0(&d);
}
END_TEST

START_TEST(cli_umount_command_and_busy)
{
	C_BEGIN();
	struct daemon d;
	char *a[] = { "dcfs", "-f", cback, cmnt, NULL };
	start_ok(&d, a);
	/* lazy unmount while a file is open: daemon keeps serving the fd */
	char p[PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/hello", cmnt);
	int fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	char out[512];
	ck_assert_int_eq(run_cmd(out, sizeof out, "umount -l '%s'", cmnt), 0);
	ck_assert(!is_mounted(cmnt, NULL, 0));
	char b[8];
	ck_assert_int_eq(pread(fd, b, sizeof b, 0), 6);
	close(fd);
	int st = daemon_wait_exit(&d, 10);
	char *log = read_file_str(d.log);
	const char *rep = log_report(log);
	ck_assert_msg(!rep, "after umount -l + close: %s", rep);
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "daemon status %#x after umount -l + close; log %s", st, log);
	free(log);
	daemon_kill(&d);
	/* plain umount(8) */
	start_ok(&d, a);
	ck_assert_int_eq(run_cmd(out, sizeof out, "umount '%s'", cmnt), 0);
	st = daemon_wait_exit(&d, 10);
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "daemon status %#x after umount", st);
	daemon_kill(&d);
}
END_TEST

START_TEST(helper_mount_umount)
{
	C_BEGIN();
	ck_assert_msg(g_mount_dcfs_bin && access(g_mount_dcfs_bin, X_OK) == 0,
		      "MOUNT_DCFS_BIN not set / not executable");
	char out[4096];
	int rc = helper_mount(cback, cmnt, "allow_other", out, sizeof out);
	ck_assert_msg(rc == 0, "mount -t dcfs failed (%d): %s", rc, out);
	char fstype[256] = "";
	ck_assert_msg(is_mounted(cmnt, fstype, sizeof fstype), "mount -t dcfs: nothing mounted");
	ck_assert_msg(strncmp(fstype, "fuse", 4) == 0, "fstype %s", fstype);
	char p[PATH_MAX + 16], pb[PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/via-helper", cmnt);
	snprintf(pb, sizeof pb, "%s/via-helper", cback);
	ck_assert_int_eq(write_file(p, "helper", 6, 0644), 0);
	struct stat sm, sb;
	ck_assert_int_eq(stat(p, &sm), 0);
	ck_assert_int_eq(stat(pb, &sb), 0);
	ck_assert_uint_eq(sm.st_ino, sb.st_ino);
	ck_assert_int_eq(sb.st_size, 6);
	/* allow_other passed through: nobody can read */
	snprintf(p, sizeof p, "%s/hello", cmnt);
	struct res r = run_as(TEST_UID, TEST_GID, open_rd, p);
	ck_assert_msg(r.ret == 0, "allow_other via helper: nobody cannot open: %s", res_str(r));
	rc = run_cmd(out, sizeof out, "umount '%s'", cmnt);
	ck_assert_msg(rc == 0, "umount: %s", out);
	ck_assert(!is_mounted(cmnt, NULL, 0));
	double end = now_s() + 10 * deadline_scale();
	pid_t alive;
	while ((alive = find_daemon_for(cmnt)) > 0 && now_s() < end)
		sleep_ms(50);
	ck_assert_msg(alive <= 0, "daemon (pid %d) still running after umount", alive);
}
END_TEST

START_TEST(helper_errors_and_ro)
{
	C_BEGIN();
	char out[4096];
	char nb[PATH_MAX + 16];
	snprintf(nb, sizeof nb, "%s/nope", cbase);
	int rc = helper_mount(nb, cmnt, "allow_other", out, sizeof out);
	ck_assert_msg(rc != 0, "mount -t dcfs of missing backing succeeded");
	ck_assert(!is_mounted(cmnt, NULL, 0));
	rc = helper_mount(cback, cmnt, "no_such_option_xyz", out, sizeof out);
	ck_assert_msg(rc != 0, "mount -t dcfs with bad option succeeded");
	ck_assert(!is_mounted(cmnt, NULL, 0));
	rc = helper_mount(cback, cmnt, "ro", out, sizeof out);
	ck_assert_msg(rc == 0, "mount -t dcfs -o ro: %s", out);
	char p[PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/hello", cmnt);
	errno = 0;
	ck_assert_int_eq(open(p, O_WRONLY), -1);
	ck_assert_int_eq(errno, EROFS);
	ck_assert_int_eq(run_cmd(out, sizeof out, "umount '%s'", cmnt), 0);
	ck_assert(!is_mounted(cmnt, NULL, 0));
}
END_TEST

/* ---- remount (issue 24 #8) ------------------------------------------------ */

/* "ro"/"rw" per mount and of the superblock of the newest mount on mnt. */
static void mount_flags(const char *mnt, char *per, char *sb)
{
	char out[8192];
	per[0] = sb[0] = 0;
	run_cmd(out, sizeof out, "awk '$5 == \"%s\"' /proc/self/mountinfo | tail -1", mnt);
	char *sep = strstr(out, " - ");
	if (sscanf(out, "%*s %*s %*s %*s %*s %2[a-z]", per) != 1 || !sep ||
	    sscanf(sep + 3, "%*s %*s %2[a-z]", sb) != 1)
		ck_abort_msg("no mountinfo line for %s: %s", mnt, out);
}

static void expect_mount_mode(const char *mnt, const char *mode, const char *when)
{
	char per[8], sb[8];
	mount_flags(mnt, per, sb);
	ck_assert_msg(!strcmp(per, mode) && !strcmp(sb, mode),
		      "%s: mount %s, superblock %s, expected %s", when, per, sb, mode);
}

/* mount.dcfs as mount(8) runs it: SOURCE TARGET -o OPTIONS.  Exit status. */
static int helper_run(const char *opts, char *err, size_t errlen)
{
	char *a[] = { "mount.dcfs", cback, cmnt, "-o", (char *)opts, NULL };
	int st = run_capture(g_mount_dcfs_bin, a, err, errlen, 20);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Every kind of change, on dir (a read-only mount): the errno of each. */
static void changes_errnos(const char *dir, int *e, int n)
{
	char p[PATH_MAX + 32], q[PATH_MAX + 32];
	int i = 0, fd;
#define TRY(expr)                                \
	do {                                     \
		errno = 0;                       \
		e[i++] = (expr) < 0 ? errno : 0; \
	} while (0)
	snprintf(p, sizeof p, "%s/hello", dir);
	TRY(fd = open(p, O_WRONLY));
	if (fd >= 0)
		close(fd);
	TRY(fd = open(p, O_RDONLY | O_TRUNC));
	if (fd >= 0)
		close(fd);
	TRY(truncate(p, 1));
	TRY(chmod(p, 0600));
	TRY(chown(p, 1, 1));
	TRY(utimensat(AT_FDCWD, p, NULL, 0));
	TRY(setxattr(p, "user.remount", "x", 1, 0));
	TRY(removexattr(p, "user.keep"));
	snprintf(q, sizeof q, "%s/renamed", dir);
	TRY(rename(p, q));
	TRY(link(p, q));
	TRY(unlink(p));
	snprintf(q, sizeof q, "%s/new", dir);
	TRY(fd = open(q, O_CREAT | O_WRONLY, 0644));
	if (fd >= 0)
		close(fd);
	TRY(mkdir(q, 0755));
	TRY(mknod(q, S_IFIFO | 0644, 0));
	TRY(symlink("hello", q));
	snprintf(q, sizeof q, "%s/sub", dir);
	TRY(rmdir(q));
#undef TRY
	ck_assert_int_le(i, n);
}

#define N_CHANGES 16

static long open_w_as(void *p)
{
	int fd = open(p, O_WRONLY);
	return fd < 0 ? -1 : close(fd);
}

/*
 * remount,ro and back of a live mount: no second daemon, the kernel's
 * rules for open writers (EBUSY, as for a native bind mount), every change
 * refused with EROFS as on a native read-only mount, reads work, and the
 * daemon notices both changes.
 */
START_TEST(cli_remount_ro_rw)
{
	C_BEGIN();
	char p[PATH_MAX + 32], err[2048], out[1024];
	snprintf(p, sizeof p, "%s/sub", cback);
	OK(mkdir(p, 0755));
	snprintf(p, sizeof p, "%s/hello", cback);
	OK(setxattr(p, "user.keep", "k", 1, 0));
	/* the native reference: a read-only bind mount of the same directory */
	char nat[PATH_MAX];
	snprintf(nat, sizeof nat, "%s/natro-remount", g_tmpdir);
	mkdir(nat, 0755);
	track_mount(nat);
	OK(mount(cback, nat, NULL, MS_BIND, NULL));
	struct daemon d;
	char *a[] = { "dcfs", "-f", "-o", "allow_other", cback, cmnt, NULL };
	start_ok(&d, a);
	pid_t daemon_pid = find_daemon_for(cmnt);

	/* a writer open: refused, as natively */
	snprintf(p, sizeof p, "%s/hello", cmnt);
	int wfd = OK(open(p, O_WRONLY | O_APPEND));
	int rc = helper_run("remount,ro", err, sizeof err);
	ck_assert_msg(rc == 32 && strstr(err, "busy"), "remount,ro with a writer: status %d: %s",
		      rc, err);
	char np[PATH_MAX + 32];
	snprintf(np, sizeof np, "%s/hello", nat);
	int nfd = OK(open(np, O_WRONLY | O_APPEND));
	errno = 0;
	ck_assert_int_eq(mount(NULL, nat, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL), -1);
	ck_assert_int_eq(errno, EBUSY);
	close(nfd);
	expect_mount_mode(cmnt, "rw", "after a refused remount");
	ck_assert_int_eq(write(wfd, "w", 1), 1);
	close(wfd);

	/* read-only */
	rc = helper_run("remount,ro", err, sizeof err);
	ck_assert_msg(rc == 0, "remount,ro: status %d: %s", rc, err);
	expect_mount_mode(cmnt, "ro", "remount,ro");
	OK(mount(NULL, nat, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL));
	int en[N_CHANGES], ed[N_CHANGES];
	changes_errnos(nat, en, N_CHANGES);
	changes_errnos(cmnt, ed, N_CHANGES);
	for (int i = 0; i < N_CHANGES; i++) {
		ck_assert_msg(en[i] == EROFS, "native change %d: %s", i, strerror(en[i]));
		ck_assert_msg(ed[i] == en[i], "change %d: native %s, dcfs %s", i, strerror(en[i]),
			      strerror(ed[i]));
	}
	struct res r = run_as(TEST_UID, TEST_GID, open_w_as, p);
	ck_assert_msg(r.ret < 0 && r.err == EROFS, "open for writing as uid %d: %s", TEST_UID,
		      res_str(r));
	size_t l;
	char *s = slurp(p, &l);
	ck_assert_msg(s && l == 7 && !memcmp(s, "hello\nw", 7), "read on the read-only mount");
	free(s);
	/* the nosuid,nodev the mount had were kept */
	run_cmd(out, sizeof out, "awk '$5 == \"%s\" {print $6}' /proc/self/mountinfo", cmnt);
	ck_assert_msg(strstr(out, "nosuid") && strstr(out, "nodev"), "flags after remount: %s",
		      out);
	/* the daemon noticed */
	double end = now_s() + 5 * deadline_scale();
	char *log;
	while (!strstr((log = read_file_str(d.log)), "is now read-only") && now_s() < end) {
		free(log);
		sleep_ms(50);
	}
	ck_assert_msg(strstr(log, "is now read-only"), "the daemon did not notice: %s", log);
	free(log);
	/* a remount,ro again changes nothing */
	rc = helper_run("remount,ro", err, sizeof err);
	ck_assert_msg(rc == 0, "second remount,ro: status %d: %s", rc, err);

	/* read-write again, the way mount.fuse3 hands it to the daemon */
	char *ra[] = { "dcfs",
		       cback,
		       cmnt,
		       "-o",
		       "rw,nosuid,nodev,relatime,remount,user_id=0,"
		       "group_id=0,default_permissions,allow_other",
		       NULL };
	int st = run_capture(g_dcfs_bin, ra, err, sizeof err, 20);
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "dcfs -o ...,remount,rw: status %#x: %s", st, err);
	expect_mount_mode(cmnt, "rw", "remount,rw");
	ck_assert_int_eq(write_file(p, "again", 5, 0644), 0);
	snprintf(p, sizeof p, "%s/new", cmnt);
	ck_assert_int_eq(write_file(p, "n", 1, 0644), 0);
	OK(unlink(p));
	end = now_s() + 5 * deadline_scale();
	while (!strstr((log = read_file_str(d.log)), "is now read-write") && now_s() < end) {
		free(log);
		sleep_ms(50);
	}
	ck_assert_msg(strstr(log, "is now read-write"), "the daemon did not notice: %s", log);
	free(log);
	/* no second daemon was started */
	ck_assert_int_eq(find_daemon_for(cmnt), daemon_pid);
	/* not a dcfs mount: refused */
	rc = helper_run("remount,ro", err, sizeof err);
	ck_assert_int_eq(rc, 0);
	char *na[] = { "mount.dcfs", cback, nat, "-o", "remount,rw", NULL };
	st = run_capture(g_mount_dcfs_bin, na, err, sizeof err, 20);
	ck_assert_msg(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 32 &&
			      strstr(err, "not a dcfs mount"),
		      "remount of a bind mount: status %#x: %s", st, err);
	rc = helper_run("remount,rw", err, sizeof err);
	ck_assert_int_eq(rc, 0);
	umount2(nat, MNT_DETACH);
	unmount_and_expect_exit0(&d);
}
END_TEST

/* The helper run by mount(8) is ours (not another test run's). */
static int sbin_helper_is_ours(void)
{
	char a[PATH_MAX], b[PATH_MAX];
	return realpath("/sbin/mount.dcfs", a) && realpath(g_mount_dcfs_bin, b) && !strcmp(a, b);
}

/*
 * An fstab line with `ro` mounts read-only; `mount -o remount,rw` and back
 * work on it (through mount(8) where /sbin/mount.dcfs is this build's, else
 * with the arguments mount(8) passes).
 */
START_TEST(helper_fstab_ro_remount)
{
	C_BEGIN();
	char out[4096], err[2048], fstab[PATH_MAX], p[PATH_MAX + 32];
	snprintf(fstab, sizeof fstab, "%s/fstab-remount", g_tmpdir);
	snprintf(out, sizeof out, "%s %s dcfs ro,allow_other,nofail 0 0\n", cback, cmnt);
	OK(write_file(fstab, out, strlen(out), 0644));
	char ignored[256];
	int ours = helper_ensure(ignored, sizeof ignored) == 0 && sbin_helper_is_ours();
	int rc;
	if (ours)
		rc = run_cmd(out, sizeof out, "mount -T '%s' '%s'", fstab, cmnt);
	else
		rc = helper_run("ro,allow_other,nofail", out, sizeof out);
	ck_assert_msg(rc == 0, "fstab ro mount: %s", out);
	expect_mount_mode(cmnt, "ro", "fstab ro");
	snprintf(p, sizeof p, "%s/hello", cmnt);
	errno = 0;
	ck_assert_int_eq(open(p, O_WRONLY), -1);
	ck_assert_int_eq(errno, EROFS);
	if (ours)
		rc = run_cmd(out, sizeof out, "mount -T '%s' -o remount,rw '%s'", fstab, cmnt);
	else
		rc = helper_run("rw,remount,allow_other,nofail", out, sizeof out);
	ck_assert_msg(rc == 0, "remount,rw: %s", out);
	expect_mount_mode(cmnt, "rw", "remount,rw");
	ck_assert_int_eq(write_file(p, "rw", 2, 0644), 0);
	if (ours)
		rc = run_cmd(out, sizeof out, "mount -t dcfs -o remount,ro '%s'", cmnt);
	else
		rc = helper_run("ro,nosuid,nodev,relatime,remount,user_id=0,group_id=0,"
				"default_permissions,allow_other",
				out, sizeof out);
	ck_assert_msg(rc == 0, "remount,ro: %s", out);
	expect_mount_mode(cmnt, "ro", "remount,ro");
	errno = 0;
	ck_assert_int_eq(open(p, O_WRONLY), -1);
	ck_assert_int_eq(errno, EROFS);
	(void)err;
	ck_assert_int_eq(run_cmd(out, sizeof out, "umount '%s'", cmnt), 0);
	ck_assert(!is_mounted(cmnt, NULL, 0));
	/* its fds keep the backing filesystem busy until it has exited */
	double end = now_s() + 10 * deadline_scale();
	pid_t alive;
	while ((alive = find_daemon_for(cmnt)) > 0 && now_s() < end)
		sleep_ms(50);
	ck_assert_msg(alive <= 0, "daemon (pid %d) still running after umount", alive);
}
END_TEST

Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = tcase_create("dcfs-cli");
	tcase_set_timeout(tc, 60 * deadline_scale());
	tcase_add_test(tc, cli_missing_backing);
	tcase_add_test(tc, cli_missing_mountpoint);
	tcase_add_test(tc, cli_nonempty_mountpoint);
	tcase_add_test(tc, cli_bad_option);
	tcase_add_test(tc, cli_bad_config);
	tcase_add_test(tc, cli_daemon_mode);
	tcase_add_test(tc, cli_ro_and_fsname);
	tcase_add_test(tc, cli_timeouts_zero);
	tcase_add_test(tc, cli_nodefault_permissions);
	tcase_add_test(tc, cli_umount_command_and_busy);
	tcase_add_test(tc, cli_remount_ro_rw);
	suite_add_tcase(s, tc);
	tc = tcase_create("mount-helper");
	tcase_set_timeout(tc, 60 * deadline_scale());
	tcase_add_test(tc, helper_mount_umount);
	tcase_add_test(tc, helper_errors_and_ro);
	tcase_add_test(tc, helper_fstab_ro_remount);
	suite_add_tcase(s, tc);
	return s;
}
