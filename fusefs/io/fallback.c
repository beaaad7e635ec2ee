// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The fallback for backing filesystems without RWF_DONTCACHE.
 *
 * Writes: write-behind in windows.  When a window's worth has been
 * written, writeback of it is started (SYNC_FILE_RANGE_WRITE), and the
 * window before it — whose writeback had a whole window's time to finish
 * — is waited for and dropped (POSIX_FADV_DONTNEED).  A stream therefore
 * holds at most two windows of page cache, and the disk stays busy.
 *
 * Reads: drop-behind.  Kernel read-ahead is turned off for the fd
 * (POSIX_FADV_RANDOM; dcfs's own read-ahead buffer reads large chunks), so
 * the only pages brought in are the ones just read, and they are dropped
 * right after.
 *
 * Pages that were resident before dcfs touched a range belong to someone
 * else (another reader, a database): they are found before the I/O
 * (cachestat, or mincore where the kernel lacks it: resident.c) and never
 * dropped.  POSIX_FADV_RANDOM does not stop everything:
 * a page that someone else's read-ahead marked starts asynchronous
 * read-ahead for whoever reads it next, even through our fd.  Those pages
 * are ours, and must not be taken for another reader's at the next
 * request (which would protect them, and the read-ahead they start in
 * turn, up to the end of the file).  So the look before a read reaches as
 * far past it as the kernel may read ahead.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"
#include "dcfs_sys.h"

#define PAGE 4096
#define RA_REACH_DEFAULT ((off_t)8 << 20)
#define RA_REACH_MAX ((off_t)64 << 20)
#define SETTLE_TRIES 20
#define SETTLE_US 10000

struct unprotected {
	struct dcfs_file *f;
	uint64_t pages;
};

/*
 * Adds [lo, hi) to the protected ranges, which stay sorted and disjoint
 * (drop_unprotected() walks them in order): requests do not come in file
 * order (the kernel's read-ahead, a reader going back).
 */
static void protect(struct dcfs_file *f, off_t lo, off_t hi)
{
	const unsigned int cap = sizeof(f->stream->prot) / sizeof(f->stream->prot[0]);
	unsigned int i = 0, j;

	while (i < f->stream->nprot && f->stream->prot[i].hi < lo)
		i++;
	/* ranges i..j-1 touch [lo, hi): they become one */
	for (j = i; j < f->stream->nprot && f->stream->prot[j].lo <= hi; j++) {
		if (f->stream->prot[j].lo < lo)
			lo = f->stream->prot[j].lo;
		if (f->stream->prot[j].hi > hi)
			hi = f->stream->prot[j].hi;
	}
	if (j == i && f->stream->nprot == cap) {
		f->stream->prot_all = true;
		return;
	}
	if (j == i) {
		memmove(&f->stream->prot[i + 1], &f->stream->prot[i],
			(f->stream->nprot - i) * sizeof(f->stream->prot[0]));
		f->stream->nprot++;
	} else if (j > i + 1) {
		memmove(&f->stream->prot[i + 1], &f->stream->prot[j],
			(f->stream->nprot - j) * sizeof(f->stream->prot[0]));
		f->stream->nprot -= j - i - 1;
	}
	f->stream->prot[i].lo = lo;
	f->stream->prot[i].hi = hi;
}

static off_t page_down(off_t x)
{
	return x & ~(off_t)(PAGE - 1);
}

static off_t page_up(off_t x)
{
	return (x + PAGE - 1) & ~(off_t)(PAGE - 1);
}

static void protect_run(void *arg, off_t lo, off_t hi)
{
	struct dcfs_file *f = arg;

	if (!f->stream->prot_all)
		protect(f, lo, hi);
}

static void note_range(struct dcfs_file *f, off_t lo, off_t hi)
{
	if (hi > lo)
		resident_runs(f->fd, lo, hi - lo, protect_run, f);
}

/*
 * Remembers which pages of [off, off + len) are resident now, except the
 * pages this handle already touched itself (a request ending mid-page
 * leaves that page resident for the next one: it is ours, not someone
 * else's).
 */
static void note_resident(struct dcfs_file *f, off_t off, size_t len)
{
	off_t lo = page_down(off), hi = page_up(off + (off_t)len);

	if (f->stream->prot_all)
		return;
	if (f->stream->seen_hi > f->stream->seen_lo) {
		note_range(f, lo, lo < f->stream->seen_lo ? f->stream->seen_lo : lo);
		note_range(f, hi > f->stream->seen_hi ? f->stream->seen_hi : hi, hi);
	} else {
		note_range(f, lo, hi);
	}
	if (f->stream->seen_hi == f->stream->seen_lo || lo < f->stream->seen_lo)
		f->stream->seen_lo = lo;
	if (hi > f->stream->seen_hi)
		f->stream->seen_hi = hi;
}

static void advise_dontneed(int fd, off_t lo, off_t hi)
{
	if (hi > lo)
		posix_fadvise(fd, lo, hi - lo, POSIX_FADV_DONTNEED);
}

/*
 * Drops [lo, hi) except the protected ranges.  The range is widened to
 * whole pages: POSIX_FADV_DONTNEED keeps partial pages, and a stream of
 * requests ending mid-page would otherwise leave one page per request.
 */
static void drop_unprotected(struct dcfs_file *f, off_t lo, off_t hi)
{
	off_t pos;

	lo = page_down(lo);
	hi = page_up(hi);
	pos = lo;
	if (f->stream->prot_all || hi <= lo)
		return;
	for (unsigned int i = 0; i < f->stream->nprot; i++) {
		const struct range *r = &f->stream->prot[i];

		if (r->hi <= pos || r->lo >= hi)
			continue;
		advise_dontneed(f->fd, pos, r->lo);
		pos = r->hi;
	}
	advise_dontneed(f->fd, pos, hi);
}

/* Waits for writeback of [lo, hi) and drops it. */
void fallback_drop(struct dcfs_file *f, off_t lo, off_t hi)
{
	if (hi <= lo)
		return;
	sync_file_range(f->fd, lo, hi - lo,
			SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				SYNC_FILE_RANGE_WAIT_AFTER);
	drop_unprotected(f, lo, hi);
}

/*
 * How far past a read the kernel may read ahead for it: two read-ahead
 * windows of the device, 8 MiB where that is unknown (a btrfs bdi has no
 * device number: its 4 MiB are not found).
 */
static off_t read_ahead_reach(struct dcfs_file *f)
{
	long long ra;

	if (!f->stream->ra_reach) {
		ra = conn_limits_read_ahead(f->fd);
		f->stream->ra_reach = ra > 0 ? (off_t)(2 * ra) : RA_REACH_DEFAULT;
		if (f->stream->ra_reach > RA_REACH_MAX)
			f->stream->ra_reach = RA_REACH_MAX;
	}
	return f->stream->ra_reach;
}

ssize_t fallback_read(struct dcfs_file *f, void *buf, size_t len, off_t off)
{
	ssize_t n;

	note_resident(f, off, len + (size_t)read_ahead_reach(f));
	n = pread(f->fd, buf, len, off);
	if (n < 0)
		return -errno;
	drop_unprotected(f, off, off + n);
	return n;
}

/*
 * btrfs finishes a write's ordered extent in a worker after the pages'
 * writeback has ended, and a page of a range locked for that cannot be
 * released: a window dropped right after its writeback may stay resident
 * whole (a 6.12 guest kept a 6.8 MiB window of a 1 GiB stream after the
 * close).  So each window is dropped once more a window later.
 */
static void start_window(struct dcfs_file *f)
{
	struct stream_state *s = f->stream;

	sync_file_range(f->fd, s->wb_lo, s->wb_hi - s->wb_lo, SYNC_FILE_RANGE_WRITE);
	fallback_drop(f, s->wb_prev_lo, s->wb_prev_hi);
	drop_unprotected(f, s->wb_old_lo, s->wb_old_hi);
	s->wb_old_lo = s->wb_prev_lo;
	s->wb_old_hi = s->wb_prev_hi;
	s->wb_prev_lo = s->wb_lo;
	s->wb_prev_hi = s->wb_hi;
	s->wb_lo = s->wb_hi = 0;
}

ssize_t fallback_write(struct dcfs_file *f, const void *buf, size_t len, off_t off)
{
	ssize_t n;
	off_t end;

	note_resident(f, off, len);
	n = pwrite(f->fd, buf, len, off);
	if (n <= 0)
		return n < 0 ? -errno : 0;
	/* O_APPEND writes land at the end, whatever off said. */
	if (f->flags & O_APPEND)
		off = lseek(f->fd, 0, SEEK_END) - n;
	end = off + n;
	if (f->stream->wb_hi == f->stream->wb_lo) {
		f->stream->wb_lo = off;
		f->stream->wb_hi = end;
	} else {
		/* The window is a span; a seek only widens it. */
		if (off < f->stream->wb_lo)
			f->stream->wb_lo = off;
		if (end > f->stream->wb_hi)
			f->stream->wb_hi = end;
	}
	if ((uint64_t)(f->stream->wb_hi - f->stream->wb_lo) >= f->stream->window)
		start_window(f);
	return n;
}

static void count_unprotected(void *arg, off_t lo, off_t hi)
{
	struct unprotected *u = arg;
	const struct stream_state *s = u->f->stream;

	for (unsigned int i = 0; i < s->nprot && lo < hi; i++) {
		const struct range *r = &s->prot[i];

		if (r->hi <= lo || r->lo >= hi)
			continue;
		if (r->lo > lo)
			u->pages += (r->lo - lo) / PAGE;
		lo = r->hi;
	}
	if (hi > lo)
		u->pages += (hi - lo) / PAGE;
}

/*
 * Drops the unprotected pages of what the handle touched (seen_lo..hi)
 * until none is left, for at most SETTLE_TRIES * SETTLE_US: the last
 * windows' extents may still be finishing (btrfs, start_window()).  Release is asynchronous to the
 * application's close, so the wait delays nobody; a page that stays
 * (mapped by someone since) costs the wait once.
 */
static void drop_settled(struct dcfs_file *f)
{
	struct stream_state *s = f->stream;
	struct unprotected u = { .f = f };

	if (s->prot_all || s->seen_hi <= s->seen_lo)
		return;
	for (int i = 0; i < SETTLE_TRIES; i++) {
		u.pages = 0;
		resident_runs(f->fd, s->seen_lo, s->seen_hi - s->seen_lo, count_unprotected, &u);
		if (!u.pages)
			return;
		if (i)
			usleep(SETTLE_US);
		drop_unprotected(f, s->seen_lo, s->seen_hi);
	}
}

/* At release: nothing of the stream stays behind. */
void fallback_finish(struct dcfs_file *f)
{
	if (f->stream->wb_hi > f->stream->wb_lo)
		start_window(f);
	fallback_drop(f, f->stream->wb_prev_lo, f->stream->wb_prev_hi);
	f->stream->wb_prev_lo = f->stream->wb_prev_hi = 0;
	/*
	 * RWF_DONTCACHE leaves a page behind when FUSE splits a write inside
	 * it (a 1 MiB write from an unaligned buffer arrives as 1048560 + 16
	 * bytes) and the second piece lands while the first is under
	 * writeback: drop what the handle wrote uncached once it is written.
	 */
	if (f->stream->dc_hi > f->stream->dc_lo)
		fallback_drop(f, f->stream->dc_lo, f->stream->dc_hi);
	/*
	 * Last, what the fallback's reads and writes touched: the last
	 * windows, and read-ahead the fd did before POSIX_FADV_RANDOM took
	 * effect.
	 */
	drop_settled(f);
}
