/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fusefs/core/ -- Identity and resources: the inode type every layer
 * shares, the inode table, node ids, file handles, the O_PATH fd cache,
 * caller credentials and the self-mount guards.  An open file (struct
 * dcfs_file) is io/'s: nothing here sees inside it.
 *
 * Invariants:
 *  - Every FUSE node id is a number from nodeid.c (derived from the
 *    backing inode number), looked up on every request (never an
 *    address); identity is (st_dev, st_ino), never a path, so renames and
 *    hard links cannot confuse the table.  The inode reaches its backing
 *    object through an O_PATH fd, which the fd cache may close when the
 *    inode has a file handle to reopen it from: use it only between
 *    fdcache_pin() and fdcache_unpin().
 *  - An inode lives while nlookup > 0 (the kernel's lookup count); the root
 *    is never freed.
 *  - Internal functions return >= 0 on success or -errno; every low-level
 *    handler ends in exactly one fuse_reply_*().
 */
#ifndef DCFS_LAYER_CORE_H
#define DCFS_LAYER_CORE_H

#include "base/base.h"

/* Default seconds a SIGTERM waits for open files (-o stop_timeout). */
#define DCFS_STOP_TIMEOUT 30

struct file_handle;

struct dcfs_inode {
	struct dcfs_inode *hnext;  /* hash chain, protected by table lock */
	struct dcfs_inode *idnext; /* node id chain (nodeid.c), table lock */
	uint64_t nodeid;	   /* what the kernel knows it by */
	bool ghost;		   /* forgotten by the kernel, kept for export (inode.c) */
	/* io_select.c: whether close(2) on its filesystem does anything */
	_Atomic unsigned char close_kind;
	struct dcfs_inode *gprev, *gnext; /* ghost list, table lock */
	/* O_PATH on the backing object, -1 while evicted (fdcache.c) */
	int fd;
	struct file_handle *handle; /* NULL: the fd is never evicted */
	unsigned int pins;	    /* fd users; fd, pins, lru_*: cache lock */
	bool on_lru;
	struct dcfs_inode *lru_prev, *lru_next;
	dev_t dev;
	ino_t ino;
	mode_t type;	  /* S_IFMT bits; fixed for the inode's life */
	uint32_t gen;	  /* generation told to the kernel (handle.c), fixed */
	uint64_t nlookup; /* protected by table lock */
	/* Bumped by every change of the data through the mount. */
	_Atomic uint64_t data_gen;
	/* What coherence.c last saw of the backing file (0: nothing yet). */
	_Atomic uint64_t seen;
	/* coherence.c: who may cache the data, set-id bits seen */
	_Atomic unsigned int coh_flags;
	/*
	 * io/: opens replied without keep_cache, before which the kernel
	 * drops every page the mount caches of the inode (notify.c).
	 */
	_Atomic unsigned int cache_drops;
	/* handlers/fuse_lock.c: a POSIX lock was taken (closes must FLUSH) */
	_Atomic bool posix_locked;
};

struct dcfs_options {
	char *backing;
	char *mountpoint;
	char *config;
	double attr_timeout;
	double entry_timeout;
	double negative_timeout; /* 0: a missing name is not cached */
	char *cache_mode;
	int nonempty;
	int nodefault_permissions;
	int acl; /* -o acl: the kernel checks POSIX ACLs (FUSE_POSIX_ACL) */
	int max_threads;
	int stop_timeout; /* seconds SIGTERM waits for open files */
	int max_idle_threads;
	int clone_fd;
	int foreground;
	int debug;
	int singlethread;
	int show_help;
	int show_version;
	int has_fsname;
	int has_subtype;
	int allow_other;
	int allow_root;
	int nopassthrough;
	int uring;    /* -o uring: FUSE over io_uring */
	int readonly; /* -o ro (passed on to the kernel too) */
};

struct dcfs_fs {
	struct dcfs_inode root;
	pthread_mutex_t table_lock;
	struct dcfs_inode **buckets;
	size_t nbuckets;
	size_t ninodes;
	struct dcfs_options opt;
	const char *config_origin; /* why this config: config=, the default, none */
	bool privileged;	   /* daemon runs as root: can chown to the caller */
	struct fuse_session *se;
};

extern struct dcfs_fs dcfs;

/* Turns a libc result into the 0-or-negative-errno convention. */
static inline long dcfs_err(long ret)
{
	return ret < 0 ? -errno : ret;
}

struct fdcache_stats {
	size_t cached, peak, budget;
	unsigned long reopens, evictions, reaped;
};

enum {
	CREDS_KEPT,
	CREDS_CALLER
};

enum {
	IO_AS_DAEMON,
	IO_RAISED,
	IO_AS_CALLER
};

struct creds_id {
	uid_t uid;
	gid_t gid;
};

struct creds_saved {
	bool active, resource;
	struct creds_id prev;
};

/* inode.c */
/*
 * The inode of a node id from the kernel.  An id dcfs does not hold maps
 * to a placeholder whose fdcache_pin() fails with ESTALE, so handlers never
 * dereference what the kernel sent.
 */
struct dcfs_inode *inode_of(fuse_ino_t ino);
int inode_table_init(const char *backing);
void inode_table_destroy(void);
void inode_table_probe(void);
int inode_lookup(struct dcfs_inode *parent, const char *name, struct fuse_entry_param *e);
int inode_lookup_again(struct dcfs_inode *inode, struct fuse_entry_param *e);
int inode_lookup_open_fd(int fd, struct fuse_entry_param *e);
int inode_lookup_self(fuse_ino_t id, struct fuse_entry_param *e);

/* idstate.c: node ids saved at a clean stop for the next run */
struct idstate_writer;
struct idstate_writer *idstate_begin(void);
void idstate_put(struct idstate_writer *w, const struct dcfs_inode *inode);
void idstate_end(struct idstate_writer *w, size_t n);
void idstate_load(int (*add)(uint64_t nodeid, ino_t ino, mode_t type, struct file_handle *fh));
void inode_forget(struct dcfs_inode *inode, uint64_t n);
void inode_release_name(int dirfd, const char *name);
int inode_stat(struct dcfs_inode *inode, struct stat *st);
void inode_proc_path(int fd, char buf[64]);
int inode_backing_path(struct dcfs_inode *inode, char *buf, size_t size);

/* fdcache.c */
void fdcache_init(void);
size_t fdcache_budget(void);
int fdcache_pin(struct dcfs_inode *inode);
void fdcache_unpin(struct dcfs_inode *inode);
void fdcache_add(struct dcfs_inode *inode);
bool fdcache_adopt(struct dcfs_inode *inode, int fd);
int fdcache_remove(struct dcfs_inode *inode);
int fdcache_evict(struct dcfs_inode *inode);
bool fdcache_retry(int err);
void fdcache_report(int err, const char *what);
void fdcache_stats(struct fdcache_stats *s);
size_t fdcache_reap_unlinked(void);
int fdcache_start(void);
void fdcache_stop(void);

/* handle.c */
struct file_handle *handle_for(int fd, const struct stat *st);
struct file_handle *handle_copy(int fd, const struct stat *st, const struct file_handle *fh);
bool handle_equal(const struct file_handle *a, const struct file_handle *b);
uint32_t handle_generation(const struct file_handle *fh, ino_t ino);
int handle_reopen(const struct dcfs_inode *inode);
void handle_set_make_room(bool (*fn)(int err));
void handle_destroy_all(void);

/* nodeid.c (called with the inode table lock held) */
int nodeid_init(void);
void nodeid_destroy(void);
void nodeid_assign(struct dcfs_inode *inode);
void nodeid_insert(struct dcfs_inode *inode);
uint64_t nodeid_derived(dev_t dev, ino_t ino);
void nodeid_remove(struct dcfs_inode *inode);
struct dcfs_inode *nodeid_find(uint64_t id);

/* guard.c */
int guard_mountpoint(const char *backing, const char *mountpoint);
void guard_learn_self(const char *mountpoint);
dev_t guard_self_dev(void); /* the mount's device, 0 if unknown */
bool guard_is_self(int fd);
void guard_end_self(const char *mountpoint);

/* creds.c */
int creds_enter(fuse_req_t req);
void creds_leave(int how);
void creds_drop_reserve(void);
int creds_io_begin(fuse_req_t req);
void creds_io_end(int how);
int creds_backing_begin(fuse_req_t req);
void creds_io_capture(struct creds_id *id);
void creds_io_switch(const struct creds_id *id, struct creds_saved *s);
void creds_io_restore(const struct creds_saved *s);

/*
 * umask.c: creates run with the caller's umask (FUSE_CAP_DONT_MASK), so
 * the backing filesystem applies it or a default ACL.  umask_enter()
 * returns the mode to create with; umask_leave() ends the scope (the
 * thread keeps the umask for its next create, umask.c).
 */
struct umask_scope {
	bool active;
};
mode_t umask_enter(fuse_req_t req, mode_t mode, struct umask_scope *s);
void umask_leave(const struct umask_scope *s);

#endif
