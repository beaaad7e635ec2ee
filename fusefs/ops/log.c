// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * One log sink for dcfs and libfuse: stderr in the foreground, syslog once
 * daemonized.  Debug messages are dropped unless -d was given, so the I/O
 * paths may call log_debug() without cost in production.
 */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "ops/ops.h"

static bool log_to_stderr = true;
static int log_max_level = FUSE_LOG_INFO;

static int syslog_priority(enum fuse_log_level level)
{
	/* fuse_log_level mirrors syslog's numbering. */
	return (int)level;
}

/*
 * libfuse builds some lines from several calls; the prefix goes only at
 * the start of a line.
 */
static void log_sink(enum fuse_log_level level, const char *fmt, va_list ap)
{
	static __thread bool mid_line;
	char buf[2048];
	int n;

	if ((int)level > log_max_level)
		return;
	if (log_to_stderr) {
		n = vsnprintf(buf, sizeof(buf), fmt, ap);
		if (n < 0)
			return;
		fprintf(stderr, "%s%s", mid_line ? "" : "dcfs: ", buf);
		mid_line = n > 0 && (size_t)n < sizeof(buf) && buf[n - 1] != '\n';
	} else {
		vsyslog(syslog_priority(level), fmt, ap);
	}
}

void dcfs_log_init(bool foreground, int debug)
{
	log_to_stderr = foreground;
	log_max_level = debug ? FUSE_LOG_DEBUG : FUSE_LOG_INFO;
	if (!foreground)
		openlog("dcfs", LOG_PID, LOG_DAEMON);
	fuse_set_log_func(log_sink);
}

void dcfs_log(enum fuse_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_sink(level, fmt, ap);
	va_end(ap);
}

bool dcfs_log_enabled(enum fuse_log_level level)
{
	return (int)level <= log_max_level;
}

void dcfs_log_set_level(int level)
{
	log_max_level = level;
}
