// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The keys of dcfs.conf, one table per section: the one place a key is
 * declared.  The parser (config.c) finds keys, parses, range-checks and
 * reports errors from these rows; the built-in defaults are the rows'
 * default texts parsed like a file; `dcfs --list-config-keys` prints the
 * rows; the documentation test compares dcfs.conf(5) and the sample
 * dcfs.conf with that listing.  Adding a key is one row here, the field
 * it fills (struct dcfs_config and friends, include/dcfs_policy.h), the
 * code that uses the field, and its prose in dcfs.conf(5).
 *
 * Like libfuse's fuse_opt tables and mergerfs's key registry, a row holds
 * the field's offset, so nothing else spells the key's name.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "policy/policy.h"

#define G(field) offsetof(struct dcfs_config, field)
#define C(field) offsetof(struct cfg_class, field)
#define D(field) offsetof(struct cfg_dir, field)
#define P(field) offsetof(struct cfg_process, field)
#define KiB(n) ((uint64_t)(n) << 10)
#define MiB(n) ((uint64_t)(n) << 20)
#define GiB(n) ((uint64_t)(n) << 30)

/*
 * .max 0: no upper bound; .line_off 0: no line field (none is first).
 * A row per key reads better than clang-format's line per field.
 */
/* clang-format off */
static const struct cfg_key global_keys[] = {
	{ .name = "default", .alias = "policy", .type = CFG_POLICY, .def = "cache",
	  .off = G(default_policy), .doc = "the policy of a file that no other rule covers" },
	{ .name = "min_size", .type = CFG_SSIZE, .def = "0", .off = G(min_size),
	  .doc = "files smaller than this are cached (0: off)" },
	{ .name = "auto_threshold", .type = CFG_SIZE, .min = 1, .def = "64M",
	  .off = G(auto_threshold),
	  .doc = "bytes an auto handle transfers in one sequential run before it streams" },
	{ .name = "window", .type = CFG_SIZE, .min = KiB(64), .max = GiB(1), .def = "8M",
	  .off = G(window),
	  .doc = "write-behind window of the fallback (no RWF_DONTCACHE); lag of switched handles" },
	{ .name = "readahead", .type = CFG_SIZE, .max = MiB(16), .zero = "0 turns it off",
	  .def = "4M", .off = G(readahead),
	  .doc = "read-ahead buffer of each handle that reads uncached" },
	{ .name = "prefetch", .type = CFG_BOOL, .def = "yes", .off = G(prefetch),
	  .doc = "read the next read-ahead window in the background" },
	{ .name = "fuse_readahead", .type = CFG_BOOL, .def = "yes", .off = G(fuse_readahead),
	  .doc = "read-only streams read through the FUSE page cache, dropped behind" },
	{ .name = "passthrough_reads", .type = CFG_BOOL, .def = "yes",
	  .off = G(passthrough_reads),
	  .doc = "read-only streams read by the kernel (passthrough), dropped behind" },
	{ .name = "passthrough_writes", .type = CFG_BOOL, .def = "yes",
	  .off = G(passthrough_writes),
	  .doc = "write streams written by the kernel (passthrough), written behind" },
	{ .name = "passthrough_uncached", .type = CFG_BOOL, .def = "yes",
	  .off = G(passthrough_uncached),
	  .doc = "streams: uncached I/O by the kernel where it offers it" },
	{ .name = "force_fallback", .type = CFG_BOOL, .def = "no", .off = G(force_fallback),
	  .doc = "streams use the fallback windows even where RWF_DONTCACHE works (to measure them)" },
	{ .name = "writeback_limit", .type = CFG_SIZE, .min = MiB(1), .max = GiB(1),
	  .zero = "0 turns it off", .def = "8M", .off = G(writeback_limit),
	  .doc = "bytes an uncached write stream may have under writeback before it waits" },
	{ .name = "inflight", .type = CFG_SIZE, .max = GiB(1), .zero = "0: synchronous writes",
	  .def = "8M", .off = G(inflight),
	  .doc = "bytes of background writes one handle may have queued" },
	{ .name = "inflight_mount", .type = CFG_SIZE, .min = MiB(1), .max = GiB(16), .def = "64M",
	  .off = G(inflight_mount),
	  .doc = "bytes of background writes all handles of the mount may have queued" },
	{ .name = "write_expire", .type = CFG_DURATION, .min = 100, .max = 3600 * 1000,
	  .zero = "0 turns it off", .def = "5s", .off = G(write_expire_ms),
	  .doc = "longest time acknowledged data waits in a handle's write buffer" },
	{ .name = "log_level", .type = CFG_LOG_LEVEL, .off = G(log_level),
	  .doc = "level of the messages logged (unset: unchanged, info at start)" },
};

static const struct cfg_key class_keys[] = {
	{ .name = "extensions", .type = CFG_EXTENSIONS, .off = C(exts), .required = true,
	  .doc = "the file name extensions of the class" },
	{ .name = "policy", .type = CFG_POLICY, .off = C(policy), .line_off = C(policy_line),
	  .doc = "the policy of files of this class (unset: only for [dir] mappings)" },
};

static const struct cfg_key dir_keys[] = {
	{ .name = "policy", .alias = "default", .type = CFG_POLICY, .off = D(policy),
	  .line_off = D(policy_line), .doc = "the policy of every file below the directory" },
	{ .name = "min_size", .type = CFG_SSIZE, .off = D(min_size), .line_off = D(min_size_line),
	  .doc = "replaces [global] min_size below the directory (unset: inherited)" },
};

static const struct cfg_key process_keys[] = {
	{ .name = "policy", .type = CFG_POLICY, .off = P(policy), .required = true,
	  .doc = "the policy of every file the program opens" },
	{ .name = "fuse_readahead", .type = CFG_TRISTATE, .off = P(fuse_readahead),
	  .doc = "overrides [global] fuse_readahead for the program (unset: as [global])" },
};

