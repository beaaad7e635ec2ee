// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The inode table: maps backing (st_dev, st_ino) to a struct dcfs_inode
 * holding an O_PATH fd, and keeps the kernel's lookup count.
 *
 * Why O_PATH fds rather than paths: a path is not an identity.  Renames in
 * the backing tree or through the mount, and hard links, leave the fd
 * pointing at the right object, and every operation is done with *at()
 * calls relative to it, so nothing is ever resolved through a symlink on
 * the caller's behalf.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <linux/openat2.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"

#define TABLE_MIN_BUCKETS 1024

/*
 * Ghosts: inodes the kernel has forgotten, kept (without an fd, with their
 * file handle) so that a node id the kernel encoded in an NFS file handle
 * can be looked up again ("." of that id) while the export lives.  At most
 * MAX_GHOSTS are kept, the oldest let go first.
 */
#define MAX_GHOSTS 65536

static struct {
	/* Inodes taken out of the table while the kernel still holds them. */
	struct dcfs_inode *detached;
	struct dcfs_inode *ghost_head, *ghost_tail;
	size_t n_ghosts;
	/* Mount id of the backing root, -1 without handles there (lookup_held()). */
	int root_mnt_id;
	/* The mount came up (init): only then are the ids worth saving. */
	bool served;
	/* What a node id dcfs does not hold maps to: pinning it fails (ESTALE). */
	struct dcfs_inode dead_inode;
} table = { .root_mnt_id = -1, .dead_inode = { .fd = -1 } };

static size_t bucket_of(dev_t dev, ino_t ino, size_t nbuckets)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev;

	return (size_t)(h ^ (h >> 29)) & (nbuckets - 1);
}

static void table_grow(void)
{
	size_t n = dcfs.nbuckets * 2;
	struct dcfs_inode **nb = calloc(n, sizeof(*nb));

	/* Out of memory only costs longer chains; keep the old table. */
	if (!nb)
		return;
	for (size_t i = 0; i < dcfs.nbuckets; i++) {
		struct dcfs_inode *p = dcfs.buckets[i], *next;

		for (; p; p = next) {
			size_t b = bucket_of(p->dev, p->ino, n);

			next = p->hnext;
			p->hnext = nb[b];
			nb[b] = p;
		}
	}
	free(dcfs.buckets);
	dcfs.buckets = nb;
	dcfs.nbuckets = n;
}

static struct dcfs_inode *table_find(dev_t dev, ino_t ino)
{
	struct dcfs_inode *p;

	if (dev == dcfs.root.dev && ino == dcfs.root.ino)
		return &dcfs.root;
	p = dcfs.buckets[bucket_of(dev, ino, dcfs.nbuckets)];
	for (; p; p = p->hnext)
		if (p->dev == dev && p->ino == ino)
			return p;
	return NULL;
}

static void table_insert(struct dcfs_inode *inode)
{
	size_t b;

	if (dcfs.ninodes >= dcfs.nbuckets)
		table_grow();
	b = bucket_of(inode->dev, inode->ino, dcfs.nbuckets);
	inode->hnext = dcfs.buckets[b];
	dcfs.buckets[b] = inode;
	dcfs.ninodes++;
}

static bool chain_remove(struct dcfs_inode **pp, struct dcfs_inode *inode)
{
	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == inode) {
			*pp = inode->hnext;
			return true;
		}
	}
	return false;
}

/* Returns true if the inode was in the table, false if detached. */
static bool table_remove(struct dcfs_inode *inode)
{
	size_t b = bucket_of(inode->dev, inode->ino, dcfs.nbuckets);

	if (chain_remove(&dcfs.buckets[b], inode)) {
		dcfs.ninodes--;
		return true;
	}
	chain_remove(&table.detached, inode);
	return false;
}

static void ghost_unlink(struct dcfs_inode *inode)
{
	if (inode->gprev)
		inode->gprev->gnext = inode->gnext;
	else
		table.ghost_head = inode->gnext;
	if (inode->gnext)
		inode->gnext->gprev = inode->gprev;
	else
		table.ghost_tail = inode->gprev;
	inode->gprev = inode->gnext = NULL;
	inode->ghost = false;
	table.n_ghosts--;
}

