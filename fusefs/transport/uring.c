// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE over io_uring (the default, -o nouring turns it off; Linux >= 6.14):
 * requests served on the CPU that issued them.
 *
 * Why.  On a small VM a /dev/fuse round trip costs 8 us when the
 * application and the daemon thread share a CPU, 12-46 us when an idle
 * vCPU has to be woken.  The kernel's io_uring transport (fs/fuse/
 * dev_uring.c) has one queue per possible CPU and puts each request on the
 * queue of the CPU that issued it; dcfs serves queue N with threads pinned
 * to CPU N, so a request normally never leaves its CPU.
 *
 * Protocol facts this file relies on (fs/fuse/dev_uring.c, 6.14-6.18):
 *  - the kernel offers FUSE_OVER_IO_URING at INIT only while the fuse
 *    module parameter enable_uring is Y, and accepting it makes every new
 *    request wait until each queue has a registered entry (the ring is
 *    "ready"); a failed REGISTER withdraws io_uring from the connection and
 *    releases the waiters.  So the rings are created before the INIT reply
 *    accepts it (a failure there means not accepting), and every queue gets
 *    its threads right after the reply.
 *  - REGISTER and COMMIT_AND_FETCH are IORING_OP_URING_CMD on the /dev/fuse
 *    fd in a 128-byte SQE; the command area holds qid (and the commit id).
 *    addr points at two iovecs: a header block (fuse_uring_req_header) and
 *    a payload buffer of at least max(8 KiB, max_write, max_pages pages).
 *  - a request arrives as the CQE of an entry's pending command: the
 *    fuse_in_header in in_out, the opcode's fixed header (the request's
 *    first argument) in op_in, everything else in the payload
 *    (ring_ent_in_out.payload_sz bytes); in.len counts all three.
 *  - the reply is the out header in in_out and the rest in the payload,
 *    its length in payload_sz; COMMIT_AND_FETCH hands it over and re-arms
 *    the entry in one submission.
 *  - FORGET and INTERRUPT still come through /dev/fuse, and notifications
 *    (unique 0) must still go there; libfuse's own loop keeps serving it.
 *  - requests of a queue whose entries are all busy wait in that queue, so
 *    each queue has several threads (one entry each): a request blocked in
 *    the backing filesystem (fsync, a write waiting for room in the
 *    pipeline) holds one thread, not the CPU's queue.
 *  - unmount or abort completes every entry's command with -ENOTCONN, and
 *    closing a ring cancels its commands: the threads end on their own when
 *    the connection goes; uring_stop() wakes them through an eventfd each
 *    ring polls.
 *
 * libfuse 3.14 knows nothing of this.  A thread turns its entry into the
 * contiguous buffer libfuse expects without moving the payload: the
 * payload sits 4 KiB into its block, and the two headers are written just
 * in front of it; fuse_session_process_buf() runs the handler.  Handlers
 * reply synchronously through the session's writev hook (wire.c,
 * which patches OPEN/CREATE replies first) and call uring_reply(), which
 * recognises this thread's request by its unique and keeps the reply in
 * the entry; the commit goes out when the handler has returned.  A reply to
 * a request that carried a payload (WRITE data, names) is staged and only
 * copied over the payload after the handler is done with its arguments.
 * libfuse's splice replies (fuse_reply_data() of a backing fd) reach
 * uring_splice_reply(), which reads the pipe into the entry instead of
 * splicing to /dev/fuse; the plain read path avoids the pipe altogether by
 * reading the backing file straight into the entry (uring_reply_buffer()).
 * reqbuf.c's WRITE adoption never applies: its thread-local note is only
 * set by wire.c's read hook, which uring threads never run; write_pipe.c queues a
 * copy instead (worth_queueing()).
 *
 * Anything missing (no parameter, no rights, no io_uring, an odd CPU
 * layout) is logged once and the mount keeps using /dev/fuse.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "transport/transport.h"

/* Protocol 7.42 names Debian 12's <linux/fuse.h> (7.38) lacks. */
#define UR_INIT_OVER_IO_URING (1U << (41 - 32)) /* flags2 */
#define UR_CMD_REGISTER 1
#define UR_CMD_COMMIT_AND_FETCH 2
#define UR_HDR_IN_OUT 128
#define UR_HDR_OP_IN 128

struct ur_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};

