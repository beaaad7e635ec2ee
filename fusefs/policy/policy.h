/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fusefs/policy/ -- dcfs.conf (include/dcfs_policy.h, shared with the
 * fuzzer) and its SIGHUP reload.
 */
#ifndef DCFS_LAYER_POLICY_H
#define DCFS_LAYER_POLICY_H

#include "transport/transport.h"
#include "dcfs_policy.h"

/* reload.c */
int reload_start(void);
bool reload_stop(void);
/* The last reload's failure while it is the latest outcome: dcfs stat and
 * the root's user.dcfs.policy show it (handlers/report.c, fuse_xattr.c). */
bool reload_failure(char *buf, size_t size);
void reload_table(FILE *out);
void reload_json(FILE *out);

#endif
