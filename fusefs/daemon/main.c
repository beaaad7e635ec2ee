// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dcfs entry point: parse and validate everything, then mount, daemonize
 * and serve.  Nothing is mounted unless every check passed, so a bad
 * option or config leaves the system as it was.
 */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "dcfs_version.h"

/*
 * The probe line of each backing filesystem already gives the fd budget.
 * Only a limit below what the bench needed for a million files (4096; the
 * unit sets 1048576) is worth a line of its own, as a warning.
 */
static void log_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	if (rl.rlim_cur < 4096)
		log_warn(
			"only %llu file descriptors: %zu for cached O_PATH fds, the rest for open files and directories and for inodes of filesystems without file handles (raise RLIMIT_NOFILE)\n",
			(unsigned long long)rl.rlim_cur, fdcache_budget());
}

static void dcfs_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	/*
	 * Reads of cached files are spliced from the backing file to the
	 * kernel.  Writes arrive in memory, not in a pipe: the streaming class
	 * must hand them to pwritev2() with RWF_DONTCACHE, which splice cannot.
	 */
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	/*
	 * No SPLICE_MOVE: the kernel would try to steal the backing file's
	 * pages into the FUSE cache, and dumps every page RWF_DONTCACHE
	 * marked ("fuse: trying to steal weird page") before copying anyway.
	 */
	conn->want &= ~FUSE_CAP_SPLICE_MOVE;
	conn->want &= ~FUSE_CAP_SPLICE_READ;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/*
	 * READDIRPLUS for every batch of a listing, not only the first (the
	 * kernel's "auto" heuristic): find, du, rsync and indexers stat what
	 * they list, and an entry with its attributes in the listing saves
	 * the LOOKUP round trip that would follow for each name.
	 */
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	/* Node ids are safe to receive back (nodeid.c): allow re-export. */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/*
	 * Not FUSE_AUTO_INVAL_DATA (libfuse asks for it by default): the
	 * kernel would drop a file's cache at the first attribute refresh
	 * after each of our own writes, and such a drop can hit a
	 * write-through write in flight and leave old data cached after it
	 * returned.  coherence.c notices changes made outside the mount.
	 */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/*
	 * -o acl: the kernel's permission checks read the access ACL
	 * (GETXATTR system.posix_acl_access, cached until the inode's
	 * attributes are refreshed), so named users and groups are granted
	 * what they are natively.  Not by default: it costs that GETXATTR
	 * once per inode and attribute refresh, a directory's after every
	 * change in it.
	 */
	if (dcfs.opt.acl) {
		if (conn->capable & FUSE_CAP_POSIX_ACL)
			conn->want |= FUSE_CAP_POSIX_ACL;
		else
			log_warn(
				"-o acl: the kernel does not offer POSIX ACLs; named ACL entries are not honoured\n");
	}
	/* The umask is applied by the backing filesystem: see umask.c. */
	if (conn->capable & FUSE_CAP_DONT_MASK)
		conn->want |= FUSE_CAP_DONT_MASK;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->time_gran = 1;
	log_info("mounted %s on %s: max_write %u, max_readahead %u\n", dcfs.opt.backing,
		 dcfs.opt.mountpoint, conn->max_write, conn->max_readahead);
	log_info("config %s (%s)\n", dcfs.opt.config ? dcfs.opt.config : "none: built-in defaults",
		 dcfs.config_origin);
	inode_table_probe();
	caps_log_startup();
	log_fd_limit();
}

static void dcfs_destroy(void *userdata)
{
	(void)userdata;
	io_release_all();
	fuse_dir_release_all();
	inode_table_destroy();
}

/* The handlers, wrapped by their rows of DCFS_FUSE_OPS; -EINVAL if an op
 * has no row (op_table.c): nothing may run unclassified. */
static int build_ops(struct fuse_lowlevel_ops *ops)
{
	if (op_table_check() < 0)
		return -EINVAL;
	memset(ops, 0, sizeof(*ops));
	ops->init = dcfs_init;
	ops->destroy = dcfs_destroy;
	fuse_inode_ops(ops);
	fuse_dir_ops(ops);
	fuse_file_ops(ops);
	fuse_xattr_ops(ops);
	fuse_lock_ops(ops);
	if (dcfs.privileged)
		caller_ops_wrap(ops, dcfs.opt.nodefault_permissions);
	readonly_ops_wrap(ops);
	return 0;
}

static int resolve_paths(struct dcfs_options *opt)
{
	char *p;

	p = realpath(opt->backing, NULL);
	if (!p)
		return -errno;
	free(opt->backing);
	opt->backing = p;
	p = realpath(opt->mountpoint, NULL);
	if (!p)
		return -errno;
	free(opt->mountpoint);
	opt->mountpoint = p;
	return 0;
}

