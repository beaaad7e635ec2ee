/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fusefs/transport/ -- How requests and replies move: FUSE over io_uring,
 * the request buffers the write engine adopts, per-connection limits.
 */
#ifndef DCFS_LAYER_TRANSPORT_H
#define DCFS_LAYER_TRANSPORT_H

#include "core/core.h"

/* WRITE data read into blocks the write engine can adopt */
struct reqbuf;
struct fuse_init_out;

/* reqbuf.c */
ssize_t reqbuf_read(int fd, void *buf, size_t len);
int reqbuf_locate(struct fuse_bufvec *in);
struct reqbuf *reqbuf_adopt(const void *data, size_t len);
char *reqbuf_data(struct reqbuf *rb);
size_t reqbuf_room(void);
void reqbuf_release(struct reqbuf *rb);

/* conn_limits.c */
void conn_limits_prepare(void);
void conn_limits_init_reply(struct fuse_init_out *out);
void conn_limits_after_init(void);
long long conn_limits_read_ahead(int fd);

/*
 * wire.c: the /dev/fuse hooks -- request counts, the INIT reply, OPEN and
 * CREATE replies patched for the layer above (kernel passthrough), which
 * registers what it adds to INIT before the session runs.
 */
struct wire_offer {
	uint32_t flags, flags2; /* the kernel's INIT offer (flags2: 0 without ext) */
	bool ext;		/* FUSE_INIT_EXT offered, and the reply can carry it */
};
/* out: the INIT reply about to go out; NULL when it cannot be extended. */
typedef void (*wire_init_fn)(const struct wire_offer *offer, struct fuse_init_out *out);
struct wire_stats {
	bool allow_mmap; /* FUSE_DIRECT_IO_ALLOW_MMAP granted */
};
int wire_install(struct fuse_session *se);
void wire_set_init_hook(wire_init_fn fn);
void wire_offer(struct wire_offer *o);
void wire_stats(struct wire_stats *s);
void wire_arm_open(uint64_t fh, int32_t backing_id, uint32_t flags);

/* uring.c: FUSE over io_uring, the default transport (-o nouring) */
void uring_prepare(bool wanted);
uint32_t uring_accept(int dev_fd, uint32_t offer, size_t max_payload);
void uring_start(struct fuse_session *se);
void uring_stop(void);
/* 0: not a reply of this thread's io_uring request (write it to /dev/fuse) */
ssize_t uring_reply(const struct iovec *iov, int count);
ssize_t uring_splice_reply(int fdin, size_t len, bool *handled);
void *uring_reply_buffer(size_t size);
/* This thread serves an io_uring queue. */
bool uring_thread(void);
/* It may wait long for a lock without starving its queue (uring.c) */
bool uring_may_block(void);
void uring_unblock(void);
#define URING_MAX_QUEUES 64
struct uring_stats {
	const char *state; /* "on", "stopped", "off" */
	bool on, accepted; /* serving; the INIT reply carried the bit */
	char reason[128];  /* why it is off; "" while on */
	unsigned int queues;
	int threads_per_queue;
	uint64_t requests, splices, in_place;
	uint64_t per_queue[URING_MAX_QUEUES];
};
void uring_stats(struct uring_stats *st);

#endif
