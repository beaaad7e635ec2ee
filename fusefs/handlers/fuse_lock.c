// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * File locks are the backing filesystem's: flock(2) and POSIX record locks
 * taken through the mount and those taken on BACKING_DIR directly (a local
 * program, Samba, an NFS server of the same tree) see each other.
 *
 * flock(2) locks belong to an open file description: the FUSE file is one,
 * and so is its backing fd (f->fd), so flock(2) on f->fd has exactly their
 * semantics (shared by dup(2) and fork(2), released with the last
 * descriptor; FUSE_RELEASE_FLOCK_UNLOCK says when).
 *
 * POSIX locks belong to a lock owner (the process's files_struct; for
 * F_OFD_* the open file description), which the kernel sends as
 * lock_owner.  Each owner that locks an inode gets a backing descriptor of
 * its own (struct owner), and its locks are open-file-description locks
 * (F_OFD_SETLK) on it: locks of one owner merge, split and convert in
 * place, those of different owners conflict, and both conflict with
 * classic POSIX and OFD locks taken on the backing file by others.  The
 * kernel sends FLUSH with the owner at every close(2), after which the
 * owner holds no POSIX lock on the file (POSIX: any close releases them):
 * its locks go and so does its descriptor.  An F_OFD_* owner's go when its
 * file is released.
 *
 * A request that must wait (F_SETLKW, flock without LOCK_NB) first tries
 * without waiting.  Then it waits in a thread of its own when the request
 * came over /dev/fuse (the reply is sent from there), or in its io_uring
 * thread, whose entry carries the reply, while one other thread of that
 * queue stays free; a signal to the caller (FUSE_INTERRUPT) ends the wait
 * with EINTR, which the kernel restarts like a native lock wait.
 *
 * Where this differs from a local filesystem (dcfs(8), LOCKS): no deadlock
 * detection (EDEADLK) between waiters, since OFD locks have none; F_GETLK
 * reports the pid of a holder that locked through the mount, but 0 for an
 * OFD lock (natively -1); programs on the backing tree see the mount's
 * POSIX locks as OFD locks (l_pid -1); a wait that would leave an io_uring
 * queue without a free thread, or more than LOCK_WAITS_PER_USER waits or
 * LOCK_OWNERS_PER_USER lock descriptors of one user, fails with ENOLCK.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "handlers/handlers.h"

#define LOCK_WAITS_PER_USER 64
#define LOCK_OWNERS_PER_USER 1024
#define OWNER_BUCKETS 256
#define SIG_LOCK_WAKE SIGURG

/* A lock owner's descriptor for one inode. */
struct owner {
	struct owner *next;
	struct dcfs_inode *inode;
	uint64_t id;		     /* the kernel's lock_owner */
	uid_t uid;		     /* who opened the descriptor (the caps) */
	int fd;			     /* its backing descriptor */
	int accmode;		     /* O_RDONLY, O_WRONLY or O_RDWR */
	pid_t pid;		     /* of its last lock: F_GETLK's l_pid */
	const struct dcfs_file *via; /* the handle it was first used through */
	bool multi;		     /* used through another handle too */
	unsigned int waits;	     /* requests waiting on fd */
	bool gone;		     /* flushed while waits > 0: closed by the last */
};

static struct owner *owners[OWNER_BUCKETS];
static pthread_mutex_t owners_lock = PTHREAD_MUTEX_INITIALIZER;
/* owners in the table: 0 spares every close and release the lookup */
static _Atomic unsigned int nowners;

/* Per uid: lock descriptors and waiting requests (small table, linear). */
struct user_count {
	uid_t uid;
	unsigned int owners, waits;
};
static struct user_count users[256];

static struct user_count *user_of(uid_t uid)
{
	struct user_count *free_slot = NULL;

	for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
		if (users[i].uid == uid && (users[i].owners || users[i].waits))
			return &users[i];
		if (!free_slot && !users[i].owners && !users[i].waits)
			free_slot = &users[i];
	}
	if (free_slot)
		free_slot->uid = uid;
	return free_slot;
}

static unsigned int bucket(const struct dcfs_inode *inode, uint64_t id)
{
	uint64_t h = (uint64_t)(uintptr_t)inode ^ (id * 0x9e3779b97f4a7c15ULL);

	return (unsigned int)(h >> 56) % OWNER_BUCKETS;
}

/* owners_lock held */
static struct owner *owner_find(const struct dcfs_inode *inode, uint64_t id)
{
	for (struct owner *o = owners[bucket(inode, id)]; o; o = o->next)
		if (o->inode == inode && o->id == id && !o->gone)
			return o;
	return NULL;
}

