// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The /dev/fuse wire: what dcfs changes in the protocol libfuse 3.14
 * speaks, on its way in and out.  This is the one place that patches
 * protocol messages; the layouts libfuse 3.14 lacks are named in
 * dcfs_fuse_proto.h.
 *
 * Mechanism.  libfuse mounts the session as always (fuse_session_mount(),
 * so fusermount3, the mount options and unmounting are unchanged); then
 * fuse_session_custom_io() installs our read/writev on its fd.  read()
 * counts each request (reqstats.c) and notes the kernel's INIT offer;
 * writev() patches two kinds of reply and passes everything else through
 * untouched:
 *  - INIT: FUSE_INIT_EXT, max_pages for unaligned 1 MiB writes
 *    (conn_limits.c), FUSE_HANDLE_KILLPRIV_V2, FUSE_DIRECT_IO_ALLOW_MMAP
 *    and FUSE over io_uring (uring.c), each only if offered, then what the
 *    layer above registered (wire_set_init_hook(): kernel passthrough,
 *    io/passthrough.c);
 *  - OPEN/CREATE replies the layer above armed (wire_arm_open()): open
 *    flags added and a backing id.  Replies are written synchronously by
 *    the thread that handled the request, so a thread-local note made just
 *    before fuse_reply_open()/_create() names the reply; it is matched by
 *    size and file handle, never guessed.
 * A splice_send hook that just splices keeps libfuse's splice replies
 * (libfuse offers splice only to custom I/O that provides one).
 * With -o uring, both hooks first offer each reply to uring.c: the reply
 * of a request that came through an io_uring entry goes into that entry
 * (after the OPEN/CREATE patching), everything else to /dev/fuse.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dcfs_fuse_proto.h"
#include "transport/transport.h"

/* Open flags the kernel accepts together with FOPEN_PASSTHROUGH. */
#define PT_FOPEN_ALLOWED                                                                         \
	(PT_FOPEN_PASSTHROUGH | FOPEN_DIRECT_IO | FOPEN_PARALLEL_DIRECT_WRITES | FOPEN_NOFLUSH | \
	 PT_FOPEN_DONTCACHE)

static struct {
	wire_init_fn init_hook; /* set once, before the session runs */
	_Atomic bool init_seen;
	_Atomic uint64_t init_unique;
	_Atomic uint32_t init_flags, init_flags2;
	_Atomic bool allow_mmap; /* FUSE_DIRECT_IO_ALLOW_MMAP granted */
} wire;

/* The open reply this thread is about to write (see the top comment). */
static __thread struct {
	uint64_t fh; /* 0: none */
	int32_t backing_id;
	uint32_t flags; /* open flags to add */
} armed;

void wire_set_init_hook(wire_init_fn fn)
{
	wire.init_hook = fn;
}

/* The kernel's INIT offer; all zero before it arrived. */
void wire_offer(struct wire_offer *o)
{
	o->flags = atomic_load(&wire.init_flags);
	o->flags2 = atomic_load(&wire.init_flags2);
	o->ext = o->flags & FUSE_INIT_EXT;
}

void wire_stats(struct wire_stats *s)
{
	s->allow_mmap = atomic_load(&wire.allow_mmap);
}

/*
 * The OPEN or CREATE reply this thread writes next, of file handle fh,
 * gets flags and backing id added; fh 0 withdraws a note.
 */
void wire_arm_open(uint64_t fh, int32_t backing_id, uint32_t flags)
{
	armed.fh = fh;
	armed.backing_id = backing_id;
	armed.flags = flags;
}

static ssize_t wire_read(int fd, void *buf, size_t len, void *userdata)
{
	/* The header is in buf whatever reqbuf_read did with the rest. */
	ssize_t n = reqbuf_read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	(void)userdata;
	if (n >= (ssize_t)sizeof(*in))
		reqstats_count(in->opcode);
	if (n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags2) +
			   sizeof(uint32_t)) &&
	    in->opcode == FUSE_INIT && !atomic_load(&wire.init_seen)) {
		const struct fuse_init_in *arg = (const void *)(in + 1);

		atomic_store(&wire.init_flags, arg->flags);
		atomic_store(&wire.init_flags2, (arg->flags & FUSE_INIT_EXT) ? arg->flags2 : 0);
		atomic_store(&wire.init_unique, in->unique);
	}
	return n;
}

