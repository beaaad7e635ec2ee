/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fusefs/handlers/ -- The FUSE request handlers, the open-file list and the
 * rendering of counters and state for the user.dcfs.* xattrs.
 */
#ifndef DCFS_LAYER_HANDLERS_H
#define DCFS_LAYER_HANDLERS_H

#include "io/io.h"

/* fuse_file.c (files_*) and fuse_dir.c (dirs_*): handles the kernel never released */
/* fuse_file.c */
void files_release_all(void);
size_t files_open_count(void);
void files_foreach(void (*fn)(struct dcfs_file *f, void *arg), void *arg);
void fuse_file_ops(struct fuse_lowlevel_ops *ops);

/* fuse_dir.c */
void dirs_release_all(void);
void fuse_dir_ops(struct fuse_lowlevel_ops *ops);

/* fuse_inode.c */
void fuse_inode_ops(struct fuse_lowlevel_ops *ops);

/* fuse_xattr.c */
void fuse_xattr_ops(struct fuse_lowlevel_ops *ops);

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
char *stats_json(void);
char *stats_table(bool wide);
char *stats_prometheus(void);
char *stats_files(uid_t who);

#endif
