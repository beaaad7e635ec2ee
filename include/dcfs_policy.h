/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dcfs policy configuration (dcfs.conf) and the per-open decision.
 *
 * A struct dcfs_config is immutable once loaded; reload builds a new one
 * and swaps the pointer, and readers hold a reference while they use it,
 * so an open never sees half of one config and half of another.
 */
#ifndef DCFS_POLICY_H
#define DCFS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

enum dcfs_policy {
	POLICY_UNSET = 0,
	POLICY_CACHE,
	POLICY_DONTCACHE,
	POLICY_DONTCACHE_READ,
	POLICY_DONTCACHE_WRITE,
	POLICY_AUTO,
	POLICY__COUNT /* a policy added above gets parsing, counters, rows */
};

struct cfg_class {
	char *name;
	char **exts; /* lower case, without the dot */
	size_t n_exts;
	enum dcfs_policy policy; /* POLICY_UNSET: none of its own */
	int line;
	int policy_line;
};

struct cfg_class_map {
	size_t class_idx;
	enum dcfs_policy policy;
	int line;
};

struct cfg_dir {
	char *path; /* normalized: "/" or "/a/b" without trailing slash */
	size_t len;
	enum dcfs_policy policy;
	int policy_line;
	int64_t min_size; /* -1: inherit */
	int min_size_line;
	struct cfg_class_map *maps;
	size_t n_maps;
	int line;
};

struct cfg_process {
	char *comm;
	enum dcfs_policy policy;
	int fuse_readahead; /* -1: as [global] */
	int line;
};

struct dcfs_config {
	char *path; /* NULL for the built-in defaults */
	time_t loaded;
	enum dcfs_policy default_policy;
	int64_t min_size;
	uint64_t auto_threshold;
	uint64_t window;	   /* fallback write-behind/drop-behind window */
	uint64_t readahead;	   /* per-handle read-ahead buffer */
	uint64_t writeback_limit;  /* uncached bytes a stream has in writeback */
	uint64_t inflight;	   /* background write bytes per handle */
	uint64_t inflight_mount;   /* ... and per mount */
	bool prefetch;		   /* double-buffered read-ahead */
	bool fuse_readahead;	   /* read-only streams through the FUSE cache */
	bool passthrough_reads;	   /* ... or read by the kernel, dropped behind */
	bool passthrough_writes;   /* write streams written by the kernel, written behind */
	bool passthrough_uncached; /* streams: uncached I/O by the kernel */
	bool force_fallback;	   /* streams: the fallback even with RWF_DONTCACHE */
	uint64_t write_expire_ms;  /* longest wait in a write buffer; 0: none */
	int log_level;		   /* fuse_log_level; -1 = unchanged */
	struct cfg_class *classes;
	size_t n_classes;
	struct cfg_dir *dirs;
	size_t n_dirs;
	struct cfg_process *procs;
	size_t n_procs;
	unsigned int refs; /* protected by the config lock */
};

/* A list of "file:line: message" lines. */
struct cfg_errors {
	char **msgs;
	int *lines;
	size_t n;
};

/* What to do with one open, and why. */
struct dcfs_decision {
	enum dcfs_policy policy;
	const char *class_name; /* NULL: no class; points into the config */
	char reason[160];
	int64_t min_size;
	bool deferred;	    /* cached until min_size bytes were written */
	int fuse_readahead; /* -1: as [global]; else the [process] rule's */
};

/* config.c */
struct dcfs_config *config_defaults(void);
int config_load(const char *path, struct dcfs_config **out, struct cfg_errors *errs);
int config_load_stream(const char *name, FILE *fp, struct dcfs_config **out,
		       struct cfg_errors *errs);
/* A config file larger than this is refused (documented in dcfs.conf(5)). */
#define CONFIG_MAX_BYTES (1024 * 1024)

/* Up to CONFIG_MAX_BYTES + 1 bytes of fd (more: too large), NUL-ended, or
 * -errno. */
ssize_t config_read_fd(int fd, char **out);
/* The bytes config_load() parses (room for one more byte), or -errno. */
ssize_t config_read(const char *path, char **out, struct cfg_errors *errs);
/* Parses len bytes of buf, which has room for one more. */
int config_load_bytes(const char *path, char *buf, size_t len, struct dcfs_config **out,
		      struct cfg_errors *errs);
/* Records a whole message (already "FILE: ..."). */
void config_error_add(struct cfg_errors *errs, const char *msg);
void config_free(struct dcfs_config *cfg);
void config_errors_print(const struct cfg_errors *errs, FILE *fp);
void config_errors_free(struct cfg_errors *errs);
void config_summary(const struct dcfs_config *cfg, char *buf, size_t size);
const char *policy_name(enum dcfs_policy p);
int policy_parse(const char *s, enum dcfs_policy *out);
int config_size_parse(const char *s, uint64_t *out);

/* policy.c: matching, pure functions over a config */
void policy_decide(const struct dcfs_config *cfg, const char *path, const char *comm, int64_t size,
		   bool writable, struct dcfs_decision *d);

void policy_describe(const struct dcfs_decision *d, char *buf, size_t size);

/* Current config: reference-counted snapshot, swapped atomically. */
void config_install(struct dcfs_config *cfg);
struct dcfs_config *config_get(void);
void config_put(struct dcfs_config *cfg);

#endif
