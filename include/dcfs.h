/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dcfs — shared types of the daemon.
 *
 * Invariants:
 *  - Every FUSE node id is the address of a struct dcfs_inode that holds an
 *    O_PATH fd on the backing object; identity is (st_dev, st_ino), never a
 *    path, so renames and hard links cannot confuse the table.
 *  - An inode lives while nlookup > 0 (the kernel's lookup count); the root
 *    is never freed.
 *  - Internal functions return >= 0 on success or -errno; every low-level
 *    handler ends in exactly one fuse_reply_*().
 */
#ifndef DCFS_H
#define DCFS_H

#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define DCFS_VERSION "0.1.0"

struct dcfs_inode {
	struct dcfs_inode *hnext; /* hash chain, protected by table lock */
	int fd;			  /* O_PATH|O_NOFOLLOW on the backing object */
	dev_t dev;
	ino_t ino;
	mode_t type; /* S_IFMT bits; fixed for the inode's life */
	uint64_t nlookup; /* protected by table lock */
};

struct dcfs_file;

/*
 * An I/O strategy, chosen once when a file is opened and kept in the
 * handle.  read() must reply to the request; write() returns the number of
 * bytes written or -errno.
 */
struct dcfs_io {
	const char *name;
	void (*read)(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off);
	ssize_t (*write)(struct dcfs_file *f, struct fuse_bufvec *in, off_t off);
	void (*release)(struct dcfs_file *f);
};

struct dcfs_file {
	int fd; /* backing fd opened with the caller's flags */
	int flags;
	struct dcfs_inode *inode;
	const struct dcfs_io *io;
	void *io_state; /* strategy-private */
};

struct dcfs_options {
	char *backing;
	char *mountpoint;
	char *config;
	double attr_timeout;
	double entry_timeout;
	int nonempty;
	int nodefault_permissions;
	int max_threads;
	int clone_fd;
	int foreground;
	int debug;
	int singlethread;
	int show_help;
	int show_version;
	int has_fsname;
	int has_subtype;
};

struct dcfs_fs {
	struct dcfs_inode root;
	pthread_mutex_t table_lock;
	struct dcfs_inode **buckets;
	size_t nbuckets;
	size_t ninodes;
	struct dcfs_options opt;
	bool privileged; /* daemon runs as root: can chown to the caller */
	struct fuse_session *se;
};

extern struct dcfs_fs dcfs;

/* Turns a libc result into the 0-or-negative-errno convention. */
static inline long dcfs_err(long ret)
{
	return ret < 0 ? -errno : ret;
}

static inline struct dcfs_inode *dcfs_inode_of(fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &dcfs.root;
	return (struct dcfs_inode *)(uintptr_t)ino;
}

static inline struct dcfs_file *dcfs_file_of(struct fuse_file_info *fi)
{
	return (struct dcfs_file *)(uintptr_t)fi->fh;
}

/* log.c */
void dcfs_log_init(bool foreground, int debug);
void dcfs_log(enum fuse_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define log_err(...) dcfs_log(FUSE_LOG_ERR, __VA_ARGS__)
#define log_warn(...) dcfs_log(FUSE_LOG_WARNING, __VA_ARGS__)
#define log_info(...) dcfs_log(FUSE_LOG_INFO, __VA_ARGS__)
#define log_debug(...) dcfs_log(FUSE_LOG_DEBUG, __VA_ARGS__)

/* inode.c */
int inode_table_init(const char *backing);
void inode_table_destroy(void);
int inode_lookup(struct dcfs_inode *parent, const char *name,
		 struct fuse_entry_param *e);
void inode_forget(struct dcfs_inode *inode, uint64_t n);
int inode_stat(struct dcfs_inode *inode, struct stat *st);
void inode_proc_path(const struct dcfs_inode *inode, char buf[64]);

/* fuse_inode.c, fuse_dir.c, fuse_file.c, fuse_xattr.c: handler tables */
void fuse_inode_ops(struct fuse_lowlevel_ops *ops);
void fuse_dir_ops(struct fuse_lowlevel_ops *ops);
void fuse_file_ops(struct fuse_lowlevel_ops *ops);
void fuse_xattr_ops(struct fuse_lowlevel_ops *ops);

/* creds.c */
int creds_chown_to_caller(fuse_req_t req, int dirfd, const char *name,
			  struct dcfs_inode *parent, mode_t mode);

/* io_plain.c */
extern const struct dcfs_io io_plain;

/* options.c */
int options_parse(struct fuse_args *args, struct dcfs_options *opt);
int options_validate(const struct dcfs_options *opt);
void options_usage(const char *prog);
int options_add_mount_args(struct fuse_args *args, const struct dcfs_options *opt);

#endif
