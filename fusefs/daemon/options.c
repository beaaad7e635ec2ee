// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Command line and -o option registry.  One table serves the command line,
 * fstab (through mount.dcfs, which passes -o through) and --help.  Options
 * not in the table are left for libfuse, which rejects unknown ones.
 */
#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/daemon.h"

enum {
	KEY_HELP,
	KEY_VERSION,
	KEY_DEBUG,
	KEY_FOREGROUND,
	KEY_FSNAME,
	KEY_SUBTYPE,
	KEY_ALLOW_OTHER,
	KEY_ALLOW_ROOT,
	KEY_RO,
	KEY_RW,
};

#define DCFS_OPT(t, field, v)                              \
	{                                                  \
		t, offsetof(struct dcfs_options, field), v \
	}

static const struct fuse_opt dcfs_opts[] = { DCFS_OPT("config=%s", config, 0),
					     DCFS_OPT("attr_timeout=%lf", attr_timeout, 0),
					     DCFS_OPT("entry_timeout=%lf", entry_timeout, 0),
					     DCFS_OPT("negative_timeout=%lf", negative_timeout, 0),
					     DCFS_OPT("cache=%s", cache_mode, 0),
					     DCFS_OPT("nonempty", nonempty, 1),
					     DCFS_OPT("nodefault_permissions",
						      nodefault_permissions, 1),
					     DCFS_OPT("acl", acl, 1),
					     DCFS_OPT("noacl", acl, 0),
					     DCFS_OPT("max_threads=%d", max_threads, 0),
					     DCFS_OPT("max_idle_threads=%d", max_idle_threads, 0),
					     DCFS_OPT("stop_timeout=%d", stop_timeout, 0),
					     DCFS_OPT("clone_fd", clone_fd, 1),
					     DCFS_OPT("nopassthrough", nopassthrough, 1),
					     DCFS_OPT("uring", uring, 1),
					     DCFS_OPT("nouring", uring, 0),
					     DCFS_OPT("-s", singlethread, 1),
					     FUSE_OPT_KEY("-f", KEY_FOREGROUND),
					     FUSE_OPT_KEY("-d", KEY_DEBUG),
					     FUSE_OPT_KEY("debug", KEY_DEBUG),
					     FUSE_OPT_KEY("fsname=", KEY_FSNAME),
					     FUSE_OPT_KEY("subtype=", KEY_SUBTYPE),
					     FUSE_OPT_KEY("allow_other", KEY_ALLOW_OTHER),
					     FUSE_OPT_KEY("allow_root", KEY_ALLOW_ROOT),
					     FUSE_OPT_KEY("ro", KEY_RO),
					     FUSE_OPT_KEY("rw", KEY_RW),
					     FUSE_OPT_KEY("-h", KEY_HELP),
					     FUSE_OPT_KEY("--help", KEY_HELP),
					     FUSE_OPT_KEY("-V", KEY_VERSION),
					     FUSE_OPT_KEY("--version", KEY_VERSION),
					     FUSE_OPT_END };

/*
 * `dcfs --list-options`: the templates of the table above, one per line
 * ("config=%s", "nonempty", "-s"), for the tests and the documentation
 * check to read the table itself.
 */
int options_list(void)
{
	for (const struct fuse_opt *o = dcfs_opts; o->templ; o++)
		printf("%s\n", o->templ);
	return fflush(stdout) == 0 ? 0 : 1;
}

static int positional(struct dcfs_options *opt, const char *arg)
{
	if (!opt->backing)
		opt->backing = strdup(arg);
	else if (!opt->mountpoint)
		opt->mountpoint = strdup(arg);
	else {
		fprintf(stderr, "dcfs: unexpected argument '%s'\n", arg);
		return -1;
	}
	return 0;
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct dcfs_options *opt = data;

	(void)outargs;
	switch (key) {
	case FUSE_OPT_KEY_NONOPT: return positional(opt, arg);
	case KEY_HELP: opt->show_help = 1; return 0;
	case KEY_VERSION: opt->show_version = 1; return 0;
	case KEY_DEBUG:
		/* Kept for libfuse too, which then traces every request. */
		opt->debug = 1;
		opt->foreground = 1;
		return 1;
	case KEY_FOREGROUND: opt->foreground = 1; return 0;
	case KEY_FSNAME: opt->has_fsname = 1; return 1;
	case KEY_SUBTYPE: opt->has_subtype = 1; return 1;
	case KEY_ALLOW_OTHER: opt->allow_other = 1; return 1;
	case KEY_ALLOW_ROOT: opt->allow_root = 1; return 1;
	case KEY_RO:
	case KEY_RW:
		/* Kept for libfuse, which mounts with MS_RDONLY or not. */
		opt->readonly = key == KEY_RO;
		return 1;
	default: return 1;
	}
}