static void ghost_append(struct dcfs_inode *inode)
{
	inode->ghost = true;
	inode->gprev = table.ghost_tail;
	inode->gnext = NULL;
	if (table.ghost_tail)
		table.ghost_tail->gnext = inode;
	else
		table.ghost_head = inode;
	table.ghost_tail = inode;
	table.n_ghosts++;
}

struct dcfs_inode *inode_of(fuse_ino_t ino)
{
	struct dcfs_inode *inode;

	if (ino == FUSE_ROOT_ID)
		return &dcfs.root;
	pthread_mutex_lock(&dcfs.table_lock);
	inode = nodeid_find(ino);
	if (!inode || inode->ghost)
		inode = &table.dead_inode;
	pthread_mutex_unlock(&dcfs.table_lock);
	return inode;
}

static void inode_free(struct dcfs_inode *inode)
{
	int fd = fdcache_remove(inode);

	if (fd >= 0)
		close(fd);
	free(inode->handle);
	free(inode);
}

int inode_table_init(const char *backing)
{
	struct stat st;
	int fd;

	fd = open(backing, O_PATH | O_DIRECTORY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -errno;
	}
	dcfs.root.fd = fd;
	dcfs.root.dev = st.st_dev;
	dcfs.root.ino = st.st_ino;
	dcfs.root.type = S_IFDIR;
	dcfs.root.nlookup = 2;
	dcfs.root.nodeid = FUSE_ROOT_ID;
	dcfs.nbuckets = TABLE_MIN_BUCKETS;
	dcfs.buckets = calloc(dcfs.nbuckets, sizeof(*dcfs.buckets));
	if (!dcfs.buckets || nodeid_init() < 0) {
		free(dcfs.buckets);
		dcfs.buckets = NULL;
		close(fd);
		return -ENOMEM;
	}
	pthread_mutex_init(&dcfs.table_lock, NULL);
	fdcache_init();
	return 0;
}

static int inode_add_saved(uint64_t nodeid, ino_t ino, mode_t type, struct file_handle *fh);

/* Decides (and logs) the identity mode of the backing filesystem. */
void inode_table_probe(void)
{
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE_SZ];
	} h = { .fh.handle_bytes = MAX_HANDLE_SZ };
	struct stat st;
	int id;

	if (fstat(dcfs.root.fd, &st) == 0)
		free(handle_for(dcfs.root.fd, &st));
	if (name_to_handle_at(dcfs.root.fd, "", &h.fh, &id, AT_EMPTY_PATH) == 0)
		table.root_mnt_id = id;
	table.served = true;
	idstate_load(inode_add_saved);
}

static bool saveable(const struct dcfs_inode *p)
{
	return p->handle && p->dev == dcfs.root.dev && p->nodeid == nodeid_derived(p->dev, p->ino);
}

/*
 * Writes what the next run needs to reopen the ids (idstate.c): at most
 * MAX_GHOSTS, as many as it keeps, oldest first; the inodes the kernel
 * held at the stop count as the newest.
 */
static void inode_table_save(void)
{
	struct idstate_writer *w;
	size_t live = 0, ghosts = 0, skip, n = 0;

	if (!table.served || !(w = idstate_begin()))
		return;
	for (size_t i = 0; i < dcfs.nbuckets; i++)
		for (struct dcfs_inode *p = dcfs.buckets[i]; p; p = p->hnext)
			if (saveable(p))
				*(p->ghost ? &ghosts : &live) += 1;
	skip = live >= MAX_GHOSTS
		       ? ghosts
		       : ghosts - (MAX_GHOSTS - live < ghosts ? MAX_GHOSTS - live : ghosts);
	for (struct dcfs_inode *g = table.ghost_head; g; g = g->gnext) {
		if (!saveable(g))
			continue;
		if (skip) {
			skip--;
			continue;
		}
		idstate_put(w, g);
		n++;
	}
	for (size_t i = 0; i < dcfs.nbuckets && n < MAX_GHOSTS; i++)
		for (struct dcfs_inode *p = dcfs.buckets[i]; p && n < MAX_GHOSTS; p = p->hnext)
			if (!p->ghost && saveable(p)) {
				idstate_put(w, p);
				n++;
			}
	idstate_end(w, n);
}

static struct dcfs_inode *ghosts_trim(void);

static void free_list(struct dcfs_inode *dead)
{
	while (dead) {
		struct dcfs_inode *next = dead->hnext;

		inode_free(dead);
		dead = next;
	}
}

