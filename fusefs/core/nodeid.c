// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE node ids.
 *
 * A node id is a number dcfs hands to the kernel for an inode, never an
 * address: ids come from a 64-bit counter and are never reused, and every
 * id the kernel sends back is looked up here.  An id dcfs does not know
 * (forged, stale, or of an inode dcfs has let go of) finds nothing, and
 * the handler answers ESTALE instead of dereferencing anything.  This is
 * also what lets the kernel re-export the mount (NFS handles carry node
 * ids, see inode.c's ghosts).
 *
 * The table is a hash of chains through dcfs_inode.idnext, protected by
 * the inode table lock.
 */
#include <stdlib.h>

#include "core/core.h"

#define MIN_BUCKETS 1024

static struct dcfs_inode **buckets;
static size_t nbuckets, count;
static uint64_t next_id = FUSE_ROOT_ID + 1;

static size_t bucket_of(uint64_t id, size_t n)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (n - 1);
}

int nodeid_init(void)
{
	nbuckets = MIN_BUCKETS;
	buckets = calloc(nbuckets, sizeof(*buckets));
	return buckets ? 0 : -ENOMEM;
}

void nodeid_destroy(void)
{
	free(buckets);
	buckets = NULL;
	nbuckets = count = 0;
}

static void grow(void)
{
	size_t n = nbuckets * 2;
	struct dcfs_inode **nb = calloc(n, sizeof(*nb));

	/* Out of memory only costs longer chains. */
	if (!nb)
		return;
	for (size_t i = 0; i < nbuckets; i++) {
		struct dcfs_inode *p = buckets[i], *next;

		for (; p; p = next) {
			size_t b = bucket_of(p->nodeid, n);

			next = p->idnext;
			p->idnext = nb[b];
			nb[b] = p;
		}
	}
	free(buckets);
	buckets = nb;
	nbuckets = n;
}

void nodeid_assign(struct dcfs_inode *inode)
{
	size_t b;

	if (count >= nbuckets)
		grow();
	inode->nodeid = next_id++;
	b = bucket_of(inode->nodeid, nbuckets);
	inode->idnext = buckets[b];
	buckets[b] = inode;
	count++;
}

void nodeid_remove(struct dcfs_inode *inode)
{
	struct dcfs_inode **pp = &buckets[bucket_of(inode->nodeid, nbuckets)];

	for (; *pp; pp = &(*pp)->idnext) {
		if (*pp == inode) {
			*pp = inode->idnext;
			count--;
			return;
		}
	}
}

struct dcfs_inode *nodeid_find(uint64_t id)
{
	struct dcfs_inode *p;

	if (!buckets)
		return NULL;
	for (p = buckets[bucket_of(id, nbuckets)]; p; p = p->idnext)
		if (p->nodeid == id)
			return p;
	return NULL;
}
