// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuse-floor: the least a FUSE server can do per request, to measure what
 * the round trips alone cost on a kernel (the lower bound of any server's
 * metadata times, dcfs's included).  Names and attributes live in memory
 * only, no file data is kept, every request is answered at once by one
 * thread, with dcfs's default timeouts (1 s) and default_permissions.
 *
 *   fuse-floor [-f] [-o OPTS] [BACKING] MOUNTPOINT
 *
 * takes dcfs's command line (options and BACKING are ignored), so that a
 * harness can time it where it times dcfs: kernel-patches' meta stage
 * (META_BASE=build/fuse-floor, META_SIZE=0: create + close, stat, unlink;
 * a write would be one more round trip here, as dcfs's passthrough does
 * not need).  It stays in the foreground.
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUCKETS (1u << 20)
#define TIMEOUT 1.0

struct node {
	struct node *next; /* hash chain of (parent, name) */
	fuse_ino_t ino, parent;
	mode_t mode;
	off_t size;
	char name[];
};

static struct node **by_name;
static struct node **by_ino; /* index ino - 1; grows */
static size_t n_ino, cap_ino;
static struct node root = { .ino = FUSE_ROOT_ID, .mode = S_IFDIR | 0755 };

static uint32_t hash(fuse_ino_t parent, const char *name)
{
	uint32_t h = 2166136261u ^ (uint32_t)parent;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h & (BUCKETS - 1);
}

static struct node *find(fuse_ino_t parent, const char *name)
{
	struct node *n = by_name[hash(parent, name)];

	while (n && (n->parent != parent || strcmp(n->name, name)))
		n = n->next;
	return n;
}

static struct node *node_of(fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &root;
	return ino - 2 < n_ino ? by_ino[ino - 2] : NULL;
}

static struct node *add(fuse_ino_t parent, const char *name, mode_t mode)
{
	size_t len = strlen(name) + 1;
	struct node *n = calloc(1, sizeof(*n) + len);
	uint32_t h = hash(parent, name);

	if (!n)
		return NULL;
	if (n_ino == cap_ino) {
		size_t cap = cap_ino ? cap_ino * 2 : 4096;
		struct node **grown = realloc(by_ino, cap * sizeof(*grown));

		if (!grown) {
			free(n);
			return NULL;
		}
		by_ino = grown;
		cap_ino = cap;
	}
	n->ino = n_ino + 2;
	by_ino[n_ino++] = n;
	n->parent = parent;
	n->mode = mode;
	memcpy(n->name, name, len);
	n->next = by_name[h];
	by_name[h] = n;
	return n;
}

/* Out of the name hash; the ino slot stays (a FORGET may still come). */
static void drop_name(struct node *n)
{
	struct node **p = &by_name[hash(n->parent, n->name)];

	while (*p != n)
		p = &(*p)->next;
	*p = n->next;
}

static void fill_attr(const struct node *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = n->mode;
	st->st_nlink = S_ISDIR(n->mode) ? 2 : 1;
	st->st_size = n->size;
	st->st_uid = getuid();
	st->st_gid = getgid();
}

static void fill_entry(const struct node *n, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = n->ino;
	e->attr_timeout = TIMEOUT;
	e->entry_timeout = TIMEOUT;
	fill_attr(n, &e->attr);
}

static void ff_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct node *n = find(parent, name);
	struct fuse_entry_param e;

	if (!n) {
		/* a negative entry, as dcfs's negative_timeout gives */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = TIMEOUT;
		fuse_reply_entry(req, &e);
		return;
	}
	fill_entry(n, &e);
	fuse_reply_entry(req, &e);
}

static void ff_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct node *n = node_of(ino);
	struct stat st;

	(void)fi;
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(n, &st);
	fuse_reply_attr(req, &st, TIMEOUT);
}

static void ff_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct node *n = node_of(ino);

	if (n && (to_set & FUSE_SET_ATTR_SIZE))
		n->size = attr->st_size;
	ff_getattr(req, ino, fi);
}

static void make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		 struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	struct node *n;

	if (find(parent, name)) {
		fuse_reply_err(req, EEXIST);
		return;
	}
	n = add(parent, name, mode);
	if (!n) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fill_entry(n, &e);
	if (fi) {
		fi->noflush = 1; /* nothing to flush: no FLUSH round trip */
		fuse_reply_create(req, &e, fi);
	} else {
		fuse_reply_entry(req, &e);
	}
}

static void ff_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make(req, parent, name, S_IFDIR | (mode & 07777), NULL);
}

static void ff_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	make(req, parent, name, S_IFREG | (mode & 07777), fi);
}

static void ff_remove(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct node *n = find(parent, name);

	if (n)
		drop_name(n);
	fuse_reply_err(req, n ? 0 : ENOENT);
}

static void ff_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

static void ff_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct node *n = node_of(ino);

	(void)buf;
	(void)fi;
	if (n && off + (off_t)size > n->size)
		n->size = off + (off_t)size;
	fuse_reply_write(req, size);
}

static void ff_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void ff_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	(void)ino;
	(void)nlookup;
	fuse_reply_none(req);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = ff_lookup,
	.forget = ff_forget,
	.getattr = ff_getattr,
	.setattr = ff_setattr,
	.mkdir = ff_mkdir,
	.unlink = ff_remove,
	.rmdir = ff_remove,
	.create = ff_create,
	.open = ff_open,
	.write = ff_write,
	.release = ff_release,
};

int main(int argc, char *argv[])
{
	char *fargs[] = { argv[0], "-o", "default_permissions,fsname=fuse-floor" };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargs);
	struct fuse_session *se;
	int rc;

	if (argc < 2 || argv[argc - 1][0] == '-') {
		fprintf(stderr, "usage: %s [-f] [-o OPTS] [BACKING] MOUNTPOINT\n", argv[0]);
		return 2;
	}
	by_name = calloc(BUCKETS, sizeof(*by_name));
	if (!by_name)
		return 1;
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		return 1;
	if (fuse_set_signal_handlers(se) || fuse_session_mount(se, argv[argc - 1])) {
		fuse_session_destroy(se);
		return 1;
	}
	rc = fuse_session_loop(se);
	fuse_session_unmount(se);
	fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	return rc ? 1 : 0;
}