/*
 * A ghost saved by the previous run over this tree: it gets the id it had,
 * which is the one derived from its inode number, unless a lookup of this
 * run took the inode number already.  Takes fh.  0 or -EEXIST.
 */
static int inode_add_saved(uint64_t nodeid, ino_t ino, mode_t type, struct file_handle *fh)
{
	struct dcfs_inode *inode, *dead;

	pthread_mutex_lock(&dcfs.table_lock);
	if (nodeid != nodeid_derived(dcfs.root.dev, ino) || nodeid_find(nodeid) ||
	    table_find(dcfs.root.dev, ino) || !(inode = calloc(1, sizeof(*inode)))) {
		pthread_mutex_unlock(&dcfs.table_lock);
		free(fh);
		return -EEXIST;
	}
	inode->fd = -1;
	inode->handle = fh;
	inode->dev = dcfs.root.dev;
	inode->ino = ino;
	inode->type = type & S_IFMT;
	inode->gen = handle_generation(fh, ino);
	inode->nodeid = nodeid;
	table_insert(inode);
	nodeid_insert(inode);
	ghost_append(inode);
	dead = ghosts_trim();
	pthread_mutex_unlock(&dcfs.table_lock);
	free_list(dead);
	return 0;
}

void inode_table_destroy(void)
{
	inode_table_save();
	for (size_t i = 0; i < dcfs.nbuckets; i++) {
		struct dcfs_inode *p = dcfs.buckets[i], *next;

		for (; p; p = next) {
			next = p->hnext;
			inode_free(p);
		}
	}
	free(dcfs.buckets);
	dcfs.buckets = NULL;
	while (table.detached) {
		struct dcfs_inode *next = table.detached->hnext;

		inode_free(table.detached);
		table.detached = next;
	}
	table.ghost_head = table.ghost_tail = NULL;
	table.n_ghosts = 0;
	nodeid_destroy();
	handle_destroy_all();
	if (dcfs.root.fd >= 0)
		close(dcfs.root.fd);
	dcfs.root.fd = -1;
}

void inode_proc_path(int fd, char buf[64])
{
	snprintf(buf, 64, "/proc/self/fd/%d", fd);
}

