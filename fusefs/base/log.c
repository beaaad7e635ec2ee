// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * One log sink for dcfs and libfuse: stderr in the foreground, syslog once
 * daemonized, or the file DCFS_LOG_FILE names (for systems without syslog,
 * and the tests of mount -t dcfs, which daemonizes).  Debug messages are
 * dropped unless -d was given, so the I/O paths may call log_debug()
 * without cost in production.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>
#include <unistd.h>

#include "base/base.h"

static struct {
	bool log_to_stderr;
	int log_fd; /* DCFS_LOG_FILE, once daemonized */
	int log_max_level;
} logger = { .log_to_stderr = true, .log_fd = -1, .log_max_level = FUSE_LOG_INFO };

/* A line (or the start or rest of one) to stderr or the log file. */
static void log_text(FILE *to, bool mid_line, const char *text)
{
	char line[2100];
	int n;

	if (logger.log_fd < 0) {
		fprintf(to, "%s%s", mid_line ? "" : "dcfs: ", text);
		return;
	}
	/* One write per line: O_APPEND keeps the threads' lines whole. */
	n = snprintf(line, sizeof(line), "%s%s", mid_line ? "" : "dcfs: ", text);
	if (n > 0 &&
	    write(logger.log_fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
		(void)0; /* nowhere left to say so */
}

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

	if ((int)level > logger.log_max_level)
		return;
	if (logger.log_to_stderr || logger.log_fd >= 0) {
		n = vsnprintf(buf, sizeof(buf), fmt, ap);
		if (n < 0)
			return;
		log_text(stderr, mid_line, buf);
		mid_line = n > 0 && (size_t)n < sizeof(buf) && buf[n - 1] != '\n';
	} else {
		vsyslog(syslog_priority(level), fmt, ap);
	}
}

void log_init(bool foreground, int debug)
{
	const char *file = getenv("DCFS_LOG_FILE");

	logger.log_to_stderr = foreground;
	logger.log_max_level = debug ? FUSE_LOG_DEBUG : FUSE_LOG_INFO;
	if (!foreground && file && *file && logger.log_fd < 0)
		logger.log_fd =
			open(file, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (!foreground && logger.log_fd < 0)
		openlog("dcfs", LOG_PID, LOG_DAEMON);
	fuse_set_log_func(log_sink);
}

void log_msg(enum fuse_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_sink(level, fmt, ap);
	va_end(ap);
}

bool log_enabled(enum fuse_log_level level)
{
	return (int)level <= logger.log_max_level;
}

void log_set_level(int level)
{
	logger.log_max_level = level;
}
