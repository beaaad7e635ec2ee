// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The FUSE op table (DCFS_FUSE_OPS, handlers.h) checked against libfuse's
 * struct fuse_lowlevel_ops: every member has exactly one row, or the build
 * (a member more) or the start-up (a row twice, a member left out) fails.
 * This is what makes the generated wrappers fail closed: an op the table
 * does not know could only run with the daemon's identity and ignore a
 * read-only mount, so it never runs at all.
 */
#include <stddef.h>
#include <string.h>

#include "handlers/handlers.h"

typedef void (*op_slot)(void);

struct op_row {
	const char *name;
	size_t off;
	enum op_ro ro;
};

#define OP_ROW(op, who, ro, params, args) { #op, offsetof(struct fuse_lowlevel_ops, op), ro },
static const struct op_row rows[] = {
	/* not requests: the session's own start and end */
	{ "init", offsetof(struct fuse_lowlevel_ops, init), OP_RO_OK },
	{ "destroy", offsetof(struct fuse_lowlevel_ops, destroy), OP_RO_OK },
	DCFS_FUSE_OPS(OP_ROW)
};
#undef OP_ROW

#define NSLOTS (sizeof(struct fuse_lowlevel_ops) / sizeof(op_slot))
_Static_assert(sizeof(struct fuse_lowlevel_ops) % sizeof(op_slot) == 0,
	       "struct fuse_lowlevel_ops is not a table of function pointers");
_Static_assert(sizeof(rows) / sizeof(rows[0]) == NSLOTS,
	       "struct fuse_lowlevel_ops has a member without a row in DCFS_FUSE_OPS (handlers.h)");

int op_table_check(void)
{
	unsigned char seen[NSLOTS] = { 0 };
	int ret = 0;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		seen[rows[i].off / sizeof(op_slot)]++;
		/* readonly.c decides on open's flags: no other op has them */
		if (rows[i].ro == OP_RO_OPEN && strcmp(rows[i].name, "open")) {
			log_err("BUG: op %s is OP_RO_OPEN (handlers.h): only open can be\n",
				rows[i].name);
			ret = -EINVAL;
		}
	}
	for (size_t i = 0; i < NSLOTS; i++) {
		if (seen[i] == 1)
			continue;
		log_err("BUG: member %zu of struct fuse_lowlevel_ops has %u rows in DCFS_FUSE_OPS (handlers.h)\n",
			i, seen[i]);
		ret = -EINVAL;
	}
	return ret;
}
