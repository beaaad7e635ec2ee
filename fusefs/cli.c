// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Subcommands that do not mount: `dcfs --check-config FILE` and
 * `dcfs stat [--json] MOUNTPOINT`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "dcfs.h"
#include "dcfs_policy.h"

/* Loads path; prints every error as FILE:LINE: message. */
int config_load_or_report(const char *path, struct dcfs_config **out)
{
	struct cfg_errors errs = { 0 };
	int err = config_load(path, out, &errs);

	config_errors_print(&errs, stderr);
	config_errors_free(&errs);
	return err;
}

int cmd_check_config(int argc, char *argv[])
{
	struct dcfs_config *cfg;
	char summary[512];

	if (argc != 3) {
		fprintf(stderr, "usage: %s --check-config FILE\n", argv[0]);
		return 2;
	}
	if (config_load_or_report(argv[2], &cfg) < 0)
		return 1;
	config_summary(cfg, summary, sizeof(summary));
	printf("%s\n", summary);
	config_free(cfg);
	return 0;
}

static char *read_xattr(const char *path, const char *name)
{
	ssize_t n = getxattr(path, name, NULL, 0);
	char *buf;

	if (n < 0)
		return NULL;
	buf = malloc((size_t)n + 1);
	if (!buf)
		return NULL;
	n = getxattr(path, name, buf, (size_t)n);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

int cmd_stat(int argc, char *argv[])
{
	bool json = false;
	const char *mnt = NULL;
	char *text;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0)
			json = true;
		else if (!mnt && argv[i][0] != '-')
			mnt = argv[i];
		else
			mnt = NULL, argc = -1;
	}
	if (!mnt || argc < 0) {
		fprintf(stderr, "usage: %s stat [--json] MOUNTPOINT\n", argv[0]);
		return 2;
	}
	text = read_xattr(mnt, json ? "user.dcfs.stats" : "user.dcfs.stats.table");
	if (!text) {
		fprintf(stderr, "dcfs: %s: not a dcfs mount point (%m)\n", mnt);
		return 1;
	}
	fputs(text, stdout);
	free(text);
	return 0;
}
