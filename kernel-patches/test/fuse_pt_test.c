// SPDX-License-Identifier: GPL-2.0
/*
 * FUSE passthrough with uncached backing I/O (patches 0021-0022): ABI test
 * run inside the UML guest, independent of dcfs and libfuse.
 *
 *   fuse_pt_test offer [expect-yes|expect-no]
 *       print whether the kernel's INIT request offers
 *       FUSE_PASSTHROUGH_DONTCACHE; assert it with expect-yes / expect-no
 *       (the unpatched control kernel must not offer it)
 *   fuse_pt_test uncached BACKINGDIR
 *       the server accepts the offer and opens files with
 *       FOPEN_PASSTHROUGH_DONTCACHE_READ | _WRITE: 64 MiB written with
 *       1 MiB, 64 KiB and 4 KiB requests and 8 MiB of 4000- and
 *       10000-byte appends, through write()/read() and through Linux AIO
 *       (the backing file's asynchronous path), must leave 0 pages of the
 *       backing files cached, and read back right; a plain passthrough
 *       open is the baseline that does leave its pages cached
 *   fuse_pt_test mixed BACKINGDIR
 *       one inode open four times at once: plain passthrough, uncached
 *       reads and writes, uncached reads only, uncached writes only; each
 *       handle's reads and writes are cached or not as its own open asked
 *   fuse_pt_test refuse BACKINGDIR
 *       BACKINGDIR on a file system without RWF_DONTCACHE (tmpfs): an
 *       uncached open fails with EIO, a plain passthrough open works
 *   fuse_pt_test unnegotiated BACKINGDIR
 *       the server does not accept the INIT offer but sets the open flags
 *       anyway: passthrough opens with them fail with EIO, plain
 *       passthrough opens work, and an open without FOPEN_PASSTHROUGH
 *       ignores them (unknown bits, as in mainline)
 *   fuse_pt_test dio BACKINGDIR
 *       no passthrough: the server serves READ and WRITE from the backing
 *       files (FUSE_ASYNC_DIO accepted).  A direct write (FOPEN_DIRECT_IO
 *       and/or O_DIRECT, by write() and by io_submit()) races with a
 *       buffered read through another open of the file that caches the
 *       range again from the old data: the server holds the WRITE until it
 *       has answered that READ.  Once the write has completed, a buffered
 *       read through the other open must return the new data (patch 0024;
 *       queued O_DIRECT writes failed this before it)
 *   fuse_pt_test attrrace|attrrace-delay BACKINGDIR
 *       B2: FUSE_PASSTHROUGH_ATTR with a 60 s attribute timeout; two
 *       extending O_DIRECT writes at once by io_submit() from two CPUs on
 *       a passthrough file, 300 times: after each pair the FUSE inode's
 *       size must be the backing file's (no older attribute snapshot stored
 *       last); -delay: with the attrdelay module (test/attrdelay.c) holding
 *       one completion's snapshot before it is stored
 *   fuse_pt_test stacked BACKINGDIR
 *       B6: FUSE_PASSTHROUGH_ATTR over a backing file on another FUSE
 *       mount (this server again, in a child): after a passthrough write
 *       the file's blocks and times are the lower server's, not the lower
 *       inode's stale ones
 *   FUSE_PT_BLKDEV=DEV fuse_pt_test stacked-blk BACKINGDIR
 *       the same with the lower mount a fuseblk one on block device DEV
 *       (as ntfs-3g and exfat-fuse are: FS_REQUIRES_DEV)
 *
 * The program is its own FUSE server (one thread, read()/writev() on
 * /dev/fuse), mounted with mount(2) on a fresh directory in /tmp.  Its root
 * directory shows the regular files of BACKINGDIR one to one; OPEN and
 * CREATE register the backing file with FUSE_DEV_IOC_BACKING_OPEN (one id
 * per inode, as the kernel requires for every passthrough open of an inode)
 * and reply with the FOPEN_* flags the test case chose for that open.
 * Every request is counted by opcode, so a case can assert that no READ or
 * WRITE reached the server: all data went through the backing file.
 * Residency is measured with cachestat(2) on the backing file itself.
 *
 * Output: one PASS/FAIL line per check and "N passed, M failed"; the exit
 * status is 0 only if nothing failed.  Must run as root (mount(2),
 * FUSE_DEV_IOC_BACKING_OPEN needs CAP_SYS_ADMIN, drop_caches).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/aio_abi.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "kt_common.h"

/* Protocol names Debian 12's <linux/fuse.h> lacks (as the daemon uses them) */
#include "dcfs_fuse_proto.h"

#define PT_MAX_STACK_DEPTH 1
_Static_assert(sizeof(struct fuse_create_in) == 16, "fuse_create_in");

#define RWF_DONTCACHE_ 0x00000080	/* RWF_DONTCACHE (patch 0002) */

#define KIB 1024UL
#define MIB (1024UL * 1024UL)
#define PAGE 4096UL

/* ------------------------------------------------------------------ */
/* Checks, content, page cache residency                                */

static int summary(void)
{
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * Deterministic content: 8-byte words derived from seed and file offset,
 * so any request size and alignment reproduces the same file.
 */
static void fill(unsigned char *buf, size_t len, uint64_t off, uint64_t seed)
{
	size_t i = 0;

	while (i < len) {
		uint64_t word = (off + i) / 8;
		uint64_t v = mix64(seed * 0x100000001b3ULL ^ word);
		size_t skip = (off + i) % 8;
		size_t n = 8 - skip < len - i ? 8 - skip : len - i;

		memcpy(buf + i, (unsigned char *)&v + skip, n);
		i += n;
	}
}

/* buf must hold what fill() makes of [off, off + len); report the first
 * difference */
static int verify(const unsigned char *buf, size_t len, uint64_t off,
		  uint64_t seed, unsigned char *scratch)
{
	size_t i;

	fill(scratch, len, off, seed);
	if (!memcmp(buf, scratch, len))
		return 1;
	for (i = 0; buf[i] == scratch[i]; i++)
		;
	printf("  data mismatch at offset %llu\n",
	       (unsigned long long)(off + i));
	return 0;
}

static void write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		die(path);
	close(fd);
}

/* Make the next reads come from the disk. */
static void drop_caches(void)
{
	sync();
	write_file("/proc/sys/vm/drop_caches", "3");
}

/* ------------------------------------------------------------------ */
/* The FUSE server                                                      */

#define MAX_NODES 256
#define MAX_WRITE (128 * KIB)
/* the kernel refuses reads shorter than max_write plus the headers */
#define REQ_BUF_SIZE (MAX_WRITE + 64 * KIB)
#define N_OPCODES 64

/* A regular file of the backing directory; its nodeid is index + 2. */
struct node {
	char name[NAME_MAX + 1];
	unsigned int opens;	/* opens the kernel may still release */
	int backing_id;		/* > 0: registered for passthrough */
};

static struct {
	int fd;			/* /dev/fuse */
	int dir;		/* the backing directory */
	char mnt[32];
	pthread_t thread;
	bool accept_dontcache;	/* accept FUSE_PASSTHROUGH_DONTCACHE */
	bool no_passthrough;	/* "stacked"'s lower server: no FUSE_PASSTHROUGH */
	bool serve_data;	/* "dio": READ/WRITE served, FUSE_ASYNC_DIO */
	/*
	 * "dio": the next WRITE is held, unanswered, until a READ has been
	 * answered (or HOLD_SECS passed): the READ sees the old data, and
	 * the kernel may cache it while the write is still in flight.
	 */
	atomic_bool hold_next_write;
	atomic_bool write_held;
	atomic_uint reads_while_held;
	atomic_uint hold_timeouts;
	void *held;		/* the held WRITE request (server thread) */
	double held_since;
	_Atomic uint64_t offered;	/* the kernel's INIT flags */
	_Atomic uint64_t accepted;	/* our INIT reply's flags */
	atomic_bool initialised;
	_Atomic uint32_t open_flags;	/* FOPEN_* for the next OPEN/CREATE */
	atomic_uint ops[N_OPCODES + 1];	/* last: opcodes >= N_OPCODES */
	/* only the server thread touches the nodes: no lock */
	struct node nodes[MAX_NODES];
	int nnodes;
} srv;

/* "attrrace": accept FUSE_PASSTHROUGH_ATTR, attributes valid this long */
static bool opt_accept_attr;
static unsigned int opt_attr_secs;

static unsigned int op_count(unsigned int opcode)
{
	return atomic_load(&srv.ops[opcode < N_OPCODES ? opcode : N_OPCODES]);
}

static void reply(const struct fuse_in_header *in, int err,
		  const void *a, size_t alen, const void *b, size_t blen)
{
	struct fuse_out_header out = { .error = err, .unique = in->unique };
	struct iovec iov[3] = {
		{ &out, sizeof(out) },
		{ (void *)a, alen },
		{ (void *)b, blen },
	};
	int n = err ? 1 : 3;

	if (err)
		alen = blen = 0;
	out.len = sizeof(out) + alen + blen;
	/* ENOENT: the request was interrupted meanwhile, nobody waits */
	if (writev(srv.fd, iov, n) < 0 && errno != ENOENT)
		printf("server: reply to opcode %u failed: %s\n", in->opcode,
		       strerror(errno));
}

static void reply_err(const struct fuse_in_header *in, int err)
{
	reply(in, -err, NULL, 0, NULL, 0);
}

static struct node *node_of(uint64_t nodeid)
{
	if (nodeid < 2 || nodeid - 2 >= (uint64_t)srv.nnodes)
		return NULL;
	return &srv.nodes[nodeid - 2];
}