/*
 * One worker per CPU, at least two.  More threads than CPUs only help
 * while some block in slow backing I/O, and each idle one costs latency:
 * the kernel hands requests to the longest-sleeping reader of /dev/fuse,
 * so a synchronous caller meets a cold thread every time (measured here:
 * 4 KiB uncached reads 67 MiB/s with 2 threads, 26 MiB/s with 10).
 */
static int default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 2 ? 2 : n > 16 ? 16 : (int)n;
}

/*
 * cache=MODE, after virtiofsd: how long the kernel may trust what it
 * learnt about names and attributes.
 *  never   0 s: every access asks dcfs (backing tree changed by others all
 *          the time);
 *  auto    1 s (default): changes made directly in the backing tree show
 *          within a second;
 *  always  1 day: for trees changed only through this mount, where
 *          metadata runs at close to native speed.
 * A missing name is remembered as long as a name (entry_timeout): a name
 * created directly in the backing tree then shows within the same time as
 * a name removed there disappears, and a name created through the mount
 * replaces the kernel's negative entry at once.  With cache=auto that
 * saves the LOOKUP of a name probed again (a stat before a create, a
 * search path) within the second.
 * An explicit attr_timeout= / entry_timeout= / negative_timeout= wins
 * over the mode.
 *
 * Directories keep attr_timeout: the kernel checks permissions with their
 * cached mode and owner (default_permissions), so a chmod of a directory
 * made in the backing tree must show within the same time, and the
 * directory GETATTRs left per create or unlink come from the kernel
 * invalidating the directory's attributes at each change, not from their
 * expiry (dcfs(8), METADATA ROUND TRIPS).
 */
/*
 * Without default_permissions the kernel checks no search permission on a
 * name it holds (fuse_permission() asks the daemon for access(2) and
 * chdir(2) only): a name root or the owner looked up in a 0700 directory
 * would let every other user walk through it to the file, and a missing
 * name would answer ENOENT where the directory refuses them.  With names
 * never cached the kernel sends a LOOKUP for every name of every walk, as
 * the caller (caller_ops.c), so the backing filesystem decides each time.
 */
static int names_never_cached(struct dcfs_options *opt)
{
	if (opt->entry_timeout > 0 || opt->negative_timeout > 0) {
		fprintf(stderr,
			"dcfs: nodefault_permissions needs entry_timeout=0 and negative_timeout=0 (the kernel lets every user through a name it holds without asking dcfs)\n");
		return -EINVAL;
	}
	opt->entry_timeout = 0;
	opt->negative_timeout = 0;
	return 0;
}

static int apply_cache_mode(struct dcfs_options *opt)
{
	double t;

	if (!opt->cache_mode || strcmp(opt->cache_mode, "auto") == 0)
		t = 1.0;
	else if (strcmp(opt->cache_mode, "never") == 0)
		t = 0.0;
	else if (strcmp(opt->cache_mode, "always") == 0)
		t = 86400.0;
	else {
		fprintf(stderr, "dcfs: bad cache mode '%s' (expected never, auto or always)\n",
			opt->cache_mode);
		return -EINVAL;
	}
	if (opt->attr_timeout < 0)
		opt->attr_timeout = t;
	if (opt->nodefault_permissions)
		return names_never_cached(opt);
	if (opt->entry_timeout < 0)
		opt->entry_timeout = t;
	if (opt->negative_timeout < 0)
		opt->negative_timeout = opt->entry_timeout;
	return 0;
}

int options_parse(struct fuse_args *args, struct dcfs_options *opt)
{
	opt->attr_timeout = -1.0;
	opt->entry_timeout = -1.0;
	opt->negative_timeout = -1.0;
	opt->max_threads = default_threads();
	opt->max_idle_threads = -1;
	opt->stop_timeout = DCFS_STOP_TIMEOUT;
	opt->uring = 1;
	if (fuse_opt_parse(args, opt, dcfs_opts, opt_proc) < 0)
		return -EINVAL;
	/* The io_uring queues have threads of their own. */
	if (opt->singlethread)
		opt->uring = 0;
	return apply_cache_mode(opt);
}