struct ur_req_header {
	char in_out[UR_HDR_IN_OUT];
	char op_in[UR_HDR_OP_IN];
	struct ur_ent_in_out ent;
};

struct ur_cmd_req {
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#ifdef FUSE_OVER_IO_URING
_Static_assert(FUSE_OVER_IO_URING >> 32 == UR_INIT_OVER_IO_URING, "FUSE_OVER_IO_URING");
#endif
_Static_assert(sizeof(struct ur_ent_in_out) == 32, "fuse_uring_ent_in_out");
_Static_assert(offsetof(struct ur_ent_in_out, payload_sz) == 16, "payload_sz");
_Static_assert(sizeof(struct ur_req_header) == 288, "fuse_uring_req_header");
_Static_assert(offsetof(struct ur_req_header, ent) == 256, "ring_ent_in_out");
_Static_assert(sizeof(struct ur_cmd_req) == 24, "fuse_uring_cmd_req");
_Static_assert(offsetof(struct ur_cmd_req, qid) == 16, "cmd_req.qid");
/* The command area of a 128-byte SQE starts at the 64-byte SQE's addr3. */
_Static_assert(offsetof(struct io_uring_sqe, cmd) == 48, "sqe cmd area");

/* Threads (one entry each) per queue: see the top comment. */
#define UR_THREADS_PER_CPU 4
/* Threads added to queues whose threads wait for file locks (at most). */
#define UR_EXTRA_MAX 256
#define UR_MAX_CPUS URING_MAX_QUEUES
/* In front of the payload: room for fuse_in_header + the op header. */
#define UR_HEADROOM 4096
/* Replies to requests with a payload are this small (entry_out + open_out). */
#define UR_STAGE 4096
#define UR_TAG_ENTRY 1
#define UR_TAG_WAKE 2
#define UR_EAGAIN_TRIES 100

struct ur_worker {
	unsigned int qid;
	unsigned int idx;
	struct io_uring ring;
	bool ring_ok;
	pthread_t tid;
	bool started;
	_Atomic bool done;
	struct ur_req_header *hdr;
	char *block; /* UR_HEADROOM + payload */
	char *payload;
	size_t payload_size;
	struct iovec iov[2]; /* what REGISTER points at */
	char stage[UR_STAGE];
	/* the request being served */
	bool busy;
	uint64_t unique;
	uint64_t commit_id;
	bool in_payload; /* the request carried a payload */
	bool replied;
	bool staged;
	uint32_t out_len;
};

static struct {
	_Atomic bool on;  /* registered and serving */
	bool wanted;	  /* -o uring */
	bool param_set;	  /* this daemon set enable_uring to Y */
	bool accepted;	  /* the INIT reply carried the bit */
	char reason[128]; /* why it is off */
	int dev_fd;
	int wake_fd;
	unsigned int ncpus;
	unsigned int nworkers;	   /* started at INIT */
	unsigned int nextra;	   /* added for lock waits, after them */
	struct ur_worker *workers; /* room for nworkers + UR_EXTRA_MAX */
	struct fuse_session *se;
	_Atomic uint64_t requests, splices, in_place, staged_direct, no_reply;
	_Atomic uint64_t per_cpu[UR_MAX_CPUS];
	/* uring_may_block(): threads of each queue, those waiting for a lock */
	pthread_mutex_t grow_lock;
	unsigned int threads[UR_MAX_CPUS], blocked[UR_MAX_CPUS];
} ur = { .dev_fd = -1, .wake_fd = -1, .grow_lock = PTHREAD_MUTEX_INITIALIZER };

static __thread struct ur_worker *self;

#define ENABLE_URING "/sys/module/fuse/parameters/enable_uring"

static void set_reason(const char *fmt, const char *detail)
{
	snprintf(ur.reason, sizeof(ur.reason), fmt, detail);
}

/* --- before the mount: the module parameter ----------------------------- */

void uring_prepare(bool wanted)
{
	char c = 0;
	int fd;

	ur.wanted = wanted;
	if (!wanted) {
		set_reason("%s", "not requested");
		return;
	}
	fd = open(ENABLE_URING, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == EACCES)
		fd = open(ENABLE_URING, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		char detail[96];

		snprintf(detail, sizeof(detail), "%s: %s", ENABLE_URING, strerror(errno));
		set_reason(errno == ENOENT ? "the kernel has no FUSE over io_uring (%s)"
					   : "cannot open %s",
			   detail);
		return;
	}
	if (pread(fd, &c, 1, 0) == 1 && c == 'N') {
		/* Host-wide, like max_pages_limit: left set for other mounts. */
		if (pwrite(fd, "Y\n", 2, 0) == 2)
			ur.param_set = true;
		else
			set_reason("%s is N and the daemon may not change it", ENABLE_URING);
	}
	close(fd);
}

/* --- CPUs ---------------------------------------------------------------- */

/*
 * The kernel has one queue per possible CPU and picks it by CPU number, so
 * the possible CPUs must be 0..n-1 ("0-1", "0", "0-3").
 */
static unsigned int possible_cpus(void)
{
	char buf[64];
	unsigned int lo, hi;
	ssize_t n;
	int fd = open("/sys/devices/system/cpu/possible", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%u-%u", &lo, &hi) == 2 && lo == 0 && hi < UR_MAX_CPUS && !strchr(buf, ','))
		return hi + 1;
	if (sscanf(buf, "%u", &lo) == 1 && lo == 0 && !strchr(buf, ',') && !strchr(buf, '-'))
		return 1;
	return 0;
}

/* --- setup, before the INIT reply -------------------------------------- */

static void worker_free(struct ur_worker *w)
{
	if (w->ring_ok)
		io_uring_queue_exit(&w->ring);
	w->ring_ok = false;
	if (w->block)
		munmap(w->block, UR_HEADROOM + w->payload_size);
	w->block = NULL;
	free(w->hdr);
	w->hdr = NULL;
}

static int worker_alloc(struct ur_worker *w, size_t payload)
{
	void *p;
	int err;

	w->payload_size = payload;
	if (posix_memalign(&p, 64, sizeof(*w->hdr)) != 0)
		return -ENOMEM;
	w->hdr = memset(p, 0, sizeof(*w->hdr));
	/* mmap: page-aligned payload, pages only touched when used. */
	p = mmap(NULL, UR_HEADROOM + payload, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	w->block = p;
	w->payload = w->block + UR_HEADROOM;
	w->iov[0] = (struct iovec){ w->hdr, sizeof(*w->hdr) };
	w->iov[1] = (struct iovec){ w->payload, payload };
	/* Entry command, its re-arm, and the wake-up poll. */
	err = io_uring_queue_init(4, &w->ring, IORING_SETUP_SQE128);
	if (err < 0)
		return err;
	w->ring_ok = true;
	return 0;
}

static void workers_free(void)
{
	for (unsigned int i = 0; i < ur.nworkers + ur.nextra; i++)
		worker_free(&ur.workers[i]);
	free(ur.workers);
	ur.workers = NULL;
	ur.nworkers = ur.nextra = 0;
	if (ur.wake_fd >= 0)
		close(ur.wake_fd);
	ur.wake_fd = -1;
}

static int workers_alloc(size_t payload)
{
	int err;

	ur.nworkers = ur.ncpus * UR_THREADS_PER_CPU;
	ur.workers = calloc(ur.nworkers + UR_EXTRA_MAX, sizeof(*ur.workers));
	if (!ur.workers)
		return -ENOMEM;
	ur.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ur.wake_fd < 0)
		return -errno;
	for (unsigned int i = 0; i < ur.nworkers; i++) {
		ur.workers[i].qid = i % ur.ncpus;
		ur.workers[i].idx = i / ur.ncpus;
		err = worker_alloc(&ur.workers[i], payload);
		if (err < 0)
			return err;
	}
	return 0;
}

static uint32_t decide(int dev_fd, uint32_t offer, size_t max_payload)
{
	char detail[64];
	int err;

	if (ur.reason[0])
		return 0;
	if (!(offer & UR_INIT_OVER_IO_URING)) {
		set_reason("%s", "the kernel does not offer it at INIT");
		return 0;
	}
	ur.ncpus = possible_cpus();
	if (!ur.ncpus) {
		set_reason("%s", "possible CPUs are not 0..n-1");
		return 0;
	}
	ur.dev_fd = dev_fd;
	err = workers_alloc(max_payload);
	if (err < 0) {
		snprintf(detail, sizeof(detail), "%s", strerror(-err));
		set_reason("setting up the rings failed: %s", detail);
		workers_free();
		return 0;
	}
	ur.accepted = true;
	return UR_INIT_OVER_IO_URING;
}

/*
 * Called with the INIT reply about to go out: the flags2 bit to accept
 * FUSE_OVER_IO_URING with, or 0.  offer is the request's flags2;
 * max_payload what the kernel will require of each payload buffer.
 */
uint32_t uring_accept(int dev_fd, uint32_t offer, size_t max_payload)
{
	uint32_t bit;

	if (!ur.wanted)
		return 0;
	if (ur.param_set)
		log_info("set %s to Y (host-wide) for FUSE over io_uring\n", ENABLE_URING);
	bit = decide(dev_fd, offer, max_payload);
	if (!bit)
		log_warn("uring: off (%s); requests go through /dev/fuse\n", ur.reason);
	return bit;
}

/* --- submissions --------------------------------------------------------- */

static struct io_uring_sqe *sqe_get(struct ur_worker *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);

	if (sqe)
		memset(sqe, 0, 2 * sizeof(*sqe)); /* the whole 128-byte SQE */
	return sqe;
}

static int prep_cmd(struct ur_worker *w, uint32_t op, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = sqe_get(w);
	struct ur_cmd_req req = { .commit_id = commit_id, .qid = (uint16_t)w->qid };

	if (!sqe)
		return -EBUSY;
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = ur.dev_fd;
	sqe->cmd_op = op;
	sqe->addr = (uintptr_t)w->iov;
	sqe->len = 2;
	sqe->user_data = UR_TAG_ENTRY;
	memcpy(sqe->cmd, &req, sizeof(req));
	return 0;
}

static int prep_wake(struct ur_worker *w)
{
	struct io_uring_sqe *sqe = sqe_get(w);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, ur.wake_fd, POLLIN);
	sqe->user_data = UR_TAG_WAKE;
	return 0;
}

