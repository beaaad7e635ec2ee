// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The mount's one instance of shared state (struct dcfs_fs): the backing
 * root, the options and the settings every layer reads.  It lives in the
 * core, below every user of it, so that reading a setting does not make a
 * module depend on the entry point that fills it in (daemon/main.c).
 */
#include "core/core.h"

struct dcfs_fs dcfs = { .root = { .fd = -1 } };