int inode_stat(struct dcfs_inode *inode, struct stat *st)
{
	int fd = fdcache_pin(inode), err;

	if (fd < 0)
		return fd;
	err = (int)dcfs_err(fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
	fdcache_unpin(inode);
	return err;
}

/*
 * An inode number is reused once its file is gone.  If the kernel still
 * holds the old inode (an open, unlinked file, a directory removed behind
 * dcfs's back), the entry found under the number is a different object:
 * take it out of the table (it lives on until forgotten) so the new file
 * gets an entry of its own.  Answering the old node id with the new
 * object's attributes would be worse than a miss: the kernel marks an
 * inode whose type changes bad, and every later use of it fails with EIO.
 * A different type always tells; with file handles the generation in the
 * handle does; without, the old fd's link count does (unless the new
 * object is unlinked already, when there is nothing to compare).
 */
static bool is_stale(struct dcfs_inode *inode, const struct stat *st, const struct file_handle *fh)
{
	struct stat old;

	if (inode == &dcfs.root)
		return false;
	if (inode->type != (st->st_mode & S_IFMT))
		return true;
	if (inode->handle && fh)
		return !handle_equal(inode->handle, fh);
	if (inode->handle || st->st_nlink == 0)
		return false;
	return fstat(inode->fd, &old) == 0 && old.st_nlink == 0;
}

/*
 * Returns the table's inode for (st->st_dev, st->st_ino) with its lookup
 * count raised by one, taking ownership of fd and fh (the fd is cached or
 * closed, the handle kept or freed).
 */
static struct dcfs_inode *inode_get(int fd, const struct stat *st, struct file_handle *fh)
{
	struct dcfs_inode *inode;

	pthread_mutex_lock(&dcfs.table_lock);
	inode = table_find(st->st_dev, st->st_ino);
	if (inode && is_stale(inode, st, fh)) {
		table_remove(inode);
		if (inode->ghost) {
			/* Nobody holds it: let it go for good. */
			ghost_unlink(inode);
			nodeid_remove(inode);
			free(inode->handle);
			free(inode);
		} else {
			inode->hnext = table.detached;
			table.detached = inode;
		}
		inode = NULL;
	}
	if (inode) {
		if (inode->ghost)
			ghost_unlink(inode);
		inode->nlookup++;
		/* An evicted inode takes the fd the lookup just opened. */
		if (inode == &dcfs.root || !fdcache_adopt(inode, fd))
			close(fd);
		pthread_mutex_unlock(&dcfs.table_lock);
		free(fh);
		return inode;
	}
	inode = calloc(1, sizeof(*inode));
	if (inode) {
		inode->fd = fd;
		inode->handle = fh;
		inode->dev = st->st_dev;
		inode->ino = st->st_ino;
		inode->type = st->st_mode & S_IFMT;
		inode->gen = fh ? handle_generation(fh, st->st_ino) : 0;
		inode->nlookup = 1;
		table_insert(inode);
		nodeid_assign(inode);
		fdcache_add(inode);
	}
	pthread_mutex_unlock(&dcfs.table_lock);
	if (!inode) {
		close(fd);
		free(fh);
	}
	return inode;
}

/* What an entry reply says besides the attributes. */
static void entry_fill(struct fuse_entry_param *e, const struct dcfs_inode *inode)
{
	e->ino = inode->nodeid;
	e->generation = inode->gen;
	e->attr_timeout = dcfs.opt.attr_timeout;
	e->entry_timeout = dcfs.opt.entry_timeout;
}

static bool is_dot_dot_of_root(struct dcfs_inode *parent, const char *name)
{
	return parent == &dcfs.root && strcmp(name, "..") == 0;
}

/*
 * Opens name in dir as an O_PATH fd without following a symlink.  The
 * common case does not cross a mount point (RESOLVE_NO_XDEV); one that does
 * is checked not to lead into dcfs's own mount.
 */
static int open_entry(int dirfd, const char *name)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_NO_XDEV,
	};
	int fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));

	if (fd < 0 && fdcache_retry(errno))
		fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	if (fd >= 0)
		return fd;
	if (errno != EXDEV && errno != ENOSYS)
		return -errno;
	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (guard_is_self(fd)) {
		close(fd);
		return -ELOOP;
	}
	return fd;
}

/*
 * What a name held just before it was opened: its handle and attributes,
 * taken by name (lookup_held()).  valid only if both were taken and the
 * handle is of the backing root's mount.
 */
struct name_id {
	bool valid;
	struct stat st;
	struct {
		struct file_handle fh;
		unsigned char bytes[MAX_HANDLE_SZ];
	} h;
};

/*
 * The handle of the object fd: the name's, if fd is the object the name
 * held when its handle was taken (same st_dev and st_ino: the name was
 * not replaced in between), which saves a name_to_handle_at() per new
 * entry.  Should the inode number have been reused in that instant, the
 * handle carries the old generation, and a reopen by it fails (ESTALE):
 * never another object.
 */
static struct file_handle *handle_of(int fd, const struct stat *st, const struct name_id *known)
{
	if (known && known->valid && known->st.st_dev == st->st_dev &&
	    known->st.st_ino == st->st_ino)
		return handle_copy(fd, st, &known->h.fh);
	return handle_for(fd, st);
}

/*
 * The entry for the object fd (an O_PATH fd, owned by the callee); known:
 * what its name held just before, or NULL.
 */
static int entry_from_fd(int fd, struct fuse_entry_param *e, const struct name_id *known)
{
	struct dcfs_inode *inode;

	memset(e, 0, sizeof(*e));
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	inode = inode_get(fd, &e->attr, handle_of(fd, &e->attr, known));
	if (!inode)
		return -ENOMEM;
	entry_fill(e, inode);
	return 0;
}