/*
 * Which config: config=PATH, else the installed DCFS_SYSCONFDIR/dcfs.conf
 * when it exists (what an admin edits after `make install` or the package
 * is what a plain `mount -t dcfs` should use), config=none for the
 * built-in defaults.  Returns 0 and sets *path (NULL: none), or -errno.
 */
static int choose_config(const char **path, const char **why)
{
	static const char installed[] = DCFS_SYSCONFDIR "/dcfs.conf";

	if (dcfs.opt.config && strcmp(dcfs.opt.config, "none") == 0) {
		free(dcfs.opt.config);
		dcfs.opt.config = NULL;
		*path = NULL;
		*why = "config=none";
		return 0;
	}
	if (dcfs.opt.config) {
		*path = dcfs.opt.config;
		*why = "config=";
		return 0;
	}
	if (access(installed, F_OK) != 0) {
		*path = NULL;
		*why = "no config=, no " DCFS_SYSCONFDIR "/dcfs.conf";
		return 0;
	}
	dcfs.opt.config = strdup(installed);
	if (!dcfs.opt.config)
		return -ENOMEM;
	*path = dcfs.opt.config;
	*why = "the default, no config=";
	return 0;
}

/* The config is loaded and validated before anything is mounted. */
static int load_config(void)
{
	struct dcfs_config *cfg;
	const char *path;
	char *abs;

	if (choose_config(&path, &dcfs.config_origin) < 0)
		return -ENOMEM;
	if (!path) {
		config_install(config_defaults());
		return 0;
	}
	/* Reloads happen after the daemon's chdir("/"). */
	abs = realpath(dcfs.opt.config, NULL);
	if (abs) {
		free(dcfs.opt.config);
		dcfs.opt.config = abs;
	}
	if (cli_load_config(dcfs.opt.config, &cfg) < 0)
		return -EINVAL;
	config_install(cfg);
	return 0;
}

static void apply_config_log_level(void)
{
	struct dcfs_config *cfg = config_get();

	if (cfg->log_level >= 0 && !dcfs.opt.debug)
		log_set_level(cfg->log_level);
	config_put(cfg);
}

static int serve(struct fuse_session *se)
{
	struct fuse_loop_config *cfg;
	int ret;

	if (dcfs.opt.singlethread)
		return fuse_session_loop(se);
	cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(cfg, (unsigned int)dcfs.opt.clone_fd);
	fuse_loop_cfg_set_max_threads(cfg, (unsigned int)dcfs.opt.max_threads);
	if (dcfs.opt.max_idle_threads >= 0)
		fuse_loop_cfg_set_idle_threads(cfg, (unsigned int)dcfs.opt.max_idle_threads);
	ret = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	return ret;
}

/*
 * SIGHUP means "reload" from the moment the mount exists, but the reload
 * thread starts only after fuse_daemonize(), and until then libfuse's
 * handler would end the session: a reload sent right after the mount
 * appeared (a script, systemctl reload) unmounted it.  Blocked here, it
 * stays pending until the reload thread takes it (reload_start() blocks
 * it in every thread anyway).
 */
static void hold_sighup(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
}