/* clang-format on */

#define SECTION(id, nm, rows, unk) [id] = { nm, rows, sizeof(rows) / sizeof((rows)[0]), unk }
const struct cfg_section cfg_sections[CFG_SEC__COUNT] = {
	SECTION(CFG_SEC_GLOBAL, "global", global_keys, CFG_UNKNOWN_PLAIN),
	SECTION(CFG_SEC_CLASS, "class", class_keys, CFG_UNKNOWN_EXPECTED),
	SECTION(CFG_SEC_DIR, "dir", dir_keys, CFG_UNKNOWN_CLASS_MAP),
	SECTION(CFG_SEC_PROCESS, "process", process_keys, CFG_UNKNOWN_EXPECTED),
};

const struct cfg_key *cfg_key_find(enum cfg_section_id sec, const char *name)
{
	const struct cfg_section *s = &cfg_sections[sec];

	for (size_t i = 0; i < s->n; i++)
		if (!strcasecmp(s->keys[i].name, name) ||
		    (s->keys[i].alias && !strcasecmp(s->keys[i].alias, name)))
			return &s->keys[i];
	return NULL;
}

/* "cache, dontcache or auto": the names of a section's keys, for messages. */
void cfg_key_names(enum cfg_section_id sec, const char *last_word, char *buf, size_t size)
{
	const struct cfg_section *s = &cfg_sections[sec];
	size_t at = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < s->n && at < size; i++) {
		const char *sep = i == 0 ? "" : (i + 1 == s->n && !last_word) ? " or " : ", ";

		at += (size_t)snprintf(buf + at, size - at, "%s%s", sep, s->keys[i].name);
	}
	if (last_word && at < size)
		snprintf(buf + at, size - at, " or %s", last_word);
}

/* A size as written in dcfs.conf: the largest exact unit ("64K", "1G"). */
static void size_text(uint64_t v, char *buf, size_t size)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (v && u < 3 && !(v & 1023)) {
		v >>= 10;
		u++;
	}
	if (u < 0)
		snprintf(buf, size, "%" PRIu64, v);
	else
		snprintf(buf, size, "%" PRIu64 "%c", v, units[u]);
}

/* A duration in milliseconds as written: "100ms", "5s", "2m", "1h". */
static void duration_text(uint64_t ms, char *buf, size_t size)
{
	if (ms && ms % 3600000 == 0)
		snprintf(buf, size, "%" PRIu64 "h", ms / 3600000);
	else if (ms && ms % 60000 == 0)
		snprintf(buf, size, "%" PRIu64 "m", ms / 60000);
	else if (ms % 1000 == 0)
		snprintf(buf, size, "%" PRIu64 "s", ms / 1000);
	else
		snprintf(buf, size, "%" PRIu64 "ms", ms);
}

static void value_text(const struct cfg_key *k, uint64_t v, char *buf, size_t size)
{
	if (k->type == CFG_DURATION)
		duration_text(v, buf, size);
	else
		size_text(v, buf, size);
}

bool cfg_key_has_range(const struct cfg_key *k)
{
	return (k->type == CFG_SIZE || k->type == CFG_SSIZE || k->type == CFG_DURATION) &&
	       (k->min > 0 || k->max > 0);
}

bool cfg_key_in_range(const struct cfg_key *k, uint64_t v)
{
	return (v >= k->min && (!k->max || v <= k->max)) || (v == 0 && k->zero);
}

/* What the error says a value must be: "between 64K and 1G (0 turns it off)". */
void cfg_key_range_text(const struct cfg_key *k, char *buf, size_t size)
{
	char lo[32], hi[32];
	int n;

	value_text(k, k->min, lo, sizeof(lo));
	value_text(k, k->max, hi, sizeof(hi));
	if (!k->max && k->min == 1)
		n = snprintf(buf, size, "greater than 0");
	else if (!k->max)
		n = snprintf(buf, size, "at least %s", lo);
	else if (k->min == 0)
		n = snprintf(buf, size, "at most %s", hi);
	else
		n = snprintf(buf, size, "between %s and %s", lo, hi);
	if (k->zero && n >= 0 && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n, " (%s)", k->zero);
}

/* clang-format off */
static const char *const type_names[] = {
	[CFG_POLICY] = "policy",
	[CFG_SIZE] = "size",
	[CFG_SSIZE] = "size",
	[CFG_BOOL] = "yes|no",
	[CFG_TRISTATE] = "yes|no",
	[CFG_LOG_LEVEL] = "error|warning|info|debug",
	[CFG_DURATION] = "duration",
	[CFG_EXTENSIONS] = "extensions",
};
/* clang-format on */

/*
 * `dcfs --list-config-keys`: one tab-separated line per key (section, key,
 * alias, type, range, default, doc; "-" for none), after a header line.
 */
void cfg_key_print(FILE *out)
{
	char range[96];

	fprintf(out, "#section\tkey\talias\ttype\trange\tdefault\tdoc\n");
	for (int s = 0; s < CFG_SEC__COUNT; s++) {
		for (size_t i = 0; i < cfg_sections[s].n; i++) {
			const struct cfg_key *k = &cfg_sections[s].keys[i];

			if (cfg_key_has_range(k))
				cfg_key_range_text(k, range, sizeof(range));
			else
				snprintf(range, sizeof(range), "-");
			fprintf(out, "%s\t%s\t%s\t%s\t%s\t%s\t%s%s\n", cfg_sections[s].name,
				k->name, k->alias ? k->alias : "-", type_names[k->type], range,
				k->def ? k->def : "-", k->doc, k->required ? " (required)" : "");
		}
	}
}
