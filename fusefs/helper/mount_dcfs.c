// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mount.dcfs - mount(8) helper for dcfs.
 *
 * mount(8) runs "mount.dcfs SOURCE TARGET [-sfnv] [-o OPTIONS]" for type
 * dcfs (fstab, "mount -t dcfs").  We check the invocation, drop options that
 * only mean something to mount(8)/fstab and run "dcfs -o OPTIONS SOURCE
 * TARGET".  The daemon's first process exits only once the mount exists, so
 * waiting for it makes mount(8) return after the mount is up.
 *
 * With "remount" among the options no daemon is run: the live dcfs mount on
 * TARGET gets its flags changed by mount(2) with MS_REMOUNT (see
 * do_remount()); its daemon notices a change to or from read-only itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef DCFS_SBINDIR
#define DCFS_SBINDIR "/usr/local/sbin"
#endif

#define PROG "mount.dcfs"
#define TRY_HELP " (try '" PROG " --help')"

enum {
	RC_OK = 0,
	RC_USAGE = 1,
	RC_MOUNTFAIL = 32
}; /* mount(8) codes */

struct helper {
	const char *source, *target;
	bool fake, verbose, sloppy, remount;
	const char *lists[64]; /* the -o arguments as given */
	int nlists;
	char opts[4096]; /* filtered, comma-separated daemon options */
	char daemon[PATH_MAX];
};

/* Meaningful only to mount(8)/fstab; libfuse would reject them. */
static const char *const mount_only[] = { "defaults", "auto",	"noauto", "user",
					  "users",    "nouser", "owner",  "group",
					  "_netdev",  "nofail", NULL };
static const char *const mount_only_prefix[] = { "comment=", "x-", NULL };

/*
 * What the daemon accepts: dcfs's own options plus those libfuse 3.14
 * accepts (checked against fuse_session_new; relatime, lazytime and friends
 * are rejected there).  Catching the rest here gives a clearer error.  "debug"
 * is left out on purpose: it keeps the daemon in the foreground, so mount(8)
 * would never return.
 */
static const char *const known[] = { "nonempty",
				     "nodefault_permissions",
				     "default_permissions",
				     "acl",
				     "noacl",
				     "allow_other",
				     "allow_root",
				     "clone_fd",
				     "nopassthrough",
				     "uring",
				     "nouring",
				     "auto_unmount",
				     "blkdev",
				     "rw",
				     "ro",
				     "suid",
				     "nosuid",
				     "dev",
				     "nodev",
				     "exec",
				     "noexec",
				     "async",
				     "sync",
				     "dirsync",
				     "atime",
				     "noatime",
				     NULL };
static const char *const known_prefix[] = { "config=",
					    "attr_timeout=",
					    "entry_timeout=",
					    "negative_timeout=",
					    "max_threads=",
					    "cache=",
					    "stop_timeout=",
					    "fsname=",
					    "subtype=",
					    "max_read=",
					    "blksize=",
					    "user=",
					    "context=",
					    "fscontext=",
					    "defcontext=",
					    "rootcontext=",
					    NULL };

static bool in_list(const char *opt, const char *const *exact, const char *const *prefix)
{
	for (; *exact; exact++)
		if (strcmp(opt, *exact) == 0)
			return true;
	for (; *prefix; prefix++)
		if (strncmp(opt, *prefix, strlen(*prefix)) == 0)
			return true;
	return false;
}

/* Keep, drop or refuse one option. */
static int filter_opt(struct helper *h, const char *opt)
{
	size_t used = strlen(h->opts), len = strlen(opt);

	if (!len || in_list(opt, mount_only, mount_only_prefix))
		return 0;
	if (!in_list(opt, known, known_prefix)) {
		if (!h->sloppy) {
			fprintf(stderr, PROG ": unsupported option '%s' (use -s to ignore it)\n",
				opt);
			return -EINVAL;
		}
		if (h->verbose)
			fprintf(stderr, PROG ": ignoring unsupported option '%s'\n", opt);
		return 0;
	}
	if (used + len + 2 > sizeof(h->opts)) {
		fprintf(stderr, PROG ": options too long\n");
		return -E2BIG;
	}
	if (used)
		h->opts[used++] = ',';
	memcpy(h->opts + used, opt, len + 1);
	return 0;
}

/*
 * Split one -o argument.  A backslash-escaped comma belongs to the option
 * (libfuse syntax, e.g. fsname=a\,b): keep the escape and don't split there.
 */
