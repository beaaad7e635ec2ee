/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fusefs/daemon/ -- Start-up, options, the CLI, the mount's log lines and
 * graceful stop.
 */
#ifndef DCFS_LAYER_DAEMON_H
#define DCFS_LAYER_DAEMON_H

#include "handlers/handlers.h"

/* shutdown.c: graceful stop on SIGTERM/SIGINT */
int shutdown_start(void);
void shutdown_stop(void);
bool shutdown_forced(void); /* the stop had to abort the connection */

/* cli.c */
int cli_load_config(const char *path, struct dcfs_config **out);
int cli_check_config(int argc, char *argv[]);
int cli_list_config_keys(void);
int cli_read_config(int argc, char *argv[]);
int cli_stat(int argc, char *argv[]);

/* options.c */
int options_parse(struct fuse_args *args, struct dcfs_options *opt);
int options_list(void);
int options_validate(const struct dcfs_options *opt);
int options_check_empty(const struct dcfs_options *opt);
void options_usage(const char *prog);
int options_add_mount_args(struct fuse_args *args, const struct dcfs_options *opt);

/* caps.c */
void caps_log_startup(void);

/* remount.c: `dcfs SRC TGT -o remount,...` runs mount.dcfs instead */
bool remount_asked(int argc, char **argv);
int remount_cmd(int argc, char **argv);

#endif