static uint64_t nodeid_of(const struct node *n)
{
	return n - srv.nodes + 2;
}

/* the node of backing file @name, made on first sight */
static struct node *node_get(const char *name)
{
	struct node *n;
	int i;

	for (i = 0; i < srv.nnodes; i++)
		if (!strcmp(srv.nodes[i].name, name))
			return &srv.nodes[i];
	if (srv.nnodes == MAX_NODES || strlen(name) > NAME_MAX)
		return NULL;
	n = &srv.nodes[srv.nnodes++];
	strcpy(n->name, name);
	return n;
}

static void fill_attr(struct fuse_attr *a, const struct stat *st, uint64_t ino)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->size = st->st_size;
	a->blocks = st->st_blocks;
	a->atime = st->st_atim.tv_sec;
	a->mtime = st->st_mtim.tv_sec;
	a->ctime = st->st_ctim.tv_sec;
	a->atimensec = st->st_atim.tv_nsec;
	a->mtimensec = st->st_mtim.tv_nsec;
	a->ctimensec = st->st_ctim.tv_nsec;
	a->mode = st->st_mode;
	a->nlink = st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->blksize = st->st_blksize;
}

/* stat of the root (the backing directory) or of a node; 0 or -errno */
static int node_stat(uint64_t nodeid, struct stat *st)
{
	struct node *n = node_of(nodeid);

	if (nodeid == FUSE_ROOT_ID)
		return fstat(srv.dir, st) ? -errno : 0;
	if (!n)
		return -ENOENT;
	if (fstatat(srv.dir, n->name, st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	return S_ISREG(st->st_mode) ? 0 : -ENOENT;
}

/*
 * Attribute and entry timeouts are 0: every stat and lookup asks us, so the
 * kernel never holds a size the backing file has moved past.
 */
static void reply_entry(const struct fuse_in_header *in, struct node *n,
			const struct stat *st, const void *open_out,
			size_t open_len)
{
	struct fuse_entry_out e = { .nodeid = nodeid_of(n), .generation = 1,
				    .entry_valid = opt_attr_secs,
				    .attr_valid = opt_attr_secs };

	fill_attr(&e.attr, st, e.nodeid);
	reply(in, 0, &e, sizeof(e), open_out, open_len);
}

static void do_init(const struct fuse_in_header *in,
		    const struct fuse_init_in *arg)
{
	struct fuse_init_out out = { .major = FUSE_KERNEL_VERSION };
	uint64_t offer = arg->flags, want;

	if (arg->flags & FUSE_INIT_EXT)
		offer |= (uint64_t)arg->flags2 << 32;
	if (arg->major != FUSE_KERNEL_VERSION) {
		reply_err(in, EPROTO);
		return;
	}
	want = FUSE_INIT_EXT;
	/* a file system with passthrough cannot back another one's */
	if (!srv.no_passthrough)
		want |= PT_INIT_PASSTHROUGH;
	if (srv.accept_dontcache)
		want |= PT_INIT_DONTCACHE;
	if (opt_accept_attr)
		want |= PT_INIT_ATTR;
	if (srv.serve_data)
		want |= FUSE_ASYNC_DIO;
	want &= offer;

	out.minor = arg->minor < PT_PROTO_MINOR ? arg->minor : PT_PROTO_MINOR;
	out.max_readahead = arg->max_readahead;
	out.flags = (uint32_t)want;
	out.flags2 = want >> 32;
	out.max_background = 16;
	out.congestion_threshold = 12;
	out.max_write = MAX_WRITE;
	out.time_gran = 1;
	out.unused[0] = PT_MAX_STACK_DEPTH;	/* max_stack_depth */
	atomic_store(&srv.offered, offer);
	atomic_store(&srv.accepted, want);
	reply(in, 0, &out, sizeof(out), NULL, 0);
	atomic_store(&srv.initialised, true);
}

static void do_lookup(const struct fuse_in_header *in, const char *name)
{
	struct stat st;
	struct node *n;

	/* one flat directory of regular files */
	if (in->nodeid != FUSE_ROOT_ID) {
		reply_err(in, ENOENT);
		return;
	}
	if (fstatat(srv.dir, name, &st, AT_SYMLINK_NOFOLLOW)) {
		reply_err(in, errno);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		reply_err(in, ENOENT);
		return;
	}
	n = node_get(name);
	if (!n) {
		reply_err(in, ENFILE);
		return;
	}
	reply_entry(in, n, &st, NULL, 0);
}

static void do_getattr(const struct fuse_in_header *in)
{
	struct fuse_attr_out out = { 0 };
	struct stat st;
	int err = node_stat(in->nodeid, &st);

	if (err) {
		reply_err(in, -err);
		return;
	}
	fill_attr(&out.attr, &st, in->nodeid);
	out.attr_valid = opt_attr_secs;
	reply(in, 0, &out, sizeof(out), NULL, 0);
}

/* only truncation matters here; other attributes are left as they are */
static void do_setattr(const struct fuse_in_header *in,
		       const struct fuse_setattr_in *arg)
{
	struct node *n = node_of(in->nodeid);
	int fd;

	if (n && (arg->valid & FATTR_SIZE)) {
		fd = openat(srv.dir, n->name, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || ftruncate(fd, arg->size)) {
			reply_err(in, errno);
			if (fd >= 0)
				close(fd);
			return;
		}
		close(fd);
	}
	do_getattr(in);
}

/*
 * Count an open of @n and, for a passthrough open, give the inode its
 * backing id: one per inode, because the kernel fails (EIO) a passthrough
 * open of an inode that already has another backing file.  Our fd is not
 * needed afterwards: the kernel keeps its own reference to the file.
 */
static int node_open(struct node *n, uint32_t fopen)
{
	struct pt_backing_map map = { 0 };
	int id, err;

	if ((fopen & PT_FOPEN_PASSTHROUGH) && !n->backing_id) {
		map.fd = openat(srv.dir, n->name, O_RDONLY | O_CLOEXEC);
		if (map.fd < 0)
			return -errno;
		id = ioctl(srv.fd, PT_IOC_BACKING_OPEN, &map);
		err = errno;
		close(map.fd);
		if (id <= 0) {
			printf("server: FUSE_DEV_IOC_BACKING_OPEN %s: %s\n",
			       n->name, strerror(err));
			return -err;
		}
		n->backing_id = id;
	}
	n->opens++;
	return 0;
}

/* The last release of an inode's handles: its backing id goes too. */
static void node_release(struct node *n)
{
	uint32_t id = n->backing_id;

	if (!n->opens || --n->opens || !id)
		return;
	if (ioctl(srv.fd, PT_IOC_BACKING_CLOSE, &id))
		printf("server: FUSE_DEV_IOC_BACKING_CLOSE %u: %s\n", id,
		       strerror(errno));
	n->backing_id = 0;
}

static void fill_open_out(struct fuse_open_out *out, struct node *n,
			  uint32_t fopen)
{
	memset(out, 0, sizeof(*out));
	out->fh = nodeid_of(n);
	out->open_flags = fopen;
	if (fopen & PT_FOPEN_PASSTHROUGH)
		out->padding = n->backing_id;	/* backing_id */
}

static void do_open(const struct fuse_in_header *in)
{
	uint32_t fopen = atomic_load(&srv.open_flags);
	struct node *n = node_of(in->nodeid);
	struct fuse_open_out out;
	int err = n ? node_open(n, fopen) : -ENOENT;

	if (err) {
		reply_err(in, -err);
		return;
	}
	fill_open_out(&out, n, fopen);
	reply(in, 0, &out, sizeof(out), NULL, 0);
}

static void do_create(const struct fuse_in_header *in,
		      const struct fuse_create_in *arg)
{
	uint32_t fopen = atomic_load(&srv.open_flags);
	const char *name = (const char *)(arg + 1);
	int flags = O_CREAT | O_RDWR | O_CLOEXEC |
		    (arg->flags & (O_EXCL | O_TRUNC));
	struct fuse_open_out out;
	struct node *n;
	struct stat st;
	int fd, err;

	if (in->nodeid != FUSE_ROOT_ID) {
		reply_err(in, EACCES);
		return;
	}
	fd = openat(srv.dir, name, flags, arg->mode & ~arg->umask & 07777);
	if (fd < 0 || fstat(fd, &st)) {
		reply_err(in, errno);
		if (fd >= 0)
			close(fd);
		return;
	}
	close(fd);
	n = node_get(name);
	err = n ? node_open(n, fopen) : -ENFILE;
	if (err) {
		reply_err(in, -err);
		return;
	}
	fill_open_out(&out, n, fopen);
	reply_entry(in, n, &st, &out, sizeof(out));
}

static void do_release(const struct fuse_in_header *in)
{
	struct node *n = node_of(in->nodeid);

	if (n)
		node_release(n);
	reply(in, 0, NULL, 0, NULL, 0);
}

/* passthrough writes dirty the backing file: FSYNC must reach it */
static void do_fsync(const struct fuse_in_header *in)
{
	struct node *n = node_of(in->nodeid);
	int fd, err = 0;

	if (!n) {
		reply_err(in, ENOENT);
		return;
	}
	fd = openat(srv.dir, n->name, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		err = errno;
	if (fd >= 0)
		close(fd);
	reply_err(in, err);
}

static void do_statfs(const struct fuse_in_header *in)
{
	struct fuse_statfs_out out = { 0 };
	struct statvfs sv;

	if (fstatvfs(srv.dir, &sv)) {
		reply_err(in, errno);
		return;
	}
	out.st.blocks = sv.f_blocks;
	out.st.bfree = sv.f_bfree;
	out.st.bavail = sv.f_bavail;
	out.st.files = sv.f_files;
	out.st.ffree = sv.f_ffree;
	out.st.bsize = sv.f_bsize;
	out.st.frsize = sv.f_frsize;
	out.st.namelen = sv.f_namemax;
	reply(in, 0, &out, sizeof(out), NULL, 0);
}

#define HOLD_SECS 3.0

/* "dio" mode: data from and to the backing file, as a plain server would */
static void do_read(const struct fuse_in_header *in,
		    const struct fuse_read_in *arg)
{
	struct node *n = node_of(in->nodeid);
	void *buf = malloc(arg->size ? arg->size : 1);
	ssize_t got = -1;
	int fd = -1;

	errno = ENOENT;
	if (n && buf)
		fd = openat(srv.dir, n->name, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		got = pread(fd, buf, arg->size, arg->offset);
	if (got < 0)
		reply_err(in, errno ? errno : EIO);
	else
		reply(in, 0, buf, got, NULL, 0);
	if (fd >= 0)
		close(fd);
	free(buf);
}

static void do_write(const struct fuse_in_header *in,
		     const struct fuse_write_in *arg)
{
	struct node *n = node_of(in->nodeid);
	struct fuse_write_out out = { 0 };
	ssize_t done = -1;
	int fd = -1;

	errno = ENOENT;
	if (n)
		fd = openat(srv.dir, n->name, O_WRONLY | O_CLOEXEC);
	if (fd >= 0)
		done = pwrite(fd, arg + 1, arg->size, arg->offset);
	if (done < 0) {
		reply_err(in, errno ? errno : EIO);
	} else {
		out.size = done;
		reply(in, 0, &out, sizeof(out), NULL, 0);
	}
	if (fd >= 0)
		close(fd);
}

/* carry out and answer the held WRITE */
static void release_held_write(bool timed_out)
{
	const struct fuse_in_header *in = srv.held;

	if (!in)
		return;
	if (timed_out)
		atomic_fetch_add(&srv.hold_timeouts, 1);
	do_write(in, (const void *)(in + 1));
	free(srv.held);
	srv.held = NULL;
	atomic_store(&srv.write_held, false);
}

static void data_request(const struct fuse_in_header *in, const void *arg)
{
	if (!srv.serve_data) {
		/* passthrough data must never come here: fail loudly */
		reply_err(in, EIO);
		return;
	}
	if (in->opcode == FUSE_READ) {
		do_read(in, arg);
		if (srv.held) {
			atomic_fetch_add(&srv.reads_while_held, 1);
			release_held_write(false);
		}
		return;
	}
	if (!srv.held && atomic_exchange(&srv.hold_next_write, false)) {
		srv.held = malloc(in->len);
		if (srv.held) {
			memcpy(srv.held, in, in->len);
			srv.held_since = now();
			atomic_store(&srv.write_held, true);
			return;
		}
	}
	do_write(in, arg);
}

static void dispatch(const struct fuse_in_header *in, const void *arg)
{
	atomic_fetch_add(&srv.ops[in->opcode < N_OPCODES ? in->opcode :
				  N_OPCODES], 1);
	switch (in->opcode) {
	case FUSE_INIT:
		do_init(in, arg);
		break;
	case FUSE_LOOKUP:
		do_lookup(in, arg);
		break;
	case FUSE_GETATTR:
		do_getattr(in);
		break;
	case FUSE_SETATTR:
		do_setattr(in, arg);
		break;
	case FUSE_OPEN:
		do_open(in);
		break;
	case FUSE_CREATE:
		do_create(in, arg);
		break;
	case FUSE_RELEASE:
		do_release(in);
		break;
	case FUSE_FSYNC:
		do_fsync(in);
		break;
	case FUSE_STATFS:
		do_statfs(in);
		break;
	case FUSE_FLUSH:
	case FUSE_DESTROY:
		reply_err(in, 0);
		break;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
		break;		/* no reply; nodes live as long as we do */
	case FUSE_READ:
	case FUSE_WRITE:
		data_request(in, arg);
		break;
	default:
		/* GETXATTR, LISTXATTR, ACCESS, ...: the kernel stops asking */
		reply_err(in, ENOSYS);
		break;
	}
}

static void *serve(void *unused)
{
	static unsigned char buf[REQ_BUF_SIZE] __attribute__((aligned(64)));
	const struct fuse_in_header *in = (const void *)buf;
	ssize_t n;

	(void)unused;
	for (;;) {
		if (srv.held) {
			struct pollfd pfd = { .fd = srv.fd, .events = POLLIN };

			if (now() - srv.held_since > HOLD_SECS)
				release_held_write(true);
			else if (poll(&pfd, 1, 50) <= 0)
				continue;
		}
		n = read(srv.fd, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == ENOENT ||
			      errno == EAGAIN))
			continue;	/* ENOENT: interrupted before we read it */
		if (n < 0) {
			/* ENODEV: unmounted, the connection is gone */
			if (errno != ENODEV)
				printf("server: read /dev/fuse: %s\n",
				       strerror(errno));
			break;
		}
		if ((size_t)n >= sizeof(*in) && (size_t)n >= in->len)
			dispatch(in, in + 1);
	}
	return NULL;
}

/*
 * Mount a fresh server over @backing.  @accept_dontcache: accept the
 * kernel's FUSE_PASSTHROUGH_DONTCACHE offer (FUSE_PASSTHROUGH always is).
 * @serve_data: answer READ and WRITE from the backing files ("dio").
 */
/* "stacked-blk": the block device of the lower fuseblk mount */
static const char *lower_blkdev;

static void server_start(const char *backing, bool accept_dontcache,
			 bool serve_data)
{
	char opts[128];
	double t0 = now();

	bool no_passthrough = srv.no_passthrough;

	memset(&srv, 0, sizeof(srv));
	srv.no_passthrough = no_passthrough;
	srv.accept_dontcache = accept_dontcache;
	srv.serve_data = serve_data;
	srv.dir = open(backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (srv.dir < 0)
		die(backing);
	srv.fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (srv.fd < 0)
		die("/dev/fuse");
	strcpy(srv.mnt, "/tmp/fuse_pt.XXXXXX");
	if (!mkdtemp(srv.mnt))
		die("mkdtemp");
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other",
		 srv.fd);
	if (srv.no_passthrough && lower_blkdev) {
		/* "stacked-blk": the lower mount as fuseblk, as ntfs-3g */
		strcat(opts, ",blksize=4096");
		if (mount(lower_blkdev, srv.mnt, "fuseblk",
			  MS_NOSUID | MS_NODEV, opts))
			die("mount -t fuseblk");
	} else if (mount("fuse_pt_test", srv.mnt, "fuse", MS_NOSUID | MS_NODEV,
			 opts)) {
		die("mount -t fuse");
	}
	errno = pthread_create(&srv.thread, NULL, serve, NULL);
	if (errno)
		die("pthread_create");
	/* the kernel sent INIT at mount; wait for our reply to it */
	while (!atomic_load(&srv.initialised)) {
		if (now() - t0 > 10) {
			errno = ETIMEDOUT;
			die("FUSE INIT");
		}
		usleep(1000);
	}
}

static const char *op_name(unsigned int op)
{
	static const char *const names[] = {
		[FUSE_LOOKUP] = "LOOKUP", [FUSE_FORGET] = "FORGET",
		[FUSE_GETATTR] = "GETATTR", [FUSE_SETATTR] = "SETATTR",
		[FUSE_OPEN] = "OPEN", [FUSE_READ] = "READ",
		[FUSE_WRITE] = "WRITE", [FUSE_STATFS] = "STATFS",
		[FUSE_RELEASE] = "RELEASE", [FUSE_FSYNC] = "FSYNC",
		[FUSE_GETXATTR] = "GETXATTR", [FUSE_LISTXATTR] = "LISTXATTR",
		[FUSE_FLUSH] = "FLUSH", [FUSE_INIT] = "INIT",
		[FUSE_ACCESS] = "ACCESS", [FUSE_CREATE] = "CREATE",
		[FUSE_INTERRUPT] = "INTERRUPT", [FUSE_DESTROY] = "DESTROY",
		[FUSE_BATCH_FORGET] = "BATCH_FORGET",
	};

	return op < sizeof(names) / sizeof(names[0]) && names[op] ?
	       names[op] : NULL;
}

static void print_ops(void)
{
	unsigned int op;

	printf("server: requests:");
	for (op = 0; op <= N_OPCODES; op++) {
		unsigned int n = atomic_load(&srv.ops[op]);

		if (!n)
			continue;
		if (op_name(op))
			printf(" %s=%u", op_name(op), n);
		else
			printf(" op%u%s=%u", op, op == N_OPCODES ? "+" : "",
			       n);
	}
	printf("\n");
}

/* All data went through the backing file, none through the server. */
static void check_no_data_requests(const char *what)
{
	check(op_count(FUSE_READ) == 0 && op_count(FUSE_WRITE) == 0,
	      "%s: no READ or WRITE request reached the server (READ=%u "
	      "WRITE=%u)", what, op_count(FUSE_READ), op_count(FUSE_WRITE));
}

static void server_stop(void)
{
	int tries;

	print_ops();
	/* a background RELEASE may still hold the mount busy for a moment */
	for (tries = 0; umount2(srv.mnt, 0); tries++) {
		if (errno != EBUSY || tries == 50) {
			printf("FAIL: umount %s: %s\n", srv.mnt,
			       strerror(errno));
			failed++;
			umount2(srv.mnt, MNT_DETACH);
			break;
		}
		usleep(100000);
	}
	pthread_join(srv.thread, NULL);
	free(srv.held);
	close(srv.fd);
	close(srv.dir);
	rmdir(srv.mnt);
}

/* ------------------------------------------------------------------ */
/* Test helpers                                                         */

/* open @name through the mount; the server answers with @fopen */
static int pt_open(const char *name, int flags, uint32_t fopen)
{
	char p[PATH_MAX];

	atomic_store(&srv.open_flags, fopen);
	snprintf(p, sizeof(p), "%s/%s", srv.mnt, name);
	return open(p, flags | O_CLOEXEC, 0644);
}

static const char *fopen_name(uint32_t fopen)
{
	switch (fopen & (PT_FOPEN_PASSTHROUGH | PT_FOPEN_DONTCACHE)) {
	case PT_FOPEN_PASSTHROUGH:
		return "PASSTHROUGH";
	case PT_FOPEN_PASSTHROUGH | PT_FOPEN_DONTCACHE_READ:
		return "PASSTHROUGH|DONTCACHE_READ";
	case PT_FOPEN_PASSTHROUGH | PT_FOPEN_DONTCACHE_WRITE:
		return "PASSTHROUGH|DONTCACHE_WRITE";
	case PT_FOPEN_PASSTHROUGH | PT_FOPEN_DONTCACHE:
		return "PASSTHROUGH|DONTCACHE_READ|DONTCACHE_WRITE";
	default:
		return "?";
	}
}

/* residency of [off, off + len) of backing file @name (len 0: to EOF) */
static struct cs_stat backing_pages(const char *name, uint64_t off,
				    uint64_t len)
{
	struct cs_stat cs;
	int fd = openat(srv.dir, name, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || cachestat_range(fd, off, len, &cs))
		die(name);
	close(fd);
	return cs;
}

/*
 * Wait up to @secs until [off, off + len) of backing file @name has @want
 * pages cached: the drop after writeback completes asynchronously.
 */
static int wait_backing(const char *name, uint64_t off, uint64_t len,
			uint64_t want, double secs, struct cs_stat *cs,
			double *took)
{
	double t0 = now();

	for (;;) {
		*cs = backing_pages(name, off, len);
		*took = now() - t0;
		if (cs->nr_cache == want)
			return 1;
		if (*took > secs)
			return 0;
		usleep(20000);
	}
}

/*
 * Make backing file @name of @size bytes directly and drop it from the page
 * cache (where the file system can; callers check residency themselves).
 */
static void make_backing_file(const char *name, size_t size, uint64_t seed)
{
	unsigned char *buf = malloc(MIB);
	size_t off, n;
	int fd = openat(srv.dir, name, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC,
			0644);

	if (fd < 0 || !buf)
		die(name);
	for (off = 0; off < size; off += n) {
		n = size - off < MIB ? size - off : MIB;
		fill(buf, n, off, seed);
		if (pwrite(fd, buf, n, off) != (ssize_t)n)
			die(name);
	}
	if (fsync(fd))
		die(name);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	free(buf);
}

/* ------------------------------------------------------------------ */
/* Streaming I/O: plain syscalls or Linux AIO                           */

#define AIO_DEPTH 8

struct io_case {
	const char *name;
	size_t size;	/* bytes in the file */
	size_t req;	/* request size */
	bool append;	/* O_APPEND writes */
};

struct xfer {
	int fd;
	bool write;
	bool aio;
	aio_context_t ctx;
	const struct io_case *c;
	uint64_t seed;
	unsigned char *buf;	/* AIO_DEPTH requests */
	unsigned char *scratch;	/* one request, for verify() */
};

static int sync_rw(struct xfer *x, size_t off, size_t len)
{
	ssize_t n;

	if (!x->write)
		n = pread(x->fd, x->buf, len, off);
	else if (x->c->append)
		n = write(x->fd, x->buf, len);
	else
		n = pwrite(x->fd, x->buf, len, off);
	if (n == (ssize_t)len)
		return 1;
	printf("  %s of %zu bytes at %zu: %s\n", x->write ? "write" : "read",
	       len, off, n < 0 ? strerror(errno) : "short");
	return 0;
}

/* @n requests of x->c->req bytes from @off (the last one @last bytes) */
static int aio_rw(struct xfer *x, size_t off, int n, size_t last)
{
	struct iocb cb[AIO_DEPTH], *cbp[AIO_DEPTH];
	struct io_event ev[AIO_DEPTH];
	int i, got = 0;

	for (i = 0; i < n; i++) {
		memset(&cb[i], 0, sizeof(cb[i]));
		cb[i].aio_fildes = x->fd;
		cb[i].aio_lio_opcode = x->write ? IOCB_CMD_PWRITE :
						  IOCB_CMD_PREAD;
		cb[i].aio_buf = (uintptr_t)(x->buf + i * x->c->req);
		cb[i].aio_nbytes = i == n - 1 ? last : x->c->req;
		cb[i].aio_offset = off + i * x->c->req;
		cb[i].aio_data = i;
		cbp[i] = &cb[i];
	}
	if (syscall(SYS_io_submit, x->ctx, n, cbp) != n) {
		printf("  io_submit at %zu: %s\n", off, strerror(errno));
		return 0;
	}
	while (got < n) {
		int r = syscall(SYS_io_getevents, x->ctx, n - got, n - got,
				ev + got, NULL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			printf("  io_getevents: %s\n", strerror(errno));
			return 0;
		}
		got += r;
	}
	for (i = 0; i < n; i++) {
		if (ev[i].res != (int64_t)cb[ev[i].data].aio_nbytes) {
			printf("  aio %s at %llu: result %lld\n",
			       x->write ? "write" : "read",
			       (unsigned long long)cb[ev[i].data].aio_offset,
			       (long long)ev[i].res);
			return 0;
		}
	}
	return 1;
}

/* the next batch: one request, or up to AIO_DEPTH of them through AIO */
static int xfer_batch(struct xfer *x, size_t off, size_t *done)
{
	size_t req = x->c->req, left = x->c->size - off, len;
	int n = 0, i, ok;

	do {
		len = left < req ? left : req;
		left -= len;
		n++;
	} while (x->aio && n < AIO_DEPTH && left);
	if (x->write)
		for (i = 0; i < n; i++)
			fill(x->buf + i * req, i == n - 1 ? len : req,
			     off + i * req, x->seed);
	ok = x->aio ? aio_rw(x, off, n, len) : sync_rw(x, off, len);
	for (i = 0; ok && !x->write && i < n; i++)
		ok = verify(x->buf + i * req, i == n - 1 ? len : req,
			    off + i * req, x->seed, x->scratch);
	*done = (n - 1) * req + len;
	return ok;
}

/*
 * Write (or read back and verify) the whole file of case @c on @fd;
 * returns the MB/s achieved, or -1 on failure.
 */
static double stream(int fd, const struct io_case *c, uint64_t seed,
		     bool write, bool aio)
{
	struct xfer x = { .fd = fd, .write = write, .aio = aio, .c = c,
			  .seed = seed };
	size_t off = 0, done;
	double t0 = now(), t;
	int ok = 1;

	x.buf = malloc(AIO_DEPTH * c->req);
	x.scratch = malloc(c->req);
	if (!x.buf || !x.scratch)
		die("malloc");
	if (aio && syscall(SYS_io_setup, AIO_DEPTH, &x.ctx))
		die("io_setup");
	while (ok && off < c->size) {
		ok = xfer_batch(&x, off, &done);
		off += done;
	}
	if (aio)
		syscall(SYS_io_destroy, x.ctx);
	free(x.buf);
	free(x.scratch);
	t = now() - t0;
	return ok ? (double)c->size / MIB / (t > 0 ? t : 1e-9) : -1;
}

/* ------------------------------------------------------------------ */
/* Test cases                                                           */

static uint64_t name_seed(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ULL;
	return h;
}

static int print_offer(void)
{
	uint64_t offer = atomic_load(&srv.offered);

	printf("kernel INIT flags 0x%016llx: FUSE_PASSTHROUGH %s, "
	       "FUSE_PASSTHROUGH_DONTCACHE %s, FUSE_PASSTHROUGH_ATTR %s\n",
	       (unsigned long long)offer,
	       offer & PT_INIT_PASSTHROUGH ? "offered" : "not offered",
	       offer & PT_INIT_DONTCACHE ? "offered" : "not offered",
	       offer & PT_INIT_ATTR ? "offered" : "not offered");
	return !!(offer & PT_INIT_DONTCACHE);
}

static int offer(const char *expect)
{
	int yes;

	server_start("/", true, false);
	yes = print_offer();
	check(!!(atomic_load(&srv.offered) & PT_INIT_PASSTHROUGH),
	      "the kernel offers FUSE_PASSTHROUGH");
	if (expect && !strcmp(expect, "expect-yes")) {
		check(yes, "the kernel offers FUSE_PASSTHROUGH_DONTCACHE");
		check(!!(atomic_load(&srv.offered) & PT_INIT_ATTR),
		      "the kernel offers FUSE_PASSTHROUGH_ATTR");
	} else if (expect && !strcmp(expect, "expect-no")) {
		check(!yes, "the kernel does not offer "
		      "FUSE_PASSTHROUGH_DONTCACHE");
		check(!(atomic_load(&srv.offered) & PT_INIT_ATTR),
		      "the kernel does not offer FUSE_PASSTHROUGH_ATTR");
	}
	server_stop();
	return summary();
}

/* the server accepted passthrough (and uncached if @dontcache) at INIT */
static int check_negotiated(bool dontcache)
{
	uint64_t acc = atomic_load(&srv.accepted);
	int ok = (acc & PT_INIT_PASSTHROUGH) &&
		 !!(acc & PT_INIT_DONTCACHE) == dontcache;

	print_offer();
	check(ok, "INIT: FUSE_PASSTHROUGH accepted, FUSE_PASSTHROUGH_DONTCACHE"
	      " %s (reply flags 0x%016llx)", dontcache ? "accepted" :
	      "not accepted", (unsigned long long)acc);
	return ok;
}

/*
 * Baseline: a plain passthrough open caches the backing file, written or
 * read, so the 0-page results of the uncached opens mean something.  Also:
 * the FUSE file itself does not offer RWF_DONTCACHE to applications, the
 * server decides.
 */
static void plain_baseline(void)
{
	static const struct io_case c = { "plain", 4 * MIB, MIB, false };
	const size_t pages = c.size / PAGE;
	uint64_t seed = name_seed(c.name);
	struct iovec iov;
	struct cs_stat cs;
	char byte;
	int fd;

	fd = pt_open(c.name, O_CREAT | O_TRUNC | O_RDWR, PT_FOPEN_PASSTHROUGH);
	if (fd < 0) {
		check(0, "plain: open with FOPEN_PASSTHROUGH: %s",
		      strerror(errno));
		return;
	}
	check(stream(fd, &c, seed, true, false) >= 0 && !fsync(fd),
	      "plain: write 4 MiB and fsync");
	cs = backing_pages(c.name, 0, 0);
	check(cs.nr_cache == pages, "plain: FOPEN_PASSTHROUGH write leaves "
	      "the backing file cached (%llu of %zu pages)",
	      (unsigned long long)cs.nr_cache, pages);
	iov.iov_base = &byte;
	iov.iov_len = 1;
	check(preadv2(fd, &iov, 1, 0, RWF_DONTCACHE_) < 0 &&
	      errno == EOPNOTSUPP,
	      "plain: RWF_DONTCACHE on the FUSE file itself is refused "
	      "(EOPNOTSUPP)");
	close(fd);

	drop_caches();
	fd = pt_open(c.name, O_RDONLY, PT_FOPEN_PASSTHROUGH);
	check(fd >= 0 && stream(fd, &c, seed, false, false) >= 0,
	      "plain: read back through FOPEN_PASSTHROUGH");
	cs = backing_pages(c.name, 0, 0);
	check(cs.nr_cache == pages, "plain: FOPEN_PASSTHROUGH read leaves "
	      "the backing file cached (%llu of %zu pages)",
	      (unsigned long long)cs.nr_cache, pages);
	if (fd >= 0)
		close(fd);
	unlinkat(srv.dir, c.name, 0);
}

static void check_resident(const char *name, const char *when, double secs)
{
	struct cs_stat cs;
	double took;
	int ok = wait_backing(name, 0, 0, 0, secs, &cs, &took);

	check(ok, "%s: 0 pages of the backing file cached %s (took %.2fs; "
	      "cache=%llu dirty=%llu writeback=%llu)", name, when,
	      ok ? took : -1.0, (unsigned long long)cs.nr_cache,
	      (unsigned long long)cs.nr_dirty,
	      (unsigned long long)cs.nr_writeback);
}

/* the FUSE inode's own page cache stays empty: passthrough bypasses it */
static void check_fuse_mapping(const char *name, int fd)
{
	struct cs_stat cs;

	if (cachestat_range(fd, 0, 0, &cs))
		die("cachestat on the FUSE file");
	check(cs.nr_cache == 0, "%s: 0 pages cached in the FUSE file's own "
	      "mapping (%llu)", name, (unsigned long long)cs.nr_cache);
}

/*
 * Patch 23: fadvise on a passthrough file is advice about the backing
 * file, whose page cache holds its data.  DONTNEED drops the backing
 * file's pages; WILLNEED reads the backing file ahead (not the FUSE
 * inode, which would ask the server with READ requests).
 */
static void fadvise_forwarded(void)
{
	static const struct io_case c = { "fadvise", 4 * MIB, MIB, false };
	const size_t pages = c.size / PAGE;
	struct cs_stat cs;
	double t0;
	int fd;

	fd = pt_open(c.name, O_CREAT | O_TRUNC | O_RDWR, PT_FOPEN_PASSTHROUGH);
	if (fd < 0) {
		check(0, "fadvise: open with FOPEN_PASSTHROUGH: %s",
		      strerror(errno));
		return;
	}
	check(stream(fd, &c, name_seed(c.name), true, false) >= 0 &&
	      !fsync(fd), "fadvise: write 4 MiB and fsync");
	cs = backing_pages(c.name, 0, 0);
	check(cs.nr_cache == pages, "fadvise: %llu of %zu backing pages "
	      "cached before the advice", (unsigned long long)cs.nr_cache,
	      pages);
	check(!posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED),
	      "fadvise: POSIX_FADV_DONTNEED on the FUSE file");
	cs = backing_pages(c.name, 0, 0);
	check(cs.nr_cache == 0, "fadvise: POSIX_FADV_DONTNEED on the FUSE "
	      "file drops the backing file's pages (%llu of %zu cached)",
	      (unsigned long long)cs.nr_cache, pages);
	close(fd);

	drop_caches();
	fd = pt_open(c.name, O_RDONLY, PT_FOPEN_PASSTHROUGH);
	if (fd < 0) {
		check(0, "fadvise: reopen: %s", strerror(errno));
		return;
	}
	check(!posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED),
	      "fadvise: POSIX_FADV_WILLNEED on the FUSE file");
	/* as much as the backing device's read-ahead limit, asynchronously */
	for (t0 = now();; usleep(20000)) {
		cs = backing_pages(c.name, 0, 0);
		if (cs.nr_cache || now() - t0 > 10.0)
			break;
	}
	check(cs.nr_cache > 0, "fadvise: POSIX_FADV_WILLNEED on the FUSE "
	      "file reads the backing file ahead (%llu of %zu cached)",
	      (unsigned long long)cs.nr_cache, pages);
	check_fuse_mapping("fadvise", fd);
	close(fd);
	unlinkat(srv.dir, c.name, 0);
}

/* Write the file of case @c with uncached opens, read it back. */
static void uncached_case(const struct io_case *c, bool aio)
{
	const uint32_t fopen = PT_FOPEN_PASSTHROUGH | PT_FOPEN_DONTCACHE;
	const int wflags = O_CREAT | O_TRUNC | O_WRONLY |
			   (c->append ? O_APPEND : 0);
	char name[64];
	uint64_t seed;
	double mbs;
	int fd;

	snprintf(name, sizeof(name), "%s-%s", aio ? "aio" : "sync", c->name);
	seed = name_seed(name);
	fd = pt_open(name, wflags, fopen);
	if (fd < 0) {
		check(0, "%s: create with %s: %s", name, fopen_name(fopen),
		      strerror(errno));
		return;
	}
	mbs = stream(fd, c, seed, true, aio);
	check(mbs >= 0, "%s: %s %zu MiB in %zu-byte requests (%.0f MB/s)",
	      name, c->append ? "append" : "write", c->size / MIB, c->req,
	      mbs);
	/* writeback was kicked by each write: no fsync needed for 0 pages */
	check_resident(name, "after the writes, file open", 15);
	check(!fsync(fd), "%s: fsync", name);
	check_resident(name, "after fsync", 15);
	check_fuse_mapping(name, fd);
	close(fd);
	check_resident(name, "after close", 1);

	drop_caches();
	fd = pt_open(name, O_RDONLY, fopen);
	if (fd < 0) {
		check(0, "%s: open for reading: %s", name, strerror(errno));
		return;
	}
	mbs = stream(fd, c, seed, false, aio);
	check(mbs >= 0, "%s: read back and verify in %zu-byte requests "
	      "(%.0f MB/s)", name, c->req, mbs);
	check_resident(name, "after reading back, file open", 5);
	close(fd);
	check_resident(name, "after close", 1);
	unlinkat(srv.dir, name, 0);
}

/*
 * The uncached flags only mean something for the reads and writes that
 * passthrough does itself: without FOPEN_PASSTHROUGH, or with
 * FOPEN_DIRECT_IO (reads and writes come to the server), the kernel must
 * refuse them rather than silently not honour them.
 */
static void expect_misuse_refused(void)
{
	static const struct {
		uint32_t fopen;
		const char *what;
	} cases[] = {
		{ PT_FOPEN_DONTCACHE, "without FOPEN_PASSTHROUGH" },
		{ PT_FOPEN_PASSTHROUGH | FOPEN_DIRECT_IO | PT_FOPEN_DONTCACHE,
		  "with FOPEN_DIRECT_IO" },
	};
	const char *name = "misused";

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int fd = pt_open(name, O_CREAT | O_RDWR, cases[i].fopen);

		check(fd < 0 && errno == EIO, "uncached flags %s: the open "
		      "fails with EIO (%s)", cases[i].what,
		      fd < 0 ? strerror(errno) : "it succeeded");
		if (fd >= 0)
			close(fd);
	}
	unlinkat(srv.dir, name, 0);
}