/* owners_lock held; the owner is off the table, its fd closed (locks gone). */
static void owner_free(struct owner *o)
{
	struct owner **pp = &owners[bucket(o->inode, o->id)];
	struct user_count *u = user_of(o->uid);

	while (*pp && *pp != o)
		pp = &(*pp)->next;
	if (*pp)
		*pp = o->next;
	if (u && u->owners)
		u->owners--;
	atomic_fetch_sub(&nowners, 1);
	close(o->fd);
	free(o);
}

/* owners_lock held: the owner's locks go now, the owner when nobody waits. */
static void owner_drop(struct owner *o)
{
	struct flock all = { .l_type = F_UNLCK, .l_whence = SEEK_SET };

	if (o->waits) {
		fcntl(o->fd, F_OFD_SETLK, &all);
		o->gone = true;
		return;
	}
	owner_free(o);
}

/*
 * A descriptor of the backing file with the handle's access mode: what a
 * lock of the type needs (F_RDLCK a readable one, F_WRLCK a writable one;
 * the kernel has checked the caller's descriptor for it).  Reopened through
 * the handle's own descriptor: the very file, never a name.
 */
static int reopen_like(const struct dcfs_file *f)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", f->fd);
	fd = open(path, (f->flags & (O_ACCMODE | O_APPEND)) | O_CLOEXEC | O_NOCTTY);
	return fd < 0 ? -errno : fd;
}

static bool mode_allows(int accmode, short type)
{
	if (type == F_RDLCK)
		return accmode != O_WRONLY;
	if (type == F_WRLCK)
		return accmode != O_RDONLY;
	return true;
}

/*
 * The owner's descriptor for a lock of type, made on first use.  Returns it
 * with owners_lock held, or NULL with *err set (lock released).
 */
static struct owner *owner_get(fuse_req_t req, struct dcfs_file *f, uint64_t id, short type,
			       int *err)
{
	uid_t uid = fuse_req_ctx(req)->uid;
	struct user_count *u;
	struct owner *o;
	int fd;

	pthread_mutex_lock(&owners_lock);
	o = owner_find(f->inode, id);
	if (o) {
		if (o->via != f)
			o->multi = true;
		if (mode_allows(o->accmode, type))
			return o;
		/*
		 * A process locking through a read-only and a write-only
		 * descriptor of one file at once: its descriptor cannot take
		 * both kinds (see dcfs(8), LOCKS).
		 */
		*err = ENOLCK;
		pthread_mutex_unlock(&owners_lock);
		return NULL;
	}
	u = user_of(uid);
	if (!u || (uid != 0 && u->owners >= LOCK_OWNERS_PER_USER)) {
		*err = ENOLCK;
		pthread_mutex_unlock(&owners_lock);
		return NULL;
	}
	fd = reopen_like(f);
	o = fd >= 0 ? calloc(1, sizeof(*o)) : NULL;
	if (!o) {
		*err = fd < 0 ? -fd : ENOMEM;
		if (fd >= 0)
			close(fd);
		pthread_mutex_unlock(&owners_lock);
		return NULL;
	}
	atomic_store(&f->inode->posix_locked, true);
	o->inode = f->inode;
	o->id = id;
	o->uid = uid;
	o->fd = fd;
	o->accmode = f->flags & O_ACCMODE;
	o->via = f;
	o->next = owners[bucket(f->inode, id)];
	owners[bucket(f->inode, id)] = o;
	u->owners++;
	atomic_fetch_add(&nowners, 1);
	return o;
}

/* ---- waiting -------------------------------------------------------------- */

struct lock_wait {
	struct lock_wait *prev, *next; /* waits, owners_lock */
	fuse_req_t req;
	int fd;		 /* flock: a duplicate of the handle's backing fd */
	struct owner *o; /* POSIX: the owner; NULL for flock */
	struct flock fl; /* POSIX */
	int op;		 /* flock */
	uid_t uid;
	pid_t pid; /* the caller's */
	pthread_t thread;
	_Atomic bool interrupted, done;
};

static struct lock_wait *waits; /* every wait in progress, owners_lock */
static bool stopping;		/* fuse_lock_stop(): no new waits */

static void on_wake(int sig)
{
	(void)sig; /* only makes the waiting call return EINTR */
}

/*
 * FUSE_INTERRUPT of a waiting request (in another thread): the waiter is
 * signalled until it has seen it, as libfuse's own interrupt does; a
 * signal that came just before the call started is not lost that way.
 */
