// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * RWF_DONTCACHE support, probed once per backing filesystem (st_dev) and
 * separately for reads and writes, by simply trying it on real I/O.
 * EOPNOTSUPP is the kernel's capability answer (no support in this kernel
 * or filesystem), never an error for the caller: it is remembered and the
 * I/O is redone through the fallback.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "io/io.h"
#include "dcfs_sys.h"

#define MAX_PROBES 64

/* The filesystems probed so far, by st_dev. */
static struct {
	pthread_mutex_t probe_lock;
	struct probe probes[MAX_PROBES];
	size_t nprobes;
	struct probe overflow; /* shared by devices past MAX_PROBES */
} known = { .probe_lock = PTHREAD_MUTEX_INITIALIZER };

static const char *fstype_name(long type)
{
	switch (type) {
	case 0xEF53: return "ext4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x01021994: return "tmpfs";
	case (long)0xF2F52010: return "f2fs";
	case 0x65735546: return "fuse";
	case 0x6969: return "nfs";
	case 0x2011BAB0: return "exfat";
	case 0x4d44: return "vfat";
	case (long)0xFF534D42: return "cifs";
	case (long)0xFE534D42: return "smb2";
	case 0x794c7630: return "overlay";
	case 0x2FC12FC1: return "zfs";
	case (long)0xca451a4e: return "bcachefs";
	case 0x7366746e: return "ntfs3";
	case 0x01021997: return "9p";
	default: return "other";
	}
}

struct probe *probe_get(int fd)
{
	struct statfs sfs;
	struct stat st;
	struct probe *p = &known.overflow;

	if (fstat(fd, &st) < 0)
		return &known.overflow;
	pthread_mutex_lock(&known.probe_lock);
	for (size_t i = 0; i < known.nprobes; i++) {
		if (known.probes[i].dev == st.st_dev) {
			p = &known.probes[i];
			goto out;
		}
	}
	if (known.nprobes < MAX_PROBES) {
		p = &known.probes[known.nprobes++];
		p->dev = st.st_dev;
		if (fstatfs(fd, &sfs) == 0)
			snprintf(p->fstype, sizeof(p->fstype), "%s", fstype_name((long)sfs.f_type));
	}
out:
	pthread_mutex_unlock(&known.probe_lock);
	return p;
}

/*
 * The probe of handles opened under force_fallback (dcfs.conf): RWF_DONTCACHE
 * counts as unsupported, so their streams take the fallback windows even
 * where the backing filesystem has it (to measure the fallback against
 * native buffered and native uncached I/O on one filesystem).  The real
 * probe of the filesystem, in the log and dcfs stat, is not touched.
 */
static struct probe forced = { .fstype = "forced", .rd = PROBE_NO, .wr = PROBE_NO };

struct probe *probe_forced_fallback(void)
{
	return &forced;
}

const char *probe_state_name(int s)
{
	return s == PROBE_YES ? "yes" : s == PROBE_NO ? "no" : "unknown";
}

static void record(struct probe *p, _Atomic int *state, int value, const char *what)
{
	int expected = PROBE_UNKNOWN;

	if (atomic_compare_exchange_strong(state, &expected, value))
		log_info("backing %s (dev %u:%u): RWF_DONTCACHE %s %s\n",
			 p->fstype[0] ? p->fstype : "fs", major(p->dev), minor(p->dev), what,
			 value == PROBE_YES ? "supported" : "not supported, using fallback");
}

ssize_t probe_pread(struct probe *p, int fd, void *buf, size_t len, off_t off)
{
	struct iovec iov = { buf, len };
	ssize_t n;

	if (p->rd == PROBE_NO)
		return -EOPNOTSUPP;
	n = preadv2(fd, &iov, 1, off, DCFS_RWF_DONTCACHE);
	if (n < 0 && errno == EOPNOTSUPP) {
		record(p, &p->rd, PROBE_NO, "reads");
		return -EOPNOTSUPP;
	}
	if (n >= 0)
		record(p, &p->rd, PROBE_YES, "reads");
	return n < 0 ? -errno : n;
}