static int uncached(const char *backing)
{
	static const struct io_case cases[] = {
		{ "req1m", 64 * MIB, 1 * MIB, false },
		{ "req64k", 64 * MIB, 64 * KIB, false },
		{ "req4k", 64 * MIB, 4 * KIB, false },
		{ "append4000", 8 * MIB, 4000, true },
		{ "append10000", 8 * MIB, 10000, true },
	};
	size_t i;
	int aio;

	server_start(backing, true, false);
	if (check_negotiated(true)) {
		plain_baseline();
		fadvise_forwarded();
		expect_misuse_refused();
		for (aio = 0; aio <= 1; aio++)
			for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
				uncached_case(&cases[i], aio);
		check_no_data_requests("uncached");
	}
	server_stop();
	return summary();
}

/*
 * The mixed case: one inode open four times at once, with each combination
 * of the two flags, and each handle reading one region of the file and
 * writing another.  Regions are 2 MiB with 2 MiB gaps, so read-ahead from
 * one does not reach the next.
 */
#define MIXED_LEN (2 * MIB)
#define MIXED_SLOT (4 * MIB)

static const uint32_t mixed_fopen[] = {
	PT_FOPEN_PASSTHROUGH,
	PT_FOPEN_PASSTHROUGH | PT_FOPEN_DONTCACHE,
	PT_FOPEN_PASSTHROUGH | PT_FOPEN_DONTCACHE_READ,
	PT_FOPEN_PASSTHROUGH | PT_FOPEN_DONTCACHE_WRITE,
};
#define MIXED_HANDLES (sizeof(mixed_fopen) / sizeof(mixed_fopen[0]))
/* region 2h is read through handle h, region 2h + 1 written */
#define MIXED_SIZE (2 * MIXED_HANDLES * MIXED_SLOT)