/* --- one request ----------------------------------------------------------- */

/*
 * The libfuse buffer: in header and op header written in front of the
 * payload, which stays where the kernel put it.  Returns its start or NULL.
 */
static char *request_buffer(struct ur_worker *w, size_t *len)
{
	const struct fuse_in_header *in = (const void *)w->hdr->in_out;
	uint32_t payload = w->hdr->ent.payload_sz;
	size_t op_len;
	char *start;

	if (payload > w->payload_size || in->len < sizeof(*in) + payload)
		return NULL;
	op_len = in->len - sizeof(*in) - payload;
	if (op_len > UR_HDR_OP_IN)
		return NULL;
	start = w->payload - op_len - sizeof(*in);
	memcpy(start, in, sizeof(*in));
	memcpy(start + sizeof(*in), w->hdr->op_in, op_len);
	*len = in->len;
	return start;
}

static void reply_error(struct ur_worker *w, int err)
{
	struct fuse_out_header out = {
		.len = sizeof(out),
		.error = -err,
		.unique = w->unique,
	};

	memcpy(w->hdr->in_out, &out, sizeof(out));
	w->out_len = 0;
	w->staged = false;
	w->replied = true;
}

static void serve_one(struct ur_worker *w)
{
	const struct fuse_in_header *in = (const void *)w->hdr->in_out;
	struct fuse_buf buf = { .flags = 0 };
	size_t len;
	char *mem;

	w->unique = in->unique;
	w->commit_id = w->hdr->ent.commit_id;
	w->in_payload = w->hdr->ent.payload_sz > 0;
	w->replied = w->staged = false;
	w->out_len = 0;
	reqstats_count(in->opcode);
	atomic_fetch_add(&ur.requests, 1);
	atomic_fetch_add(&ur.per_cpu[w->qid], 1);
	mem = request_buffer(w, &len);
	if (!mem) {
		log_err("uring: malformed request %llu (opcode %u, len %u, payload %u)\n",
			(unsigned long long)in->unique, in->opcode, in->len,
			w->hdr->ent.payload_sz);
		reply_error(w, EIO);
		return;
	}
	buf.mem = mem;
	buf.size = len;
	w->busy = true;
	fuse_session_process_buf(ur.se, &buf);
	w->busy = false;
	if (!w->replied) {
		/* dcfs replies in the handler's thread; never leave an entry stuck. */
		if (atomic_fetch_add(&ur.no_reply, 1) == 0)
			log_err("uring: request %llu (opcode %u) got no reply in its thread; answered EIO\n",
				(unsigned long long)w->unique, in->opcode);
		reply_error(w, EIO);
	}
	if (w->staged)
		memcpy(w->payload, w->stage, w->out_len);
	w->hdr->ent.payload_sz = w->out_len;
}

