// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * What each open handle carries for user.dcfs.files (struct file_stats):
 * who opened it, the rule that decided its class, the bytes it moved.  The
 * class counters themselves are a leaf below (base/stats.c).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

static bool is_read_kind(enum stat_kind k)
{
	return k == ST_READ_DONTCACHE || k == ST_READ_FALLBACK || k == ST_READ_CACHED ||
	       k == ST_READ_KERNEL;
}

/* Data moved by handle f: the class counters and the handle's own. */
void file_stats_io(struct dcfs_file *f, enum stat_kind k, uint64_t n)
{
	stats_add(f->policy, k, n);
	if (f->stats && k != ST_SWITCHED && k != ST_OPENED)
		atomic_fetch_add_explicit(&f->stats->bytes[is_read_kind(k) ? 0 : 1], n,
					  memory_order_relaxed);
}

void file_stats_bytes(struct dcfs_file *f, bool read, uint64_t n)
{
	if (f->stats)
		atomic_fetch_add_explicit(&f->stats->bytes[read ? 0 : 1], n, memory_order_relaxed);
}

int file_stats_open(fuse_req_t req, struct dcfs_file *f, const struct dcfs_decision *d)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct file_stats *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	st->uid = ctx->uid;
	st->pid = ctx->pid;
	/* Copied: the class name belongs to a config a reload may free. */
	snprintf(st->why, sizeof(st->why), "%s%s%s", d->class_name ? "class " : "",
		 d->class_name ? d->class_name : "", d->class_name ? ", " : "");
	snprintf(st->why + strlen(st->why), sizeof(st->why) - strlen(st->why), "%s", d->reason);
	f->stats = st;
	return 0;
}

void file_stats_close(struct dcfs_file *f)
{
	free(f->stats);
	f->stats = NULL;
}