static bool mixed_write(unsigned int region)
{
	return region % 2;
}

/* whether region @region stays cached: its handle's flag for that direction */
static bool mixed_cached(unsigned int region)
{
	uint32_t fopen = mixed_fopen[region / 2];

	return !(fopen & (mixed_write(region) ? PT_FOPEN_DONTCACHE_WRITE :
						PT_FOPEN_DONTCACHE_READ));
}

/* pread/pwrite region @region through @fd, verify what is read */
static int mixed_io(int fd, unsigned int region, bool write, uint64_t seed)
{
	unsigned char *buf = malloc(MIXED_LEN), *scratch = malloc(MIXED_LEN);
	size_t off = region * MIXED_SLOT;
	ssize_t n;
	int ok;

	if (!buf || !scratch)
		die("malloc");
	if (write) {
		fill(buf, MIXED_LEN, off, seed);
		n = pwrite(fd, buf, MIXED_LEN, off);
	} else {
		n = pread(fd, buf, MIXED_LEN, off);
	}
	ok = n == (ssize_t)MIXED_LEN &&
	     (write || verify(buf, MIXED_LEN, off, seed, scratch));
	free(buf);
	free(scratch);
	return ok;
}

/*
 * Region @region of backing file @name holds all its pages or none, as its
 * handle asked; @secs: the drop after writeback is asynchronous.
 */