static bool is_dot_or_dotdot(const char *name)
{
	return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/*
 * LOOKUP of a name whose object dcfs already holds (a stat or unlink
 * after the entry timeout, a listing again): answered without opening an
 * O_PATH fd, which would only replace one the fd cache may have evicted.
 * The name's handle comes first: name_to_handle_at() follows no trailing
 * symlink and, on a mount point, only encodes the mounted root without
 * asking its filesystem, so a name on another mount than the backing
 * root's is left to the full path (open_entry() and its checks).  The
 * attributes are then read by name; they are answered here only if they
 * belong to a held inode whose handle is the one just taken (the name was
 * not replaced in between).  Returns 0, -ENOENT, or 1: take the full path,
 * with what the name held in *nid if it got that far.
 */
static int lookup_held(int pfd, const char *name, struct fuse_entry_param *e, struct name_id *nid)
{
	struct dcfs_inode *inode;
	int id;

	nid->valid = false;
	nid->h.fh.handle_bytes = MAX_HANDLE_SZ;
	if (table.root_mnt_id < 0 || is_dot_or_dotdot(name))
		return 1;
	if (name_to_handle_at(pfd, name, &nid->h.fh, &id, 0) < 0)
		return errno == ENOENT ? -ENOENT : 1;
	if (id != table.root_mnt_id)
		return 1;
	memset(e, 0, sizeof(*e));
	if (fstatat(pfd, name, &e->attr, AT_SYMLINK_NOFOLLOW) < 0)
		return 1;
	nid->st = e->attr;
	nid->valid = true;
	pthread_mutex_lock(&dcfs.table_lock);
	inode = table_find(e->attr.st_dev, e->attr.st_ino);
	if (!inode || inode == &dcfs.root || inode->ghost || !inode->handle ||
	    !handle_equal(inode->handle, &nid->h.fh)) {
		pthread_mutex_unlock(&dcfs.table_lock);
		return 1;
	}
	inode->nlookup++;
	entry_fill(e, inode);
	pthread_mutex_unlock(&dcfs.table_lock);
	return 0;
}

int inode_lookup(struct dcfs_inode *parent, const char *name, struct fuse_entry_param *e)
{
	struct name_id nid;
	int fd, pfd;

	/* The mount root is a ceiling: ".." must not reach the backing dir's parent. */
	if (is_dot_dot_of_root(parent, name))
		name = ".";
	pfd = fdcache_pin(parent);
	if (pfd < 0)
		return pfd;
	fd = lookup_held(pfd, name, e, &nid);
	if (fd <= 0) {
		fdcache_unpin(parent);
		return fd;
	}
	fd = open_entry(pfd, name);
	fdcache_unpin(parent);
	if (fd < 0)
		return fd;
	return entry_from_fd(fd, e, &nid);
}

int inode_lookup_again(struct dcfs_inode *inode, struct fuse_entry_param *e)
{
	int fd = fdcache_pin(inode), dup;

	if (fd < 0)
		return fd;
	dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup < 0 && fdcache_retry(errno))
		dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	fdcache_unpin(inode);
	if (dup < 0)
		return -errno;
	return entry_from_fd(dup, e, NULL);
}

/*
 * The entry for the object an open fd refers to: what openat(O_CREAT)
 * created, never whatever the name holds by now.
 */
int inode_lookup_open_fd(int fd, struct fuse_entry_param *e)
{
	char path[64];
	int pfd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0 && fdcache_retry(errno))
		pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -errno;
	return entry_from_fd(pfd, e, NULL);
}

/* The oldest ghosts beyond MAX_GHOSTS are let go (table lock held). */
static struct dcfs_inode *ghosts_trim(void)
{
	struct dcfs_inode *freed = NULL;

	while (table.n_ghosts > MAX_GHOSTS) {
		struct dcfs_inode *g = table.ghost_head;

		ghost_unlink(g);
		table_remove(g);
		nodeid_remove(g);
		g->hnext = freed;
		freed = g;
	}
	return freed;
}

void inode_forget(struct dcfs_inode *inode, uint64_t n)
{
	struct dcfs_inode *dead = NULL;
	int fd = -1;

	if (inode == &dcfs.root || inode == &table.dead_inode)
		return;
	pthread_mutex_lock(&dcfs.table_lock);
	if (n > inode->nlookup) {
		log_err("BUG: forget %llu > lookup count %llu\n", (unsigned long long)n,
			(unsigned long long)inode->nlookup);
		n = inode->nlookup;
	}
	inode->nlookup -= n;
	if (inode->nlookup == 0) {
		if (table_remove(inode) && inode->handle) {
			/* Back in the table as a ghost, without its fd. */
			table_insert(inode);
			fd = fdcache_remove(inode);
			/* Without the fd its superblock may go, and st_dev with it. */
			atomic_store(&inode->close_kind, 0);
			ghost_append(inode);
			dead = ghosts_trim();
		} else {
			nodeid_remove(inode);
			inode->hnext = NULL;
			dead = inode;
		}
	}
	pthread_mutex_unlock(&dcfs.table_lock);
	if (fd >= 0)
		close(fd);
	free_list(dead);
}

