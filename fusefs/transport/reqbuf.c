// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Where the data of a WRITE request lands when it is read from /dev/fuse,
 * so that the streaming engine can keep it without copying it.
 *
 * Why.  A 1 MiB uncached write used to be written synchronously from
 * libfuse's request buffer: handing it to the handle's worker needed a
 * copy into the job (the buffer is reused for the thread's next request),
 * and on a 2-CPU machine that 1 MiB memcpy cost more than the overlap won.
 * So the data goes, from the start, into memory dcfs owns and can give
 * away: the job takes the block and the thread reads its next request
 * into a fresh one.
 *
 * How.  wire.c's read hook calls reqbuf_read() for every request.
 * It is read with readv() into two pieces: the first HDR bytes (the
 * fuse_in_header and fuse_write_in of a WRITE) into libfuse's buffer, the
 * rest into this thread's block, page-aligned.  The total length is what
 * libfuse asked for, so the kernel's check (at least max_write plus the
 * headers) passes as before, and /dev/fuse fills iovecs in order.  Then:
 *  - a request that is not a WRITE, or whose size does not match: what
 *    went into the block is copied back behind the headers, and libfuse
 *    sees the usual contiguous request (such requests are small: the
 *    largest are SETXATTR values);
 *  - a WRITE: the data stays in the block and a thread-local note says so.
 *    libfuse hands the request to its handler in the thread that read it
 *    (fuse_session_loop and fuse_session_loop_mt alike), so write_buf,
 *    the only consumer of WRITE data, finds the note with
 *    reqbuf_locate(), which checks that the note is this request's (the
 *    header still sits in front of libfuse's data pointer: same unique,
 *    same size) and points the request at the block.  libfuse's own bytes
 *    behind the header are stale and are never used.
 * Every WRITE is left in the block, not only large ones: copying a 64 KiB
 * write back would be a copy the old read did not make, and locating it
 * costs nothing.  Whether a write's block is worth adopting is the write
 * engine's decision (write_pipe.c), by how much of it comes from the
 * request.
 *
 * Ownership.  A thread owns at most one block (its current one; returned
 * to the pool when the thread exits).  reqbuf_adopt() gives it to the
 * caller, the worker gives it back with reqbuf_release() once written; a
 * bounded free list keeps blocks with their pages faulted in, the rest are
 * unmapped.  So the blocks alive are one per libfuse thread, those in
 * jobs (bounded by the write engine's in-flight limits) and the free list.
 * Blocks are mmap()ed: page-aligned, and outside malloc's arenas, so a
 * released block really returns its memory.
 */
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/transport.h"

#define PAGE 4096
/* Headers of a WRITE: what goes into libfuse's buffer. */
#define HDR (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))
/*
 * Room in front of the data: the write engine puts the head of a run it
 * buffered there, so a job stays one contiguous write (reqbuf_room()).
 */
#define ROOM PAGE
/* Data capacity: libfuse 3.14's buffer (256 pages + a page) less HDR. */
#define DATA_CAP (((size_t)256 << 12) + PAGE)
#define BLOCK_SIZE (ROOM + DATA_CAP)
/* Free blocks kept: a stream's worth of the default in-flight bound. */
#define FREE_MAX 12

_Static_assert(HDR == 80, "fuse_in_header + fuse_write_in");

struct reqbuf {
	struct reqbuf *next; /* free list */
};

static struct {
	pthread_mutex_t lock;
	struct reqbuf *free;
	unsigned int nfree;
	pthread_key_t key;
	pthread_once_t once;
	bool key_ok;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT };

/* This thread's block, and what its current request left in it. */
static __thread struct {
	struct reqbuf *cur;
	struct {
		const struct fuse_in_header *hdr; /* NULL: nothing in the block */
		uint64_t unique;
		uint32_t size;
	} note;
} self;

static char *data_of(struct reqbuf *rb)
{
	return (char *)rb + ROOM;
}

void reqbuf_release(struct reqbuf *rb)
{
	if (!rb)
		return;
	pthread_mutex_lock(&pool.lock);
	if (pool.nfree < FREE_MAX) {
		rb->next = pool.free;
		pool.free = rb;
		pool.nfree++;
		rb = NULL;
	}
	pthread_mutex_unlock(&pool.lock);
	if (rb)
		munmap(rb, BLOCK_SIZE);
}

static void thread_gone(void *p)
{
	reqbuf_release(p);
}

static void key_init(void)
{
	pool.key_ok = pthread_key_create(&pool.key, thread_gone) == 0;
}

static struct reqbuf *block_get(void)
{
	struct reqbuf *rb;
	void *p;

	pthread_once(&pool.once, key_init);
	if (!pool.key_ok)
		return NULL;
	pthread_mutex_lock(&pool.lock);
	rb = pool.free;
	if (rb) {
		pool.free = rb->next;
		pool.nfree--;
	}
	pthread_mutex_unlock(&pool.lock);
	if (!rb) {
		p = mmap(NULL, BLOCK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			 0);
		if (p == MAP_FAILED)
			return NULL;
		rb = p;
	}
	/* The key's value is only for the destructor; cur is the fast path. */
	pthread_setspecific(pool.key, rb);
	return rb;
}

ssize_t reqbuf_read(int fd, void *buf, size_t len)
{
	const struct fuse_in_header *in = buf;
	const struct fuse_write_in *w = (const void *)(in + 1);
	struct iovec iov[2];
	ssize_t n;
	size_t rest;

	self.note.hdr = NULL;
	if (len <= HDR || len - HDR > DATA_CAP)
		return read(fd, buf, len);
	if (!self.cur)
		self.cur = block_get();
	if (!self.cur)
		return read(fd, buf, len); /* no memory: libfuse's buffer */
	iov[0] = (struct iovec){ buf, HDR };
	iov[1] = (struct iovec){ data_of(self.cur), len - HDR };
	n = readv(fd, iov, 2);
	if (n <= (ssize_t)HDR)
		return n;
	rest = (size_t)n - HDR;
	if (in->opcode == FUSE_WRITE && w->size == rest) {
		self.note.hdr = in;
		self.note.unique = in->unique;
		self.note.size = w->size;
	} else {
		memcpy((char *)buf + HDR, data_of(self.cur), rest);
	}
	return n;
}

/* Is this thread's noted request the WRITE whose data libfuse put at mem? */
static bool noted(const void *mem, size_t size)
{
	return self.note.hdr && self.cur && mem == (const char *)self.note.hdr + HDR &&
	       size == self.note.size && self.note.hdr->unique == self.note.unique &&
	       self.note.hdr->opcode == FUSE_WRITE;
}

int reqbuf_locate(struct fuse_bufvec *in)
{
	struct fuse_buf *b = &in->buf[0];

	if (!self.note.hdr)
		return 0;
	if (in->count != 1 || (b->flags & FUSE_BUF_IS_FD) || !noted(b->mem, b->size)) {
		/*
		 * The data of this thread's request is in the block, and this
		 * is not where libfuse says it is: never serve stale bytes.
		 * Cannot happen with protocol >= 7.9 (every kernel since
		 * 2.6.26), whose WRITE header is HDR bytes.
		 */
		log_err("write request %llu: data not where expected\n",
			(unsigned long long)self.note.unique);
		self.note.hdr = NULL;
		return -EIO;
	}
	b->mem = data_of(self.cur);
	return 0;
}

struct reqbuf *reqbuf_adopt(const void *data, size_t len)
{
	struct reqbuf *rb = self.cur;

	if (!self.note.hdr || !rb || data != data_of(rb) || len != self.note.size)
		return NULL;
	self.note.hdr = NULL;
	self.cur = NULL;
	pthread_setspecific(pool.key, NULL);
	return rb;
}

char *reqbuf_data(struct reqbuf *rb)
{
	return data_of(rb);
}

size_t reqbuf_room(void)
{
	return ROOM;
}