/* --- the replies, from wire.c's hooks -------------------------------------- */

static bool mine(const struct fuse_out_header *out)
{
	return self && self->busy && !self->replied && out->unique && out->unique == self->unique;
}

/* Where a reply's payload of len bytes goes; NULL if it cannot fit. */
static char *reply_dest(struct ur_worker *w, size_t len)
{
	if (len > w->payload_size)
		return NULL;
	w->staged = w->in_payload && len <= UR_STAGE;
	if (w->in_payload && !w->staged && atomic_fetch_add(&ur.staged_direct, 1) == 0)
		log_warn(
			"uring: a %zu-byte reply to a request with a payload is written over it (logged once)\n",
			len);
	return w->staged ? w->stage : w->payload;
}

bool uring_thread(void)
{
	return self != NULL;
}

static void *worker_main(void *arg);

/*
 * One more thread (and entry) for queue q: the kernel takes a REGISTER at
 * any time, an entry cannot be taken back, so it serves the queue until
 * the connection ends.  Its payload buffer costs nothing until used.
 * grow_lock held.
 */
static bool queue_grow(unsigned int q)
{
	struct ur_worker *w;
	sigset_t all, old;
	int err;

	if (!atomic_load(&ur.on) || ur.nextra >= UR_EXTRA_MAX)
		return false;
	w = &ur.workers[ur.nworkers + ur.nextra];
	memset(w, 0, sizeof(*w));
	w->qid = q;
	w->idx = ur.threads[q];
	if (worker_alloc(w, ur.workers[0].payload_size) < 0) {
		worker_free(w);
		return false;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&w->tid, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		worker_free(w);
		return false;
	}
	w->started = true;
	ur.nextra++;
	ur.threads[q]++;
	if (ur.nextra == 1)
		log_info("uring: queue %u: a thread added for a lock wait (at most %d in all)\n", q,
			 UR_EXTRA_MAX);
	return true;
}

