// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Classification: which policy one open of one file gets, and why.
 *
 * Precedence (documented in dcfs.conf(5)):
 *   1. a [process NAME] rule matching the caller's comm;
 *   2. the longest [dir PATH] prefix of the file's path that says
 *      something for this file: its mapping for the file's class, else its
 *      own policy; a [dir] that says nothing defers to the next shorter one;
 *   3. the file's [class] policy;
 *   4. [global] default.
 * min_size (nearest [dir] that sets it, else [global]) applies last: a
 * smaller file is read through the cache.
 *
 * Everything here is a pure function of the config snapshot, so it is
 * shared by open(), the user.dcfs.policy xattr and the tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "policy/policy.h"

/* The policies by name, as dcfs.conf and every report write them. */
static const char *const policy_names[POLICY__COUNT] = {
	[POLICY_UNSET] = "unset",
	[POLICY_CACHE] = "cache",
	[POLICY_DONTCACHE] = "dontcache",
	[POLICY_DONTCACHE_READ] = "dontcache-read",
	[POLICY_DONTCACHE_WRITE] = "dontcache-write",
	[POLICY_AUTO] = "auto",
};

const char *policy_name(enum dcfs_policy p)
{
	return policy_names[p];
}

int policy_parse(const char *s, enum dcfs_policy *out)
{
	for (int p = POLICY_CACHE; p < POLICY__COUNT; p++) {
		if (strcasecmp(s, policy_names[p]) == 0) {
			*out = (enum dcfs_policy)p;
			return 0;
		}
	}
	return -EINVAL;
}

static const char *extension_of(const char *path)
{
	const char *base = strrchr(path, '/');
	const char *dot;

	base = base ? base + 1 : path;
	dot = strrchr(base, '.');
	/* ".bashrc" has no extension; "a." has an empty one. */
	if (!dot || dot == base || !dot[1])
		return NULL;
	return dot + 1;
}

static const struct cfg_class *class_of(const struct dcfs_config *cfg, const char *path,
					size_t *idx)
{
	const char *ext = extension_of(path);

	if (!ext)
		return NULL;
	for (size_t i = 0; i < cfg->n_classes; i++) {
		const struct cfg_class *c = &cfg->classes[i];

		for (size_t e = 0; e < c->n_exts; e++) {
			if (strcasecmp(c->exts[e], ext) == 0) {
				*idx = i;
				return c;
			}
		}
	}
	return NULL;
}

static bool dir_contains(const struct cfg_dir *d, const char *path)
{
	if (d->len == 1)
		return true; /* [dir /] */
	return strncmp(path, d->path, d->len) == 0 && (path[d->len] == '/' || path[d->len] == '\0');
}

/* The matching [dir] sections, longest first. */
static size_t matching_dirs(const struct dcfs_config *cfg, const char *path,
			    const struct cfg_dir **out)
{
	size_t n = 0;

	for (size_t i = 0; i < cfg->n_dirs; i++) {
		size_t j;

		if (!dir_contains(&cfg->dirs[i], path))
			continue;
		for (j = n; j > 0 && out[j - 1]->len < cfg->dirs[i].len; j--)
			out[j] = out[j - 1];
		out[j] = &cfg->dirs[i];
		n++;
	}
	return n;
}

static const struct cfg_process *process_rule(const struct dcfs_config *cfg, const char *comm)
{
	if (!comm)
		return NULL;
	for (size_t i = 0; i < cfg->n_procs; i++)
		if (strcmp(cfg->procs[i].comm, comm) == 0)
			return &cfg->procs[i];
	return NULL;
}

static void set(struct dcfs_decision *d, enum dcfs_policy p, const char *fmt, const char *arg,
		int line)
{
	d->policy = p;
	snprintf(d->reason, sizeof(d->reason), fmt, arg, line);
}

static bool decide_by_dirs(const struct cfg_dir **dirs, size_t n, const struct cfg_class *c,
			   size_t ci, struct dcfs_decision *d)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t m = 0; c && m < dirs[i]->n_maps; m++) {
			if (dirs[i]->maps[m].class_idx != ci)
				continue;
			set(d, dirs[i]->maps[m].policy, "rule [dir %s] line %d", dirs[i]->path,
			    dirs[i]->maps[m].line);
			return true;
		}
		if (dirs[i]->policy != POLICY_UNSET) {
			set(d, dirs[i]->policy, "rule [dir %s] line %d", dirs[i]->path,
			    dirs[i]->policy_line);
			return true;
		}
	}
	return false;
}

static int64_t effective_min_size(const struct dcfs_config *cfg, const struct cfg_dir **dirs,
				  size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (dirs[i]->min_size >= 0)
			return dirs[i]->min_size;
	return cfg->min_size;
}

/*
 * A small file is cached.  A writer of a small (often new, empty) file
 * cannot know its final size, so it starts cached and is switched once it
 * has written min_size bytes.
 */
static void apply_min_size(struct dcfs_decision *d, bool writable)
{
	size_t len = strlen(d->reason);

	snprintf(d->reason + len, sizeof(d->reason) - len, "; %s min_size %lld",
		 writable ? "cache until" : "smaller than", (long long)d->min_size);
	if (writable)
		d->deferred = true;
	else
		d->policy = POLICY_CACHE;
}

void policy_decide(const struct dcfs_config *cfg, const char *path, const char *comm, int64_t size,
		   bool writable, struct dcfs_decision *d)
{
	const struct cfg_dir *stack_dirs[16], **dirs = stack_dirs;
	const struct cfg_process *pr;
	const struct cfg_class *c;
	size_t ci = 0, n;

	memset(d, 0, sizeof(*d));
	if (cfg->n_dirs > 16)
		dirs = malloc(cfg->n_dirs * sizeof(*dirs));
	n = dirs ? matching_dirs(cfg, path, dirs) : 0;
	c = class_of(cfg, path, &ci);
	d->class_name = c ? c->name : NULL;
	d->min_size = effective_min_size(cfg, dirs, n);

	pr = process_rule(cfg, comm);
	d->fuse_readahead = pr ? pr->fuse_readahead : -1;
	if (pr)
		set(d, pr->policy, "rule [process %s] line %d", pr->comm, pr->line);
	else if (decide_by_dirs(dirs, n, c, ci, d))
		;
	else if (c && c->policy != POLICY_UNSET)
		set(d, c->policy, "rule [class %s] line %d", c->name, c->policy_line);
	else
		set(d, cfg->default_policy, "%s", "rule [global] default", 0);

	if (d->policy != POLICY_CACHE && size >= 0 && size < d->min_size)
		apply_min_size(d, writable);
	if (dirs != stack_dirs)
		free(dirs);
}

/* "dontcache (class video, rule [dir /Movies] line 12)" */
void policy_describe(const struct dcfs_decision *d, char *buf, size_t size)
{
	snprintf(buf, size, "%s (%s%s%s%s)", policy_name(d->policy), d->class_name ? "class " : "",
		 d->class_name ? d->class_name : "", d->class_name ? ", " : "", d->reason);
}