static void wait_interrupted(fuse_req_t req, void *data)
{
	struct lock_wait *w = data;

	(void)req;
	atomic_store(&w->interrupted, true);
	if (pthread_equal(w->thread, pthread_self()))
		return;
	while (!atomic_load(&w->done)) {
		pthread_kill(w->thread, SIG_LOCK_WAKE);
		usleep(10000);
	}
}

static int wait_call(struct lock_wait *w)
{
	struct flock fl = w->fl;

	if (w->o)
		return fcntl(w->o->fd, F_OFD_SETLKW, &fl);
	return flock(w->fd, w->op);
}

/* Waits in this thread until granted, failed or interrupted; 0 or errno. */
static int wait_here(struct lock_wait *w)
{
	sigset_t wake, old;
	int err = 0;

	pthread_mutex_lock(&owners_lock);
	w->thread = pthread_self();
	pthread_mutex_unlock(&owners_lock);
	fuse_req_interrupt_func(w->req, wait_interrupted, w);
	sigemptyset(&wake);
	sigaddset(&wake, SIG_LOCK_WAKE);
	pthread_sigmask(SIG_UNBLOCK, &wake, &old);
	for (;;) {
		if (atomic_load(&w->interrupted)) {
			err = EINTR;
			break;
		}
		if (wait_call(w) == 0)
			break;
		if (errno != EINTR) {
			err = errno;
			break;
		}
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	atomic_store(&w->done, true);
	/* Waits for a running wait_interrupted(); none is called after. */
	fuse_req_interrupt_func(w->req, NULL, NULL);
	return err;
}

/* After a wait: the counts, the owner (who may have been flushed), the reply. */
static void wait_end(struct lock_wait *w, int err)
{
	struct user_count *u;

	pthread_mutex_lock(&owners_lock);
	if (w->prev)
		w->prev->next = w->next;
	else if (waits == w)
		waits = w->next;
	if (w->next)
		w->next->prev = w->prev;
	if (w->o) {
		if (!err)
			w->o->pid = w->pid;
		w->o->waits--;
		if (w->o->gone && !w->o->waits)
			owner_free(w->o);
	}
	u = user_of(w->uid);
	if (u && u->waits)
		u->waits--;
	pthread_mutex_unlock(&owners_lock);
	fuse_reply_err(w->req, err);
	if (w->fd >= 0)
		close(w->fd);
	free(w);
}

static void *wait_main(void *arg)
{
	struct lock_wait *w = arg;

	wait_end(w, wait_here(w));
	return NULL;
}

/*
 * The lock is taken: wait for it.  w->o (if any) has waits counted;
 * owners_lock is not held.
 */
static void wait_for(struct lock_wait *w)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t tid;
	int err;

	if (uring_thread()) {
		if (!uring_may_block()) {
			wait_end(w, ENOLCK);
			return;
		}
		err = wait_here(w);
		uring_unblock();
		wait_end(w, err);
		return;
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 << 10);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&tid, &attr, wait_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (err)
		wait_end(w, ENOLCK);
}

/* A new wait of req's user, or NULL (ENOLCK) over the limit. */
static struct lock_wait *wait_new(fuse_req_t req)
{
	uid_t uid = fuse_req_ctx(req)->uid;
	struct lock_wait *w = calloc(1, sizeof(*w));
	struct user_count *u;

	if (!w)
		return NULL;
	w->fd = -1;
	pthread_mutex_lock(&owners_lock);
	u = user_of(uid);
	if (stopping || !u || (uid != 0 && u->waits >= LOCK_WAITS_PER_USER)) {
		pthread_mutex_unlock(&owners_lock);
		free(w);
		return NULL;
	}
	u->waits++;
	w->req = req;
	w->uid = uid;
	w->pid = fuse_req_ctx(req)->pid;
	w->next = waits;
	if (waits)
		waits->prev = w;
	waits = w;
	pthread_mutex_unlock(&owners_lock);
	return w;
}

/* ---- the handlers ------------------------------------------------------- */

static bool conflict(int err)
{
	return err == EAGAIN || err == EACCES || err == EWOULDBLOCK;
}

/*
 * The kernel sends RELEASE in the background after the last close(2) of a
 * file, so an flock or F_OFD_* lock taken through the mount by a process
 * that has just closed or exited may still be held here for a moment when
 * the next request arrives (in another thread).  A request that would fail
 * on a conflict gives such a release LOCK_SETTLE_MS to arrive: try(arg)
 * again every millisecond until it succeeds or fails otherwise.
 */
