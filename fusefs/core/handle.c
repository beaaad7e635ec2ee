// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Identity by file handle.
 *
 * An inode the kernel holds must stay reachable, but holding an O_PATH fd
 * for each one makes the fd limit the limit on how many files the kernel
 * may cache (a find over a large tree exhausted it and every user's opens
 * failed).  So each inode also keeps the file handle of its backing object
 * (name_to_handle_at() at lookup), and its fd may be closed by the fd
 * cache (fdcache.c) and reopened with open_by_handle_at() when needed.
 *
 * Modes, decided once per backing filesystem (st_dev) and logged once:
 *  - "handle": name_to_handle_at() works and a handle opened back gives the
 *    same object (needs CAP_DAC_READ_SEARCH, so a root daemon);
 *  - "fd": no handles (the filesystem cannot give them, or the daemon is
 *    not privileged): one fd per inode, as before, bounded by RLIMIT_NOFILE.
 *
 * Safety: a handle names an object of the filesystem, not a path, so it is
 * only ever opened against a mount fd of that same backing filesystem, as
 * O_PATH, never resolving a symlink.  An object can have been moved out of
 * BACKING_DIR (on the same filesystem) since the kernel looked it up.  For
 * a non-directory that changes nothing an open fd would not allow too (the
 * kernel holds that inode); a directory, though, would expose what is
 * below it, so a reopened directory must still lead up to the backing root
 * through "..", or it is answered as gone (ESTALE).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/core.h"

#define MAX_FILESYSTEMS 64
/* Directory depth walked to prove a reopened directory is in the tree. */
#define MAX_DEPTH 4096

enum fs_mode {
	MODE_HANDLE,
	MODE_FD
};

struct backing_fs {
	dev_t dev;
	int mount_fd; /* an O_PATH fd on that filesystem, for open_by_handle_at */
	enum fs_mode mode;
};

/*
 * The backing filesystems seen, and what to do when reopening by handle
 * fails for want of fds: the fd cache (fdcache.c, above this file: it
 * reopens through here) registers how to make room at start-up.
 */
static struct {
	pthread_mutex_t fs_lock;
	struct backing_fs filesystems[MAX_FILESYSTEMS];
	size_t n_filesystems;
	bool (*make_room)(int err);
} backing = { .fs_lock = PTHREAD_MUTEX_INITIALIZER };

void handle_set_make_room(bool (*fn)(int err))
{
	backing.make_room = fn;
}

/*
 * Runs fn with filesystem uid 0: a handler running as the caller has no
 * CAP_DAC_READ_SEARCH, which open_by_handle_at() needs.
 */
static int as_daemon_fsuid(int (*fn)(void *), void *arg)
{
	int old = (int)syscall(SYS_setfsuid, -1);
	int ret;

	if (old != 0)
		syscall(SYS_setfsuid, 0);
	ret = fn(arg);
	if (old != 0)
		syscall(SYS_setfsuid, old);
	return ret;
}

struct open_args {
	int mount_fd;
	struct file_handle *fh;
};