static void check_region(const char *name, unsigned int region,
			 const char *when, double secs)
{
	const uint64_t all = MIXED_LEN / PAGE;
	uint64_t want = mixed_cached(region) ? all : 0;
	size_t off = region * MIXED_SLOT;
	struct cs_stat cs;
	double took;
	int ok = wait_backing(name, off, MIXED_LEN, want, secs, &cs, &took);

	check(ok, "mixed: %s through %s%s: %llu of %llu pages of "
	      "[%zu, %zu) MiB cached (want %llu)",
	      mixed_write(region) ? "written" : "read",
	      fopen_name(mixed_fopen[region / 2]), when,
	      (unsigned long long)cs.nr_cache, (unsigned long long)all,
	      off / MIB, (off + MIXED_LEN) / MIB, (unsigned long long)want);
}

/* open the four handles; returns 1 if all opened */
static int mixed_open(const char *name, int fd[MIXED_HANDLES])
{
	unsigned int h;
	int ok = 1;

	for (h = 0; h < MIXED_HANDLES; h++) {
		fd[h] = pt_open(name, O_RDWR, mixed_fopen[h]);
		check(fd[h] >= 0, "mixed: open %s while the inode has other "
		      "passthrough handles (%s)", fopen_name(mixed_fopen[h]),
		      fd[h] < 0 ? strerror(errno) : "ok");
		ok &= fd[h] >= 0;
	}
	return ok;
}