#define LOCK_SETTLE_MS 10

static int settle(int (*try)(void *arg), void *arg)
{
	int err = try(arg);

	for (int i = 0; i < LOCK_SETTLE_MS && conflict(err); i++) {
		usleep(1000);
		err = try(arg);
	}
	return err;
}

struct try_posix {
	int fd;
	struct flock fl;
};

static int try_posix(void *arg)
{
	struct try_posix *t = arg;
	struct flock fl = t->fl;

	return fcntl(t->fd, F_OFD_SETLK, &fl) < 0 ? errno : 0;
}

/* Is the lock in the way an OFD lock (ours among them), not a process's? */
static bool held_by_ofd(int fd, const struct flock *want)
{
	struct flock fl = *want;

	fl.l_pid = 0;
	return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK && fl.l_pid < 0;
}

struct try_flock {
	int fd, op;
};

static int try_flock(void *arg)
{
	struct try_flock *t = arg;

	return flock(t->fd, t->op) < 0 ? errno : 0;
}

static void dcfs_setlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		       struct flock *lock, int sleep)
{
	(void)ino;
	struct dcfs_file *f = dcfs_file_of(fi);
	struct flock fl = *lock;
	struct lock_wait *w;
	struct owner *o;
	int err = 0;

	fl.l_pid = 0; /* F_OFD_* want it 0 */
	if (lock->l_type == F_UNLCK) {
		pthread_mutex_lock(&owners_lock);
		o = owner_find(f->inode, fi->lock_owner);
		if (o && fcntl(o->fd, F_OFD_SETLK, &fl) < 0)
			err = errno;
		pthread_mutex_unlock(&owners_lock);
		fuse_reply_err(req, err);
		return;
	}
	o = owner_get(req, f, fi->lock_owner, lock->l_type, &err);
	if (!o) {
		fuse_reply_err(req, err);
		return;
	}
	if (fcntl(o->fd, F_OFD_SETLK, &fl) < 0)
		err = errno;
	if (err && !sleep && conflict(err) && held_by_ofd(o->fd, &fl)) {
		struct try_posix t = { o->fd, fl };

		o->waits++; /* kept while the lock is dropped */
		pthread_mutex_unlock(&owners_lock);
		err = settle(try_posix, &t);
		pthread_mutex_lock(&owners_lock);
		if (--o->waits == 0 && o->gone) {
			owner_free(o); /* flushed meanwhile: its locks went */
			pthread_mutex_unlock(&owners_lock);
			fuse_reply_err(req, err);
			return;
		}
	}
	if (!err)
		o->pid = lock->l_pid;
	if (!err || !sleep || !conflict(err)) {
		pthread_mutex_unlock(&owners_lock);
		fuse_reply_err(req, err);
		return;
	}
	o->waits++;
	pthread_mutex_unlock(&owners_lock);
	w = wait_new(req);
	if (!w) {
		pthread_mutex_lock(&owners_lock);
		o->waits--;
		if (o->gone && !o->waits)
			owner_free(o);
		pthread_mutex_unlock(&owners_lock);
		fuse_reply_err(req, ENOLCK);
		return;
	}
	w->o = o;
	w->fl = fl;
	w->pid = lock->l_pid;
	wait_for(w);
}

/* The pid of the owner (through the mount) holding the lock fl describes. */
static pid_t holder_pid(const struct dcfs_inode *inode, const struct owner *self,
			const struct flock *fl)
{
	long long start = fl->l_start;
	long long end = fl->l_len ? fl->l_start + fl->l_len - 1 : -1;
	pid_t pid = fl->l_pid;

	pthread_mutex_lock(&owners_lock);
	for (size_t b = 0; b < OWNER_BUCKETS && pid < 0; b++)
		for (struct owner *o = owners[b]; o && pid < 0; o = o->next) {
			char path[64], line[256];
			FILE *fp;

			if (o->inode != inode || o == self || o->gone)
				continue;
			snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", o->fd);
			fp = fopen(path, "re");
			/* lock:	1: OFDLCK  ADVISORY  WRITE -1 00:2d:12 0 EOF */
			while (fp && fgets(line, sizeof(line), fp)) {
				char kind[16], type[16], s[32], e[32];

				if (sscanf(line, "lock: %*d: %15s %*s %15s %*d %*s %31s %31s", kind,
					   type, s, e) != 4 ||
				    strcmp(kind, "OFDLCK") != 0 ||
				    (strcmp(type, "WRITE") == 0) != (fl->l_type == F_WRLCK) ||
				    atoll(s) != start ||
				    (strcmp(e, "EOF") == 0 ? -1 : atoll(e)) != end)
					continue;
				pid = o->pid;
				break;
			}
			if (fp)
				fclose(fp);
		}
	pthread_mutex_unlock(&owners_lock);
	return pid;
}