/*
 * A handler of this thread's request is about to wait, for as long as
 * someone else holds a file lock (handlers/fuse_lock.c).  Its reply can
 * only go through this thread's entry, so it waits here, and the queue's
 * other requests are served by its other threads: one is always kept free,
 * a thread is added to the queue where none would be (UR_EXTRA_MAX in
 * all).  False if the waiter must not block (it then answers ENOLCK).
 */
bool uring_may_block(void)
{
	unsigned int q;
	bool ok = true;

	if (!self)
		return true;
	q = self->qid;
	pthread_mutex_lock(&ur.grow_lock);
	if (ur.threads[q] - ur.blocked[q] <= 1)
		ok = queue_grow(q);
	if (ok)
		ur.blocked[q]++;
	pthread_mutex_unlock(&ur.grow_lock);
	return ok;
}

void uring_unblock(void)
{
	if (!self)
		return;
	pthread_mutex_lock(&ur.grow_lock);
	ur.blocked[self->qid]--;
	pthread_mutex_unlock(&ur.grow_lock);
}

/*
 * Where a handler may read the data of this thread's request's reply, so
 * that it is already in the entry: the payload of a request that carried
 * none (READ), or NULL.
 */
void *uring_reply_buffer(size_t size)
{
	struct ur_worker *w = self;

	if (!w || !w->busy || w->replied || w->in_payload || size > w->payload_size)
		return NULL;
	return w->payload;
}

