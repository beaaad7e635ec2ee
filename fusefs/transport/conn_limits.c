// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * One FUSE request per application write of 1 MiB, wherever its buffer is.
 *
 * A 1 MiB buffer that is not page-aligned (what malloc() returns) spans
 * 257 pages.  The kernel caps a request at max_pages pages, and libfuse
 * 3.14 derives the max_pages of its INIT reply from max_write
 * ((max_write - 1) / page + 1 = 256, with no way to ask for more), so such
 * a write arrives as two requests of 1048560 and 16 bytes: a second round
 * trip and a partial-page write per MiB.  dcfs asks for one page more than
 * max_write needs (257): the kernel then sends the whole 1 MiB, whatever
 * its alignment, in one request of at most max_write bytes, which still
 * fits libfuse's buffer.
 *
 * The kernel clamps max_pages to /proc/sys/fs/fuse/max_pages_limit (256
 * by default), read when a connection is made: a root daemon raises it to
 * 257 before mounting if it is lower.  It is a host-wide ceiling that only
 * matters to daemons asking for more than 256 pages, and it is left raised
 * (other dcfs mounts may rely on it).  Without the rights, or on kernels
 * without the sysctl, the split simply stays.
 *
 * Read-ahead of the mount: the kernel gives a FUSE mount 128 KiB, which
 * the INIT reply can only lower.  A reader through the FUSE page cache (a
 * cached forwarded open, or a streaming reader with fuse_readahead) then
 * waits for a READ round trip per 128 KiB; with 1 MiB (one request of
 * max_pages) a 1 MiB reader ran 1.1-1.45 -> 1.5-1.7 GB/s here.  A root
 * daemon raises its own mount's /sys/class/bdi/MAJ:MIN/read_ahead_kb to
 * 1024 once the INIT reply is applied (that reply would lower it again);
 * it is the mount's own setting, gone with the mount.
 *
 * libfuse 3.14 has no API for this, so the INIT reply is patched on its
 * way out by wire.c's hook on /dev/fuse, which calls
 * conn_limits_init_reply(); that function is the whole protocol knowledge
 * of this file.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "transport/transport.h"

_Static_assert(offsetof(struct fuse_init_out, max_pages) == 28, "fuse_init_out.max_pages");
_Static_assert(offsetof(struct fuse_init_out, flags) == 12, "fuse_init_out.flags");

#define MAX_PAGES_LIMIT "/proc/sys/fs/fuse/max_pages_limit"

static bool raised; /* logged once the log is set up */

static unsigned int wanted_pages(void)
{
	return (1U << 20) / (unsigned int)sysconf(_SC_PAGESIZE) + 1;
}

/* The number a sysctl or sysfs file open as fd starts with. */
static int number_in(int fd, unsigned long *v)
{
	char buf[32];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);

	if (n < 0)
		return -errno;
	if (n == 0)
		return -ENODATA;
	buf[n] = '\0';
	*v = strtoul(buf, NULL, 10);
	return 0;
}

/*
 * Raises the number in a sysctl or sysfs file to want if it is lower.
 * Returns 1 if it was raised, 0 if it already was that high, -errno.
 */
static int raise_setting(const char *path, unsigned long want)
{
	char buf[32];
	unsigned long now;
	int fd = open(path, O_RDWR | O_CLOEXEC), len, rc;

	if (fd < 0)
		return -errno;
	rc = number_in(fd, &now);
	if (rc == -ENODATA)
		rc = 0;
	else if (!rc && now < want) {
		len = snprintf(buf, sizeof(buf), "%lu\n", want);
		rc = pwrite(fd, buf, (size_t)len, 0) == len ? 1 : -errno;
	}
	close(fd);
	return rc;
}

static void read_ahead_path(dev_t dev, char *buf, size_t size)
{
	snprintf(buf, size, "/sys/class/bdi/%u:%u/read_ahead_kb", major(dev), minor(dev));
}

/*
 * The read-ahead of the device (bdi) the file fd is on, in bytes; 0 if
 * unknown (a btrfs bdi, say, has no device number).
 */
long long conn_limits_read_ahead(int file)
{
	char path[64];
	unsigned long kb = 0;
	struct stat st;
	int fd;

	if (fstat(file, &st) < 0)
		return 0;
	read_ahead_path(st.st_dev, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (number_in(fd, &kb) < 0)
		kb = 0;
	close(fd);
	return (long long)kb << 10;
}

void conn_limits_prepare(void)
{
	raised = raise_setting(MAX_PAGES_LIMIT, wanted_pages()) == 1;
}

void conn_limits_init_reply(struct fuse_init_out *out)
{
	unsigned int page = (unsigned int)sysconf(_SC_PAGESIZE);
	unsigned int need = (out->max_write + page - 1) / page + 1;

	if ((out->flags & FUSE_MAX_PAGES) && out->max_pages < need)
		out->max_pages = (uint16_t)need;
	if (raised)
		log_info("raised %s to %u: unaligned 1 MiB writes come in one request\n",
			 MAX_PAGES_LIMIT, wanted_pages());
}

#define MOUNT_READ_AHEAD_KB 1024

void conn_limits_after_init(void)
{
	dev_t dev = guard_self_dev();
	char path[64];
	int rc;

	if (!dev)
		return;
	read_ahead_path(dev, path, sizeof(path));
	rc = raise_setting(path, MOUNT_READ_AHEAD_KB);
	if (rc < 0)
		log_debug("%s: %s (read-ahead of the mount stays)\n", path, strerror(-rc));
	else if (rc)
		log_debug("%s: raised to %d\n", path, MOUNT_READ_AHEAD_KB);
}
