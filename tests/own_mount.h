/* Helpers shared by the suites that run a daemon of their own (defined in
 * own_mount.c): a dcfs mount with a config file of the suite's own,
 * reload by SIGHUP, the user.dcfs.* xattrs, stats counters, page cache
 * residency (cachestat), and the source tree's documents. */
#ifndef DCFS_TESTS_OWN_MOUNT_H
#define DCFS_TESTS_OWN_MOUNT_H

#include "harness.h"

#include <stdbool.h>
#include <stdint.h>

struct own_mount {
	struct daemon d;
	char exp[PATH_MAX];  /* exported backing dir */
	char mnt[PATH_MAX];  /* mount point */
	char conf[PATH_MAX]; /* config file (absolute) */
	char err[2048];	     /* setup error, "" if mounted */
	int up;
};

/* Write text to path atomically (tmp + rename). 0 or -1. */
int own_write_conf(const char *path, const char *text);
/* mkdir exp and mnt, write conf text, spawn `dcfs -f -o allow_other,config=`.
 * Returns 0, or -1 with m->err set. */
int own_mount_start(struct own_mount *m, const char *root, const char *tag, const char *conf_text);
/* The same with more -o options (comma separated), or NULL. */
int own_mount_start_opts(struct own_mount *m, const char *root, const char *tag,
			 const char *conf_text, const char *extra_opts);
/* The same with one more command-line argument (such as "-s"), or NULL. */
int own_mount_start_argv(struct own_mount *m, const char *root, const char *tag,
			 const char *conf_text, const char *extra_opts, const char *extra_arg);
/* Unmount, wait for exit, require status 0 and a clean log. Returns 0 or
 * -1 with err filled. */
int own_mount_stop(struct own_mount *m, char *err, size_t errlen);
/* own_mount_start() on the harness's fs, own_mount_stop(): the test fails
 * on an error. */
void own_mount_ck(struct own_mount *m, enum fs_kind fs, const char *tag, const char *conf);
void own_unmount_ck(struct own_mount *m);
/* How own_mount_ck_with() mounts; all zero: ext4, as own_mount_ck(). */
struct own_mount_how {
	enum fs_kind fs;
	const char *opts; /* more -o options (comma separated), or NULL */
	const char *arg;  /* one more command-line argument (such as "-s"), or NULL */
	bool fresh;	  /* the exported dir starts empty */
};
void own_mount_ck_with(struct own_mount *m, const char *tag, const char *conf,
		       const struct own_mount_how *how);
/* Best-effort: lazy unmount and kill (fixture teardown). */
void own_mount_kill(struct own_mount *m);
/* Rewrite the config and SIGHUP the daemon; waits until the daemon has
 * logged the outcome of that reload ("reloaded ..." or "reload of ...
 * failed"). Returns 1 reloaded, 0 failed (old rules kept), -1 no answer. */
int own_reload(struct own_mount *m, const char *text);
/* How many times needle occurs in hay (without overlaps). */
int count_str(const char *hay, const char *needle);
/* getxattr as a malloc'd NUL-terminated string, NULL (errno) on error. */
char *xattr_str(const char *path, const char *name);
/* Counter key of class cls in user.dcfs.stats; fails the test when absent
 * (an opcode of class "requests" not seen yet is 0). */
long long stats_get(const char *mnt, const char *cls, const char *key);
/* Polls stats_get() until it is at least want (timeout scaled); the last value. */
long long stats_wait_ge(const char *mnt, const char *cls, const char *key, long long want,
			double timeout_s);
/* Resident pages of fd (whole file); fails the test if cachestat(2) does. */
long long resident_pages(int fd);
long long resident_range(int fd, uint64_t off, uint64_t len);
/* Poll until resident pages of path (opened O_RDONLY) are <= max; returns
 * the last count seen. */
long long wait_resident_le(const char *path, long long max, double timeout_s);
/* 1-based line of conf whose trimmed text equals line, or 0. */
int line_of(const char *conf, const char *line);
/* sync + echo 3 > /proc/sys/vm/drop_caches */
void drop_caches(void);
uint64_t hash64(const void *buf, size_t len);
/* The source tree (DCFS_SRCDIR, set by make check), and one of its files
 * read whole (malloc'd); both fail the test when missing. */
const char *srcdir(void);
char *src_file(const char *rel);

/* Runs bin with argv (argv[0] ignored), stdin and stdout on /dev/null,
 * stderr into err; killed after timeout s (scaled).  The wait status, or
 * -1 on the timeout. */
int run_capture(const char *bin, char *const argv[], char *err, size_t errlen, double timeout);
/* dcfs with argv must exit non-zero with exactly one informative line on
 * stderr and nothing mounted on mnt. */
void expect_cli_error(const char *what, const char *mnt, char *const argv[]);

#endif