ssize_t uring_reply(const struct iovec *iov, int count)
{
	struct ur_worker *w = self;
	const struct fuse_out_header *out;
	size_t len = 0, at = 0;
	char *dest;

	if (count < 1 || iov[0].iov_len != sizeof(*out) || !mine(iov[0].iov_base))
		return 0;
	out = iov[0].iov_base;
	for (int i = 1; i < count; i++)
		len += iov[i].iov_len;
	if (count == 2 && iov[1].iov_base == w->payload && !w->in_payload &&
	    len <= w->payload_size) {
		/* Read there by uring_reply_buffer()'s caller: nothing to copy. */
		memcpy(w->hdr->in_out, out, sizeof(*out));
		w->out_len = (uint32_t)len;
		w->staged = false;
		w->replied = true;
		atomic_fetch_add(&ur.in_place, 1);
		return (ssize_t)(sizeof(*out) + len);
	}
	dest = reply_dest(w, len);
	if (!dest) {
		reply_error(w, EIO);
		errno = EINVAL;
		return -1;
	}
	for (int i = 1; i < count; i++) {
		memcpy(dest + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	memcpy(w->hdr->in_out, out, sizeof(*out));
	w->out_len = (uint32_t)len;
	w->replied = true;
	return (ssize_t)(sizeof(*out) + len);
}

static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = read(fd, (char *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		got += (size_t)n;
	}
	return 0;
}

/* A spliced reply that is not this entry's: to /dev/fuse, by copy. */
static ssize_t splice_to_dev(int fdin, const struct fuse_out_header *out, size_t rest)
{
	struct iovec iov[2];
	char *buf = malloc(rest ? rest : 1);
	ssize_t n;
	int err;

	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	err = read_full(fdin, buf, rest);
	if (err < 0) {
		free(buf);
		errno = -err;
		return -1;
	}
	iov[0] = (struct iovec){ (void *)out, sizeof(*out) };
	iov[1] = (struct iovec){ buf, rest };
	n = writev(ur.dev_fd, iov, 2);
	free(buf);
	return n;
}

ssize_t uring_splice_reply(int fdin, size_t len, bool *handled)
{
	struct ur_worker *w = self;
	struct fuse_out_header out;
	size_t rest;
	char *dest;
	int err;

	*handled = false;
	if (!w || !w->busy || w->replied || len < sizeof(out))
		return 0;
	*handled = true;
	err = read_full(fdin, &out, sizeof(out));
	if (err < 0) {
		errno = -err;
		return -1;
	}
	rest = len - sizeof(out);
	if (!mine(&out))
		return splice_to_dev(fdin, &out, rest);
	dest = reply_dest(w, rest);
	if (!dest) {
		reply_error(w, EIO);
		errno = EINVAL;
		return -1;
	}
	err = read_full(fdin, dest, rest);
	if (err < 0) {
		reply_error(w, EIO);
		errno = -err;
		return -1;
	}
	memcpy(w->hdr->in_out, &out, sizeof(out));
	w->out_len = (uint32_t)rest;
	w->replied = true;
	atomic_fetch_add(&ur.splices, 1);
	return (ssize_t)len;
}

/* --- the threads ---------------------------------------------------------- */

static void pin(struct ur_worker *w)
{
	cpu_set_t set;
	int err;

	CPU_ZERO(&set);
	CPU_SET(w->qid, &set);
	err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	/* Unpinned it still serves its queue, only without the locality. */
	if (err && w->idx == 0)
		log_warn("uring: cannot pin a thread to CPU %u: %s\n", w->qid, strerror(err));
}

/* Waits for and handles one completion; returns 0, or -errno to stop. */
static int step(struct ur_worker *w, unsigned int *eagain)
{
	struct io_uring_cqe *cqe;
	uint64_t tag;
	int res, err;

	err = io_uring_submit_and_wait(&w->ring, 1);
	if (err == -EINTR)
		return 0;
	if (err < 0)
		return err;
	err = io_uring_peek_cqe(&w->ring, &cqe);
	if (err == -EAGAIN)
		return 0;
	if (err < 0)
		return err;
	tag = cqe->user_data;
	res = cqe->res;
	io_uring_cqe_seen(&w->ring, cqe);
	if (tag == UR_TAG_WAKE)
		return -ESHUTDOWN;
	if (res == -EAGAIN && ++*eagain < UR_EAGAIN_TRIES) {
		/* The connection is not initialized yet: register again. */
		usleep(10000);
		return prep_cmd(w, UR_CMD_REGISTER, 0);
	}
	if (res < 0)
		return res;
	serve_one(w);
	return prep_cmd(w, UR_CMD_COMMIT_AND_FETCH, w->commit_id);
}

static void *worker_main(void *arg)
{
	struct ur_worker *w = arg;
	unsigned int eagain = 0;
	int err;

	self = w;
	pin(w);
	err = prep_wake(w);
	if (!err)
		err = prep_cmd(w, UR_CMD_REGISTER, 0);
	while (!err)
		err = step(w, &eagain);
	if (err != -ESHUTDOWN && err != -ENOTCONN && err != -ECANCELED && err != -ENODEV &&
	    w->idx == 0)
		log_warn(
			"uring: queue %u: %s; its requests go through /dev/fuse if the ring is not ready\n",
			w->qid, strerror(-err));
	if (atomic_load(&ur.on) && err != -ESHUTDOWN)
		log_debug("uring: thread %u/%u ends (%s)\n", w->qid, w->idx, strerror(-err));
	atomic_store(&w->done, true);
	return NULL;
}

/*
 * After the INIT reply was applied.  A queue without a single thread would
 * block the connection (the ring is never ready): then one bad REGISTER
 * makes the kernel withdraw io_uring from it.
 */
void uring_start(struct fuse_session *se)
{
	bool queue_ok[UR_MAX_CPUS] = { false };
	sigset_t all, old;

	if (!ur.accepted)
		return;
	ur.se = se;
	/* Signals stay with the main thread (shutdown.c), as libfuse's workers. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned int i = 0; i < ur.nworkers; i++) {
		if (pthread_create(&ur.workers[i].tid, NULL, worker_main, &ur.workers[i]) == 0) {
			ur.workers[i].started = true;
			queue_ok[ur.workers[i].qid] = true;
			ur.threads[ur.workers[i].qid]++;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (unsigned int q = 0; q < ur.ncpus; q++) {
		if (queue_ok[q])
			continue;
		set_reason("%s", "could not start the threads of every queue");
		log_warn("uring: off (%s)\n", ur.reason);
		for (unsigned int i = 0; i < ur.nworkers; i++) {
			struct ur_worker *w = &ur.workers[i];

			if (!w->started && prep_cmd(w, UR_CMD_REGISTER, 0) == 0) {
				w->iov[1].iov_len = 0; /* refused: too small */
				io_uring_submit(&w->ring);
				break;
			}
		}
		return;
	}
	atomic_store(&ur.on, true);
	log_info("uring: on, %u queues x %d threads, payload %zu bytes\n", ur.ncpus,
		 UR_THREADS_PER_CPU, ur.workers[0].payload_size);
}