ssize_t probe_pwrite(struct probe *p, int fd, const void *buf, size_t len, off_t off)
{
	struct iovec iov = { (void *)buf, len };

	return probe_pwritev(p, fd, &iov, 1, off);
}

ssize_t probe_pwritev(struct probe *p, int fd, const struct iovec *iov, int cnt, off_t off)
{
	ssize_t n;

	if (p->wr == PROBE_NO)
		return -EOPNOTSUPP;
	n = pwritev2(fd, iov, cnt, off, DCFS_RWF_DONTCACHE);
	if (n < 0 && errno == EOPNOTSUPP) {
		record(p, &p->wr, PROBE_NO, "writes");
		return -EOPNOTSUPP;
	}
	if (n >= 0)
		record(p, &p->wr, PROBE_YES, "writes");
	return n < 0 ? -errno : n;
}

size_t probe_snapshot(struct probe *out, size_t max)
{
	size_t n;

	pthread_mutex_lock(&known.probe_lock);
	n = known.nprobes < max ? known.nprobes : max;
	for (size_t i = 0; i < n; i++) {
		out[i].dev = known.probes[i].dev;
		memcpy(out[i].fstype, known.probes[i].fstype, sizeof(out[i].fstype));
		out[i].rd = known.probes[i].rd;
		out[i].wr = known.probes[i].wr;
	}
	pthread_mutex_unlock(&known.probe_lock);
	return n;
}

/*
 * The largest size the filesystem lets a new file have (ext4: 16 TiB less
 * a block with 4 KiB blocks; xfs, btrfs: the largest offset there is):
 * where ftruncate() of the O_TMPFILE fd stops saying EFBIG.  Sparse, so
 * nothing is allocated.  A write past it must not be acknowledged before
 * it lands (admit.c).
 */
static void probe_max_size(struct probe *p, int fd)
{
	off_t lo = 0, hi = INT64_MAX;

	if (ftruncate(fd, hi) == 0)
		lo = hi;
	while (hi - lo > 1) {
		off_t mid = lo + (hi - lo) / 2;

		if (ftruncate(fd, mid) == 0)
			lo = mid;
		else if (errno == EFBIG || errno == EINVAL)
			hi = mid;
		else
			return; /* it cannot say */
	}
	if (lo > 0)
		atomic_store(&p->max_size, (int64_t)lo);
	if (ftruncate(fd, 0) < 0)
		return;
}

/*
 * Probes the filesystem of directory dirfd at once, instead of at its first
 * streamed I/O, so the startup log and `dcfs stat` can say what it does:
 * one page written and read back with RWF_DONTCACHE in an O_TMPFILE, which
 * has no name and vanishes at close.  Where that cannot be made (read-only,
 * full, no O_TMPFILE, no write permission) the states stay unknown and real
 * I/O decides later, as before.
 */
struct probe *probe_dir(int dirfd)
{
	static char page[4096];
	struct iovec iov = { page, sizeof(page) };
	struct probe *p;
	int fd, expected;
	ssize_t n;

	fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return probe_get(dirfd);
	p = probe_get(fd);
	if (p == &known.overflow)
		goto out;
	probe_max_size(p, fd);
	n = pwritev2(fd, &iov, 1, 0, DCFS_RWF_DONTCACHE);
	expected = PROBE_UNKNOWN;
	if (n == (ssize_t)sizeof(page) || (n < 0 && errno == EOPNOTSUPP))
		atomic_compare_exchange_strong(&p->wr, &expected, n < 0 ? PROBE_NO : PROBE_YES);
	if (n < 0 && pwrite(fd, page, sizeof(page), 0) != (ssize_t)sizeof(page))
		goto out;
	n = preadv2(fd, &iov, 1, 0, DCFS_RWF_DONTCACHE);
	expected = PROBE_UNKNOWN;
	if (n >= 0 || errno == EOPNOTSUPP)
		atomic_compare_exchange_strong(&p->rd, &expected, n < 0 ? PROBE_NO : PROBE_YES);
out:
	close(fd);
	return p;
}
