/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * FUSE protocol names Debian 12's <linux/fuse.h> (7.38) lacks: kernel
 * passthrough (7.40), and the uncached passthrough (kernel-patches/0022) and
 * backing-inode attributes (0028-0029) of this project's kernel series, not
 * in mainline.  The struct layouts are the
 * header's; the fields 7.40 gave names to were padding before, and the
 * asserts pin where they are.  Used by the daemon (fusefs/io/passthrough.c) and
 * by the kernel series' own FUSE server test
 * (kernel-patches/test/fuse_pt_test.c).
 *
 * The series' private bits sit in the middle of their fields, where no
 * mainline version allocates: mainline takes open flags from bit 0 up (8
 * is FOPEN_IO_URING_ZERO_COPY in protocol 7.47), but 7.47 took bit 30 from
 * the top for FUSE_BACKING_ID_64, the bit this series used before; INIT
 * flags from bit 0 up (flags2 holds 32..63; 44 is FUSE_HAS_SYNCFS in
 * 7.47).  See
 * "Protocol bits" in kernel-patches/README.md.
 */
#ifndef DCFS_FUSE_PROTO_H
#define DCFS_FUSE_PROTO_H

#include <linux/fuse.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#define PT_PROTO_MINOR 40 /* passthrough */

/* INIT flags, 64 bits wide: the upper half travels in flags2. */
#define PT_INIT_ALLOW_MMAP (1ULL << 36)	 /* FUSE_DIRECT_IO_ALLOW_MMAP */
#define PT_INIT_PASSTHROUGH (1ULL << 37) /* FUSE_PASSTHROUGH */
#define PT_INIT_DONTCACHE (1ULL << 56)	 /* FUSE_PASSTHROUGH_DONTCACHE */
/*
 * FUSE_PASSTHROUGH_ATTR: the server says a passthrough file's size, blocks,
 * times and security xattrs are its backing inode's; the kernel then copies
 * them from the backing inode after passthrough writes, fallocate and
 * O_TRUNC opens instead of asking (no GETATTR for stat after a write), and
 * takes S_NOSEC from it (no GETXATTR security.capability at the first
 * write).  Next to bit 56, as far from mainline's allocations.
 */
#define PT_INIT_ATTR (1ULL << 57)
#define PT_FLAGS2(flag) ((uint32_t)((flag) >> 32))

#define PT_FOPEN_PASSTHROUGH (1U << 7)
#define PT_FOPEN_DONTCACHE_READ (1U << 20)
#define PT_FOPEN_DONTCACHE_WRITE (1U << 21)
#define PT_FOPEN_DONTCACHE (PT_FOPEN_DONTCACHE_READ | PT_FOPEN_DONTCACHE_WRITE)

/*
 * Bits mainline allocates or has drafted (to protocol 7.47), which the
 * private ones must stay clear of: open flags 0..8 and the top two (30 is
 * FUSE_BACKING_ID_64), INIT flags 0..31 (flags) and 32..47 (flags2: 7.47
 * allocates up to 44, with room for what later drafts take).
 */
#define PT_MAINLINE_FOPEN (0x1ffU | (1U << 30) | (1U << 31))
#define PT_MAINLINE_INIT 0x0000ffffffffffffULL
_Static_assert(!(PT_FOPEN_DONTCACHE & PT_MAINLINE_FOPEN), "open bits");
_Static_assert(!(PT_INIT_DONTCACHE & PT_MAINLINE_INIT), "INIT bit");
_Static_assert(!(PT_INIT_ATTR & PT_MAINLINE_INIT), "INIT bit");
_Static_assert(PT_INIT_ATTR != PT_INIT_DONTCACHE, "INIT bits");

struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define PT_IOC_BACKING_OPEN _IOW(FUSE_DEV_IOC_MAGIC, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE _IOW(FUSE_DEV_IOC_MAGIC, 2, uint32_t)

#ifdef FUSE_PASSTHROUGH
_Static_assert(FUSE_PASSTHROUGH == PT_INIT_PASSTHROUGH, "FUSE_PASSTHROUGH");
_Static_assert(FOPEN_PASSTHROUGH == PT_FOPEN_PASSTHROUGH, "FOPEN_PASSTHROUGH");
_Static_assert(FUSE_DEV_IOC_BACKING_OPEN == PT_IOC_BACKING_OPEN, "BACKING_OPEN");
_Static_assert(FUSE_DEV_IOC_BACKING_CLOSE == PT_IOC_BACKING_CLOSE, "BACKING_CLOSE");
#endif
#ifdef FUSE_PASSTHROUGH_DONTCACHE
_Static_assert(FUSE_PASSTHROUGH_DONTCACHE == PT_INIT_DONTCACHE, "INIT bit");
_Static_assert(FOPEN_PASSTHROUGH_DONTCACHE_READ == PT_FOPEN_DONTCACHE_READ, "READ");
_Static_assert(FOPEN_PASSTHROUGH_DONTCACHE_WRITE == PT_FOPEN_DONTCACHE_WRITE, "WRITE");
#endif
#ifdef FUSE_PASSTHROUGH_ATTR
_Static_assert(FUSE_PASSTHROUGH_ATTR == PT_INIT_ATTR, "INIT bit");
#endif
_Static_assert(sizeof(struct pt_backing_map) == 16, "fuse_backing_map");
_Static_assert(sizeof(struct fuse_in_header) == 40, "fuse_in_header");
_Static_assert(sizeof(struct fuse_out_header) == 16, "fuse_out_header");
_Static_assert(offsetof(struct fuse_init_in, flags) == 12, "init_in.flags");
_Static_assert(offsetof(struct fuse_init_in, flags2) == 16, "init_in.flags2");
_Static_assert(sizeof(struct fuse_init_out) == 64, "fuse_init_out");
_Static_assert(offsetof(struct fuse_init_out, flags) == 12, "init_out.flags");
_Static_assert(offsetof(struct fuse_init_out, flags2) == 32, "init_out.flags2");
/* max_stack_depth is 7.38's unused[0] */
_Static_assert(offsetof(struct fuse_init_out, unused) == 36, "max_stack_depth");
_Static_assert(sizeof(struct fuse_open_out) == 16, "fuse_open_out");
/* backing_id is 7.38's padding */
_Static_assert(offsetof(struct fuse_open_out, padding) == 12, "backing_id");
_Static_assert(sizeof(struct fuse_entry_out) == 128, "fuse_entry_out");

#define INIT_OUT_MAX_STACK_DEPTH offsetof(struct fuse_init_out, unused)
#define OPEN_OUT_BACKING_ID offsetof(struct fuse_open_out, padding)

#endif
