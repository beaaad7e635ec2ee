/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * fusefs/policy/ -- dcfs.conf (include/dcfs_policy.h, shared with the
 * fuzzer) and its SIGHUP reload.
 */
#ifndef DCFS_LAYER_POLICY_H
#define DCFS_LAYER_POLICY_H

#include "transport/transport.h"
#include "dcfs_policy.h"

/* keys.c: the keys of each section of dcfs.conf, one row per key */
enum cfg_type {
	CFG_POLICY,	/* enum dcfs_policy */
	CFG_SIZE,	/* uint64_t, dcfs.conf(5) SIZES */
	CFG_SSIZE,	/* int64_t, -1 until set (inherited) */
	CFG_BOOL,	/* bool: yes/no, on/off, 1/0 */
	CFG_TRISTATE,	/* int: 1, 0, or -1 until set */
	CFG_LOG_LEVEL,	/* int: enum fuse_log_level, -1 until set */
	CFG_DURATION,	/* uint64_t milliseconds: 500ms, 5s, 2m, 1h */
	CFG_EXTENSIONS, /* a [class]'s char **exts, size_t n_exts after it */
};

struct cfg_key {
	const char *name;
	const char *alias; /* another name for the key, or NULL */
	enum cfg_type type;
	uint64_t min, max; /* sizes, durations: the range; max 0: unbounded */
	const char *zero;  /* 0 is accepted outside it too: what 0 means */
	const char *def;   /* the default as written in a file; NULL: none */
	size_t off;	   /* the field in the section's struct */
	size_t line_off;   /* its int line-number field, or 0: none */
	const char *doc;   /* one line for --list-config-keys */
	bool required;	   /* each such section must set it */
};

enum cfg_section_id {
	CFG_SEC_GLOBAL,
	CFG_SEC_CLASS,
	CFG_SEC_DIR,
	CFG_SEC_PROCESS,
	CFG_SEC__COUNT
};

/* How an unknown key of a section is reported. */
enum cfg_unknown {
	CFG_UNKNOWN_PLAIN,     /* "unknown key 'K' in [global]" */
	CFG_UNKNOWN_EXPECTED,  /* "... (expected A or B)" */
	CFG_UNKNOWN_CLASS_MAP, /* a class mapping of a [dir], checked later */
};

struct cfg_section {
	const char *name;
	const struct cfg_key *keys;
	size_t n;
	enum cfg_unknown unknown;
};

extern const struct cfg_section cfg_sections[CFG_SEC__COUNT];
const struct cfg_key *cfg_key_find(enum cfg_section_id sec, const char *name);
void cfg_key_names(enum cfg_section_id sec, const char *last_word, char *buf, size_t size);
bool cfg_key_has_range(const struct cfg_key *k);
bool cfg_key_in_range(const struct cfg_key *k, uint64_t v);
void cfg_key_range_text(const struct cfg_key *k, char *buf, size_t size);
void cfg_key_print(FILE *out);

/* reload.c */
int reload_start(void);
bool reload_stop(void);
/* The last reload's failure while it is the latest outcome: dcfs stat and
 * the root's user.dcfs.policy show it (handlers/report.c, fuse_xattr.c). */
bool reload_failure(char *buf, size_t size);
struct reload_stats {
	unsigned long failures;
	bool failed;	 /* the last reload failed */
	char error[320]; /* then: "failed at TIME: why" */
};
void reload_stats(struct reload_stats *st);

#endif
