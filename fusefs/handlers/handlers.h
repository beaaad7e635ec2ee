/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fusefs/handlers/ -- The FUSE request handlers, the open-file list and the
 * rendering of counters and state for the user.dcfs.* xattrs.
 */
#ifndef DCFS_LAYER_HANDLERS_H
#define DCFS_LAYER_HANDLERS_H

#include "io/io.h"

/* fuse_file.c */
void fuse_file_ops(struct fuse_lowlevel_ops *ops);

/* fuse_lock.c: flock and POSIX locks on the backing file */
void fuse_lock_ops(struct fuse_lowlevel_ops *ops);
void fuse_lock_flush(struct dcfs_file *f, uint64_t owner);
void fuse_lock_release(struct dcfs_file *f, bool flock_release);
void fuse_lock_stop(void);

/* fuse_dir.c */
void fuse_dir_release_all(void);
void fuse_dir_ops(struct fuse_lowlevel_ops *ops);

/* fuse_inode.c */
void fuse_inode_ops(struct fuse_lowlevel_ops *ops);

/* fuse_xattr.c */
void fuse_xattr_ops(struct fuse_lowlevel_ops *ops);

/*
 * Every request of libfuse's low-level API (struct fuse_lowlevel_ops of
 * 3.14, in its order), once, with what dcfs must know of it -- like
 * libfuse's indexed fuse_ll_ops[].  The caller-identity wrapper
 * (caller_ops.c) and the read-only wrapper (readonly.c) are generated from
 * these rows, so a handler gets both from its row; op_table.c refuses to
 * start if a member of the struct has no row (and the build fails when
 * libfuse grows one), so no op can run unclassified as root.
 *
 * who: whose identity the handler runs with (creds.c says why)
 *   OP_CALLER      the caller's: it creates, opens, renames, removes or
 *                  changes an object it reaches by name or node id
 *   OP_CALLER_NDP  the caller's under -o nodefault_permissions, where the
 *                  kernel checks nothing; else the daemon's: it changes
 *                  nothing and the kernel checked search and read rights
 *   OP_DAEMON      the daemon's: it works on a handle the caller opened
 *                  (with the caller's identity), or is the kernel's
 *                  bookkeeping (forget, release), or reads attributes
 * ro: on a read-only mount (readonly.c)
 *   OP_RO_OK       served
 *   OP_RO_REFUSED  EROFS: it changes the filesystem
 *   OP_RO_OPEN     EROFS when it opens for writing or truncates (open only)
 *
 * Adding an op: implement it in a fuse_*.c file and check its row here;
 * a new libfuse op is a new row (the build says so).
 */
enum op_who {
	OP_CALLER,
	OP_CALLER_NDP,
	OP_DAEMON
};
enum op_ro {
	OP_RO_OK,
	OP_RO_REFUSED,
	OP_RO_OPEN
};

