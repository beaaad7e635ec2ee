// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * One log line per backing filesystem when the mount comes up, so the
 * journal says what dcfs will do on each before anything streams: the
 * RWF_DONTCACHE probe (read/write), kernel FUSE passthrough, how inodes are
 * identified (handle.c) and how many file descriptors that leaves.
 *
 * The backing filesystems are the one holding the backing directory and
 * every filesystem mounted below it (found in /proc/self/mountinfo); each
 * is probed at once by probe_dir().
 *
 * This runs in INIT, after the mount: a path under the mount point is a
 * request to this daemon, which is not answered before INIT is, and the
 * mount point may be the backing directory itself (a mount in place,
 * -o nonempty).  So every directory is opened relative to the backing
 * directory's fd, taken before the mount.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "daemon/daemon.h"

#define MAX_BACKING_FS 64

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

/* The part of path below the backing directory ("sub/dir"), or NULL. */
static const char *below_backing(const char *path)
{
	size_t n = strlen(dcfs.opt.backing);

	if (n == 1) /* backing is "/" */
		return path[1] != '\0' ? path + 1 : NULL;
	if (strncmp(path, dcfs.opt.backing, n) == 0 && path[n] == '/' && path[n + 1] != '\0')
		return path + n + 1;
	return NULL;
}

/*
 * Opening and writing there could hang the mount's INIT on a server that
 * does not answer, or trigger an automount: those are probed by real I/O.
 */
static bool remote_or_automounted(const char *fstype)
{
	static const char *const skip[] = { "fuse", "nfs",	 "cifs", "smb",	  "9p",
					    "ceph", "glusterfs", "afs",	 "autofs" };

	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (strncmp(fstype, skip[i], strlen(skip[i])) == 0)
			return true;
	return false;
}

/* where: the directory's path, for the log; rel: relative to the backing
 * directory ("." for itself). */
static void log_one(const char *where, const char *rel, dev_t *seen, size_t *nseen)
{
	char limit[32] = "unlimited", ident[96], pts[64];
	const char *later;
	struct file_handle *fh;
	struct probe *p;
	struct rlimit rl;
	struct stat st;
	int fd;

	fd = openat(dcfs.root.fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	p = probe_dir(fd);
	/* Probes the identity mode of a filesystem not seen yet, too. */
	fh = fstat(fd, &st) == 0 ? handle_for(fd, &st) : NULL;
	close(fd);
	for (size_t i = 0; i < *nseen; i++)
		if (seen[i] == p->dev) {
			free(fh);
			return;
		}
	if (*nseen < MAX_BACKING_FS)
		seen[(*nseen)++] = p->dev;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		snprintf(limit, sizeof(limit), "%llu", (unsigned long long)rl.rlim_cur);
	/*
	 * With file handles the fd cache keeps at most its budget of O_PATH
	 * fds and the rest of the limit is for open files; without, every
	 * inode in use holds an fd and the limit bounds the tree in use.
	 */
	if (fh)
		snprintf(ident, sizeof(ident),
			 "identity file handle; fd budget %zu cached O_PATH of %s",
			 fdcache_budget(), limit);
	else
		snprintf(ident, sizeof(ident), "identity O_PATH fd per inode; fd budget %s", limit);
	free(fh);
	passthrough_summary(pts, sizeof(pts));
	/* exFAT, NFS and read-only filesystems: said later, at the first stream */
	later = p->rd == PROBE_UNKNOWN || p->wr == PROBE_UNKNOWN
			? " (not probed: no O_TMPFILE or not writable; the first stream decides)"
			: "";
	log_info(
		"backing %s %s (dev %u:%u): RWF_DONTCACHE read %s, write %s%s; passthrough %s; %s\n",
		p->fstype[0] ? p->fstype : "fs", where, major(p->dev), minor(p->dev),
		probe_state_name(p->rd), probe_state_name(p->wr), later, pts, ident);
}

/*
 * The kernel, and what of it the fallback relies on: without cachestat(2)
 * (before 6.5) the pages of other programs are found with mincore(2)
 * (io/resident.c); force_fallback makes every stream use the fallback.
 */
static void log_kernel(void)
{
	struct dcfs_config *cfg = config_get();
	struct utsname u;

	if (uname(&u) < 0)
		snprintf(u.release, sizeof(u.release), "?");
	log_info("kernel %s: page residency by %s%s\n", u.release,
		 strcmp(resident_method(), "cachestat")
			 ? "mincore(2) (no cachestat(2) before Linux 6.5)"
			 : "cachestat(2)",
		 cfg && cfg->force_fallback
			 ? "; force_fallback: streams take the fallback windows on every filesystem"
			 : "");
	if (cfg)
		config_put(cfg);
}

void caps_log_startup(void)
{
	dev_t seen[MAX_BACKING_FS];
	size_t nseen = 0, cap = 0;
	char *line = NULL;
	FILE *fp;

	log_kernel();
	log_one(dcfs.opt.backing, ".", seen, &nseen);
	fp = fopen("/proc/self/mountinfo", "re");
	if (!fp)
		return;
	/* id parent major:minor root MOUNTPOINT ... - FSTYPE SOURCE ... */
	while (getline(&line, &cap, fp) > 0) {
		char *sep = strstr(line, " - "), *save, *f;
		const char *rel;

		if (!sep)
			continue;
		*sep = '\0';
		f = strtok_r(line, " ", &save);
		for (int i = 0; f && i < 4; i++)
			f = strtok_r(NULL, " ", &save);
		if (!f)
			continue;
		unescape(f);
		/* Our own mount point is never below the backing dir (guard.c). */
		rel = below_backing(f);
		if (!rel)
			continue;
		if (remote_or_automounted(sep + 3))
			log_info(
				"backing %.*s %s: not probed at startup (remote, FUSE or automounted)\n",
				(int)strcspn(sep + 3, " "), sep + 3, f);
		else
			log_one(f, rel, seen, &nseen);
	}
	free(line);
	fclose(fp);
}
