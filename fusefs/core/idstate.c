// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Node ids across a restart.
 *
 * Node ids are derived from inode numbers (nodeid.c), so a new dcfs over
 * the same tree gives every file the id it had.  But a client that holds
 * an export handle (an NFS client of a re-export, an open_by_handle_at()
 * caller) sends only that id, and an inode number alone cannot be opened:
 * open_by_handle_at() of the backing filesystem needs the whole handle.
 * So at a clean stop dcfs saves, for the files of BACKING_DIR's own
 * filesystem it knows (held or ghost), node id, inode number, type and
 * file handle, and the next run over the same directory loads them as
 * ghosts (inode.c): a LOOKUP of "." of such an id reopens the file from
 * its handle, checked like any ghost (a deleted file, or another file
 * under the inode number, is stale; a directory must still be inside the
 * tree).
 *
 * The file is /run/dcfs/ids-MAJ.MIN-INO (the backing directory's device
 * and inode), written by root, 0600, in a directory of root's that nobody
 * else may write; anything else is ignored.  Its header holds the backing
 * directory's identity and handle, and the filesystem's (struct fs_ident),
 * so a file of another tree is never used: device numbers, inode number
 * and handle alone are the same for the root of every ext4 made anew on
 * the same device (inode 2, generation 0), whose ids must not be taken
 * for the old one's.  After a crash nothing is saved: handles of files the
 * new run has not looked up yet are stale, as before.
 */
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/core.h"

#define STATE_DIR "/run/dcfs"
#define MAGIC "dcfsids2"

struct rec {
	uint64_t nodeid;
	uint64_t ino;
	uint32_t type;
	int32_t handle_type;
	uint32_t handle_bytes;
};

/*
 * Which filesystem: its UUID (FS_IOC_GETFSUUID, Linux 6.5; ext4, xfs,
 * btrfs...), its statfs f_fsid (from the UUID on ext4 and btrfs, from the
 * device on xfs) and the backing directory's birth time (a directory made
 * anew, or mkfs's root, gets another).  What a filesystem cannot tell is 0.
 */
struct fs_ident {
	uint64_t fsid;
	uint8_t uuid_len;
	uint8_t uuid[16];
	uint8_t pad[7];
	int64_t btime_sec;
	uint32_t btime_nsec;
	uint32_t pad2;
};

struct head {
	char magic[8];
	uint64_t dev;
	uint64_t ino;
	struct fs_ident fs;
	int32_t handle_type;
	uint32_t handle_bytes;
};

#ifndef FS_IOC_GETFSUUID
struct fsuuid2 {
	uint8_t len;
	uint8_t uuid[16];
};
#define FS_IOC_GETFSUUID _IOR(0x15, 0, struct fsuuid2)
#endif

static void fs_ident_of(int dirfd, struct fs_ident *id)
{
	struct fsuuid2 u = { 0 };
	struct statx stx;
	struct statfs sf;
	int fd;

	memset(id, 0, sizeof(*id));
	if (fstatfs(dirfd, &sf) == 0)
		memcpy(&id->fsid, &sf.f_fsid, sizeof(id->fsid));
	/* ioctl() needs more than the O_PATH fd */
	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		if (ioctl(fd, FS_IOC_GETFSUUID, &u) == 0 && u.len <= sizeof(u.uuid)) {
			id->uuid_len = u.len;
			memcpy(id->uuid, u.uuid, u.len);
		}
		close(fd);
	}
	if (statx(dirfd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_BTIME, &stx) == 0 &&
	    (stx.stx_mask & STATX_BTIME)) {
		id->btime_sec = stx.stx_btime.tv_sec;
		id->btime_nsec = stx.stx_btime.tv_nsec;
	}
}

static bool safe(int fd, mode_t type)
{
	struct stat st;

	return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type && st.st_uid == 0 &&
	       !(st.st_mode & 022);
}

