/* Suite "mountopts": the -o options of dcfs's own table.
 *
 * TCase validation: every option `dcfs --list-options` prints refuses a
 *   malformed value (a number that is not one, a flag given a value, an
 *   empty or unknown word, a value out of its range) with one line on
 *   stderr, a non-zero exit and nothing mounted; an option the test knows
 *   no bad value for fails the test, so a new option needs one.
 * TCase behaviour: what the options no other suite passes do.  cache=never
 *   asks the daemon on every stat(2), cache=always not again for a day;
 *   max_threads= bounds the threads reading /dev/fuse, max_idle_threads=
 *   those left idle, and clone_fd gives each its own /dev/fuse fd (with
 *   -o nouring, where those threads serve the requests); subtype= names the mount's type; noacl, after
 *   acl, has the kernel ignore access ACLs again; -d makes libfuse trace
 *   every request in the log.
 */
#include "own_mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- validation ------------------------------------------------------------ */

/* Values that must be refused, and a part of the message that says why. */
static const struct {
	const char *opt, *msg;
} bad_values[] = {
	{ "config=/nonexistent/dcfs.conf", "cannot read" },
	{ "cache=bogus", "bad cache mode 'bogus' (expected never, auto or always)" },
	{ "max_threads=0", "max_threads must be at least 1" },
	{ "stop_timeout=86401", "stop_timeout must be between 0 and 86400 seconds" },
	{ "stop_timeout=-1", "stop_timeout must be between 0 and 86400 seconds" },
	{ "fsname=", "mount failed" },
	{ "subtype=", "mount failed" },
};
#define N_BAD (sizeof bad_values / sizeof bad_values[0])

static char vback[PATH_MAX], vmnt[PATH_MAX];

static void refused(const char *opt, const char *msg)
{
	char *argv[] = { "dcfs", "-f", "-o", (char *)opt, vback, vmnt, NULL };
	char err[4096] = "", what[256];
	snprintf(what, sizeof what, "-o %s", opt);
	expect_cli_error(what, vmnt, argv);
	run_capture(g_dcfs_bin, argv, err, sizeof err, 10);
	ck_assert_msg(strstr(err, msg), "-o %s: expected '%s', got: %s", opt, msg, err);
}

/* The bad value of a value option named name ("cache=") in bad_values. */
static int has_bad_value(const char *name)
{
	for (size_t i = 0; i < N_BAD; i++)
		if (!strncmp(bad_values[i].opt, name, strlen(name)))
			return 1;
	return 0;
}

START_TEST(mo_every_option_validated)
{
	char err[512], list[4096], *save, opt[128];
	const char *root = backing_root(FS_EXT4, err, sizeof err);
	ck_assert_msg(root != NULL, "backing fs: %s", err);
	snprintf(vback, sizeof vback, "%s/export-mo-valid", root);
	snprintf(vmnt, sizeof vmnt, "%s/mnt-mo-valid", g_tmpdir);
	mkdir(vback, 0755);
	mkdir(vmnt, 0755);
	track_mount(vmnt);
	ck_assert_int_eq(run_cmd(list, sizeof list, "'%s' --list-options", g_dcfs_bin), 0);
	int n = 0;
	for (char *t = strtok_r(list, "\n", &save); t; t = strtok_r(NULL, "\n", &save)) {
		char *pct = strchr(t, '%'), *eq = strchr(t, '=');
		if (t[0] == '-')
			continue; /* the command line's flags: -f, -s, -d, -h, -V */
		n++;
		if (pct && pct[1] != 's') {
			/* a number: "max_threads=%d", "attr_timeout=%lf" */
			snprintf(opt, sizeof opt, "%.*sx1", (int)(pct - t), t);
			refused(opt, "invalid parameter");
		} else if (eq) {
			/* a word: "config=%s", or a prefix passed to libfuse: "fsname=" */
			if (pct)
				*pct = 0;
			ck_assert_msg(has_bad_value(t), "no refused value known for -o %s", t);
		} else {
			/* a flag given a value */
			snprintf(opt, sizeof opt, "%s=1", t);
			refused(opt, "unknown option");
		}
	}
	ck_assert_int_gt(n, 20);
	for (size_t i = 0; i < N_BAD; i++)
		refused(bad_values[i].opt, bad_values[i].msg);
}
END_TEST

/* ---- behaviour ------------------------------------------------------------- */

static struct own_mount g_mo;

static void mo_teardown(void)
{
	own_mount_kill(&g_mo);
}

/* opts more -o options, arg one more argument (or NULL). */
static void mo_mount(const char *tag, const char *opts, const char *arg)
{
	own_mount_ck_with(&g_mo, tag, "[global]\ndefault = cache\n",
			  &(struct own_mount_how){ .opts = opts, .arg = arg });
}