static void mixed_close(int fd[MIXED_HANDLES])
{
	unsigned int h;

	for (h = 0; h < MIXED_HANDLES; h++)
		if (fd[h] >= 0)
			close(fd[h]);
}

/* every region through a fresh plain handle: new data where written */
static void mixed_verify(const char *name, uint64_t seed, uint64_t wseed)
{
	unsigned int r;
	int fd = pt_open(name, O_RDONLY, PT_FOPEN_PASSTHROUGH), ok = fd >= 0;

	for (r = 0; ok && r < 2 * MIXED_HANDLES; r++)
		ok = mixed_io(fd, r, false, mixed_write(r) ? wseed : seed);
	check(ok, "mixed: every handle's reads and writes read back right");
	if (fd >= 0)
		close(fd);
}

static int mixed(const char *backing)
{
	const char *name = "mixed";
	const uint64_t seed = name_seed(name), wseed = seed + 1;
	int fd[MIXED_HANDLES];
	unsigned int r;

	server_start(backing, true, false);
	if (!check_negotiated(true)) {
		server_stop();
		return summary();
	}
	make_backing_file(name, MIXED_SIZE, seed);
	check_resident(name, "after making it on the backing file system", 5);
	if (mixed_open(name, fd)) {
		for (r = 0; r < 2 * MIXED_HANDLES; r++) {
			bool w = mixed_write(r);

			check(mixed_io(fd[r / 2], r, w, w ? wseed : seed),
			      "mixed: %s 2 MiB through %s",
			      w ? "write" : "read",
			      fopen_name(mixed_fopen[r / 2]));
			check_region(name, r, "", mixed_cached(r) ? 0 : 15);
		}
		/* the uncached handles' close must not take the others' pages */
		mixed_close(fd);
		for (r = 0; r < 2 * MIXED_HANDLES; r++)
			check_region(name, r, ", all closed", 0);
		mixed_verify(name, seed, wseed);
	} else {
		mixed_close(fd);
	}
	check_no_data_requests("mixed");
	unlinkat(srv.dir, name, 0);
	server_stop();
	return summary();
}

static void expect_eio(const char *name, int flags, uint32_t fopen,
		       const char *why)
{
	int fd = pt_open(name, flags, fopen);

	check(fd < 0 && errno == EIO, "%s: %s open with %s fails with EIO "
	      "(%s)", why, flags & O_CREAT ? "creating" : "an",
	      fopen_name(fopen), fd < 0 ? strerror(errno) : "it succeeded");
	if (fd >= 0)
		close(fd);
}

/* a plain passthrough open of @name works, reads right and writes */
static int plain_works(const char *name, uint64_t seed, const char *why)
{
	static const struct io_case c = { "check", MIB, 64 * KIB, false };
	int fd = pt_open(name, O_RDWR, PT_FOPEN_PASSTHROUGH);
	int ok = fd >= 0 && stream(fd, &c, seed, false, false) >= 0 &&
		 pwrite(fd, "x", 1, c.size) == 1;

	check(ok, "%s: plain FOPEN_PASSTHROUGH open reads and writes (%s)",
	      why, fd < 0 ? strerror(errno) : "ok");
	return fd;
}

/*
 * Opens the kernel must refuse: @why says why.  The refusal must also not
 * disturb a plain passthrough handle of the same inode.
 */
static void expect_refused(const char *why)
{
	const uint32_t pt = PT_FOPEN_PASSTHROUGH;
	const char *name = "refused";
	uint64_t seed = name_seed(name);
	int fd;

	make_backing_file(name, MIB, seed);
	expect_eio(name, O_RDONLY, pt | PT_FOPEN_DONTCACHE_READ, why);
	expect_eio(name, O_WRONLY, pt | PT_FOPEN_DONTCACHE_WRITE, why);
	expect_eio(name, O_RDWR, pt | PT_FOPEN_DONTCACHE, why);
	expect_eio("refused-new", O_CREAT | O_EXCL | O_RDWR,
		   pt | PT_FOPEN_DONTCACHE, why);

	fd = plain_works(name, seed, why);
	if (fd >= 0) {
		/* with the inode in passthrough mode already */
		expect_eio(name, O_RDWR, pt | PT_FOPEN_DONTCACHE, why);
		check(pwrite(fd, "y", 1, 0) == 1, "%s: the plain handle still "
		      "works after the refused open", why);
		close(fd);
	}
	check_no_data_requests(why);
	unlinkat(srv.dir, name, 0);
	unlinkat(srv.dir, "refused-new", 0);
}

static int refuse(const char *backing)
{
	server_start(backing, true, false);
	if (check_negotiated(true))
		expect_refused("no RWF_DONTCACHE on the backing file system");
	server_stop();
	return summary();
}

/*
 * Without FUSE_PASSTHROUGH_DONTCACHE the private open bits are bits the
 * kernel does not know: a passthrough open with them fails (as mainline
 * refuses unknown flags there), any other open ignores them (as mainline
 * ignores unknown FOPEN bits).  B3: the series failed the latter too.
 */
static void expect_ignored(const char *why)
{
	const char *name = "ignored";
	int fd;

	make_backing_file(name, MIB, name_seed(name));
	fd = pt_open(name, O_RDONLY, PT_FOPEN_DONTCACHE);
	check(fd >= 0, "%s: a non-passthrough open with DONTCACHE_READ|"
	      "DONTCACHE_WRITE opens, the bits ignored as unknown (%s)", why,
	      fd < 0 ? strerror(errno) : "ok");
	if (fd >= 0)
		close(fd);
	unlinkat(srv.dir, name, 0);
}