typedef struct fuse_file_info fi_t;
/* One op per row, not clang-format's layout: */
/* clang-format off */
#define DCFS_FUSE_OPS(X)                                                            \
	X(lookup, OP_CALLER_NDP, OP_RO_OK, (fuse_req_t req, fuse_ino_t p, const char *n), \
	  (req, p, n))                                                              \
	X(forget, OP_DAEMON, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, uint64_t n),  \
	  (req, i, n))                                                              \
	X(getattr, OP_DAEMON, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, fi_t *fi),   \
	  (req, i, fi))                                                             \
	X(setattr, OP_CALLER, OP_RO_REFUSED,                                        \
	  (fuse_req_t req, fuse_ino_t i, struct stat *a, int v, fi_t *fi),          \
	  (req, i, a, v, fi))                                                       \
	X(readlink, OP_CALLER_NDP, OP_RO_OK, (fuse_req_t req, fuse_ino_t i), (req, i)) \
	X(mknod, OP_CALLER, OP_RO_REFUSED,                                          \
	  (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, dev_t r),         \
	  (req, p, n, m, r))                                                        \
	X(mkdir, OP_CALLER, OP_RO_REFUSED,                                          \
	  (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m), (req, p, n, m))  \
	X(unlink, OP_CALLER, OP_RO_REFUSED, (fuse_req_t req, fuse_ino_t p, const char *n), \
	  (req, p, n))                                                              \
	X(rmdir, OP_CALLER, OP_RO_REFUSED, (fuse_req_t req, fuse_ino_t p, const char *n), \
	  (req, p, n))                                                              \
	X(symlink, OP_CALLER, OP_RO_REFUSED,                                        \
	  (fuse_req_t req, const char *l, fuse_ino_t p, const char *n), (req, l, p, n)) \
	X(rename, OP_CALLER, OP_RO_REFUSED,                                         \
	  (fuse_req_t req, fuse_ino_t p, const char *n, fuse_ino_t np, const char *nn, \
	   unsigned int f),                                                         \
	  (req, p, n, np, nn, f))                                                   \
	X(link, OP_CALLER, OP_RO_REFUSED,                                           \
	  (fuse_req_t req, fuse_ino_t i, fuse_ino_t np, const char *nn), (req, i, np, nn)) \
	X(open, OP_CALLER, OP_RO_OPEN, (fuse_req_t req, fuse_ino_t i, fi_t *fi),    \
	  (req, i, fi))                                                             \
	X(read, OP_DAEMON, OP_RO_OK,                                                \
	  (fuse_req_t req, fuse_ino_t i, size_t s, off_t o, fi_t *fi), (req, i, s, o, fi)) \
	X(write, OP_DAEMON, OP_RO_REFUSED,                                          \
	  (fuse_req_t req, fuse_ino_t i, const char *b, size_t s, off_t o, fi_t *fi), \
	  (req, i, b, s, o, fi))                                                    \
	X(flush, OP_DAEMON, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, fi_t *fi),     \
	  (req, i, fi))                                                             \
	X(release, OP_DAEMON, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, fi_t *fi),   \
	  (req, i, fi))                                                             \
	X(fsync, OP_DAEMON, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, int d, fi_t *fi), \
	  (req, i, d, fi))                                                          \
	X(opendir, OP_CALLER, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, fi_t *fi),   \
	  (req, i, fi))                                                             \
	X(readdir, OP_DAEMON, OP_RO_OK,                                             \
	  (fuse_req_t req, fuse_ino_t i, size_t s, off_t o, fi_t *fi), (req, i, s, o, fi)) \
	X(releasedir, OP_DAEMON, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, fi_t *fi), \
	  (req, i, fi))                                                             \
	X(fsyncdir, OP_DAEMON, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, int d, fi_t *fi), \
	  (req, i, d, fi))                                                          \
	X(statfs, OP_DAEMON, OP_RO_OK, (fuse_req_t req, fuse_ino_t i), (req, i))    \
	X(setxattr, OP_CALLER, OP_RO_REFUSED,                                       \
	  (fuse_req_t req, fuse_ino_t i, const char *n, const char *v, size_t s, int f), \
	  (req, i, n, v, s, f))                                                     \
	X(getxattr, OP_CALLER_NDP, OP_RO_OK,                                        \
	  (fuse_req_t req, fuse_ino_t i, const char *n, size_t s), (req, i, n, s))  \
	X(listxattr, OP_CALLER_NDP, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, size_t s), \
	  (req, i, s))                                                              \
	X(removexattr, OP_CALLER, OP_RO_REFUSED,                                    \
	  (fuse_req_t req, fuse_ino_t i, const char *n), (req, i, n))               \
	X(access, OP_CALLER_NDP, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, int m),   \
	  (req, i, m))                                                              \
	X(create, OP_CALLER, OP_RO_REFUSED,                                         \
	  (fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, fi_t *fi),        \
	  (req, p, n, m, fi))                                                       \
	X(getlk, OP_DAEMON, OP_RO_OK,                                               \
	  (fuse_req_t req, fuse_ino_t i, fi_t *fi, struct flock *l), (req, i, fi, l)) \
	X(setlk, OP_DAEMON, OP_RO_OK,                                               \
	  (fuse_req_t req, fuse_ino_t i, fi_t *fi, struct flock *l, int s),         \
	  (req, i, fi, l, s))                                                       \
	X(bmap, OP_DAEMON, OP_RO_OK,                                                \
	  (fuse_req_t req, fuse_ino_t i, size_t b, uint64_t x), (req, i, b, x))     \
	/* not implemented; it could change anything: as the caller, not on ro */   \
	X(ioctl, OP_CALLER, OP_RO_REFUSED,                                          \
	  (fuse_req_t req, fuse_ino_t i, unsigned int c, void *a, fi_t *fi, unsigned f, \
	   const void *ib, size_t is, size_t os),                                   \
	  (req, i, c, a, fi, f, ib, is, os))                                        \
	X(poll, OP_DAEMON, OP_RO_OK,                                                \
	  (fuse_req_t req, fuse_ino_t i, fi_t *fi, struct fuse_pollhandle *ph),     \
	  (req, i, fi, ph))                                                         \
	X(write_buf, OP_DAEMON, OP_RO_REFUSED,                                      \
	  (fuse_req_t req, fuse_ino_t i, struct fuse_bufvec *b, off_t o, fi_t *fi), \
	  (req, i, b, o, fi))                                                       \
	X(retrieve_reply, OP_DAEMON, OP_RO_OK,                                      \
	  (fuse_req_t req, void *c, fuse_ino_t i, off_t o, struct fuse_bufvec *b),  \
	  (req, c, i, o, b))                                                        \
	X(forget_multi, OP_DAEMON, OP_RO_OK,                                        \
	  (fuse_req_t req, size_t n, struct fuse_forget_data *f), (req, n, f))      \
	X(flock, OP_DAEMON, OP_RO_OK, (fuse_req_t req, fuse_ino_t i, fi_t *fi, int o), \
	  (req, i, fi, o))                                                          \
	X(fallocate, OP_DAEMON, OP_RO_REFUSED,                                      \
	  (fuse_req_t req, fuse_ino_t i, int m, off_t o, off_t l, fi_t *fi),        \
	  (req, i, m, o, l, fi))                                                    \
	X(readdirplus, OP_DAEMON, OP_RO_OK,                                         \
	  (fuse_req_t req, fuse_ino_t i, size_t s, off_t o, fi_t *fi), (req, i, s, o, fi)) \
	X(copy_file_range, OP_DAEMON, OP_RO_REFUSED,                                \
	  (fuse_req_t req, fuse_ino_t i, off_t o, fi_t *fi, fuse_ino_t io, off_t oo, \
	   fi_t *fo, size_t l, int f),                                              \
	  (req, i, o, fi, io, oo, fo, l, f))                                        \
	X(lseek, OP_DAEMON, OP_RO_OK,                                               \
	  (fuse_req_t req, fuse_ino_t i, off_t o, int w, fi_t *fi), (req, i, o, w, fi))
/* clang-format on */

/* op_table.c: 0, or -EINVAL (logged) if a member of the ops has no row. */
int op_table_check(void);

/* caller_ops.c */
void caller_ops_wrap(struct fuse_lowlevel_ops *ops, bool all);

/*
 * readonly.c: changes get EROFS from the daemon while the mount is
 * read-only (-o ro, or a remount noticed in /proc/self/mountinfo).
 */
void readonly_ops_wrap(struct fuse_lowlevel_ops *ops);
int readonly_start(void);
void readonly_stop(void);
bool readonly_now(void);

/* report.c */
char *report_json(void);
char *report_table(bool wide);
char *report_prometheus(void);
char *report_files(uid_t who);

#endif
