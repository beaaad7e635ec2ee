// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * copy_file_range between streams, made by the daemon with uncached reads
 * and writes (io.c: io_copy_file_range() decides when).
 *
 * Made inside the backing filesystem, such a copy would leave both files
 * in its page cache (cp(1) of a film).  Handed back to the kernel
 * (EOPNOTSUPP), it would be read through a direct-I/O handle of the
 * source, which does not see the dirty pages a shared mapping of it may
 * hold.
 */
#include <stdlib.h>

#include "io/io.h"

/* Pieces, and at most one chunk a request. */
#define COPY_PIECE ((size_t)1 << 20)
#define COPY_CHUNK ((size_t)8 << 20)

/* Writes all of buf at off uncached; bytes written, or -errno if none. */
static ssize_t write_all_uncached(struct probe *p, int fd, const char *buf, size_t len, off_t off)
{
	size_t done = 0;
	ssize_t n = 0;

	while (done < len) {
		n = probe_pwrite(p, fd, buf + done, len - done, off + (off_t)done);
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	return done ? (ssize_t)done : n < 0 ? n : -EIO;
}

/*
 * Returns the bytes copied (a short count: the caller asks again), or
 * -errno; -EOPNOTSUPP where the backing filesystem cannot do uncached
 * I/O, and the kernel then copies through the handles (the fallback
 * windows).
 */
ssize_t copy_uncached(struct dcfs_file *fin, off_t in, struct dcfs_file *fout, off_t out,
		      size_t len)
{
	struct probe *pin = fin->probe ? fin->probe : probe_get(fin->fd);
	struct probe *pout = fout->probe ? fout->probe : probe_get(fout->fd);
	size_t done = 0, want;
	ssize_t r = 0, w;
	char *buf;

	if (len > COPY_CHUNK)
		len = COPY_CHUNK;
	buf = malloc(len < COPY_PIECE ? len : COPY_PIECE);
	if (!buf)
		return -ENOMEM;
	while (done < len) {
		want = len - done < COPY_PIECE ? len - done : COPY_PIECE;
		r = probe_pread(pin, fin->fd, buf, want, in + (off_t)done);
		if (r <= 0)
			break;
		file_stats_io(fin, ST_READ_DONTCACHE, (uint64_t)r);
		w = write_all_uncached(pout, fout->fd, buf, (size_t)r, out + (off_t)done);
		if (w < 0) {
			r = w;
			break;
		}
		file_stats_io(fout, ST_WRITE_DONTCACHE, (uint64_t)w);
		done += (size_t)w;
		if (w < r || (size_t)r < want)
			break;
	}
	free(buf);
	return done ? (ssize_t)done : r;
}