#define mo_path(side, name) path_at(side, "%s", name)

/* LOOKUP and GETATTR requests the daemon has served (absent counts are 0). */
static long long meta_requests(const char *mnt)
{
	long long l = stats_get(mnt, "requests", "lookup");
	long long g = stats_get(mnt, "requests", "getattr");
	return (l > 0 ? l : 0) + (g > 0 ? g : 0);
}

static off_t size_of(const char *path)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_size;
}

START_TEST(mo_cache_never_and_always)
{
	const char *modes[] = { "cache=never", "cache=always" };
	for (int m = 0; m < 2; m++) {
		mo_mount(m ? "mo-always" : "mo-never", modes[m], NULL);
		const char *bf = mo_path(g_mo.exp, "f"), *mf = mo_path(g_mo.mnt, "f");
		ck_assert_int_eq(write_file(bf, "0123456789", 10, 0644), 0);
		ck_assert_int_eq(size_of(mf), 10);
		/* a change made in the backing directory */
		ck_assert_int_eq(truncate(bf, 4), 0);
		long long r0 = meta_requests(g_mo.mnt);
		off_t seen = 0;
		for (int i = 0; i < 5; i++)
			seen = size_of(mf);
		long long asked = meta_requests(g_mo.mnt) - r0;
		fprintf(stderr, "mo_cache: %s: 5 stats asked the daemon %lld times, size %lld\n",
			modes[m], asked, (long long)seen);
		if (m == 0)
			ck_assert_msg(
				asked >= 5 && seen == 4,
				"cache=never: %lld requests for 5 stats, size %lld (backing 4)",
				asked, (long long)seen);
		else
			ck_assert_msg(
				asked == 0 && seen == 10,
				"cache=always: %lld requests for 5 stats, size %lld (cached 10)",
				asked, (long long)seen);
		own_unmount_ck(&g_mo);
	}
}
END_TEST

/* Threads of pid blocked reading a /dev/fuse fd (idle workers), the
 * number of different fds they read, and the /dev/fuse fds pid holds. */
static void fuse_readers(pid_t pid, int *threads, int *fds_read, int *fds_open)
{
	char dir[64], path[PATH_MAX], link[64];
	int seen[64], nseen = 0;
	snprintf(dir, sizeof dir, "/proc/%d/task", pid);
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	*threads = 0;
	for (struct dirent *de; (de = readdir(d));) {
		long nr;
		unsigned long fd;
		char *text;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s/syscall", dir, de->d_name);
		text = read_file_str(path);
		int got = sscanf(text, "%ld %lx", &nr, &fd);
		free(text);
		if (got != 2 || (nr != SYS_read && nr != SYS_readv))
			continue;
		snprintf(path, sizeof path, "/proc/%d/fd/%lu", pid, fd);
		ssize_t n = readlink(path, link, sizeof link - 1);
		if (n <= 0 || (link[n] = 0, strcmp(link, "/dev/fuse")))
			continue;
		(*threads)++;
		int known = 0;
		for (int i = 0; i < nseen; i++)
			known |= seen[i] == (int)fd;
		if (!known && nseen < 64)
			seen[nseen++] = (int)fd;
	}
	closedir(d);
	*fds_read = nseen;
	char out[256];
	snprintf(path, sizeof path, "ls -l /proc/%d/fd | grep -c ' /dev/fuse$'", pid);
	run_cmd(out, sizeof out, "%s", path);
	*fds_open = atoi(out);
}

/* Four processes stat, read and list the mount at once for a while. */
static void parallel_load(const char *mnt)
{
	pid_t kids[4];
	for (int k = 0; k < 4; k++) {
		kids[k] = fork();
		ck_assert_int_ge(kids[k], 0);
		if (kids[k] == 0) {
			char p[PATH_MAX], buf[4096];
			snprintf(p, sizeof p, "%s/f%d", mnt, k);
			for (int i = 0; i < 300; i++) {
				struct stat st;
				int fd = open(p, O_RDWR | O_CREAT, 0644);
				if (fd < 0 || pwrite(fd, buf, sizeof buf, i * 4096) < 0 ||
				    fstat(fd, &st) < 0 || pread(fd, buf, sizeof buf, 0) < 0)
					_exit(1);
				close(fd);
			}
			_exit(0);
		}
	}
	for (int k = 0; k < 4; k++) {
		int st;
		ck_assert_int_eq(waitpid(kids[k], &st, 0), kids[k]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "load process %d failed", k);
	}
	sleep_ms(300); /* the workers go back to reading /dev/fuse */
}