/*
 * name in dirfd is about to go (unlink, or a rename over it).  An NFS
 * client does not remove a name whose dentry someone still references (a
 * cached O_PATH fd does) but renames it to .nfsXXXX until the reference
 * goes ("silly rename"): the directory stays non-empty, and rm -r of a
 * tree just written through dcfs failed with ENOTEMPTY.  So on NFS the
 * victim's cached fd is closed first when no request is using it (its
 * handle reopens it if it is asked for again).  A file that is open keeps
 * its .nfsXXXX, as it does natively.
 */
void inode_release_name(int dirfd, const char *name)
{
	struct dcfs_inode *victim;
	struct statfs sf;
	struct stat st;
	int fd = -1;

	if (fstatfs(dirfd, &sf) < 0 || sf.f_type != NFS_SUPER_MAGIC)
		return;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
		return;
	pthread_mutex_lock(&dcfs.table_lock);
	victim = table_find(st.st_dev, st.st_ino);
	if (victim && victim != &dcfs.root && !victim->ghost)
		fd = fdcache_evict(victim);
	pthread_mutex_unlock(&dcfs.table_lock);
	if (fd >= 0)
		close(fd);
}

/*
 * LOOKUP of "." in node id id: what the kernel sends to decode an export
 * handle (NFS, open_by_handle_at() on the mount) of an inode it does not
 * have in core.  A ghost (also one saved by the previous run, idstate.c)
 * comes back under the same id, as the kernel requires, if its handle
 * still opens the object inside the tree; an inode dcfs holds is looked
 * up again; any other id is stale.  The kernel then compares the
 * generation with the handle's, so another file that got the inode
 * number since is stale too.
 */
int inode_lookup_self(fuse_ino_t id, struct fuse_entry_param *e)
{
	struct dcfs_inode *inode;
	int fd, err = -ESTALE;

	if (id == FUSE_ROOT_ID)
		return inode_lookup_again(&dcfs.root, e);
	pthread_mutex_lock(&dcfs.table_lock);
	inode = nodeid_find(id);
	if (inode && !inode->ghost) {
		/* Held across the unlock: a FORGET may be in flight. */
		inode->nlookup++;
		pthread_mutex_unlock(&dcfs.table_lock);
		err = inode_lookup_again(inode, e);
		inode_forget(inode, 1);
		return err;
	}
	if (!inode)
		goto out;
	fd = handle_reopen(inode);
	if (fd < 0) {
		err = fd;
		goto out;
	}
	memset(e, 0, sizeof(*e));
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		err = -errno;
		close(fd);
		goto out;
	}
	ghost_unlink(inode);
	inode->nlookup = 1;
	if (!fdcache_adopt(inode, fd))
		close(fd);
	entry_fill(e, inode);
	err = 0;
out:
	pthread_mutex_unlock(&dcfs.table_lock);
	return err;
}

/*
 * The path of inode below the backing directory ("/" for the root), as
 * the kernel's /proc link of its O_PATH fd names it now: for the rules of
 * dcfs.conf and the reports, never to act on.  0 or -errno (-ENOENT: not
 * below the backing directory any more).
 */
int inode_backing_path(struct dcfs_inode *inode, char *buf, size_t size)
{
	size_t blen = strlen(dcfs.opt.backing);
	char link[64];
	int fd = fdcache_pin(inode), err;
	ssize_t n;

	if (fd < 0)
		return fd;
	inode_proc_path(fd, link);
	n = readlink(link, buf, size - 1);
	err = n < 0 ? -errno : 0;
	fdcache_unpin(inode);
	if (err)
		return err;
	if ((size_t)n == size - 1)
		return -ENAMETOOLONG;
	buf[n] = '\0';
	if (blen == 1) /* backing is "/" */
		return 0;
	if (strncmp(buf, dcfs.opt.backing, blen) != 0 || (buf[blen] != '/' && buf[blen] != '\0'))
		return -ENOENT;
	memmove(buf, buf + blen, (size_t)n - blen + 1);
	if (!buf[0])
		strcpy(buf, "/");
	return 0;
}
