// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Guards against dcfs serving its own mount.
 *
 * A mount point inside the backing tree makes the mount reachable from
 * itself: a lookup under it becomes a request to this daemon, made by a
 * worker that waits for it, and a few levels deep every worker waits on
 * another (callers in D state, kill -9 leaves zombies).  So the mount point
 * may not be a descendant of the backing directory (compared by st_dev and
 * st_ino along its real path, which also catches bind mounts of the backing
 * directory), and no lookup may ever return an object of dcfs's own
 * superblock (a bind mount of the mount point into the backing tree made
 * later).  A mount point that already holds a dcfs mount is refused too:
 * stacking a second daemon over the first helps nobody.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"

static dev_t self_dev; /* 0: unknown */

static bool same_object(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Is dir (a real path) the backing directory or below it?  *depth: 0 if it
 * is the backing directory itself. */
static bool is_within(const char *dir, const struct stat *backing, int *depth)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s", dir);
	for (*depth = 0;; (*depth)++) {
		char *slash;

		if (stat(path, &st) == 0 && same_object(&st, backing))
			return true;
		slash = strrchr(path, '/');
		if (!slash || path[1] == '\0')
			return false;
		if (slash == path)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
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

/*
 * The newest mount on mountpoint: its device and file system type.
 * Returns 0, or -ENOENT if nothing is mounted there.
 */
static int mount_on(const char *mountpoint, dev_t *dev, char *fstype, size_t fstypelen)
{
	FILE *fp = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int ret = -ENOENT;

	if (!fp)
		return -errno;
	while (getline(&line, &cap, fp) > 0) {
		unsigned int maj, min;
		char mp[PATH_MAX], type[64];
		char *sep = strstr(line, " - ");

		if (!sep || sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, mp) != 3 ||
		    sscanf(sep + 3, "%63s", type) != 1)
			continue;
		unescape(mp);
		if (strcmp(mp, mountpoint) != 0)
			continue;
		*dev = makedev(maj, min);
		snprintf(fstype, fstypelen, "%s", type);
		ret = 0;
	}
	free(line);
	fclose(fp);
	return ret;
}

int guard_mountpoint(const char *backing, const char *mountpoint)
{
	struct stat bst;
	char type[64];
	dev_t dev;
	int depth;

	if (stat(backing, &bst) < 0) {
		fprintf(stderr, "dcfs: backing directory %s: %s\n", backing, strerror(errno));
		return -errno;
	}
	if (is_within(mountpoint, &bst, &depth) && depth > 0) {
		fprintf(stderr,
			"dcfs: mount point %s is inside the backing directory %s: the mount would serve itself\n",
			mountpoint, backing);
		return -ELOOP;
	}
	if (mount_on(mountpoint, &dev, type, sizeof(type)) == 0 && strcmp(type, "fuse.dcfs") == 0) {
		fprintf(stderr, "dcfs: %s is already mounted by dcfs\n", mountpoint);
		return -EBUSY;
	}
	return 0;
}

void guard_learn_self(const char *mountpoint)
{
	char type[64];

	if (mount_on(mountpoint, &self_dev, type, sizeof(type)) < 0 ||
	    strncmp(type, "fuse", 4) != 0) {
		self_dev = 0;
		log_warn(
			"cannot find the mount on %s in /proc/self/mountinfo: lookups into the mount itself are not refused\n",
			mountpoint);
	}
}

dev_t guard_self_dev(void)
{
	return self_dev;
}

/*
 * fd was opened across a mount point: is it dcfs's own mount?  Asked with
 * AT_STATX_DONT_SYNC, so a FUSE mount answers from its cache and no request
 * goes to this daemon.
 */
bool guard_is_self(int fd)
{
	struct statx stx;
	static atomic_bool logged;

	if (!self_dev)
		return false;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE,
		  &stx) < 0)
		return false;
	if (makedev(stx.stx_dev_major, stx.stx_dev_minor) != self_dev)
		return false;
	if (!atomic_exchange(&logged, true))
		log_warn(
			"refusing a lookup into this mount itself (the mount point is reachable from the backing tree)\n");
	return true;
}

/*
 * A stop that cannot finish (shutdown.c): ends this mount's connection,
 * which fails every request waiting on it (the kernel's umount_begin of a
 * forced unmount does that for FUSE), and takes the mount off the mount
 * point, lazily, so that what it covered (a mount in place: the backing
 * directory itself) is reachable again.  Only if the newest mount there is
 * still this daemon's.  Without root, fusermount3 detaches it and the
 * connection ends when the daemon exits.
 */
void guard_end_self(const char *mountpoint)
{
	char type[64];
	dev_t dev;
	pid_t pid;

	if (!self_dev || mount_on(mountpoint, &dev, type, sizeof(type)) < 0 || dev != self_dev)
		return;
	if (geteuid() == 0) {
		if (umount2(mountpoint, MNT_FORCE) < 0 && umount2(mountpoint, MNT_DETACH) < 0)
			log_warn("cannot unmount %s: %s\n", mountpoint, strerror(errno));
		return;
	}
	pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", "-q", "--", mountpoint,
		       (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}