START_TEST(mo_max_threads_and_clone_fd)
{
	static const struct {
		const char *opts;
		int max, clone;
	} cases[] = {
		{ "nouring,max_threads=1", 1, 0 },
		{ "nouring,max_threads=3", 3, 0 },
		{ "nouring,max_threads=3,clone_fd", 3, 1 },
		/* idle workers beyond max_idle_threads exit */
		{ "nouring,max_threads=3,max_idle_threads=1", 1, 0 },
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		int threads, fds_read, fds_open;
		mo_mount("mo-threads", cases[c].opts, NULL);
		parallel_load(g_mo.mnt);
		fuse_readers(g_mo.d.pid, &threads, &fds_read, &fds_open);
		fprintf(stderr,
			"mo_threads: -o %s: %d threads read /dev/fuse, %d fds read, %d open\n",
			cases[c].opts, threads, fds_read, fds_open);
		ck_assert_msg(threads >= 1 && threads <= cases[c].max,
			      "-o %s: %d threads reading /dev/fuse", cases[c].opts, threads);
		if (cases[c].clone)
			ck_assert_msg(fds_read == threads && fds_open == threads + 1,
				      "clone_fd: %d readers read %d fds, %d /dev/fuse fds open",
				      threads, fds_read, fds_open);
		else
			ck_assert_msg(fds_read == 1 && fds_open == 1,
				      "without clone_fd: %d fds read, %d /dev/fuse fds open",
				      fds_read, fds_open);
		own_unmount_ck(&g_mo);
	}
}
END_TEST

START_TEST(mo_subtype)
{
	char type[64];
	mo_mount("mo-subtype", "subtype=media", NULL);
	ck_assert(is_mounted(g_mo.mnt, type, sizeof type));
	ck_assert_str_eq(type, "fuse.media");
	own_unmount_ck(&g_mo);
}
END_TEST

static long open_read(void *path)
{
	int fd = open(path, O_RDONLY);
	if (fd >= 0)
		close(fd);
	return fd < 0 ? -1 : 0;
}

/* An access ACL grants nobody what the mode bits do not: read by the
 * kernel's check with acl, ignored (mode bits only) with acl,noacl. */
START_TEST(mo_noacl_after_acl)
{
	const char *opts[] = { "acl", "acl,noacl" };
	for (int m = 0; m < 2; m++) {
		char out[512];
		mo_mount(m ? "mo-noacl" : "mo-acl", opts[m], NULL);
		const char *bf = mo_path(g_mo.exp, "secret"), *mf = mo_path(g_mo.mnt, "secret");
		ck_assert_int_eq(write_file(bf, "s", 1, 0600), 0);
		ck_assert_msg(run_cmd(out, sizeof out, "setfacl -m u:%d:r '%s'", TEST_UID, bf) == 0,
			      "setfacl: %s", out);
		struct res native = run_as(TEST_UID, TEST_GID, open_read, (void *)bf);
		struct res mounted = run_as(TEST_UID, TEST_GID, open_read, (void *)mf);
		ck_assert_msg(native.ret == 0, "the ACL grants no read natively: %s",
			      res_str(native));
		if (m == 0)
			ck_assert_msg(mounted.ret == 0, "-o acl: %s", res_str(mounted));
		else
			ck_assert_msg(mounted.ret == -1 && mounted.err == EACCES,
				      "-o acl,noacl: the ACL still counts: %s", res_str(mounted));
		own_unmount_ck(&g_mo);
	}
}
END_TEST

START_TEST(mo_debug_traces_requests)
{
	mo_mount("mo-debug", NULL, "-d");
	struct stat st;
	errno = 0;
	ck_assert_int_eq(stat(mo_path(g_mo.mnt, "not-there"), &st), -1);
	ck_assert_int_eq(errno, ENOENT);
	char *log = read_file_str(g_mo.d.log);
	ck_assert_msg(strstr(log, "opcode: LOOKUP") && strstr(log, "unique: "),
		      "-d: no request trace in the log:\n%.2000s", log);
	free(log);
	own_unmount_ck(&g_mo);
}
END_TEST

Suite *mountopts_suite(void)
{
	Suite *s = suite_create("mountopts");
	TCase *tc = tcase_create("validation");
	tcase_set_timeout(tc, 120 * deadline_scale());
	tcase_add_test(tc, mo_every_option_validated);
	suite_add_tcase(s, tc);
	tc = tcase_create("behaviour");
	tcase_set_timeout(tc, 120 * deadline_scale());
	tcase_add_checked_fixture(tc, NULL, mo_teardown);
	tcase_add_test(tc, mo_cache_never_and_always);
	tcase_add_test(tc, mo_max_threads_and_clone_fd);
	tcase_add_test(tc, mo_subtype);
	tcase_add_test(tc, mo_noacl_after_acl);
	tcase_add_test(tc, mo_debug_traces_requests);
	suite_add_tcase(s, tc);
	return s;
}
