// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * One FUSE request per application write of 1 MiB, wherever its buffer is.
 *
 * A 1 MiB buffer that is not page-aligned (what malloc() returns) spans
 * 257 pages.  The kernel caps a request at max_pages pages, and libfuse
 * 3.14 derives the max_pages of its INIT reply from max_write
 * ((max_write - 1) / page + 1 = 256, with no way to ask for more), so such
 * a write arrives as two requests of 1048560 and 16 bytes: a second round
 * trip and a partial-page write per MiB.  dcfs asks for one page more than
 * max_write needs (257): the kernel then sends the whole 1 MiB, whatever
 * its alignment, in one request of at most max_write bytes, which still
 * fits libfuse's buffer.
 *
 * The kernel clamps max_pages to /proc/sys/fs/fuse/max_pages_limit (256
 * by default), read when a connection is made: a root daemon raises it to
 * 257 before mounting if it is lower.  It is a host-wide ceiling that only
 * matters to daemons asking for more than 256 pages, and it is left raised
 * (other dcfs mounts may rely on it).  Without the rights, or on kernels
 * without the sysctl, the split simply stays.
 *
 * libfuse 3.14 has no API for this, so the INIT reply is patched on its
 * way out, through fuse_session_custom_io(); conn_limits_init_reply() is
 * the whole protocol knowledge and can be called from any other writev
 * hook that handles INIT.
 */
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dcfs_io.h"

_Static_assert(offsetof(struct fuse_init_out, max_pages) == 28,
	       "fuse_init_out.max_pages");
_Static_assert(offsetof(struct fuse_init_out, flags) == 12,
	       "fuse_init_out.flags");

#define MAX_PAGES_LIMIT "/proc/sys/fs/fuse/max_pages_limit"

static bool raised; /* logged once the log is set up */

static unsigned int wanted_pages(void)
{
	return (1U << 20) / (unsigned int)sysconf(_SC_PAGESIZE) + 1;
}

void conn_limits_prepare(void)
{
	char buf[32];
	ssize_t n;
	int fd = open(MAX_PAGES_LIMIT, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = '\0';
		if (strtoul(buf, NULL, 10) < wanted_pages()) {
			int len = snprintf(buf, sizeof(buf), "%u\n", wanted_pages());

			raised = pwrite(fd, buf, (size_t)len, 0) == len;
		}
	}
	close(fd);
}

void conn_limits_init_reply(struct fuse_init_out *out)
{
	unsigned int page = (unsigned int)sysconf(_SC_PAGESIZE);
	unsigned int need = (out->max_write + page - 1) / page + 1;

	if ((out->flags & FUSE_MAX_PAGES) && out->max_pages < need)
		out->max_pages = (uint16_t)need;
}

/* --- fuse_session_custom_io hooks ------------------------------------- */

static _Atomic uint64_t init_unique;

static ssize_t cl_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	(void)userdata;
	if (n >= (ssize_t)sizeof(*in) && in->opcode == FUSE_INIT)
		init_unique = in->unique;
	return n;
}

static ssize_t cl_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	char buf[sizeof(struct fuse_out_header) + sizeof(struct fuse_init_out)];
	const struct fuse_out_header *oh;
	size_t len = 0;

	(void)userdata;
	if (count < 1 || iov[0].iov_len != sizeof(*oh))
		return writev(fd, iov, count);
	oh = iov[0].iov_base;
	if (!init_unique || oh->unique != init_unique || oh->error)
		return writev(fd, iov, count);
	init_unique = 0;
	for (int i = 0; i < count; i++) {
		if (iov[i].iov_len > sizeof(buf) - len)
			return writev(fd, iov, count);
		memcpy(buf + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	/* Older protocol minors have a shorter reply: leave those alone. */
	if (len != sizeof(buf))
		return writev(fd, iov, count);
	conn_limits_init_reply((struct fuse_init_out *)(buf + sizeof(*oh)));
	return write(fd, buf, len);
}

static ssize_t cl_splice_send(int fdin, off_t *offin, int fdout,
			      off_t *offout, size_t len, unsigned int flags,
			      void *userdata)
{
	(void)userdata;
	/* libfuse offers splice replies only to custom I/O that has this. */
	return splice(fdin, offin, fdout, offout, len, flags);
}

int conn_limits_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = cl_read,
		.writev = cl_writev,
		.splice_send = cl_splice_send,
	};

	if (raised)
		log_info("raised %s to %u: unaligned 1 MiB writes come in one request\n",
			 MAX_PAGES_LIMIT, wanted_pages());
	/* Same fd: libfuse keeps owning (and closing) it. */
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