static int unnegotiated(const char *backing)
{
	server_start(backing, false, false);
	if (check_negotiated(false)) {
		expect_refused("FUSE_PASSTHROUGH_DONTCACHE not negotiated");
		expect_ignored("FUSE_PASSTHROUGH_DONTCACHE not negotiated");
	}
	server_stop();
	return summary();
}

/*
 * "dio": page cache invalidation after direct writes (patch 0024).
 *
 * File DIO_FILE bytes, written at [0, DIO_LEN) by the direct handle and
 * read there by the cached one.  Writes stay inside i_size: an extending
 * O_DIRECT write is never queued (the kernel waits for it).
 */
#define DIO_LEN (64 * KIB)
#define DIO_FILE (2 * DIO_LEN)

struct dio_writer {
	int fd;
	bool aio;
	const unsigned char *buf;
	ssize_t res;		/* bytes written, or -errno */
};

static void *dio_write(void *arg)
{
	struct dio_writer *w = arg;
	struct iocb cb = { 0 }, *cbp = &cb;
	struct io_event ev;
	aio_context_t ctx = 0;

	if (!w->aio) {
		w->res = pwrite(w->fd, w->buf, DIO_LEN, 0);
		if (w->res < 0)
			w->res = -errno;
		return NULL;
	}
	if (syscall(SYS_io_setup, 1, &ctx)) {
		w->res = -errno;
		return NULL;
	}
	cb.aio_fildes = w->fd;
	cb.aio_lio_opcode = IOCB_CMD_PWRITE;
	cb.aio_buf = (uintptr_t)w->buf;
	cb.aio_nbytes = DIO_LEN;
	if (syscall(SYS_io_submit, ctx, 1, &cbp) != 1)
		w->res = -errno;
	else if (syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) != 1)
		w->res = -errno;
	else
		w->res = ev.res;
	syscall(SYS_io_destroy, ctx);
	return NULL;
}

/* [0, DIO_LEN) read through @fd holds the data of @seed */
static int dio_reads(int fd, uint64_t seed, unsigned char *buf,
		     unsigned char *scratch)
{
	return pread(fd, buf, DIO_LEN, 0) == DIO_LEN &&
	       verify(buf, DIO_LEN, 0, seed, scratch);
}

/*
 * One direct write of new data over [0, DIO_LEN) through an open with
 * @fopen and @flags, by write() or io_submit() (@aio) in a thread, while
 * this thread reads the range through a cached open (no FOPEN_DIRECT_IO)
 * that had it cached: that read gets the old data (the server holds the
 * WRITE until it has answered the READ) and caches it again.  After the
 * write has completed, the cached open must read the new data.
 */
static void dio_case(const char *what, int flags, uint32_t fopen, bool aio)
{
	const uint64_t old_seed = name_seed(what), new_seed = old_seed + 1;
	unsigned char *buf = NULL, *scratch = malloc(DIO_LEN);
	struct dio_writer w = { .aio = aio };
	unsigned int reads = atomic_load(&srv.reads_while_held);
	unsigned int timeouts = atomic_load(&srv.hold_timeouts);
	const char *name = "dio";
	struct cs_stat cs;
	pthread_t t;
	double t0;
	int wfd, rfd;

	if (posix_memalign((void **)&buf, PAGE, DIO_LEN) || !scratch)
		die("malloc");
	make_backing_file(name, DIO_FILE, old_seed);
	wfd = pt_open(name, O_RDWR | flags, fopen);
	rfd = pt_open(name, O_RDONLY, 0);
	if (wfd < 0 || rfd < 0) {
		check(0, "%s: open: %s", what, strerror(errno));
		goto out;
	}
	check(dio_reads(rfd, old_seed, buf, scratch),
	      "%s: the cached open reads the old data", what);
	if (cachestat_range(rfd, 0, DIO_LEN, &cs))
		die("cachestat on the FUSE file");
	check(cs.nr_cache == DIO_LEN / PAGE, "%s: ... and has the range "
	      "cached (%llu of %lu pages)", what,
	      (unsigned long long)cs.nr_cache, DIO_LEN / PAGE);

	fill(buf, DIO_LEN, 0, new_seed);
	w.fd = wfd;
	w.buf = buf;
	atomic_store(&srv.hold_next_write, true);
	errno = pthread_create(&t, NULL, dio_write, &w);
	if (errno)
		die("pthread_create");
	/* the WRITE is at the server: the kernel sent it, nothing answered */
	for (t0 = now(); !atomic_load(&srv.write_held) &&
	     now() - t0 < HOLD_SECS; usleep(1000))
		;
	/* what this read gets is not checked: the write is in flight */
	if (pread(rfd, scratch, DIO_LEN, 0) != DIO_LEN)
		check(0, "%s: read during the write: %s", what,
		      strerror(errno));
	pthread_join(t, NULL);
	atomic_store(&srv.hold_next_write, false);
	check(w.res == DIO_LEN, "%s: the direct write wrote %ld bytes "
	      "(%zd)", what, (long)DIO_LEN, w.res);
	check(atomic_load(&srv.reads_while_held) == reads + 1 &&
	      atomic_load(&srv.hold_timeouts) == timeouts,
	      "%s: a READ of the cached open was answered with the old data "
	      "while the WRITE was held (the race happened)", what);
	check(dio_reads(rfd, new_seed, scratch, buf),
	      "%s: once the write has completed, the cached open reads the "
	      "new data", what);
out:
	if (wfd >= 0)
		close(wfd);
	if (rfd >= 0)
		close(rfd);
	unlinkat(srv.dir, name, 0);
	free(buf);
	free(scratch);
}

static int dio(const char *backing)
{
	server_start(backing, false, true);
	check(!!(atomic_load(&srv.accepted) & FUSE_ASYNC_DIO),
	      "INIT: FUSE_ASYNC_DIO accepted");
	dio_case("FOPEN_DIRECT_IO write()", 0, FOPEN_DIRECT_IO, false);
	dio_case("FOPEN_DIRECT_IO io_submit()", 0, FOPEN_DIRECT_IO, true);
	dio_case("FOPEN_DIRECT_IO O_DIRECT write()", O_DIRECT,
		 FOPEN_DIRECT_IO, false);
	/* queued: completes after io_submit() returned */
	dio_case("FOPEN_DIRECT_IO O_DIRECT io_submit()", O_DIRECT,
		 FOPEN_DIRECT_IO, true);
	dio_case("O_DIRECT write()", O_DIRECT, 0, false);
	dio_case("O_DIRECT io_submit()", O_DIRECT, 0, true);
	server_stop();
	return summary();
}

static int usage(void)
{
	fprintf(stderr,
		"usage: fuse_pt_test offer [expect-yes|expect-no]\n"
		"       fuse_pt_test uncached|mixed|refuse|unnegotiated|dio|"
		"attrrace|attrrace-delay|stacked BACKINGDIR\n"
		"       FUSE_PT_BLKDEV=DEV fuse_pt_test stacked-blk BACKINGDIR\n");
	return 2;
}

/*
 * "attrrace" (B2): the server accepts FUSE_PASSTHROUGH_ATTR and lets
 * attributes stay valid for 60 s; a passthrough file gets two extending
 * O_DIRECT writes at once, ATTR_ROUNDS times (FUSE_PT_ROUNDS overrides):
 * both start at EOF (a write past EOF would make xfs zero the gap and wait
 * for the other first), one 4 KiB, one 8 KiB long, the same data, each
 * submitted by io_submit() from its own thread, pinned to CPU 0 and CPU 1
 * (where there are two): the block layer completes a request on the CPU
 * that submitted it, so the two completions run on two CPUs, concurrently,
 * from workqueues, and each copies the backing inode's attributes into the
 * FUSE inode.  Once both completed, the FUSE inode's size (fstat,
 * lseek(SEEK_END): the cached attributes, no GETATTR within the timeout)
 * must be the backing file's; a snapshot read before the other write
 * completed but stored after it shows a size that went backwards.
 * "attrrace-delay": the same with the attrdelay module loaded (the guest
 * script loads it), which holds each snapshot the 4 KiB write's completion
 * takes on CPU 0 for a while before it is stored; checks that it did.
 */
#define ATTR_ROUNDS 300
#define ATTR_REQ 4096

struct attr_submitter {
	pthread_t thread;
	pthread_barrier_t *go, *done;
	aio_context_t ctx;
	struct iocb cb;
	int cpu, rounds, err;
};

/* one write per round: wait for "go", submit, wait for "done" */
static void *attr_submit(void *arg)
{
	struct attr_submitter *a = arg;
	struct iocb *cbp = &a->cb;
	cpu_set_t set;
	int r;

	CPU_ZERO(&set);
	CPU_SET(a->cpu, &set);
	/* one CPU only (UML): both submit from it */
	sched_setaffinity(0, sizeof(set), &set);
	for (r = 0; r < a->rounds; r++) {
		pthread_barrier_wait(a->go);
		if (syscall(SYS_io_submit, a->ctx, 1, &cbp) != 1)
			a->err = errno;
		pthread_barrier_wait(a->done);
	}
	return NULL;
}

/* the attrdelay module's count of held snapshots (-1: not loaded) */
static long attrdelay_count(void)
{
	FILE *f = fopen("/sys/module/attrdelay/parameters/delayed", "r");
	long n = -1;

	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = -1;
		fclose(f);
	}
	return n;
}

