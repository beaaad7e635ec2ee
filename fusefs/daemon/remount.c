// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * `dcfs SOURCE TARGET -o remount,...`: what mount.fuse3 runs for
 * `mount -o remount,ro TARGET` when mount(8) finds the type fuse.dcfs in
 * /proc/self/mountinfo and no mount.fuse.dcfs helper.  A remount must not
 * start a second daemon over the live mount: it is handed to mount.dcfs,
 * which changes the flags of the existing mount (mount.dcfs(8)).
 */
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/daemon.h"

#define MAX_ARGS 64

static bool list_has_remount(const char *list)
{
	const char *p = list;

	while ((p = strstr(p, "remount"))) {
		bool starts = p == list || p[-1] == ',';
		bool ends = p[7] == '\0' || p[7] == ',';

		if (starts && ends)
			return true;
		p += 7;
	}
	return false;
}

bool remount_asked(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc && list_has_remount(argv[++i]))
			return true;
		if (strncmp(argv[i], "-o", 2) == 0 && list_has_remount(argv[i] + 2))
			return true;
	}
	return false;
}

/*
 * mount.dcfs beside our own real path, else where make install and the
 * package put it (/sbin, where mount(8) looks, whatever PREFIX), else PATH.
 */
static void find_helper(char *buf, size_t len)
{
	char self[PATH_MAX];

	if (realpath("/proc/self/exe", self)) {
		snprintf(buf, len, "%s/mount.dcfs", dirname(self));
		if (access(buf, X_OK) == 0)
			return;
	}
	snprintf(buf, len, "%s/mount.dcfs", DCFS_HELPERDIR);
	if (access(buf, X_OK) == 0)
		return;
	snprintf(buf, len, "mount.dcfs");
}

/* Only the positionals and the -o lists go on: "-f" means "fake" there. */
int remount_cmd(int argc, char **argv)
{
	char helper[PATH_MAX], *args[MAX_ARGS + 2];
	int n = 0;

	find_helper(helper, sizeof(helper));
	args[n++] = helper;
	for (int i = 1; i < argc && n < MAX_ARGS; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
			args[n++] = argv[i];
			args[n++] = argv[++i];
		} else if (strncmp(argv[i], "-o", 2) == 0 || argv[i][0] != '-') {
			args[n++] = argv[i];
		}
	}
	args[n] = NULL;
	execvp(helper, args);
	fprintf(stderr, "dcfs: remount: cannot run %s: %s\n", helper, strerror(errno));
	return 32;
}
