// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Requests received from the kernel, counted by opcode as they are read
 * from /dev/fuse (transport/wire.c's read hook), for `dcfs stat`: the cost of
 * metadata through FUSE is the number of round trips per operation, and
 * these counters show where they go (a parent GETATTR before each create,
 * a GETXATTR per write, LOOKUPs of expired entries...).
 */
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdio.h>

#include "base/base.h"

#define NOPCODES REQSTATS_NOPCODES

static _Atomic uint64_t requests[NOPCODES];

static const char *const op_names[NOPCODES] = {
	[FUSE_LOOKUP] = "lookup",
	[FUSE_FORGET] = "forget",
	[FUSE_GETATTR] = "getattr",
	[FUSE_SETATTR] = "setattr",
	[FUSE_READLINK] = "readlink",
	[FUSE_SYMLINK] = "symlink",
	[FUSE_MKNOD] = "mknod",
	[FUSE_MKDIR] = "mkdir",
	[FUSE_UNLINK] = "unlink",
	[FUSE_RMDIR] = "rmdir",
	[FUSE_RENAME] = "rename",
	[FUSE_LINK] = "link",
	[FUSE_OPEN] = "open",
	[FUSE_READ] = "read",
	[FUSE_WRITE] = "write",
	[FUSE_STATFS] = "statfs",
	[FUSE_RELEASE] = "release",
	[FUSE_FSYNC] = "fsync",
	[FUSE_SETXATTR] = "setxattr",
	[FUSE_GETXATTR] = "getxattr",
	[FUSE_LISTXATTR] = "listxattr",
	[FUSE_REMOVEXATTR] = "removexattr",
	[FUSE_FLUSH] = "flush",
	[FUSE_INIT] = "init",
	[FUSE_OPENDIR] = "opendir",
	[FUSE_READDIR] = "readdir",
	[FUSE_RELEASEDIR] = "releasedir",
	[FUSE_FSYNCDIR] = "fsyncdir",
	[FUSE_GETLK] = "getlk",
	[FUSE_SETLK] = "setlk",
	[FUSE_SETLKW] = "setlkw",
	[FUSE_ACCESS] = "access",
	[FUSE_CREATE] = "create",
	[FUSE_INTERRUPT] = "interrupt",
	[FUSE_BMAP] = "bmap",
	[FUSE_DESTROY] = "destroy",
	[FUSE_IOCTL] = "ioctl",
	[FUSE_POLL] = "poll",
	[FUSE_NOTIFY_REPLY] = "notify_reply",
	[FUSE_BATCH_FORGET] = "batch_forget",
	[FUSE_FALLOCATE] = "fallocate",
	[FUSE_READDIRPLUS] = "readdirplus",
	[FUSE_RENAME2] = "rename2",
	[FUSE_LSEEK] = "lseek",
	[FUSE_COPY_FILE_RANGE] = "copy_file_range",
	[FUSE_SYNCFS] = "syncfs",
	[FUSE_TMPFILE] = "tmpfile",
};

void reqstats_count(uint32_t opcode)
{
	atomic_fetch_add_explicit(&requests[opcode < NOPCODES ? opcode : 0], 1,
				  memory_order_relaxed);
}

const char *reqstats_op_name(int op)
{
	return op && op > 0 && op < NOPCODES && op_names[op] ? op_names[op] : "other";
}

/* The requests seen by opcode (0: opcodes without a name here). */
void reqstats_snapshot(struct reqstats *st)
{
	for (int op = 0; op < NOPCODES; op++)
		st->n[op] = atomic_load(&requests[op]);
}