static int open_handle_cb(void *arg)
{
	struct open_args *a = arg;
	int fd = open_by_handle_at(a->mount_fd, a->fh, O_PATH | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static int open_handle(int mount_fd, struct file_handle *fh)
{
	struct open_args a = { mount_fd, fh };

	return as_daemon_fsuid(open_handle_cb, &a);
}

static struct file_handle *make_handle(int fd, int *err)
{
	struct file_handle *fh = malloc(sizeof(*fh) + MAX_HANDLE_SZ);
	struct file_handle *exact;
	int mount_id;

	if (!fh) {
		*err = ENOMEM;
		return NULL;
	}
	fh->handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(fd, "", fh, &mount_id, AT_EMPTY_PATH) < 0) {
		*err = errno;
		free(fh);
		return NULL;
	}
	exact = realloc(fh, sizeof(*fh) + fh->handle_bytes);
	return exact ? exact : fh;
}

/*
 * open_by_handle_at() wants a real (not O_PATH) fd on the filesystem: the
 * first object dcfs meets on a filesystem is the directory it is mounted on
 * (or the backing root), opened read-only for that.
 */
static int open_mount_fd(int fd, const struct stat *st)
{
	char path[64];
	int mfd;

	if (!S_ISDIR(st->st_mode))
		return -ENOTDIR;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	mfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return mfd < 0 ? -errno : mfd;
}

/* Probes a new filesystem with the object fd refers to. */
static enum fs_mode probe_fs(int fd, const struct stat *st, int *mount_fd)
{
	unsigned int maj = major(st->st_dev), min = minor(st->st_dev);
	struct file_handle *fh;
	struct stat st2;
	int err = 0, rfd;

	*mount_fd = -1;
	if (!dcfs.privileged) {
		log_info(
			"backing filesystem %u:%u: identity mode fd (no CAP_DAC_READ_SEARCH for file handles)\n",
			maj, min);
		return MODE_FD;
	}
	fh = make_handle(fd, &err);
	if (!fh) {
		log_info("backing filesystem %u:%u: identity mode fd (no file handles: %s)\n", maj,
			 min, strerror(err));
		return MODE_FD;
	}
	*mount_fd = open_mount_fd(fd, st);
	rfd = *mount_fd < 0 ? *mount_fd : open_handle(*mount_fd, fh);
	free(fh);
	if (rfd < 0 || fstat(rfd, &st2) < 0 || st2.st_dev != st->st_dev ||
	    st2.st_ino != st->st_ino) {
		log_info("backing filesystem %u:%u: identity mode fd (open_by_handle_at: %s)\n",
			 maj, min, rfd < 0 ? strerror(-rfd) : "another object");
		if (rfd >= 0)
			close(rfd);
		if (*mount_fd >= 0)
			close(*mount_fd);
		*mount_fd = -1;
		return MODE_FD;
	}
	close(rfd);
	log_info(
		"backing filesystem %u:%u: identity mode handle (O_PATH fds cached, reopened by handle)\n",
		maj, min);
	return MODE_HANDLE;
}

static struct backing_fs *fs_of(dev_t dev)
{
	for (size_t i = 0; i < backing.n_filesystems; i++)
		if (backing.filesystems[i].dev == dev)
			return &backing.filesystems[i];
	return NULL;
}

/*
 * The filesystem's entry, probed with fd on first sight of one of its
 * directories; NULL if not probed yet or the table is full.
 */
static struct backing_fs *fs_get(int fd, const struct stat *st)
{
	struct backing_fs *fs;
	int mount_fd;
	enum fs_mode mode;

	pthread_mutex_lock(&backing.fs_lock);
	fs = fs_of(st->st_dev);
	pthread_mutex_unlock(&backing.fs_lock);
	if (fs)
		return fs;
	/* Only a directory can serve as the mount fd: wait for one. */
	if (!S_ISDIR(st->st_mode))
		return NULL;
	mode = probe_fs(fd, st, &mount_fd);
	pthread_mutex_lock(&backing.fs_lock);
	fs = fs_of(st->st_dev);
	if (!fs && backing.n_filesystems < MAX_FILESYSTEMS) {
		fs = &backing.filesystems[backing.n_filesystems];
		fs->dev = st->st_dev;
		fs->mount_fd = mount_fd;
		fs->mode = mode;
		backing.n_filesystems++;
		mount_fd = -1;
	}
	pthread_mutex_unlock(&backing.fs_lock);
	if (mount_fd >= 0)
		close(mount_fd);
	return fs;
}

struct file_handle *handle_for(int fd, const struct stat *st)
{
	struct backing_fs *fs = fs_get(fd, st);
	int err;

	if (!fs || fs->mode != MODE_HANDLE)
		return NULL;
	return make_handle(fd, &err);
}

/* handle_for(), with a handle of the object already taken (fh). */
struct file_handle *handle_copy(int fd, const struct stat *st, const struct file_handle *fh)
{
	struct backing_fs *fs = fs_get(fd, st);
	size_t size = sizeof(*fh) + fh->handle_bytes;
	struct file_handle *copy;

	if (!fs || fs->mode != MODE_HANDLE)
		return NULL;
	copy = malloc(size);
	if (copy)
		memcpy(copy, fh, size);
	return copy;
}

bool handle_equal(const struct file_handle *a, const struct file_handle *b)
{
	return a->handle_type == b->handle_type && a->handle_bytes == b->handle_bytes &&
	       memcmp(a->f_handle, b->f_handle, a->handle_bytes) == 0;
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/*
 * The generation dcfs tells the kernel for the object of handle fh: the
 * filesystem's own i_generation where the layout is known and holds the
 * inode number (ext4 and xfs: inode number, then generation; btrfs:
 * objectid, root, generation), else a hash of the whole handle.  Either
 * way it is fixed for the object, across restarts too, and differs for
 * another object that gets the same inode number later (the hash: unless
 * 32 bits collide), which is what the kernel checks decoding an export
 * handle.
 */
uint32_t handle_generation(const struct file_handle *fh, ino_t ino)
{
	const unsigned char *b = fh->f_handle;
	uint32_t h = 2166136261u;

	if (fh->handle_type == 1 && fh->handle_bytes == 8 && get32(b) == (uint32_t)ino &&
	    ino == (uint32_t)ino)
		return get32(b + 4);
	if (fh->handle_type == 0x81 && fh->handle_bytes == 12 && get64(b) == (uint64_t)ino)
		return get32(b + 8);
	if (fh->handle_type == 0x4d && fh->handle_bytes == 20 && get64(b) == (uint64_t)ino)
		return get32(b + 16);
	for (unsigned int i = 0; i < fh->handle_bytes; i++)
		h = (h ^ b[i]) * 16777619u;
	return (h ^ (uint32_t)fh->handle_type) * 16777619u;
}

/* Does the directory fd still lead up to the backing root? */
static bool dir_in_tree(int fd)
{
	struct stat st;
	int cur = fcntl(fd, F_DUPFD_CLOEXEC, 0), next;
	bool found = false;

	for (int depth = 0; cur >= 0 && depth < MAX_DEPTH; depth++) {
		struct stat up;

		if (fstat(cur, &st) < 0)
			break;
		if (st.st_dev == dcfs.root.dev && st.st_ino == dcfs.root.ino) {
			found = true;
			break;
		}
		next = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(cur);
		cur = next;
		/* The top of the filesystem is its own parent. */
		if (cur >= 0 && fstat(cur, &up) == 0 && up.st_dev == st.st_dev &&
		    up.st_ino == st.st_ino)
			break;
	}
	if (cur >= 0)
		close(cur);
	return found;
}

int handle_reopen(const struct dcfs_inode *inode)
{
	struct backing_fs *fs;
	struct stat st;
	int fd;

	pthread_mutex_lock(&backing.fs_lock);
	fs = fs_of(inode->dev);
	pthread_mutex_unlock(&backing.fs_lock);
	if (!fs || fs->mount_fd < 0 || !inode->handle)
		return -ESTALE;
	fd = open_handle(fs->mount_fd, inode->handle);
	if (fd < 0 && backing.make_room && backing.make_room(-fd))
		fd = open_handle(fs->mount_fd, inode->handle);
	if (fd < 0)
		return fd == -ENOENT ? -ESTALE : fd;
	if (fstat(fd, &st) < 0 || st.st_ino != inode->ino || st.st_dev != inode->dev ||
	    (S_ISDIR(st.st_mode) && !dir_in_tree(fd))) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

void handle_destroy_all(void)
{
	for (size_t i = 0; i < backing.n_filesystems; i++)
		if (backing.filesystems[i].mount_fd >= 0)
			close(backing.filesystems[i].mount_fd);
	backing.n_filesystems = 0;
}
