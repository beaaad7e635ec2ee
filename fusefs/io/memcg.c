// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * How much memory the memory cgroup of a process has left: the least room
 * (limit minus usage) of its cgroup and the cgroups above it, cgroup v2
 * (memory.max, memory.high, memory.current) or v1
 * (memory.limit_in_bytes, memory.usage_in_bytes).
 *
 * writebehind.c asks it for the opener of a write stream: the pages a
 * kernel-served stream holds are charged to the writer's cgroup, and in a
 * cgroup at its limit each of them is taken from the cgroup's other pages
 * at once (a hot set under a 1 GiB limit: 94.6-97.1 % kept against the
 * engine's 98 %, tests/bench/README.md).
 *
 * Only files of the cgroup filesystem are read, at paths the kernel gives
 * (/proc/PID/cgroup, /proc/self/mountinfo); an answer about the wrong
 * cgroup (the process moved, its pid was reused) can only choose the
 * slower of two ways to serve a stream.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"

#define MEMCG_PATH 512
#define MEMCG_LEVELS 16		    /* cgroups looked at, from the process's up */
#define MEMCG_NO_LIMIT (1ULL << 62) /* v1 says 2^63 - 4096 for none */

static char v1_mount[MEMCG_PATH]; /* the memory controller's v1 hierarchy */
static char v2_mount[MEMCG_PATH]; /* the unified hierarchy */
static pthread_once_t mounts_once = PTHREAD_ONCE_INIT;

/* Whether token is one of the comma-separated words of list. */
static bool has_word(const char *list, const char *token)
{
	size_t n = strlen(token);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, token, n) && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

/*
 * One line of /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT
 * OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS".  Mounts of a
 * subtree (ROOT not "/") and mount points with escapes are not used.
 */
static void note_mount(char *line)
{
	char root[MEMCG_PATH], mnt[MEMCG_PATH], type[32], super[256];
	const char *sep = strstr(line, " - ");

	if (!sep || sscanf(line, "%*s %*s %*s %511s %511s", root, mnt) != 2 ||
	    sscanf(sep + 3, "%31s %*s %255s", type, super) != 2)
		return;
	if (strcmp(root, "/") || strchr(mnt, '\\'))
		return;
	if (!strcmp(type, "cgroup2") && !v2_mount[0])
		snprintf(v2_mount, sizeof(v2_mount), "%s", mnt);
	else if (!strcmp(type, "cgroup") && has_word(super, "memory") && !v1_mount[0])
		snprintf(v1_mount, sizeof(v1_mount), "%s", mnt);
}

static void find_mounts(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;

	if (!f)
		return;
	while (getline(&line, &cap, f) > 0)
		note_mount(line);
	free(line);
	fclose(f);
}

/*
 * The process's memory cgroup as a directory; v2 is set when it is in the
 * unified hierarchy.  A line "N:...memory...:/path" is the v1 memory
 * controller's, "0::/path" the unified hierarchy's (whose memory
 * controller is there only where v1 does not have it).
 */
static int cgroup_dir(pid_t pid, char *dir, size_t size, bool *v2)
{
	char path[64], *line = NULL, v2_path[MEMCG_PATH] = "";
	size_t cap = 0;
	int err = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *ctl = strchr(line, ':'), *cg = ctl ? strchr(ctl + 1, ':') : NULL;

		if (!cg)
			continue;
		*ctl = '\0'; /* line: the hierarchy's number, ctl + 1: its controllers */
		*cg++ = '\0';
		cg[strcspn(cg, "\n")] = '\0';
		if (strstr(cg, "/..") || cg[0] != '/')
			continue;
		if (has_word(ctl + 1, "memory") && v1_mount[0]) {
			snprintf(dir, size, "%s%s", v1_mount, cg);
			*v2 = false;
			err = 0;
			break;
		}
		if (!strcmp(line, "0") && !ctl[1])
			snprintf(v2_path, sizeof(v2_path), "%s", cg);
	}
	free(line);
	fclose(f);
	if (err && v2_path[0] && v2_mount[0]) {
		snprintf(dir, size, "%s%s", v2_mount, v2_path);
		*v2 = true;
		err = 0;
	}
	return err;
}

/* A number of a cgroup file; "max" (v2) is MEMCG_NO_LIMIT. */
static int read_bytes(int dirfd, const char *name, uint64_t *v)
{
	char buf[32];
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EINVAL;
	buf[n] = '\0';
	if (!strncmp(buf, "max", 3)) {
		*v = MEMCG_NO_LIMIT;
		return 0;
	}
	*v = strtoull(buf, NULL, 10);
	return 0;
}

/* The room of one cgroup; MEMCG_NO_LIMIT where it has no limit. */
static uint64_t level_room(const char *dir, bool v2)
{
	uint64_t limit = MEMCG_NO_LIMIT, high = MEMCG_NO_LIMIT, used = 0;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	int err;

	if (dirfd < 0)
		return MEMCG_NO_LIMIT;
	if (v2) {
		err = read_bytes(dirfd, "memory.max", &limit);
		if (!err && !read_bytes(dirfd, "memory.high", &high) && high < limit)
			limit = high;
		if (!err)
			err = read_bytes(dirfd, "memory.current", &used);
	} else {
		err = read_bytes(dirfd, "memory.limit_in_bytes", &limit);
		if (!err)
			err = read_bytes(dirfd, "memory.usage_in_bytes", &used);
	}
	close(dirfd);
	if (err || limit >= MEMCG_NO_LIMIT)
		return MEMCG_NO_LIMIT;
	return used >= limit ? 0 : limit - used;
}

int memcg_room(pid_t pid, uint64_t *room)
{
	char dir[2 * MEMCG_PATH];
	const char *top;
	bool v2 = false;
	int err;

	*room = MEMCG_NO_LIMIT;
	if (pid <= 0)
		return -ESRCH;
	pthread_once(&mounts_once, find_mounts);
	err = cgroup_dir(pid, dir, sizeof(dir), &v2);
	if (err)
		return err;
	top = v2 ? v2_mount : v1_mount;
	for (int i = 0; i < MEMCG_LEVELS; i++) {
		uint64_t r = level_room(dir, v2);
		char *slash = strrchr(dir, '/');

		if (r < *room)
			*room = r;
		/* Up one level, down to the hierarchy's root (never above it). */
		if (strlen(dir) <= strlen(top) || !slash || slash - dir < (ptrdiff_t)strlen(top))
			break;
		*slash = '\0';
	}
	return *room < MEMCG_NO_LIMIT ? 0 : -ENOENT;
}