/* Copies a reply of at most cap bytes into buf; returns its length or 0. */
static size_t flatten(const struct iovec *iov, int count, char *buf, size_t cap)
{
	size_t len = 0;

	for (int i = 0; i < count; i++) {
		if (iov[i].iov_len > cap - len)
			return 0;
		memcpy(buf + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	return len;
}

/*
 * The kernel has applied the reply once write() returns: the io_uring
 * queues can be registered from then on.
 */
static ssize_t write_init_reply(int fd, const char *buf, size_t len)
{
	ssize_t n = write(fd, buf, len);

	if (n == (ssize_t)len) {
		conn_limits_after_init();
		uring_start(dcfs.se);
	}
	return n;
}

/* What the kernel will require of each io_uring payload buffer. */
static size_t uring_payload(const struct fuse_init_out *out)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t pages = out->max_pages > 256 ? out->max_pages : 256;
	size_t n = pages * page;

	if (n < out->max_write)
		n = out->max_write;
	return n < 8192 ? 8192 : n;
}

static void call_init_hook(const struct wire_offer *offer, struct fuse_init_out *out)
{
	if (wire.init_hook)
		wire.init_hook(offer, out);
}

static ssize_t write_init(int fd, struct iovec *iov, int count)
{
	char buf[sizeof(struct fuse_out_header) + sizeof(struct fuse_init_out)];
	size_t len = flatten(iov, count, buf, sizeof(buf));
	struct fuse_init_out *out = (void *)(buf + sizeof(struct fuse_out_header));
	struct wire_offer offer;

	atomic_store(&wire.init_seen, true);
	wire_offer(&offer);
	if (len != sizeof(buf) || !offer.ext) {
		offer.ext = false;
		call_init_hook(&offer, NULL);
		if (len != sizeof(buf))
			return writev(fd, iov, count);
		conn_limits_init_reply(out);
		return write_init_reply(fd, buf, len);
	}
	conn_limits_init_reply(out);
	out->flags |= FUSE_INIT_EXT;
	/*
	 * Without FUSE_HANDLE_KILLPRIV_V2 the kernel asks the daemon for
	 * security.capability before every write (file_remove_privs() on an
	 * inode that can never be S_NOSEC), passthrough writes included: a
	 * round trip per write(2).  dcfs kills privileges as the backing
	 * filesystem does: every write, truncate and O_TRUNC open runs with
	 * the caller's identity (creds.c), which is what V2 asks of a server.
	 */
	if (offer.flags & FUSE_HANDLE_KILLPRIV_V2)
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
	if (offer.flags2 & PT_FLAGS2(PT_INIT_ALLOW_MMAP)) {
		out->flags2 |= PT_FLAGS2(PT_INIT_ALLOW_MMAP);
		atomic_store(&wire.allow_mmap, true);
	}
	out->flags2 |= uring_accept(fd, offer.flags2, uring_payload(out));
	call_init_hook(&offer, out);
	return write_init_reply(fd, buf, len);
}

/* A reply goes into this thread's io_uring entry if it answers its request. */
static ssize_t dev_writev(int fd, const struct iovec *iov, int count)
{
	ssize_t n = uring_reply(iov, count);

	return n ? n : writev(fd, iov, count);
}

static ssize_t dev_write(int fd, char *buf, size_t len)
{
	struct iovec iov[2] = {
		{ buf, sizeof(struct fuse_out_header) },
		{ buf + sizeof(struct fuse_out_header), len - sizeof(struct fuse_out_header) },
	};

	return dev_writev(fd, iov, 2);
}

static ssize_t write_open(int fd, struct iovec *iov, int count, uint64_t fh, int32_t id,
			  uint32_t flags)
{
	char buf[sizeof(struct fuse_out_header) + sizeof(struct fuse_entry_out) +
		 sizeof(struct fuse_open_out)];
	size_t len = flatten(iov, count, buf, sizeof(buf));
	size_t at;
	struct fuse_open_out out;

	/* OPEN: header + open_out; CREATE: header + entry_out + open_out. */
	if (len == sizeof(struct fuse_out_header) + sizeof(out))
		at = sizeof(struct fuse_out_header);
	else if (len == sizeof(buf))
		at = sizeof(buf) - sizeof(out);
	else
		return dev_writev(fd, iov, count);
	memcpy(&out, buf + at, sizeof(out));
	if (out.fh != fh)
		return dev_writev(fd, iov, count);
	if ((flags & PT_FOPEN_PASSTHROUGH) && (out.open_flags & ~(uint32_t)PT_FOPEN_ALLOWED))
		/* Cannot happen: passthrough_open() cleared keep_cache. */
		log_err("passthrough: open flags 0x%x do not combine with passthrough\n",
			out.open_flags);
	out.open_flags |= flags;
	memcpy(&out.padding, &id, sizeof(id));
	memcpy(buf + at, &out, sizeof(out));
	return dev_write(fd, buf, len);
}

static ssize_t wire_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fuse_out_header *out;
	uint64_t fh = armed.fh;

	(void)userdata;
	armed.fh = 0;
	if (count < 1 || iov[0].iov_len != sizeof(*out))
		return dev_writev(fd, iov, count);
	out = iov[0].iov_base;
	if (out->error == 0 && out->unique && out->unique == atomic_load(&wire.init_unique) &&
	    !atomic_load(&wire.init_seen))
		return write_init(fd, iov, count);
	if (fh && out->error == 0)
		return write_open(fd, iov, count, fh, armed.backing_id, armed.flags);
	return dev_writev(fd, iov, count);
}

static ssize_t wire_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
				unsigned int flags, void *userdata)
{
	bool handled;
	ssize_t n = uring_splice_reply(fdin, len, &handled);

	(void)userdata;
	/* An io_uring request's reply is read from the pipe into its entry. */
	if (handled)
		return n;
	return splice(fdin, offin, fdout, offout, len, flags);
}

int wire_install(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.read = wire_read,
		.writev = wire_writev,
		.splice_send = wire_splice_send,
	};

	/* Same fd: libfuse keeps owning (and closing) it. */
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
