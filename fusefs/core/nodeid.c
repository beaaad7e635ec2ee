// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE node ids.
 *
 * A node id is a number dcfs hands to the kernel for an inode, never an
 * address: every id the kernel sends back is looked up here.  An id dcfs
 * does not know (forged, stale, or of an inode dcfs has let go of) finds
 * nothing, and the handler answers ESTALE instead of dereferencing
 * anything.
 *
 * The id is derived from the backing identity, so that it is the same
 * after a restart of dcfs (an NFS client or an open_by_handle_at() caller
 * keeps its handles, which carry node ids; see inode.c's saved ghosts):
 *
 *   bits 0-47   st_ino
 *   bits 48-62  index of the backing filesystem: 0 for BACKING_DIR's own
 *               (so there node id == st_ino, the layout upstream's inode
 *               passthrough, FUSE_PASSTHROUGH_INO, asks for), 1..32767 for
 *               filesystems mounted below it, from a hash of st_dev
 *               (the same after a restart as long as the device numbers
 *               are), the next free one on a clash
 *   bit 63      0
 *
 * Whatever does not fit gets an id from a counter with bit 63 set, never
 * reused (stable within one run only): an st_ino of 48 bits or more, one
 * equal to FUSE_ROOT_ID, a filesystem beyond the index table, and an
 * inode number reused while the kernel still holds the old object under
 * the derived id (inode.c detaches that one; two objects never share an
 * id).  The kernel tells objects that had the same id at different times
 * apart by the generation (inode.c: from the file handle).
 *
 * The table is a hash of chains through dcfs_inode.idnext, protected by
 * the inode table lock.
 */
#include <stdlib.h>

#include "core/core.h"

#define MIN_BUCKETS 1024

#define INO_BITS 48
#define FS_INDEXES (1u << 15)
#define COUNTER_BIT (1ULL << 63)
/* Filesystems given an index; more are possible but get counter ids. */
#define MAX_INDEXED 1024

/* The id table (under the inode table lock, as every function here). */
static struct {
	struct dcfs_inode **buckets;
	size_t nbuckets, count;
	uint64_t next_counter;
	struct {
		dev_t dev;
		uint32_t index;
	} indexed[MAX_INDEXED];
	size_t n_indexed;
} ids = { .next_counter = COUNTER_BIT | 1 };

static size_t bucket_of(uint64_t id, size_t n)
{
	uint64_t h = id * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 32) & (n - 1);
}

int nodeid_init(void)
{
	ids.nbuckets = MIN_BUCKETS;
	ids.buckets = calloc(ids.nbuckets, sizeof(*ids.buckets));
	return ids.buckets ? 0 : -ENOMEM;
}

void nodeid_destroy(void)
{
	free(ids.buckets);
	ids.buckets = NULL;
	ids.nbuckets = ids.count = 0;
	ids.n_indexed = 0;
}

static bool index_taken(uint32_t index)
{
	for (size_t i = 0; i < ids.n_indexed; i++)
		if (ids.indexed[i].index == index)
			return true;
	return false;
}

/* The index of dev's filesystem, assigned at first sight; -1: none left. */
static int64_t fs_index(dev_t dev)
{
	uint64_t h;
	uint32_t index;

	if (dev == dcfs.root.dev)
		return 0;
	for (size_t i = 0; i < ids.n_indexed; i++)
		if (ids.indexed[i].dev == dev)
			return ids.indexed[i].index;
	if (ids.n_indexed == MAX_INDEXED)
		return -1;
	h = ((uint64_t)dev + 1) * 0x9e3779b97f4a7c15ULL;
	index = 1 + (uint32_t)((h >> 32) % (FS_INDEXES - 1));
	while (index_taken(index))
		index = index % (FS_INDEXES - 1) + 1;
	ids.indexed[ids.n_indexed].dev = dev;
	ids.indexed[ids.n_indexed].index = index;
	ids.n_indexed++;
	return index;
}

uint64_t nodeid_derived(dev_t dev, ino_t ino)
{
	int64_t index;
	uint64_t id;

	if (ino == 0 || (uint64_t)ino >> INO_BITS)
		return 0;
	index = fs_index(dev);
	if (index < 0)
		return 0;
	id = (uint64_t)index << INO_BITS | (uint64_t)ino;
	return id == FUSE_ROOT_ID ? 0 : id;
}

static void grow(void)
{
	size_t n = ids.nbuckets * 2;
	struct dcfs_inode **nb = calloc(n, sizeof(*nb));

	/* Out of memory only costs longer chains. */
	if (!nb)
		return;
	for (size_t i = 0; i < ids.nbuckets; i++) {
		struct dcfs_inode *p = ids.buckets[i], *next;

		for (; p; p = next) {
			size_t b = bucket_of(p->nodeid, n);

			next = p->idnext;
			p->idnext = nb[b];
			nb[b] = p;
		}
	}
	free(ids.buckets);
	ids.buckets = nb;
	ids.nbuckets = n;
}

/* Adds inode under the id it has already (a ghost saved by a previous run). */
void nodeid_insert(struct dcfs_inode *inode)
{
	size_t b;

	if (ids.count >= ids.nbuckets)
		grow();
	b = bucket_of(inode->nodeid, ids.nbuckets);
	inode->idnext = ids.buckets[b];
	ids.buckets[b] = inode;
	ids.count++;
}

void nodeid_assign(struct dcfs_inode *inode)
{
	uint64_t id = nodeid_derived(inode->dev, inode->ino);

	/* Taken: by an old object of a reused inode number the kernel holds. */
	if (!id || nodeid_find(id))
		id = ids.next_counter++;
	inode->nodeid = id;
	nodeid_insert(inode);
}

void nodeid_remove(struct dcfs_inode *inode)
{
	struct dcfs_inode **pp = &ids.buckets[bucket_of(inode->nodeid, ids.nbuckets)];

	for (; *pp; pp = &(*pp)->idnext) {
		if (*pp == inode) {
			*pp = inode->idnext;
			ids.count--;
			return;
		}
	}
}

struct dcfs_inode *nodeid_find(uint64_t id)
{
	struct dcfs_inode *p;

	if (!ids.buckets)
		return NULL;
	for (p = ids.buckets[bucket_of(id, ids.nbuckets)]; p; p = p->idnext)
		if (p->nodeid == id)
			return p;
	return NULL;
}
