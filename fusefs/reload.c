// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * SIGHUP reloads the config file.  The signal is blocked in every thread
 * and taken by sigwait() here, so the reload runs in ordinary thread
 * context (it allocates and logs).  A file that fails validation changes
 * nothing: the old rules stay and every error is logged.  Open handles
 * keep the decision they were given at open.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "dcfs.h"
#include "dcfs_policy.h"

static pthread_t reload_thread;

static void reload(void)
{
	struct cfg_errors errs = { 0 };
	struct dcfs_config *cfg;
	char summary[512];

	if (!dcfs.opt.config) {
		log_info("SIGHUP: no config file to reload\n");
		return;
	}
	if (config_load(dcfs.opt.config, &cfg, &errs) < 0) {
		for (size_t i = 0; i < errs.n; i++)
			log_err("%s\n", errs.msgs[i]);
		log_err("reload of %s failed: keeping the previous rules\n",
			dcfs.opt.config);
		config_errors_free(&errs);
		return;
	}
	config_summary(cfg, summary, sizeof(summary));
	config_install(cfg);
	if (!dcfs.opt.debug)
		dcfs_log_set_level(cfg->log_level >= 0 ? cfg->log_level : FUSE_LOG_INFO);
	log_info("reloaded %s\n", summary);
}

static void *reload_main(void *arg)
{
	sigset_t *set = arg;
	int sig;

	for (;;) {
		if (sigwait(set, &sig) != 0)
			continue;
		if (sig == SIGHUP)
			reload();
		else
			break;
	}
	return NULL;
}

/* Call before any other thread exists, so all of them inherit the mask. */
int reload_start(void)
{
	static sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR2); /* reload_stop() */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
		return -EINVAL;
	if (pthread_create(&reload_thread, NULL, reload_main, &set) != 0)
		return -EAGAIN;
	return 0;
}

void reload_stop(void)
{
	pthread_kill(reload_thread, SIGUSR2);
	pthread_join(reload_thread, NULL);
}
