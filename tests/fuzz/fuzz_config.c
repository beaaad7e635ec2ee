// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * libFuzzer target for the dcfs.conf parser and the matcher: any byte
 * string is parsed as a config; when it is valid, a fixed set of paths
 * and process names is classified against it.  Neither may crash, leak
 * or read out of bounds, whatever the input.
 */
#include <stdio.h>
#include <stdlib.h>

#include "dcfs_policy.h"

static const char *const paths[] = {
	"/",
	"/a.mkv",
	"/Movies/x/y.MKV",
	"/Movies",
	"/Recordings/t.jpg",
	"/.hidden",
	"/dir.d/noext",
	"/a.",
	"/x/y/z/w/v/u.tar.gz",
};
static const char *const comms[] = { NULL, "rsync", "ffmpeg", "" };

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct cfg_errors errs = { 0 };
	struct dcfs_config *cfg = NULL;
	FILE *fp = fmemopen((void *)data, size, "r");

	if (!fp)
		return 0;
	if (config_load_stream("fuzz.conf", fp, &cfg, &errs) == 0) {
		char summary[512], why[256];
		struct dcfs_decision d;

		config_summary(cfg, summary, sizeof(summary));
		for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
			for (size_t c = 0; c < sizeof(comms) / sizeof(comms[0]); c++) {
				policy_decide(cfg, paths[p], comms[c], (int64_t)(p << 20), c & 1,
					      &d);
				policy_describe(&d, why, sizeof(why));
			}
		}
		config_free(cfg);
	}
	fclose(fp);
	config_errors_free(&errs);
	return 0;
}
