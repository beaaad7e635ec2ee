// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE directory handlers.  A directory handle is a DIR stream on a fresh
 * fd of the directory; offsets handed to the kernel are the backing
 * filesystem's telldir cookies, so a listing resumed after entries were
 * added or removed continues where the backing filesystem says, and never
 * repeats or skips unchanged entries.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handlers/handlers.h"

struct dcfs_dir {
	DIR *dp;
	bool plus_ok;	      /* the opener may look names up in it: see can_search() */
	struct dirent *entry; /* read but not yet handed to the kernel */
	off_t offset;
	struct dcfs_dir *prev, *next; /* open handles, for teardown */
};

/* Open directories, so that those the kernel never releases are freed at teardown. */
static struct {
	pthread_mutex_t lock;
	struct dcfs_dir *open_dirs;
} dirs = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void dir_link(struct dcfs_dir *d)
{
	pthread_mutex_lock(&dirs.lock);
	d->next = dirs.open_dirs;
	if (dirs.open_dirs)
		dirs.open_dirs->prev = d;
	dirs.open_dirs = d;
	pthread_mutex_unlock(&dirs.lock);
}

static void dir_free(struct dcfs_dir *d)
{
	pthread_mutex_lock(&dirs.lock);
	if (d->prev)
		d->prev->next = d->next;
	else
		dirs.open_dirs = d->next;
	if (d->next)
		d->next->prev = d->prev;
	pthread_mutex_unlock(&dirs.lock);
	closedir(d->dp);
	free(d);
}

void fuse_dir_release_all(void)
{
	while (dirs.open_dirs)
		dir_free(dirs.open_dirs);
}

static struct dcfs_dir *dir_of(struct fuse_file_info *fi)
{
	return (struct dcfs_dir *)(uintptr_t)fi->fh;
}

/*
 * Reopens the directory through /proc/self/fd of its O_PATH fd, which needs
 * read permission on the directory only, as open(2) of a path to it does.
 * openat(pfd, ".") would resolve "." inside it and so need search
 * permission too: a caller with r-- could not list a directory natively
 * listable (opendir runs as the caller, caller_ops.c).
 */
static int open_dir(struct dcfs_inode *inode)
{
	int pfd = fdcache_pin(inode), fd;
	char path[64];

	if (pfd < 0)
		return pfd;
	inode_proc_path(pfd, path);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && fdcache_retry(errno))
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	fdcache_unpin(inode);
	fdcache_report(fd < 0 ? -fd : 0, "opendir");
	return fd;
}

/*
 * May the opener (whose identity is in force: caller_ops.c) look names up
 * in the directory?  READDIRPLUS runs as the daemon and would hand the
 * kernel attributes and dentries of entries a caller without search
 * permission cannot stat natively; with -o nodefault_permissions the kernel
 * does not check search permission on cached dentries either.  Such
 * listings carry names only, like getdents(2).
 */
static bool can_search(int fd)
{
	return faccessat(fd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) == 0;
}

static void dcfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dcfs_dir *d = calloc(1, sizeof(*d));
	int fd, err = -ENOMEM;

	if (!d)
		goto out_err;
	fd = open_dir(inode_of(ino));
	if (fd < 0) {
		err = fd;
		goto out_free;
	}
	d->plus_ok = can_search(fd);
	d->dp = fdopendir(fd);
	if (!d->dp) {
		err = -errno;
		close(fd);
		goto out_free;
	}
	fi->fh = (uintptr_t)d;
	dir_link(d);
	if (fuse_reply_open(req, fi) == -ENOENT)
		dir_free(d); /* interrupted: the kernel will never release it */
	return;
out_free:
	free(d);
out_err:
	fuse_reply_err(req, -err);
}

static bool is_dot_or_dotdot(const char *name)
{
	return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

static int next_entry(struct dcfs_dir *d, struct dirent **out)
{
	if (!d->entry) {
		errno = 0;
		d->entry = readdir(d->dp);
		if (!d->entry)
			return errno ? -errno : 0;
	}
	*out = d->entry;
	return 1;
}

/*
 * Adds one entry to the reply buffer; returns its size, 0 to skip it (it
 * vanished between readdir and lookup), or a size larger than rem when the
 * buffer is full (and then no lookup count is kept).
 */
static size_t add_entry(fuse_req_t req, fuse_ino_t ino, char *p, size_t rem,
			const struct dirent *de, bool attrs)
{
	struct fuse_entry_param e;
	uint64_t mark;
	size_t size;

	/* An entry with node id 0 gives the kernel the name only. */
	if (!attrs || is_dot_or_dotdot(de->d_name)) {
		memset(&e, 0, sizeof(e));
		e.attr.st_ino = de->d_ino;
		e.attr.st_mode = DTTOIF(de->d_type);
		return fuse_add_direntry_plus(req, p, rem, de->d_name, &e, de->d_off);
	}
	mark = io_entry_mark();
	if (inode_lookup(inode_of(ino), de->d_name, &e) < 0)
		return 0;
	/* With the writes acknowledged so far, as a lookup (fuse_inode.c). */
	if (io_entry_settle(inode_of(e.ino), mark))
		inode_stat(inode_of(e.ino), &e.attr);
	size = fuse_add_direntry_plus(req, p, rem, de->d_name, &e, de->d_off);
	if (size > rem)
		inode_forget(inode_of(e.ino), 1);
	return size;
}

/*
 * READDIRPLUS only: dcfs asks for it on every batch (daemon/main.c, no
 * READDIRPLUS_AUTO), so the kernel never sends a plain READDIR (it would
 * on a kernel older than 3.9, which FUSE passthrough and dcfs do not run
 * on); libfuse answers one with ENOSYS.
 */
static void dcfs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
			     struct fuse_file_info *fi)
{
	struct dcfs_dir *d = dir_of(fi);
	char *buf = malloc(size), *p = buf;
	size_t rem = size;
	struct dirent *de = NULL;
	int err = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	while ((err = next_entry(d, &de)) > 0) {
		size_t n = add_entry(req, ino, p, rem, de, d->plus_ok);

		if (n > rem)
			break;
		p += n;
		rem -= n;
		d->entry = NULL;
		d->offset = de->d_off;
	}
	/* An error after some entries is reported by the next call. */
	if (err < 0 && rem == size)
		fuse_reply_err(req, -err);
	else
		fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void dcfs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dcfs_dir *d = dir_of(fi);

	(void)ino;
	dir_free(d);
	fuse_reply_err(req, 0);
}

static void dcfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	int fd = dirfd(dir_of(fi)->dp);
	int err = (int)dcfs_err(datasync ? fdatasync(fd) : fsync(fd));

	(void)ino;
	fuse_reply_err(req, -err);
}

void fuse_dir_ops(struct fuse_lowlevel_ops *ops)
{
	ops->opendir = dcfs_opendir;
	ops->readdirplus = dcfs_readdirplus;
	ops->releasedir = dcfs_releasedir;
	ops->fsyncdir = dcfs_fsyncdir;
}