void uring_stop(void)
{
	struct timespec until;
	uint64_t one = 1;
	bool stuck = false;

	if (!ur.workers)
		return;
	if (ur.wake_fd >= 0 && write(ur.wake_fd, &one, sizeof(one)) < 0)
		(void)0; /* a full counter is readable anyway */
	/* One deadline for all: a thread may be stuck in a hung filesystem. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 3;
	pthread_mutex_lock(&ur.grow_lock); /* no thread is added from now on */
	for (unsigned int i = 0; i < ur.nworkers + ur.nextra; i++) {
		struct ur_worker *w = &ur.workers[i];

		if (w->started && pthread_timedjoin_np(w->tid, NULL, &until) != 0) {
			stuck = true;
			continue;
		}
		w->started = false;
	}
	atomic_store(&ur.on, false);
	if (stuck) {
		/* Its ring and buffers stay: the thread may still use them. */
		pthread_mutex_unlock(&ur.grow_lock);
		log_warn("uring: a thread is still in a request at exit\n");
		return;
	}
	workers_free();
	pthread_mutex_unlock(&ur.grow_lock);
}

/* --- reporting ---------------------------------------------------------- */

static const char *state_name(void)
{
	return atomic_load(&ur.on) ? "on" : ur.accepted ? "stopped" : "off";
}

void uring_stats(struct uring_stats *st)
{
	st->state = state_name();
	st->on = atomic_load(&ur.on);
	st->accepted = ur.accepted;
	snprintf(st->reason, sizeof(st->reason), "%s", st->on ? "" : ur.reason);
	st->queues = ur.ncpus;
	st->threads_per_queue = UR_THREADS_PER_CPU;
	st->requests = atomic_load(&ur.requests);
	st->splices = atomic_load(&ur.splices);
	st->in_place = atomic_load(&ur.in_place);
	for (unsigned int i = 0; i < ur.ncpus && i < URING_MAX_QUEUES; i++)
		st->per_queue[i] = atomic_load(&ur.per_cpu[i]);
}
