// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Read-only mounts (-o ro, `mount -o remount,ro`): the daemon refuses
 * every change with EROFS itself, not only the kernel.
 *
 * The kernel already refuses changes on a read-only mount before they reach
 * dcfs (EROFS from the VFS), and it refuses to make a mount read-only while
 * a file on it is open for writing or an unlinked file is still open
 * (EBUSY, sb_prepare_remount_readonly()), so no writable handle survives a
 * remount,ro: not a streamed one with the daemon's engine behind it, not an
 * uncached passthrough one.  Only the emergency remount (SysRq u) forces a
 * superblock read-only under open writers.  Then FORWARDED writes still come
 * to the daemon, and this answers them with EROFS as a read-only
 * filesystem would (writes the kernel passes through to the backing file
 * itself do not come here).  Data the streaming engine had acknowledged
 * before the remount is still written: it was written as far as its writer
 * knows.
 *
 * The daemon is not told of a remount; it watches /proc/self/mountinfo,
 * which signals POLLPRI on every change of the mount table (the kernel's
 * touch_mnt_namespace(), also for a remount), and reads the superblock
 * flags of its own mount (device guard_self_dev()) from it.
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "handlers/handlers.h"

static struct {
	atomic_bool readonly;	       /* the mount is read-only now */
	struct fuse_lowlevel_ops real; /* the handlers, unwrapped */
	pthread_t watcher;
	int stop_fd, info_fd;
	bool started;
} mount_ro = { .stop_fd = -1, .info_fd = -1 };

bool readonly_now(void)
{
	return atomic_load_explicit(&mount_ro.readonly, memory_order_relaxed);
}

/* ---- what the kernel says ------------------------------------------------ */

/* "ro" or "rw" leads the superblock options of a mountinfo line. */
static int line_sb_readonly(const char *line, dev_t dev)
{
	unsigned int maj, min;
	const char *sep = strstr(line, " - ");
	char type[64], source[4096], opts[16];

	if (!sep || sscanf(line, "%*u %*u %u:%u", &maj, &min) != 2 || makedev(maj, min) != dev)
		return -1;
	if (sscanf(sep + 3, "%63s %4095s %15[^,\n ]", type, source, opts) != 3)
		return -1;
	return strcmp(opts, "ro") == 0;
}

/* 1 read-only, 0 read-write, -ENOENT if our mount is not (yet) listed. */
static int sb_readonly(void)
{
	dev_t dev = guard_self_dev();
	FILE *fp;
	char *line = NULL;
	size_t cap = 0;
	int ret = -ENOENT;

	if (!dev)
		return -ENOENT;
	fp = fopen("/proc/self/mountinfo", "re");
	if (!fp)
		return -errno;
	while (getline(&line, &cap, fp) > 0) {
		int ro = line_sb_readonly(line, dev);

		if (ro >= 0)
			ret = ro;
	}
	free(line);
	fclose(fp);
	return ret;
}

static void update(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	int ro;

	pthread_mutex_lock(&lock);
	ro = sb_readonly();
	if (ro >= 0 && (bool)ro != readonly_now()) {
		atomic_store(&mount_ro.readonly, ro);
		log_info("%s is now %s\n", dcfs.opt.mountpoint,
			 ro ? "read-only: changes get EROFS" : "read-write");
	}
	pthread_mutex_unlock(&lock);
}

/*
 * The watcher may not have seen a remount,rw yet when the first change
 * after it arrives (the kernel lets it through at once): a refusal is
 * decided on the mount table as it is now.  Refusals are rare (the kernel
 * refuses first on a read-only mount), so reading it costs nothing in
 * practice; in the other direction a lag is harmless, the kernel refuses.
 */
static bool refuse_change(void)
{
	if (!readonly_now())
		return false;
	update();
	return readonly_now();
}

static void *watch_main(void *arg)
{
	struct pollfd p[2] = { { .fd = mount_ro.info_fd, .events = POLLPRI },
			       { .fd = mount_ro.stop_fd, .events = POLLIN } };

	(void)arg;
	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[0].revents & (POLLPRI | POLLERR))
			update();
	}
	return NULL;
}

/*
 * Learns the mount's state (after the mount exists and guard_learn_self()
 * ran) and watches it.  Without mountinfo, -o ro still counts.
 */
int readonly_start(void)
{
	sigset_t all, old;
	int err;

	atomic_store(&mount_ro.readonly, dcfs.opt.readonly);
	mount_ro.info_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	mount_ro.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (mount_ro.info_fd < 0 || mount_ro.stop_fd < 0) {
		err = -errno;
		log_warn(
			"cannot watch /proc/self/mountinfo: %s: a remount is not noticed by the daemon\n",
			strerror(-err));
		readonly_stop();
		return 0;
	}
	update();
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&mount_ro.watcher, NULL, watch_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		readonly_stop();
		return -err;
	}
	mount_ro.started = true;
	return 0;
}

void readonly_stop(void)
{
	uint64_t one = 1;

	if (mount_ro.started && write(mount_ro.stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(mount_ro.watcher, NULL);
	mount_ro.started = false;
	if (mount_ro.info_fd >= 0)
		close(mount_ro.info_fd);
	if (mount_ro.stop_fd >= 0)
		close(mount_ro.stop_fd);
	mount_ro.info_fd = mount_ro.stop_fd = -1;
}

/* ---- the handlers ------------------------------------------------------- */

/* One wrapper per op of DCFS_FUSE_OPS (handlers.h); its row says which. */
#define REFUSE_IF_RO(op, who, ro, params, args)            \
	static void __attribute__((unused)) ro_##op params \
	{                                                  \
		if (refuse_change())                       \
			fuse_reply_err(req, EROFS);        \
		else                                       \
			mount_ro.real.op args;             \
	}
DCFS_FUSE_OPS(REFUSE_IF_RO)
#undef REFUSE_IF_RO

static bool open_writes(const struct fuse_file_info *fi)
{
	return (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
}

/* OP_RO_OPEN: whether an open changes anything depends on its flags. */
static void ro_open_writing(fuse_req_t req, fuse_ino_t i, struct fuse_file_info *fi)
{
	if (open_writes(fi) && refuse_change())
		fuse_reply_err(req, EROFS);
	else
		mount_ro.real.open(req, i, fi);
}

/* Outermost wrapper: a refused change never switches identities. */
void readonly_ops_wrap(struct fuse_lowlevel_ops *ops)
{
	mount_ro.real = *ops;
#define WRAP(op, who, ro, params, args)     \
	if (ops->op && ro == OP_RO_REFUSED) \
		ops->op = ro_##op;
	DCFS_FUSE_OPS(WRAP)
#undef WRAP
	/* the one OP_RO_OPEN row (op_table.c checks that) */
	if (ops->open)
		ops->open = ro_open_writing;
}