static int run(struct fuse_args *args)
{
	struct fuse_lowlevel_ops ops;
	struct fuse_session *se;
	bool stuck = false;
	int ret = 1;

	if (options_add_mount_args(args, &dcfs.opt) < 0)
		return 1;
	if (build_ops(&ops) < 0)
		return 1;
	se = fuse_session_new(args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	dcfs.se = se;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_destroy;
	hold_sighup();
	conn_limits_prepare();
	uring_prepare(dcfs.opt.uring);
	if (fuse_session_mount(se, dcfs.opt.mountpoint) != 0)
		goto out_signals;
	/* The wire's hooks, and what io/ adds to them (passthrough). */
	if (wire_install(se) < 0 || passthrough_install(se, dcfs.opt.nopassthrough) < 0)
		goto out_unmount;
	guard_learn_self(dcfs.opt.mountpoint);
	log_init(dcfs.opt.foreground, dcfs.opt.debug);
	apply_config_log_level();
	if (fuse_daemonize(dcfs.opt.foreground) != 0)
		goto out_unmount;
	/* Threads only after fuse_daemonize(): they would not survive its fork. */
	creds_drop_reserve();
	if (reload_start() < 0 || io_start(se) < 0 || shutdown_start() < 0 ||
	    readonly_start() < 0 || fdcache_start() < 0)
		goto out_unmount;
	ret = serve(se) ? 1 : 0;
	fuse_lock_stop();
	shutdown_stop();
	if (shutdown_forced())
		ret = 1;
	io_stop();
	stuck = reload_stop();
out_unmount:
	fdcache_stop();
	readonly_stop();
	/* The io_uring threads first: they serve the session being unmounted. */
	uring_stop();
	fuse_session_unmount(se);
	/*
	 * A thread still blocked reading a config on a hung filesystem cannot
	 * be joined, and exit handlers (a sanitizer's leak check stops every
	 * thread first) would wait for it: leave at once, the mount is gone.
	 */
	if (stuck) {
		log_warn("exiting with a reload still blocked in the kernel\n");
		fuse_remove_signal_handlers(se);
		_exit(ret);
	}
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	return ret;
}

static void free_state(struct fuse_args *args)
{
	struct dcfs_config *cfg = config_get();

	/* Once for our reference, once for the installed one. */
	if (cfg) {
		config_put(cfg);
		config_put(cfg);
	}
	fuse_opt_free_args(args);
	free(dcfs.opt.backing);
	free(dcfs.opt.mountpoint);
	free(dcfs.opt.config);
	free(dcfs.opt.cache_mode);
}

/*
 * Open files hold a backing fd each, and inodes of filesystems without file
 * handles an O_PATH fd each; the O_PATH cache takes half the limit: raise
 * it as far as the system allows.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	unsigned long max = 0;
	FILE *fp = fopen("/proc/sys/fs/nr_open", "re");

	if (fp) {
		if (fscanf(fp, "%lu", &max) != 1)
			max = 0;
		fclose(fp);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (max > rl.rlim_max && geteuid() == 0)
		rl.rlim_max = max;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Everything before the mount: nothing is mounted unless this returns 0. */
static int prepare(struct fuse_args *args, const char *prog, bool *done)
{
	int err;

	*done = false;
	if (options_parse(args, &dcfs.opt) < 0)
		return 1;
	if (dcfs.opt.show_help || dcfs.opt.show_version) {
		if (dcfs.opt.show_help)
			options_usage(prog);
		else
			printf("dcfs %s (libfuse %s)\n", DCFS_VERSION, fuse_pkgversion());
		*done = true;
		return 0;
	}
	if (options_validate(&dcfs.opt) < 0 || resolve_paths(&dcfs.opt) < 0 ||
	    guard_mountpoint(dcfs.opt.backing, dcfs.opt.mountpoint) < 0 ||
	    options_check_empty(&dcfs.opt) < 0 || load_config() < 0)
		return 1;
	dcfs.privileged = geteuid() == 0;
	raise_fd_limit();
	err = inode_table_init(dcfs.opt.backing);
	if (err) {
		fprintf(stderr, "dcfs: %s: %s\n", dcfs.opt.backing, strerror(-err));
		return 1;
	}
	return 0;
}

/*
 * The streaming buffers (read-ahead windows, write jobs, coalescing
 * buffers: 256 KiB to 4 MiB each) come and go with handles, in many
 * threads.  glibc raises its mmap threshold each time such a buffer is
 * freed, so later ones come from per-thread heaps that keep their pages:
 * the daemon's RSS then grew by a buffer set per stream (4 MiB fresh,
 * 29 MiB after a dozen streams in the bench) instead of staying at what
 * is in use.  A fixed threshold returns every large buffer at free().
 */
static void bound_buffer_memory(void)
{
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	bool done;
	int ret;

	if (argc >= 2 && strcmp(argv[1], "--check-config") == 0)
		return cli_check_config(argc, argv);
	if (argc == 2 && strcmp(argv[1], "--list-config-keys") == 0)
		return cli_list_config_keys();
	if (argc == 2 && strcmp(argv[1], "--list-options") == 0)
		return options_list();
	if (argc >= 2 && strcmp(argv[1], "stat") == 0)
		return cli_stat(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "--read-config") == 0)
		return cli_read_config(argc, argv);
	/* Not a second daemon: the live mount's flags change. */
	if (remount_asked(argc, argv))
		return remount_cmd(argc, argv);
	log_init(true, 0);
	bound_buffer_memory();
	/*
	 * Modes arrive with the caller's umask applied by the kernel, or with
	 * it beside them (umask.c), which worker threads put in force.
	 */
	umask(0);
	ret = prepare(&args, argv[0], &done);
	if (ret == 0 && !done) {
		ret = run(&args);
		/* destroy() did not run if the mount failed. */
		if (dcfs.buckets)
			inode_table_destroy();
	}
	free_state(&args);
	return ret;
}
