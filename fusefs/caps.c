// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * One log line per backing filesystem when the mount comes up, so the
 * journal says what dcfs will do on each before anything streams: the
 * RWF_DONTCACHE probe (read/write), kernel FUSE passthrough, how inodes are
 * identified and how many file descriptors that leaves.
 *
 * The backing filesystems are the one holding the backing directory and
 * every filesystem mounted below it (found in /proc/self/mountinfo); each
 * is probed at once by probe_dir().
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "dcfs_io.h"

#define MAX_BACKING_FS 64

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = '\0';
}

static bool below_backing(const char *path)
{
	size_t n = strlen(dcfs.opt.backing);

	if (n == 1) /* backing is "/" */
		return path[1] != '\0';
	return strncmp(path, dcfs.opt.backing, n) == 0 && path[n] == '/';
}

/*
 * Opening and writing there could hang the mount's INIT on a server that
 * does not answer, or trigger an automount: those are probed by real I/O.
 */
static bool remote_or_automounted(const char *fstype)
{
	static const char *const skip[] = { "fuse", "nfs", "cifs", "smb", "9p",
					    "ceph", "glusterfs", "afs", "autofs" };

	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (strncmp(fstype, skip[i], strlen(skip[i])) == 0)
			return true;
	return false;
}

static void log_one(const char *where, dev_t *seen, size_t *nseen)
{
	char budget[64] = "unlimited";
	struct probe *p;
	struct rlimit rl;
	int fd;

	fd = open(where, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	p = probe_dir(fd);
	close(fd);
	for (size_t i = 0; i < *nseen; i++)
		if (seen[i] == p->dev)
			return;
	if (*nseen < MAX_BACKING_FS)
		seen[(*nseen)++] = p->dev;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		snprintf(budget, sizeof(budget), "%llu",
			 (unsigned long long)rl.rlim_cur);
	/*
	 * libfuse 3.14 cannot open kernel passthrough backing files; inodes
	 * are held by an O_PATH fd each, so the fd limit bounds how many
	 * files and directories can be in use through the mount at once.
	 */
	log_info("backing %s %s (dev %u:%u): RWF_DONTCACHE read %s, write %s; passthrough no; identity O_PATH fd per inode; fd budget %s\n",
		 p->fstype[0] ? p->fstype : "fs", where, major(p->dev),
		 minor(p->dev), probe_state_name(p->rd),
		 probe_state_name(p->wr), budget);
}

void caps_log_startup(void)
{
	dev_t seen[MAX_BACKING_FS];
	size_t nseen = 0, cap = 0;
	char *line = NULL;
	FILE *fp;

	log_one(dcfs.opt.backing, seen, &nseen);
	fp = fopen("/proc/self/mountinfo", "re");
	if (!fp)
		return;
	/* id parent major:minor root MOUNTPOINT ... - FSTYPE SOURCE ... */
	while (getline(&line, &cap, fp) > 0) {
		char *sep = strstr(line, " - "), *save, *f;

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
		if (!below_backing(f))
			continue;
		if (remote_or_automounted(sep + 3))
			log_info("backing %.*s %s: not probed at startup (remote, FUSE or automounted)\n",
				 (int)strcspn(sep + 3, " "), sep + 3, f);
		else
			log_one(f, seen, &nseen);
	}
	free(line);
	fclose(fp);
}