void options_usage(const char *prog)
{
	printf("usage: %s [options] BACKING_DIR MOUNTPOINT\n"
	       "       %s --check-config FILE\n"
	       "       %s --list-config-keys | --list-options\n"
	       "       %s stat [--wide | --json | --prometheus | --files |\n"
	       "               --watch [SECS] [--count N]] MOUNTPOINT  (stat --help)\n\n"
	       "    -h, --help             print this help\n"
	       "    -V, --version          print version\n"
	       "    -f                     stay in the foreground, log to stderr\n"
	       "    -d, -o debug           debug log (implies -f)\n"
	       "    -s                     single-threaded (no io_uring)\n"
	       "    -o config=PATH         policy file (see dcfs.conf(5)); default:\n"
	       "                           " DCFS_SYSCONFDIR "/dcfs.conf if it exists,\n"
	       "                           config=none for the built-in defaults\n"
	       "    -o attr_timeout=SECS   attribute cache timeout (1)\n"
	       "    -o entry_timeout=SECS  name cache timeout (1)\n"
	       "    -o negative_timeout=SECS  how long a missing name is remembered\n"
	       "                           (entry_timeout)\n"
	       "    -o cache=MODE          never, auto (default) or always: how long\n"
	       "                           the kernel trusts names and attributes\n"
	       "    -o nonempty            allow a non-empty mount point\n"
	       "    -o nodefault_permissions  do not let the kernel check permissions\n"
	       "    -o acl                 the kernel's permission checks honour POSIX\n"
	       "                           ACLs (named users and groups), as natively\n"
	       "    -o max_threads=N       /dev/fuse worker threads (default: CPUs, at\n"
	       "                           least 2; io_uring: 4 per CPU)\n"
	       "    -o max_idle_threads=N  idle workers kept (-1: all)\n"
	       "    -o clone_fd            one /dev/fuse fd per thread\n"
	       "    -o stop_timeout=SECS   SIGTERM waits this long for open files (30)\n"
	       "    -o nopassthrough       forward cached files through the daemon\n"
	       "                           instead of kernel passthrough\n"
	       "    -o nouring             serve requests through /dev/fuse only, not\n"
	       "                           FUSE over io_uring (default where the\n"
	       "                           kernel has it, Linux >= 6.14)\n"
	       "    -o allow_other, ro, fsname=..., and the other FUSE mount\n"
	       "       options of mount.fuse3(8)\n",
	       prog, prog, prog, prog);
}

static int dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n == 0;
}

static int check_dir(const char *what, const char *path)
{
	struct stat st;

	if (!path) {
		fprintf(stderr, "dcfs: missing %s (see --help)\n", what);
		return -EINVAL;
	}
	if (stat(path, &st) < 0) {
		fprintf(stderr, "dcfs: %s %s: %s\n", what, path, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "dcfs: %s %s: %s\n", what, path, strerror(ENOTDIR));
		return -ENOTDIR;
	}
	return 0;
}

int options_validate(const struct dcfs_options *opt)
{
	int err;

	err = check_dir("backing directory", opt->backing);
	if (err)
		return err;
	err = check_dir("mount point", opt->mountpoint);
	if (err)
		return err;
	if (opt->attr_timeout < 0 || opt->entry_timeout < 0 || opt->negative_timeout < 0) {
		fprintf(stderr, "dcfs: timeouts must not be negative\n");
		return -EINVAL;
	}
	if (opt->allow_other && opt->allow_root) {
		fprintf(stderr,
			"dcfs: allow_other and allow_root exclude each other (allow_other already lets root in)\n");
		return -EINVAL;
	}
	if (opt->acl && opt->nodefault_permissions) {
		fprintf(stderr,
			"dcfs: acl and nodefault_permissions exclude each other (ACLs are checked by the kernel's permission checks)\n");
		return -EINVAL;
	}
	if (opt->stop_timeout < 0 || opt->stop_timeout > 86400) {
		fprintf(stderr, "dcfs: stop_timeout must be between 0 and 86400 seconds\n");
		return -EINVAL;
	}
	if (opt->max_threads < 1) {
		fprintf(stderr, "dcfs: max_threads must be at least 1\n");
		return -EINVAL;
	}
	return 0;
}

/*
 * After guard_mountpoint(): a live dcfs mount is never empty, and "already
 * mounted by dcfs" is the answer there, not "use -o nonempty".
 */
int options_check_empty(const struct dcfs_options *opt)
{
	int err;

	if (!opt->nonempty) {
		err = dir_is_empty(opt->mountpoint);
		if (err == 0) {
			fprintf(stderr, "dcfs: mount point %s is not empty (use -o nonempty)\n",
				opt->mountpoint);
			return -ENOTEMPTY;
		}
		if (err < 0) {
			fprintf(stderr, "dcfs: mount point %s: %s\n", opt->mountpoint,
				strerror(-err));
			return err;
		}
	}
	return 0;
}

/* The options dcfs always wants from the kernel, unless told otherwise. */
int options_add_mount_args(struct fuse_args *args, const struct dcfs_options *opt)
{
	char *o = NULL;
	int err = 0;

	if (!opt->nodefault_permissions)
		err |= fuse_opt_add_opt(&o, "default_permissions");
	if (!opt->has_fsname) {
		char *fsname;

		if (asprintf(&fsname, "fsname=%s", opt->backing) < 0)
			return -ENOMEM;
		err |= fuse_opt_add_opt_escaped(&o, fsname);
		free(fsname);
	}
	if (!opt->has_subtype)
		err |= fuse_opt_add_opt(&o, "subtype=dcfs");
	if (!err && o) {
		err = fuse_opt_add_arg(args, "-o") || fuse_opt_add_arg(args, o);
	}
	free(o);
	return err ? -ENOMEM : 0;
}