static int state_dir(bool create)
{
	int fd;

	if (create && mkdir(STATE_DIR, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = open(STATE_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!safe(fd, S_IFDIR)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

static void state_name(char *buf, size_t size, const char *suffix)
{
	snprintf(buf, size, "ids-%u.%u-%llu%s", major(dcfs.root.dev), minor(dcfs.root.dev),
		 (unsigned long long)dcfs.root.ino, suffix);
}

/* The backing directory's handle, NULL without handles there. */
static struct file_handle *root_handle(void)
{
	struct stat st;

	if (fstat(dcfs.root.fd, &st) < 0)
		return NULL;
	return handle_for(dcfs.root.fd, &st);
}

struct idstate_writer {
	FILE *f;
	int dirfd;
	char tmp[64];
	bool failed;
};

struct idstate_writer *idstate_begin(void)
{
	struct file_handle *rh = root_handle();
	struct idstate_writer *w;
	struct head h = { .magic = MAGIC };
	int fd;

	if (!rh || !dcfs.privileged)
		goto fail_handle;
	w = calloc(1, sizeof(*w));
	if (!w)
		goto fail_handle;
	w->dirfd = state_dir(true);
	if (w->dirfd < 0)
		goto fail_w;
	snprintf(w->tmp, sizeof(w->tmp), ".tmp-%d", (int)getpid());
	unlinkat(w->dirfd, w->tmp, 0);
	fd = openat(w->dirfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail_dir;
	w->f = fdopen(fd, "w");
	if (!w->f) {
		close(fd);
		goto fail_dir;
	}
	h.dev = dcfs.root.dev;
	h.ino = dcfs.root.ino;
	fs_ident_of(dcfs.root.fd, &h.fs);
	h.handle_type = rh->handle_type;
	h.handle_bytes = rh->handle_bytes;
	if (fwrite(&h, sizeof(h), 1, w->f) != 1 ||
	    fwrite(rh->f_handle, rh->handle_bytes, 1, w->f) != 1)
		w->failed = true;
	free(rh);
	return w;
fail_dir:
	close(w->dirfd);
fail_w:
	free(w);
fail_handle:
	free(rh);
	return NULL;
}

void idstate_put(struct idstate_writer *w, const struct dcfs_inode *inode)
{
	struct rec r = {
		.nodeid = inode->nodeid,
		.ino = inode->ino,
		.type = inode->type,
		.handle_type = inode->handle->handle_type,
		.handle_bytes = inode->handle->handle_bytes,
	};

	if (fwrite(&r, sizeof(r), 1, w->f) != 1 ||
	    fwrite(inode->handle->f_handle, r.handle_bytes, 1, w->f) != 1)
		w->failed = true;
}

void idstate_end(struct idstate_writer *w, size_t n)
{
	char name[64];

	state_name(name, sizeof(name), "");
	if (fclose(w->f) != 0)
		w->failed = true;
	if (w->failed || renameat(w->dirfd, w->tmp, w->dirfd, name) < 0) {
		log_warn("could not save the node ids for the next run in %s/%s\n", STATE_DIR,
			 name);
		unlinkat(w->dirfd, w->tmp, 0);
	} else {
		log_info("saved %zu node ids for the next run in %s/%s\n", n, STATE_DIR, name);
	}
	close(w->dirfd);
	free(w);
}

static struct file_handle *read_handle(FILE *f, int32_t type, uint32_t bytes)
{
	struct file_handle *fh;

	if (bytes == 0 || bytes > MAX_HANDLE_SZ)
		return NULL;
	fh = malloc(sizeof(*fh) + bytes);
	if (!fh)
		return NULL;
	fh->handle_type = type;
	fh->handle_bytes = bytes;
	if (fread(fh->f_handle, bytes, 1, f) != 1) {
		free(fh);
		return NULL;
	}
	return fh;
}

/* Is the file's header of this backing directory on this filesystem? */
static bool same_tree(FILE *f)
{
	struct file_handle *rh = root_handle(), *saved;
	struct fs_ident now;
	struct head h;
	bool same = false;

	if (!rh)
		return false;
	fs_ident_of(dcfs.root.fd, &now);
	if (fread(&h, sizeof(h), 1, f) == 1 && memcmp(h.magic, MAGIC, sizeof(h.magic)) == 0 &&
	    h.dev == (uint64_t)dcfs.root.dev && h.ino == (uint64_t)dcfs.root.ino) {
		saved = read_handle(f, h.handle_type, h.handle_bytes);
		same = saved && handle_equal(saved, rh) && memcmp(&h.fs, &now, sizeof(now)) == 0;
		if (saved && handle_equal(saved, rh) && !same)
			log_info(
				"not loading the node ids saved in %s: they are of another filesystem at the same place (made anew?)\n",
				STATE_DIR);
		free(saved);
	}
	free(rh);
	return same;
}

/*
 * add is inode.c's inode_add_saved(), handed in so that this file does
 * not call back into the inode table (layers, fusefs/README.md).
 */
void idstate_load(int (*add)(uint64_t nodeid, ino_t ino, mode_t type, struct file_handle *fh))
{
	char name[64];
	struct rec r;
	size_t n = 0;
	FILE *f;
	int dirfd, fd;

	if (!dcfs.privileged)
		return;
	dirfd = state_dir(false);
	if (dirfd < 0)
		return;
	state_name(name, sizeof(name), "");
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dirfd);
	if (fd < 0)
		return;
	if (!safe(fd, S_IFREG) || !(f = fdopen(fd, "r"))) {
		log_warn("ignoring %s/%s: not a file of root's that only root may write\n",
			 STATE_DIR, name);
		close(fd);
		return;
	}
	if (same_tree(f)) {
		while (fread(&r, sizeof(r), 1, f) == 1) {
			struct file_handle *fh = read_handle(f, r.handle_type, r.handle_bytes);

			if (!fh)
				break;
			n += add(r.nodeid, (ino_t)r.ino, (mode_t)r.type, fh) == 0;
		}
		log_info("loaded %zu node ids of the previous run from %s/%s\n", n, STATE_DIR,
			 name);
	}
	fclose(f);
}