static int add_opts(struct helper *h, const char *list)
{
	char opt[sizeof(h->opts)];
	size_t n = 0;
	int err;

	for (;; list++) {
		if (*list == ',' || !*list) {
			opt[n] = '\0';
			err = filter_opt(h, opt);
			if (err || !*list)
				return err;
			n = 0;
		} else {
			if (n + 3 > sizeof(opt)) {
				fprintf(stderr, PROG ": options too long\n");
				return -E2BIG;
			}
			if (*list == '\\' && list[1])
				opt[n++] = *list++;
			opt[n++] = *list;
		}
	}
}

/* Is opt one of the comma-separated options of list? */
static bool has_opt(const char *list, const char *opt)
{
	size_t len = strlen(opt);

	for (const char *p = list; *p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n == len && strncmp(p, opt, len) == 0)
			return true;
		p += n + (end ? 1 : 0);
	}
	return false;
}

static int check_dir(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static bool try_daemon(struct helper *h, const char *dir)
{
	int n = snprintf(h->daemon, sizeof(h->daemon), "%s/dcfs", dir);

	return n < (int)sizeof(h->daemon) && access(h->daemon, X_OK) == 0;
}

/*
 * DCFS_BIN wins (tests, uninstalled builds); next the dcfs beside our own
 * real path, so a build tree or a /sbin/mount.dcfs symlink into it runs the
 * matching daemon; then the install directory; last PATH, via execvp.
 */
static int find_daemon(struct helper *h)
{
	const char *env = getenv("DCFS_BIN");
	char self[PATH_MAX];

	if (env && *env) {
		if (strlen(env) >= sizeof(h->daemon))
			return -ENAMETOOLONG;
		strcpy(h->daemon, env);
		return 0;
	}
	if (realpath("/proc/self/exe", self) && try_daemon(h, dirname(self)))
		return 0;
	if (try_daemon(h, DCFS_SBINDIR))
		return 0;
	strcpy(h->daemon, "dcfs");
	return 0;
}

/*
 * Run the daemon and wait for its first process.  Returns 0, -errno if we
 * could not run it, or -EIO if it failed (it has printed why).
 */
static int run_daemon(const struct helper *h)
{
	char *argv[] = { (char *)h->daemon, "-o", (char *)h->opts, (char *)h->source,
			 (char *)h->target, NULL };
	char **args = argv;
	int status;
	pid_t pid;

	if (!h->opts[0]) { /* no empty "-o": skip it, daemon moves to slot 2 */
		args = argv + 2;
		args[0] = (char *)h->daemon;
	}
	if (h->verbose)
		fprintf(stderr, PROG ": %s%s%s %s %s\n", h->daemon, h->opts[0] ? " -o " : "",
			h->opts, h->source, h->target);
	if (h->fake)
		return 0;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execvp(args[0], args);
		fprintf(stderr, PROG ": %s: %s\n", h->daemon, strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFSIGNALED(status)) /* it had no chance to say why */
		fprintf(stderr, PROG ": %s killed by signal %d\n", h->daemon, WTERMSIG(status));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static int add_positional(const char **pos, int *npos, const char *arg)
{
	if (*npos == 2) {
		fprintf(stderr, PROG ": too many arguments" TRY_HELP "\n");
		return -EINVAL;
	}
	pos[(*npos)++] = arg;
	return 0;
}

/* Parse mount(8)'s helper arguments; flags may come after SOURCE TARGET. */
static int parse_args(struct helper *h, int argc, char **argv)
{
	static const struct option longopts[] = { { "help", no_argument, NULL, 'h' },
						  { NULL, 0, NULL, 0 } };
	const char **lists = h->lists, *pos[2];
	int c, nlists = 0, npos = 0, err;

	opterr = 0; /* we print our own one-line errors */
	/* Leading '-': positionals come back in order as 1, even with
	 * POSIXLY_CORRECT set, which would otherwise stop at SOURCE. */
	while ((c = getopt_long(argc, argv, "-sfnvho:t:", longopts, NULL)) != -1) {
		switch (c) {
		case 1:
			if (add_positional(pos, &npos, optarg) < 0)
				return -EINVAL;
			break;
		case 's': h->sloppy = true; break;
		case 'f': h->fake = true; break;
		case 'v': h->verbose = true; break;
		case 'n': break; /* no mtab to skip: the kernel keeps it */
		case 't': break; /* type.subtype from mount(8): known */
		case 'h':
			printf("usage: " PROG " SOURCE TARGET [-sfnv] [-o OPTION[,OPTION...]]\n"
			       "Mount directory SOURCE at TARGET with dcfs; see mount.dcfs(8).\n");
			exit(RC_OK);
		case 'o':
			if (nlists == (int)(sizeof(h->lists) / sizeof(h->lists[0]))) {
				fprintf(stderr, PROG ": too many -o options\n");
				return -E2BIG;
			}
			lists[nlists++] = optarg; /* filtered once -s is known */
			break;
		default:
			if (optopt && strchr("ot", optopt))
				fprintf(stderr, PROG ": option '-%c' requires an argument\n",
					optopt);
			else if (optopt)
				fprintf(stderr, PROG ": unknown option '-%c'" TRY_HELP "\n",
					optopt);
			else
				fprintf(stderr, PROG ": unknown option '%s'" TRY_HELP "\n",
					argv[optind - 1]);
			return -EINVAL;
		}
	}
	for (; optind < argc; optind++) /* whatever followed "--" */
		if (add_positional(pos, &npos, argv[optind]) < 0)
			return -EINVAL;
	if (npos != 2) {
		fprintf(stderr, PROG ": missing SOURCE or TARGET" TRY_HELP "\n");
		return -EINVAL;
	}
	h->source = pos[0];
	h->target = pos[1];
	h->nlists = nlists;
	for (int i = 0; i < nlists; i++)
		if (has_opt(lists[i], "remount"))
			h->remount = true;
	/* A remount checks its options itself (do_remount()). */
	for (int i = 0; i < nlists && !h->remount; i++)
		if ((err = add_opts(h, lists[i])) < 0)
			return err;
	return 0;
}

/* ---- remount ------------------------------------------------------------- */

/*
 * mount(2) with MS_REMOUNT replaces the mount's flags with those passed:
 * nosuid, nodev and noexec not passed are cleared.  mount(8) passes the
 * options of the fstab line (which may not list the FUSE defaults nosuid
 * and nodev) or of /proc/self/mountinfo, and a user may pass just
 * "remount,ro".  So the flags the mount has now are the starting point and
 * each option given changes one; atime flags not given are kept by the
 * kernel itself.
 */
struct flag_opt {
	const char *name;
	unsigned long flag;
	bool set;
};

static const struct flag_opt flag_opts[] = { { "ro", MS_RDONLY, true },
					     { "rw", MS_RDONLY, false },
					     { "nosuid", MS_NOSUID, true },
					     { "suid", MS_NOSUID, false },
					     { "nodev", MS_NODEV, true },
					     { "dev", MS_NODEV, false },
					     { "noexec", MS_NOEXEC, true },
					     { "exec", MS_NOEXEC, false },
					     { "sync", MS_SYNCHRONOUS, true },
					     { "async", MS_SYNCHRONOUS, false },
					     { "dirsync", MS_DIRSYNC, true },
					     { "noatime", MS_NOATIME, true },
					     { "atime", MS_NOATIME, false },
					     { "nodiratime", MS_NODIRATIME, true },
					     { "diratime", MS_NODIRATIME, false },
					     { "relatime", MS_RELATIME, true },
					     { "norelatime", MS_RELATIME, false },
					     { "strictatime", MS_STRICTATIME, true },
					     { "lazytime", MS_LAZYTIME, true },
					     { "nolazytime", MS_LAZYTIME, false },
					     { "bind", MS_BIND, true },
					     { NULL, 0, false } };

/* Fixed while the daemon runs (or FUSE's own): accepted, changed nothing. */
static const char *const remount_fixed[] = { "remount", "default_permissions", "acl", "noacl",
					     NULL };
static const char *const remount_fixed_prefix[] = { "user_id=", "group_id=", "rootmode=", "fd=",
						    NULL };

static const struct flag_opt *flag_opt(const char *name)
{
	for (const struct flag_opt *f = flag_opts; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

/* The mount on TARGET (the newest one): its per-mount and superblock flags. */
struct mount_state {
	bool found, dcfs;
	unsigned long flags;
};

static unsigned long flags_of(char *opts)
{
	unsigned long flags = 0;

	for (char *o = strtok(opts, ","); o; o = strtok(NULL, ",")) {
		const struct flag_opt *f = flag_opt(o);

		/* Atime flags are left to the kernel (see above). */
		if (f && f->set &&
		    !(f->flag & (MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME)))
			flags |= f->flag;
	}
	return flags;
}

/* Undoes the octal escapes of /proc/self/mountinfo fields, in place. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] && s[3]) {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

static int mount_state(const char *target, struct mount_state *ms)
{
	FILE *fp = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;

	memset(ms, 0, sizeof(*ms));
	if (!fp)
		return -errno;
	while (getline(&line, &cap, fp) > 0) {
		static char mp[PATH_MAX], mopts[4096], type[256], src[PATH_MAX], sopts[4096];
		char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*u %*u %*u:%*u %*s %4095s %4095s", mp, mopts) != 2 ||
		    sscanf(sep + 3, "%255s %4095s %4095s", type, src, sopts) != 3)
			continue;
		unescape(mp);
		if (strcmp(mp, target) != 0)
			continue;
		ms->found = true;
		ms->dcfs = strcmp(type, "fuse.dcfs") == 0;
		/* sync, dirsync, lazytime live in the superblock's options */
		ms->flags = flags_of(mopts) | flags_of(sopts);
	}
	free(line);
	fclose(fp);
	return 0;
}

/* One option of a remount: changes *flags, or is accepted and ignored. */
static int remount_opt(const struct helper *h, const char *opt, unsigned long *flags)
{
	const struct flag_opt *f = flag_opt(opt);

	if (!*opt)
		return 0;
	if (f) {
		if (f->set)
			*flags |= f->flag;
		else
			*flags &= ~f->flag;
		if (f->flag == MS_STRICTATIME)
			*flags &= ~(MS_NOATIME | MS_RELATIME);
		return 0;
	}
	if (in_list(opt, remount_fixed, remount_fixed_prefix) ||
	    in_list(opt, mount_only, mount_only_prefix))
		return 0;
	if (in_list(opt, known, known_prefix)) {
		if (h->verbose)
			fprintf(stderr, PROG ": '%s' cannot change while mounted: ignored\n", opt);
		return 0;
	}
	if (!h->sloppy) {
		fprintf(stderr, PROG ": unsupported option '%s' (use -s to ignore it)\n", opt);
		return -EINVAL;
	}
	return 0;
}

static int remount_opts(const struct helper *h, const char *list, unsigned long *flags)
{
	char opt[4096];
	size_t n = 0;
	int err;

	for (;; list++) {
		if (*list == ',' || !*list) {
			opt[n] = '\0';
			if ((err = remount_opt(h, opt, flags)) < 0 || !*list)
				return err;
			n = 0;
		} else if (n + 2 < sizeof(opt)) {
			if (*list == '\\' && list[1])
				list++;
			opt[n++] = *list;
		}
	}
}

static int do_remount(const struct helper *h)
{
	struct mount_state ms;
	char target[PATH_MAX];
	unsigned long flags;
	int err;

	if (!realpath(h->target, target)) {
		fprintf(stderr, PROG ": %s: %s\n", h->target, strerror(errno));
		return RC_MOUNTFAIL;
	}
	if ((err = mount_state(target, &ms)) < 0 || !ms.found || !ms.dcfs) {
		fprintf(stderr, PROG ": %s: %s\n", target,
			err < 0	    ? strerror(-err)
			: !ms.found ? "nothing is mounted there"
				    : "not a dcfs mount");
		return RC_MOUNTFAIL;
	}
	flags = ms.flags;
	for (int i = 0; i < h->nlists; i++)
		if (remount_opts(h, h->lists[i], &flags) < 0)
			return RC_USAGE;
	if (h->verbose)
		fprintf(stderr, PROG ": remount %s%s%s\n", target,
			flags & MS_RDONLY ? " read-only" : " read-write",
			flags & MS_BIND ? " (this mount only)" : "");
	if (h->fake)
		return RC_OK;
	if (mount(NULL, target, NULL, MS_REMOUNT | flags, NULL) < 0) {
		err = errno;
		fprintf(stderr, PROG ": remount %s: %s%s\n", target, strerror(err),
			err == EBUSY && (flags & MS_RDONLY)
				? " (a file on it is open for writing, or deleted but still open)"
				: "");
		return RC_MOUNTFAIL;
	}
	return RC_OK;
}

int main(int argc, char **argv)
{
	static struct helper h;
	int err;

	if (parse_args(&h, argc, argv) < 0)
		return RC_USAGE;
	if (h.remount)
		return do_remount(&h);
	/* Fail early with a message naming the path, rather than libfuse's. */
	for (int i = 0; i < 2; i++) {
		const char *path = i ? h.target : h.source;

		if ((err = check_dir(path)) < 0) {
			fprintf(stderr, PROG ": %s: %s\n", path, strerror(-err));
			return RC_MOUNTFAIL;
		}
	}
	err = find_daemon(&h);
	if (!err)
		err = run_daemon(&h);
	if (err && err != -EIO)
		fprintf(stderr, PROG ": cannot run %s: %s\n", h.daemon, strerror(-err));
	return err ? RC_MOUNTFAIL : RC_OK;
}