static void dcfs_getlk(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		       struct flock *lock)
{
	struct dcfs_file *f = dcfs_file_of(fi);
	struct flock fl = *lock;
	struct owner *o;
	int fd, err = 0;

	(void)ino;
	fl.l_pid = 0;
	/* The owner's own locks do not count: ask through its descriptor. */
	pthread_mutex_lock(&owners_lock);
	o = owner_find(f->inode, fi->lock_owner);
	fd = o ? o->fd : f->fd;
	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		err = errno;
	pthread_mutex_unlock(&owners_lock);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	if (fl.l_type != F_UNLCK && fl.l_pid < 0)
		fl.l_pid = holder_pid(f->inode, o, &fl);
	fuse_reply_lock(req, &fl);
}

static void dcfs_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	(void)ino;
	struct dcfs_file *f = dcfs_file_of(fi);
	struct lock_wait *w;
	int err = 0;

	if (flock(f->fd, op | LOCK_NB) < 0)
		err = errno;
	if (err && (op & LOCK_NB) && conflict(err)) {
		struct try_flock t = { f->fd, op };

		err = settle(try_flock, &t);
	}
	if (!err || (op & (LOCK_NB | LOCK_UN)) || !conflict(err)) {
		fuse_reply_err(req, err);
		return;
	}
	w = wait_new(req);
	if (w)
		w->fd = dup(f->fd);
	if (!w || w->fd < 0) {
		if (w)
			wait_end(w, ENOLCK);
		else
			fuse_reply_err(req, ENOLCK);
		return;
	}
	w->op = op;
	wait_for(w);
}

/* ---- the ends of owners --------------------------------------------------- */

/* close(2) by owner of a descriptor of f's file: its POSIX locks go. */
void fuse_lock_flush(struct dcfs_file *f, uint64_t owner)
{
	struct owner *o;

	if (!atomic_load(&nowners))
		return;
	pthread_mutex_lock(&owners_lock);
	o = owner_find(f->inode, owner);
	if (o)
		owner_drop(o);
	pthread_mutex_unlock(&owners_lock);
}

/*
 * f is released: the owners only it was used through go (F_OFD_* owners;
 * a process's own went at its FLUSH).  flock_release: its flock goes now,
 * although a passthrough backing file may still hold the description.
 */
void fuse_lock_release(struct dcfs_file *f, bool flock_release)
{
	if (flock_release)
		flock(f->fd, LOCK_UN);
	if (!atomic_load(&nowners))
		return;
	pthread_mutex_lock(&owners_lock);
	for (size_t b = 0; b < OWNER_BUCKETS; b++)
		for (struct owner *o = owners[b], *next; o; o = next) {
			next = o->next;
			if (o->via == f && !o->multi && !o->gone)
				owner_drop(o);
			else if (o->via == f)
				o->via = NULL;
		}
	pthread_mutex_unlock(&owners_lock);
}

/*
 * The session has ended: every wait ends with EINTR (its reply goes
 * nowhere), before the io_uring threads are joined and the handles freed.
 */
void fuse_lock_stop(void)
{
	for (int i = 0; i < 200; i++) {
		pthread_mutex_lock(&owners_lock);
		stopping = true;
		for (struct lock_wait *w = waits; w; w = w->next) {
			atomic_store(&w->interrupted, true);
			if (w->thread)
				pthread_kill(w->thread, SIG_LOCK_WAKE);
		}
		if (!waits) {
			pthread_mutex_unlock(&owners_lock);
			return;
		}
		pthread_mutex_unlock(&owners_lock);
		usleep(10000);
	}
	log_warn("%s: lock waits still running after 2 s\n", __func__);
}

void fuse_lock_ops(struct fuse_lowlevel_ops *ops)
{
	struct sigaction sa = { .sa_handler = on_wake };

	/* No SA_RESTART: a waiting fcntl()/flock() must return EINTR. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIG_LOCK_WAKE, &sa, NULL);
	ops->getlk = dcfs_getlk;
	ops->setlk = dcfs_setlk;
	ops->flock = dcfs_flock;
}