static int attr_race(const char *backing, bool delayed)
{
	pthread_barrier_t go, done;
	struct attr_submitter sub[2];
	struct io_event ev[2];
	aio_context_t ctx = 0;
	int fd, r, i, got, behind = 0, seek_behind = 0, errs = 0, rounds;
	long delays0 = attrdelay_count();
	const char *env = getenv("FUSE_PT_ROUNDS");
	off_t want, seek;
	unsigned char *buf;
	struct stat st;
	uint64_t acc;

	rounds = env && atoi(env) > 0 ? atoi(env) : ATTR_ROUNDS;
	if (delayed && delays0 < 0) {
		check(0, "attrrace-delay: the attrdelay module is loaded");
		return summary();
	}
	opt_accept_attr = true;
	opt_attr_secs = 60;
	server_start(backing, false, false);
	acc = atomic_load(&srv.accepted);
	print_offer();
	check(!!(acc & PT_INIT_ATTR), "INIT: FUSE_PASSTHROUGH_ATTR accepted "
	      "(reply flags 0x%016llx)", (unsigned long long)acc);
	if (!(acc & PT_INIT_ATTR))
		goto out;
	if (posix_memalign((void **)&buf, PAGE, 2 * ATTR_REQ))
		die("posix_memalign");
	memset(buf, 0x5a, 2 * ATTR_REQ);	/* both requests write it */
	fd = pt_open("attrrace", O_CREAT | O_TRUNC | O_RDWR | O_DIRECT,
		     PT_FOPEN_PASSTHROUGH);
	if (fd < 0 || syscall(SYS_io_setup, 8, &ctx))
		die("attrrace open / io_setup");
	if (pthread_barrier_init(&go, NULL, 3) ||
	    pthread_barrier_init(&done, NULL, 3))
		die("pthread_barrier_init");
	for (i = 0; i < 2; i++) {
		memset(&sub[i], 0, sizeof(sub[i]));
		sub[i].go = &go;
		sub[i].done = &done;
		sub[i].ctx = ctx;
		sub[i].cpu = sysconf(_SC_NPROCESSORS_ONLN) > 1 ? i : 0;
		sub[i].rounds = rounds;
		sub[i].cb.aio_fildes = fd;
		sub[i].cb.aio_lio_opcode = IOCB_CMD_PWRITE;
		sub[i].cb.aio_buf = (uintptr_t)buf;
		sub[i].cb.aio_nbytes = (i + 1) * ATTR_REQ;
		errno = pthread_create(&sub[i].thread, NULL, attr_submit,
				       &sub[i]);
		if (errno)
			die("pthread_create");
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 2; i++)
			sub[i].cb.aio_offset = 2 * r * ATTR_REQ;
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&done);
		if (sub[0].err || sub[1].err) {
			errno = sub[0].err ? sub[0].err : sub[1].err;
			die("io_submit");
		}
		for (got = 0; got < 2; ) {
			int n = syscall(SYS_io_getevents, ctx, 1, 2 - got,
					ev + got, NULL);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				die("io_getevents");
			got += n;
		}
		errs += ev[0].res + ev[1].res != 3 * ATTR_REQ;
		want = (off_t)(2 * r + 2) * ATTR_REQ;
		if (fstat(fd, &st))
			die("fstat");
		behind += st.st_size < want;
		seek = lseek(fd, 0, SEEK_END);
		seek_behind += seek < want;
		if (st.st_size < want && behind <= 3)
			printf("  round %d: size %lld, lseek(SEEK_END) %lld, "
			       "backing %lld\n", r, (long long)st.st_size,
			       (long long)seek, (long long)want);
	}
	for (i = 0; i < 2; i++)
		pthread_join(sub[i].thread, NULL);
	check(!errs, "attrrace: %d rounds of two extending O_DIRECT "
	      "io_submit() writes from CPUs %d and %d completed (%d short)",
	      rounds, sub[0].cpu, sub[1].cpu, errs);
	if (delayed)
		check(attrdelay_count() > delays0, "attrrace-delay: %ld "
		      "attribute snapshots held by the attrdelay module",
		      attrdelay_count() - delays0);
	check(!behind && !seek_behind, "attrrace%s: the FUSE inode's size "
	      "behind the backing file's after %d of %d rounds (fstat), %d "
	      "(lseek SEEK_END)", delayed ? "-delay" : "", behind, rounds,
	      seek_behind);
	printf("attrrace: %u GETATTR requests at the server\n",
	       op_count(FUSE_GETATTR));
	pthread_barrier_destroy(&go);
	pthread_barrier_destroy(&done);
	syscall(SYS_io_destroy, ctx);
	close(fd);
	free(buf);
	unlinkat(srv.dir, "attrrace", 0);
out:
	server_stop();
	opt_accept_attr = false;
	opt_attr_secs = 0;
	return summary();
}

/*
 * "stacked" (B6): FUSE_PASSTHROUGH_ATTR over a backing file that is itself
 * on a FUSE mount, the kind of file system whose inode can hold attributes
 * older than its server's: a second instance of this server, in a child
 * process, serves READ and WRITE from BACKINGDIR with attributes valid for
 * 60 s and no passthrough of its own (so that its files may back ours).
 * A write through our passthrough file goes to the lower FUSE file, whose
 * inode then has the new size but the blocks and times from before the
 * write, marked stale (its server has the new ones).  Copied as cached
 * (AT_STATX_DONT_SYNC), they would stay on our file for the attribute
 * timeout; the kernel must ask our server instead (GETATTR), which asks the
 * lower file system, which asks its server.  Checked after an 8 KiB write
 * to a new file: st_size, st_blocks and st_mtime through our mount are
 * BACKINGDIR's file's.
 */
static int stacked(const char *backing)
{
	int up[2], down[2], fd, status;
	char lower[sizeof(srv.mnt)] = "", go = 'x', path[PATH_MAX];
	unsigned char *buf;
	struct stat st, real;
	pid_t pid;

	/* the servers have no UNLINK: the file goes on the backing dir */
	snprintf(path, sizeof(path), "%s/stacked", backing);
	unlink(path);
	if (pipe(up) || pipe(down))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		/* the lower server: mount, say where, wait, unmount */
		close(up[0]);
		close(down[1]);
		srv.no_passthrough = true;
		opt_attr_secs = 60;
		server_start(backing, false, true);
		if (write(up[1], srv.mnt, sizeof(srv.mnt)) != sizeof(srv.mnt))
			die("pipe write");
		if (read(down[0], &go, 1) < 0)
			die("pipe read");
		server_stop();
		_exit(failed ? 1 : 0);
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], lower, sizeof(lower)) != sizeof(lower))
		die("the lower FUSE server did not start");
	printf("stacked: lower FUSE mount %s over %s\n", lower, backing);

	opt_accept_attr = true;
	opt_attr_secs = 60;
	server_start(lower, false, false);
	if (!(atomic_load(&srv.accepted) & PT_INIT_ATTR)) {
		check(0, "stacked: INIT: FUSE_PASSTHROUGH_ATTR accepted");
		goto out;
	}
	fd = pt_open("stacked", O_CREAT | O_EXCL | O_RDWR,
		     PT_FOPEN_PASSTHROUGH);
	if (fd < 0)
		die("stacked: passthrough open of a file on the lower FUSE mount");
	/* the write's times must differ from the create's */
	usleep(50 * 1000);
	if (posix_memalign((void **)&buf, PAGE, 2 * PAGE))
		die("posix_memalign");
	memset(buf, 0x6b, 2 * PAGE);
	if (pwrite(fd, buf, 2 * PAGE, 0) != 2 * PAGE)
		die("stacked: pwrite");
	if (fstat(fd, &st))
		die("stacked: fstat");
	if (stat(path, &real))
		die(path);
	check(st.st_size == real.st_size && st.st_blocks == real.st_blocks &&
	      st.st_mtim.tv_sec == real.st_mtim.tv_sec &&
	      st.st_mtim.tv_nsec == real.st_mtim.tv_nsec,
	      "stacked: after a passthrough write to a file on a FUSE mount, "
	      "size %lld, blocks %lld, mtime %lld.%09ld through the mount; "
	      "the file's own: %lld, %lld, %lld.%09ld (%u GETATTR)",
	      (long long)st.st_size, (long long)st.st_blocks,
	      (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
	      (long long)real.st_size, (long long)real.st_blocks,
	      (long long)real.st_mtim.tv_sec, real.st_mtim.tv_nsec,
	      op_count(FUSE_GETATTR));
	close(fd);
	free(buf);
out:
	server_stop();
	opt_accept_attr = false;
	opt_attr_secs = 0;
	if (write(down[1], &go, 1) != 1)
		die("pipe write");
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		check(0, "stacked: the lower FUSE server stopped cleanly");
	close(up[0]);
	close(down[1]);
	unlink(path);
	return summary();
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "offer"))
		return offer(argc > 2 ? argv[2] : NULL);
	if (argc != 3)
		return usage();
	if (!strcmp(argv[1], "uncached"))
		return uncached(argv[2]);
	if (!strcmp(argv[1], "mixed"))
		return mixed(argv[2]);
	if (!strcmp(argv[1], "refuse"))
		return refuse(argv[2]);
	if (!strcmp(argv[1], "unnegotiated"))
		return unnegotiated(argv[2]);
	if (!strcmp(argv[1], "dio"))
		return dio(argv[2]);
	if (!strcmp(argv[1], "attrrace"))
		return attr_race(argv[2], false);
	if (!strcmp(argv[1], "attrrace-delay"))
		return attr_race(argv[2], true);
	if (!strcmp(argv[1], "stacked"))
		return stacked(argv[2]);
	if (!strcmp(argv[1], "stacked-blk")) {
		lower_blkdev = getenv("FUSE_PT_BLKDEV");
		if (!lower_blkdev)
			return usage();
		return stacked(argv[2]);
	}
	return usage();
}
