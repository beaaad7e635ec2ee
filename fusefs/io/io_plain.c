// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The plain I/O strategy: ordinary buffered passthrough.  Data moves by
 * splice between /dev/fuse and the backing file where libfuse can, so the
 * daemon never copies it (io_uring requests: read into the ring entry).
 */
#include <unistd.h>

#include "io/io.h"

void io_plain_read(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	void *entry = uring_reply_buffer(size);
	ssize_t n;

	/*
	 * An io_uring request has no /dev/fuse to splice to: read straight
	 * into its entry, one copy, no pipe.
	 */
	if (entry) {
		n = pread(f->fd, entry, size, off);
		if (n < 0)
			fuse_reply_err(req, errno);
		else
			fuse_reply_buf(req, entry, (size_t)n);
		return;
	}

	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = f->fd;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

ssize_t io_plain_write(struct dcfs_file *f, struct fuse_bufvec *in, off_t off)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));

	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = f->fd;
	out.buf[0].pos = off;
	return fuse_buf_copy(&out, in, 0);
}

static void counted_read(fuse_req_t req, struct dcfs_file *f, size_t size, off_t off)
{
	/* Requested, not returned: a splice reply does not say how much. */
	file_stats_io(f, ST_READ_CACHED, size);
	io_plain_read(req, f, size, off);
}

static ssize_t counted_write(struct dcfs_file *f, struct fuse_bufvec *in, off_t off)
{
	ssize_t n = io_plain_write(f, in, off);

	if (n > 0)
		file_stats_io(f, ST_WRITE_CACHED, (uint64_t)n);
	return n;
}

/* A regular file's handle has a deferred-error cursor (write_pipe.c). */
static void plain_release(struct dcfs_file *f)
{
	wpipe_close(f);
}

const struct dcfs_io io_plain = {
	.name = "plain",
	.read = counted_read,
	.write = counted_write,
	.release = plain_release,
};
