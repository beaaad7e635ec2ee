// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dcfs.conf parser and validator.
 *
 * inih does the INI lexing (sections, key = value, comments).  It is fed
 * through our own line reader, which counts lines (so every message can
 * say FILE:LINE), rejects lines inih would silently mangle (too long, NUL
 * bytes, malformed section headers, lines without '='), and opens
 * sections itself, so even an empty duplicate section is caught.
 *
 * A parse produces a complete new struct dcfs_config or errors, never half
 * of one; only config_install() (the end of this file) makes one the
 * config in force.
 */
#include <ctype.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/policy.h"

#define MAX_LINE 4096
#define MAX_ERRORS 100
#define COMM_MAX 15 /* TASK_COMM_LEN - 1 */

/* The sections of keys.c's table, and the states between them. */
enum section {
	SEC_GLOBAL = CFG_SEC_GLOBAL,
	SEC_CLASS = CFG_SEC_CLASS,
	SEC_DIR = CFG_SEC_DIR,
	SEC_PROCESS = CFG_SEC_PROCESS,
	SEC_NONE = CFG_SEC__COUNT, /* before the first header */
	SEC_BAD,		   /* after a rejected header */
};

/* A class name used in a [dir] before the class may have been defined. */
struct pending_map {
	size_t dir_idx;
	char *class_name;
	char *value;
	int line;
};

struct parse_state {
	const char *file;
	FILE *fp;
	int lineno;
	char *buf;
	size_t cap;
	struct dcfs_config *cfg;
	struct cfg_errors *errs;
	enum section sec;
	size_t idx; /* index of the current class/dir/process */
	bool global_seen;
	char **keys; /* keys seen in the current section */
	size_t n_keys;
	struct pending_map *pending;
	size_t n_pending;
	int read_errno; /* a read of the stream failed */
};

static int section_defaults(enum cfg_section_id sec, void *obj);

/* The decimal number s starts with (no sign, no blank): 0 or -errno. */
static int leading_number(const char *s, unsigned long long *v, char **end)
{
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, end, 10);
	if (errno)
		return errno == ERANGE ? -ERANGE : -EINVAL;
	return 0;
}

/* "123", "64K", "16M", "16MiB", "1G", "2T" (powers of 1024). */
int config_size_parse(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;
	int err = leading_number(s, &v, &end);

	if (err)
		return err;
	switch (toupper((unsigned char)*end)) {
	case 'K':
		shift = 10;
		end++;
		break;
	case 'M':
		shift = 20;
		end++;
		break;
	case 'G':
		shift = 30;
		end++;
		break;
	case 'T':
		shift = 40;
		end++;
		break;
	case 'B': end++; break;
	default: break;
	}
	if (shift && (strcasecmp(end, "iB") == 0 || strcasecmp(end, "B") == 0))
		end += strlen(end);
	if (*end != '\0')
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	if ((v << shift) > INT64_MAX)
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

/* Takes full (a whole message) into errs, in line order. */
static void errors_insert(struct cfg_errors *errs, int line, char *full)
{
	char **grown;
	int *lines;
	size_t i;

	if (errs->n >= MAX_ERRORS) {
		free(full);
		return;
	}
	grown = realloc(errs->msgs, (errs->n + 1) * sizeof(*grown));
	lines = realloc(errs->lines, (errs->n + 1) * sizeof(*lines));
	if (grown)
		errs->msgs = grown;
	if (lines)
		errs->lines = lines;
	if (!grown || !lines) {
		free(full);
		return;
	}
	/* Keep file order: checks made after parsing report earlier lines. */
	i = errs->n++;
	for (; i > 0 && lines[i - 1] > line; i--) {
		grown[i] = grown[i - 1];
		lines[i] = lines[i - 1];
	}
	grown[i] = full;
	lines[i] = line;
}

static __attribute__((format(printf, 3, 4))) void error_at(struct parse_state *ps, int line,
							   const char *fmt, ...)
{
	char msg[512], *full;
	va_list ap;
	int ret;

	if (ps->errs->n >= MAX_ERRORS)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		ret = asprintf(&full, "%s:%d: %s", ps->file, line, msg);
	else
		ret = asprintf(&full, "%s: %s", ps->file, msg);
	if (ret >= 0)
		errors_insert(ps->errs, line, full);
}

void config_error_add(struct cfg_errors *errs, const char *msg)
{
	char *full = strdup(msg);

	if (full)
		errors_insert(errs, 0, full);
}

/* Grows an array by one zeroed element; returns it or NULL. */
static void *array_push(void *arrp, size_t *n, size_t elsize)
{
	void **arr = arrp;
	char *p = realloc(*arr, (*n + 1) * elsize);

	if (!p)
		return NULL;
	*arr = p;
	memset(p + *n * elsize, 0, elsize);
	return p + (*n)++ * elsize;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static void forget_keys(struct parse_state *ps)
{
	for (size_t i = 0; i < ps->n_keys; i++)
		free(ps->keys[i]);
	free(ps->keys);
	ps->keys = NULL;
	ps->n_keys = 0;
}

/* key is the table's name of a key, so an alias and its key are one. */
static bool key_seen_before(struct parse_state *ps, const char *key)
{
	char **slot;

	for (size_t i = 0; i < ps->n_keys; i++)
		if (strcasecmp(ps->keys[i], key) == 0)
			return true;
	slot = array_push(&ps->keys, &ps->n_keys, sizeof(*slot));
	if (slot)
		*slot = strdup(key);
	return false;
}

static bool valid_name(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
			return false;
	return true;
}

/* "/a//b/" -> "/a/b"; rejects relative paths, "." and ".." components. */
static int normalize_dir(const char *in, char **out)
{
	char *res = malloc(strlen(in) + 2), *w = res;
	const char *p = in;

	if (!res)
		return -ENOMEM;
	if (*p != '/') {
		free(res);
		return -EINVAL;
	}
	while (*p) {
		const char *start;
		size_t len;

		while (*p == '/')
			p++;
		start = p;
		while (*p && *p != '/')
			p++;
		len = (size_t)(p - start);
		if (!len)
			continue;
		if ((len == 1 && start[0] == '.') ||
		    (len == 2 && start[0] == '.' && start[1] == '.')) {
			free(res);
			return -EINVAL;
		}
		*w++ = '/';
		memcpy(w, start, len);
		w += len;
	}
	if (w == res)
		*w++ = '/';
	*w = '\0';
	*out = res;
	return 0;
}

static void begin_class(struct parse_state *ps, const char *name)
{
	struct dcfs_config *cfg = ps->cfg;
	struct cfg_class *c;

	if (!valid_name(name)) {
		error_at(ps, ps->lineno, "bad class name '%s' (letters, digits, '-', '_')", name);
		return;
	}
	/* A [dir] takes class names as keys: its own keys cannot be one. */
	if (cfg_key_find(CFG_SEC_DIR, name)) {
		error_at(ps, ps->lineno, "class name '%s' is a reserved key", name);
		return;
	}
	for (size_t i = 0; i < cfg->n_classes; i++) {
		if (strcasecmp(cfg->classes[i].name, name) == 0) {
			error_at(ps, ps->lineno, "duplicate section [class %s] (first at line %d)",
				 name, cfg->classes[i].line);
			return;
		}
	}
	c = array_push(&cfg->classes, &cfg->n_classes, sizeof(*c));
	if (!c)
		return;
	section_defaults(CFG_SEC_CLASS, c);
	c->name = strdup(name);
	c->line = ps->lineno;
	ps->sec = SEC_CLASS;
	ps->idx = cfg->n_classes - 1;
}

static void begin_dir(struct parse_state *ps, const char *path)
{
	struct dcfs_config *cfg = ps->cfg;
	struct cfg_dir *d;
	char *norm;

	if (normalize_dir(path, &norm) < 0) {
		error_at(
			ps, ps->lineno,
			"bad directory '%s': must be absolute under the mount root, without . or ..",
			path);
		return;
	}
	for (size_t i = 0; i < cfg->n_dirs; i++) {
		if (strcmp(cfg->dirs[i].path, norm) == 0) {
			error_at(ps, ps->lineno, "duplicate section [dir %s] (first at line %d)",
				 norm, cfg->dirs[i].line);
			free(norm);
			return;
		}
	}
	d = array_push(&cfg->dirs, &cfg->n_dirs, sizeof(*d));
	if (!d) {
		free(norm);
		return;
	}
	section_defaults(CFG_SEC_DIR, d);
	d->path = norm;
	d->len = strlen(norm);
	d->line = ps->lineno;
	ps->sec = SEC_DIR;
	ps->idx = cfg->n_dirs - 1;
}

static void begin_process(struct parse_state *ps, const char *comm)
{
	struct dcfs_config *cfg = ps->cfg;
	struct cfg_process *p;

	if (!*comm || strlen(comm) > COMM_MAX || strchr(comm, '/')) {
		error_at(ps, ps->lineno,
			 "bad process name '%s': a command name (comm) of 1 to %d characters", comm,
			 COMM_MAX);
		return;
	}
	for (size_t i = 0; i < cfg->n_procs; i++) {
		if (strcmp(cfg->procs[i].comm, comm) == 0) {
			error_at(ps, ps->lineno,
				 "duplicate section [process %s] (first at line %d)", comm,
				 cfg->procs[i].line);
			return;
		}
	}
	p = array_push(&cfg->procs, &cfg->n_procs, sizeof(*p));
	if (!p)
		return;
	section_defaults(CFG_SEC_PROCESS, p);
	p->comm = strdup(comm);
	p->line = ps->lineno;
	ps->sec = SEC_PROCESS;
	ps->idx = cfg->n_procs - 1;
}

static void begin_section(struct parse_state *ps, char *name)
{
	char *arg = name + strcspn(name, " \t");

	forget_keys(ps);
	ps->sec = SEC_BAD;
	if (*arg)
		*arg++ = '\0';
	arg = trim(arg);
	if (strcmp(name, "global") == 0 && !*arg) {
		if (ps->global_seen) {
			error_at(ps, ps->lineno, "duplicate section [global]");
			return;
		}
		ps->global_seen = true;
		ps->sec = SEC_GLOBAL;
	} else if (strcmp(name, "class") == 0 && *arg) {
		begin_class(ps, arg);
	} else if (strcmp(name, "dir") == 0 && *arg) {
		begin_dir(ps, arg);
	} else if (strcmp(name, "process") == 0 && *arg) {
		begin_process(ps, arg);
	} else {
		error_at(
			ps, ps->lineno,
			"unknown section [%s%s%s] (expected [global], [class NAME], [dir PATH] or [process NAME])",
			name, *arg ? " " : "", arg);
	}
}

/* Lines inih would accept but mean something else are errors here. */
static bool check_line(struct parse_state *ps, char *line)
{
	char *s = trim(line), *close;

	if (*s == '\0' || *s == '#' || *s == ';')
		return true;
	if (*s == '[') {
		close = strchr(s, ']');
		if (!close || (*trim(close + 1) && !strchr("#;", *trim(close + 1)))) {
			error_at(ps, ps->lineno, "malformed section header");
			return false;
		}
		*close = '\0';
		begin_section(ps, trim(s + 1));
		return true;
	}
	if (!strchr(s, '=')) {
		error_at(ps, ps->lineno, "expected 'key = value'");
		return false;
	}
	if (ps->sec == SEC_NONE) {
		error_at(ps, ps->lineno, "key outside of any section");
		return false;
	}
	return true;
}

/* Length without the line end ("\n" or "\r\n"). */
static size_t content_length(const char *line, ssize_t n)
{
	size_t len = (size_t)n;

	if (len && line[len - 1] == '\n')
		len--;
	if (len && line[len - 1] == '\r')
		len--;
	return len;
}

static char *read_line(char *str, int num, void *stream)
{
	struct parse_state *ps = stream;
	ssize_t n;
	char *line;

	errno = 0;
	n = getline(&ps->buf, &ps->cap, ps->fp);
	line = ps->buf;
	if (n < 0) {
		/* The end of the file, or an error that must not look like one. */
		if (!feof(ps->fp))
			ps->read_errno = errno ? errno : EIO;
		return NULL;
	}
	ps->lineno++;
	if (ps->lineno == 1 && n >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0) {
		line += 3; /* UTF-8 byte order mark */
		n -= 3;
	}
	if (memchr(line, '\0', (size_t)n)) {
		error_at(ps, ps->lineno, "NUL byte in line");
		goto skip;
	}
	if (content_length(line, n) > MAX_LINE || n >= num - 1) {
		error_at(ps, ps->lineno, "line longer than %d characters", MAX_LINE);
		goto skip;
	}
	memcpy(str, line, (size_t)n + 1);
	if (!check_line(ps, str))
		goto skip;
	/* Section headers were handled by check_line(): inih never sees them. */
	if (*trim(str) == '[')
		goto skip;
	memcpy(str, line, (size_t)n + 1);
	return str;
skip:
	/* A blank line keeps inih's line count in step with ours. */
	strcpy(str, "\n");
	return str;
}

static bool set_policy(struct parse_state *ps, const char *value, enum dcfs_policy *slot)
{
	if (policy_parse(value, slot) < 0) {
		error_at(
			ps, ps->lineno,
			"bad policy '%s' (expected cache, dontcache, dontcache-read, dontcache-write or auto)",
			value);
		return false;
	}
	return true;
}

/* "500ms", "5s", "2m", "1h"; a plain number is seconds.  In milliseconds. */
static int duration_parse(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		uint64_t ms;
	} units[] = { { "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 } };
	unsigned long long v;
	char *end;
	int err = leading_number(s, &v, &end);

	if (err)
		return err;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(end, units[i].suffix))
			continue;
		if (v > UINT64_MAX / units[i].ms)
			return -ERANGE;
		*out = v * units[i].ms;
		return 0;
	}
	return -EINVAL;
}

/* A size (dcfs.conf(5) SIZES) or a duration into *slot; else reported. */
static bool parse_number(struct parse_state *ps, const char *key, const char *value, bool duration,
			 uint64_t *slot)
{
	int err = duration ? duration_parse(value, slot) : config_size_parse(value, slot);
	const char *what = duration ? "duration" : "size";

	if (err == -ERANGE)
		error_at(ps, ps->lineno, "%s: %s '%s' is too large", key, what, value);
	else if (err)
		error_at(ps, ps->lineno, "%s: bad %s '%s' (a number with an optional %s suffix)",
			 key, what, value, duration ? "ms, s, m or h" : "K, M, G or T");
	return err == 0;
}

static bool set_bool(struct parse_state *ps, const char *key, const char *value, bool *slot)
{
	if (!strcasecmp(value, "yes") || !strcmp(value, "1") || !strcasecmp(value, "on"))
		*slot = true;
	else if (!strcasecmp(value, "no") || !strcmp(value, "0") || !strcasecmp(value, "off"))
		*slot = false;
	else {
		error_at(ps, ps->lineno, "%s must be yes or no", key);
		return false;
	}
	return true;
}

static bool set_log_level(struct parse_state *ps, const char *value, int *slot)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	static const int levels[] = { FUSE_LOG_ERR, FUSE_LOG_WARNING, FUSE_LOG_INFO,
				      FUSE_LOG_DEBUG };

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(value, names[i]) == 0) {
			*slot = levels[i];
			return true;
		}
	}
	error_at(ps, ps->lineno, "bad log_level '%s' (expected error, warning, info or debug)",
		 value);
	return false;
}

static void add_extensions(struct parse_state *ps, char ***exts, size_t *n_exts, const char *value)
{
	char *copy = strdup(value), *save = NULL, *tok;

	for (tok = strtok_r(copy, " \t,", &save); tok; tok = strtok_r(NULL, " \t,", &save)) {
		char **slot;

		if (*tok == '.')
			tok++;
		if (!*tok || strchr(tok, '/') || strchr(tok, '.')) {
			error_at(ps, ps->lineno, "bad extension '%s'", tok);
			continue;
		}
		for (char *p = tok; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		slot = array_push(exts, n_exts, sizeof(*slot));
		if (slot)
			*slot = strdup(tok);
	}
	free(copy);
}

/* A size or duration within the key's range (keys.c); else reported. */
static bool in_range(struct parse_state *ps, const struct cfg_key *k, uint64_t v)
{
	char range[96];

	if (cfg_key_in_range(k, v))
		return true;
	cfg_key_range_text(k, range, sizeof(range));
	error_at(ps, ps->lineno, "%s must be %s", k->name, range);
	return false;
}

static bool set_number(struct parse_state *ps, const struct cfg_key *k, const char *key,
		       const char *value, void *field)
{
	uint64_t v = 0;

	if (!parse_number(ps, key, value, k->type == CFG_DURATION, &v))
		return false;
	if (!in_range(ps, k, v))
		return false;
	if (k->type == CFG_SSIZE)
		*(int64_t *)field = (int64_t)v;
	else
		*(uint64_t *)field = v;
	return true;
}

/*
 * Sets key k (spelt key in the file) of obj, the struct of its section,
 * from value: true, or false with the problem reported.
 */
static bool set_value(struct parse_state *ps, const struct cfg_key *k, void *obj, const char *key,
		      const char *value)
{
	void *field = (char *)obj + k->off;
	bool on = false;

	switch (k->type) {
	case CFG_POLICY: return set_policy(ps, value, field);
	case CFG_SIZE:
	case CFG_SSIZE:
	case CFG_DURATION: return set_number(ps, k, key, value, field);
	case CFG_BOOL:
		if (!set_bool(ps, key, value, &on))
			return false;
		*(bool *)field = on;
		return true;
	case CFG_TRISTATE:
		if (!set_bool(ps, key, value, &on))
			return false;
		*(int *)field = on;
		return true;
	case CFG_LOG_LEVEL: return set_log_level(ps, value, field);
	case CFG_EXTENSIONS:
		add_extensions(ps, field, (size_t *)((char *)field + sizeof(char **)), value);
		return true;
	}
	return false;
}

static void set_key(struct parse_state *ps, const struct cfg_key *k, void *obj, const char *key,
		    const char *value)
{
	if (set_value(ps, k, obj, key, value) && k->line_off)
		*(int *)((char *)obj + k->line_off) = ps->lineno;
}

/*
 * A section's struct with nothing set: each key's default (the row's text,
 * parsed as if it stood in a file) or its "unset" value.
 */
static int section_defaults(enum cfg_section_id sec, void *obj)
{
	struct cfg_errors errs = { 0 };
	struct parse_state ps = { .file = "built-in default", .errs = &errs };
	const struct cfg_section *s = &cfg_sections[sec];
	int ret = 0;

	for (size_t i = 0; i < s->n; i++) {
		const struct cfg_key *k = &s->keys[i];
		void *field = (char *)obj + k->off;

		if (k->def)
			set_value(&ps, k, obj, k->name, k->def);
		else if (k->type == CFG_SSIZE)
			*(int64_t *)field = -1;
		else if (k->type == CFG_TRISTATE || k->type == CFG_LOG_LEVEL)
			*(int *)field = -1;
	}
	for (size_t i = 0; i < errs.n; i++) {
		log_err("BUG: keys.c: %s\n", errs.msgs[i]);
		ret = -EINVAL;
	}
	config_errors_free(&errs);
	return ret;
}

/* Is the required key k of obj still unset? */
static bool key_unset(const struct cfg_key *k, const void *obj)
{
	const char *field = (const char *)obj + k->off;

	switch (k->type) {
	case CFG_POLICY: return *(const enum dcfs_policy *)field == POLICY_UNSET;
	case CFG_EXTENSIONS: return *(const size_t *)(field + sizeof(char **)) == 0;
	case CFG_SSIZE: return *(const int64_t *)field < 0;
	case CFG_TRISTATE:
	case CFG_LOG_LEVEL: return *(const int *)field < 0;
	default: return false;
	}
}

/* "[class NAME] has no extensions", reported at the section's header. */
static void check_required(struct parse_state *ps, enum cfg_section_id sec, const void *obj,
			   const char *arg, int line)
{
	const struct cfg_section *s = &cfg_sections[sec];

	for (size_t i = 0; i < s->n; i++)
		if (s->keys[i].required && key_unset(&s->keys[i], obj))
			error_at(ps, line, "[%s %s] has no %s", s->name, arg, s->keys[i].name);
}

/* The struct of the current section, and its name or path for messages. */
static void *section_object(struct parse_state *ps, const char **arg)
{
	struct dcfs_config *cfg = ps->cfg;

	switch (ps->sec) {
	case SEC_CLASS: *arg = cfg->classes[ps->idx].name; return &cfg->classes[ps->idx];
	case SEC_DIR: *arg = cfg->dirs[ps->idx].path; return &cfg->dirs[ps->idx];
	case SEC_PROCESS: *arg = cfg->procs[ps->idx].comm; return &cfg->procs[ps->idx];
	default: *arg = NULL; return cfg;
	}
}

/* A [dir] key that is no key of the table names a class: resolved at the end. */
static void add_class_map(struct parse_state *ps, const char *key, const char *value)
{
	struct pending_map *pm = array_push(&ps->pending, &ps->n_pending, sizeof(*pm));

	if (!pm)
		return;
	pm->dir_idx = ps->idx;
	pm->class_name = strdup(key);
	pm->value = strdup(value);
	pm->line = ps->lineno;
}

static void unknown_key(struct parse_state *ps, const char *key, const char *value, const char *arg)
{
	enum cfg_section_id sec = (enum cfg_section_id)ps->sec;
	char names[256];

	switch (cfg_sections[sec].unknown) {
	case CFG_UNKNOWN_CLASS_MAP: add_class_map(ps, key, value); break;
	case CFG_UNKNOWN_EXPECTED:
		cfg_key_names(sec, NULL, names, sizeof(names));
		error_at(ps, ps->lineno, "unknown key '%s' in [%s %s] (expected %s)", key,
			 cfg_sections[sec].name, arg, names);
		break;
	case CFG_UNKNOWN_PLAIN:
		error_at(ps, ps->lineno, "unknown key '%s' in [%s]", key, cfg_sections[sec].name);
		break;
	}
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
	struct parse_state *ps = user;
	const struct cfg_key *k;
	const char *arg;
	void *obj;

	(void)section;
	/* Errors of a rejected section were reported at its header. */
	if (ps->sec == SEC_BAD || ps->sec == SEC_NONE)
		return 1;
	k = cfg_key_find((enum cfg_section_id)ps->sec, key);
	if (key_seen_before(ps, k ? k->name : key)) {
		error_at(ps, ps->lineno, "duplicate key '%s'", key);
		return 1;
	}
	if (!*value) {
		error_at(ps, ps->lineno, "key '%s' has no value", key);
		return 1;
	}
	obj = section_object(ps, &arg);
	if (k)
		set_key(ps, k, obj, key, value);
	else
		unknown_key(ps, key, value, arg);
	/* Always go on: every problem of the file is reported in one run. */
	return 1;
}

static ssize_t class_index(const struct dcfs_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_classes; i++)
		if (strcasecmp(cfg->classes[i].name, name) == 0)
			return (ssize_t)i;
	return -1;
}

static void resolve_class_maps(struct parse_state *ps)
{
	for (size_t i = 0; i < ps->n_pending; i++) {
		struct pending_map *pm = &ps->pending[i];
		struct cfg_dir *d = &ps->cfg->dirs[pm->dir_idx];
		ssize_t ci = class_index(ps->cfg, pm->class_name);
		struct cfg_class_map *m;

		if (ci < 0) {
			char names[256];

			cfg_key_names(CFG_SEC_DIR, "a class name", names, sizeof(names));
			error_at(ps, pm->line, "unknown key '%s' in [dir %s] (not %s)",
				 pm->class_name, d->path, names);
			continue;
		}
		m = array_push(&d->maps, &d->n_maps, sizeof(*m));
		if (!m)
			continue;
		m->class_idx = (size_t)ci;
		m->line = pm->line;
		ps->lineno = pm->line;
		set_policy(ps, pm->value, &m->policy);
	}
}

/* One extension in two classes would make the class of a file ambiguous. */
static void check_classes(struct parse_state *ps)
{
	struct dcfs_config *cfg = ps->cfg;

	for (size_t i = 0; i < cfg->n_classes; i++) {
		struct cfg_class *c = &cfg->classes[i];

		check_required(ps, CFG_SEC_CLASS, c, c->name, c->line);
		for (size_t e = 0; e < c->n_exts; e++) {
			for (size_t j = 0; j <= i; j++) {
				struct cfg_class *o = &cfg->classes[j];
				size_t lim = j == i ? e : o->n_exts;

				for (size_t f = 0; f < lim; f++) {
					if (strcmp(o->exts[f], c->exts[e]))
						continue;
					error_at(
						ps, c->line,
						"extension '%s' of [class %s] is already in [class %s] (line %d)",
						c->exts[e], c->name, o->name, o->line);
				}
			}
		}
	}
	for (size_t i = 0; i < cfg->n_procs; i++)
		check_required(ps, CFG_SEC_PROCESS, &cfg->procs[i], cfg->procs[i].comm,
			       cfg->procs[i].line);
}

struct dcfs_config *config_defaults(void)
{
	struct dcfs_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return NULL;
	/* The [global] rows of keys.c, parsed: never a second list. */
	if (section_defaults(CFG_SEC_GLOBAL, cfg) < 0) {
		free(cfg);
		return NULL;
	}
	cfg->loaded = time(NULL);
	return cfg;
}

static void parse_state_free(struct parse_state *ps)
{
	forget_keys(ps);
	for (size_t i = 0; i < ps->n_pending; i++) {
		free(ps->pending[i].class_name);
		free(ps->pending[i].value);
	}
	free(ps->pending);
	free(ps->buf);
}

int config_load_stream(const char *name, FILE *fp, struct dcfs_config **out,
		       struct cfg_errors *errs)
{
	struct parse_state ps = { .file = name, .fp = fp, .errs = errs, .sec = SEC_NONE };
	int ret;

	ps.cfg = config_defaults();
	if (!ps.cfg)
		return -ENOMEM;
	ps.cfg->path = strdup(name);
	/* Continuation lines would hide mistakes; ';' and '#' start comments. */
	ini_allow_multiline = false;
	ini_inline_comment_prefixes = ";#";
	ini_max_line = MAX_LINE + 8;
	ini_initial_alloc = MAX_LINE + 8; /* the heap buffer never grows */
	ini_use_stack = false;
	ret = ini_parse_stream(read_line, &ps, on_key, &ps);
	if (ps.read_errno)
		error_at(&ps, ps.lineno, "read error: %s", strerror(ps.read_errno));
	else if (ret == -1 || ferror(fp))
		error_at(&ps, ps.lineno, "read error");
	else if (ret == -2)
		error_at(&ps, ps.lineno, "out of memory");
	else if (ret > 0 && errs->n == 0)
		error_at(&ps, ret, "syntax error");
	resolve_class_maps(&ps);
	check_classes(&ps);
	parse_state_free(&ps);
	if (errs->n) {
		config_free(ps.cfg);
		return -EINVAL;
	}
	*out = ps.cfg;
	return 0;
}

ssize_t config_read_fd(int fd, char **out)
{
	char *buf = malloc(CONFIG_MAX_BYTES + 2);
	size_t len = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + len, CONFIG_MAX_BYTES + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;

			free(buf);
			return -err;
		}
		if (n == 0 || (len += (size_t)n) > CONFIG_MAX_BYTES)
			break;
	}
	buf[len] = '\0';
	*out = buf;
	return (ssize_t)len;
}

/*
 * Reads the whole file into memory, bounded: only a regular file, opened
 * without blocking (a FIFO or a device would wait forever or never end) and
 * without following a symlink swapped in after the path was resolved, at
 * most CONFIG_MAX_BYTES.  A read error is an error, never an early end of
 * file that would install a truncated rule set.  Returns the length, or
 * -errno with the message recorded.
 */
static ssize_t read_bounded(struct parse_state *ps, const char *path, char **out)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	ssize_t n;
	struct stat st;
	char *buf;
	int err;

	if (fd < 0) {
		err = errno;
		error_at(ps, 0, "cannot read: %s", strerror(err));
		return -err;
	}
	if (fstat(fd, &st) < 0) {
		err = errno;
		error_at(ps, 0, "cannot read: %s", strerror(err));
		close(fd);
		return -err;
	}
	if (!S_ISREG(st.st_mode)) {
		err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
		error_at(ps, 0, "%s",
			 S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
		close(fd);
		return -err;
	}
	n = config_read_fd(fd, &buf);
	close(fd);
	if (n == -ENOMEM)
		error_at(ps, 0, "out of memory");
	else if (n < 0)
		error_at(ps, 0, "read error: %s", strerror((int)-n));
	else if (n > CONFIG_MAX_BYTES) {
		free(buf);
		error_at(ps, 0, "larger than %d bytes", CONFIG_MAX_BYTES);
		return -EFBIG;
	} else
		*out = buf;
	return n;
}

ssize_t config_read(const char *path, char **out, struct cfg_errors *errs)
{
	struct parse_state ps = { .file = path, .errs = errs };
	char *resolved = realpath(path, NULL);
	ssize_t len;

	/* A symlinked config is fine; what it resolves to is checked. */
	len = read_bounded(&ps, resolved ? resolved : path, out);
	free(resolved);
	return len;
}

int config_load_bytes(const char *path, char *buf, size_t len, struct dcfs_config **out,
		      struct cfg_errors *errs)
{
	FILE *fp;
	int ret;

	/* An empty file parses like a blank line (fmemopen wants a size). */
	if (len == 0)
		buf[len++] = '\n';
	fp = fmemopen(buf, len, "r");
	if (!fp) {
		struct parse_state ps = { .file = path, .errs = errs };

		ret = -errno;
		error_at(&ps, 0, "cannot read: %s", strerror(-ret));
		return ret;
	}
	ret = config_load_stream(path, fp, out, errs);
	fclose(fp);
	return ret;
}

int config_load(const char *path, struct dcfs_config **out, struct cfg_errors *errs)
{
	char *buf = NULL;
	ssize_t len = config_read(path, &buf, errs);
	int ret;

	if (len < 0)
		return (int)len;
	ret = config_load_bytes(path, buf, (size_t)len, out, errs);
	free(buf);
	return ret;
}

void config_free(struct dcfs_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->n_classes; i++) {
		for (size_t e = 0; e < cfg->classes[i].n_exts; e++)
			free(cfg->classes[i].exts[e]);
		free(cfg->classes[i].exts);
		free(cfg->classes[i].name);
	}
	for (size_t i = 0; i < cfg->n_dirs; i++) {
		free(cfg->dirs[i].path);
		free(cfg->dirs[i].maps);
	}
	for (size_t i = 0; i < cfg->n_procs; i++)
		free(cfg->procs[i].comm);
	free(cfg->classes);
	free(cfg->dirs);
	free(cfg->procs);
	free(cfg->path);
	free(cfg);
}

void config_errors_print(const struct cfg_errors *errs, FILE *fp)
{
	for (size_t i = 0; i < errs->n; i++)
		fprintf(fp, "%s\n", errs->msgs[i]);
}

void config_errors_free(struct cfg_errors *errs)
{
	for (size_t i = 0; i < errs->n; i++)
		free(errs->msgs[i]);
	free(errs->msgs);
	free(errs->lines);
	errs->msgs = NULL;
	errs->lines = NULL;
	errs->n = 0;
}

void config_summary(const struct dcfs_config *cfg, char *buf, size_t size)
{
	size_t exts = 0;

	for (size_t i = 0; i < cfg->n_classes; i++)
		exts += cfg->classes[i].n_exts;
	snprintf(
		buf, size,
		"%s: OK: default %s, min_size %lld, auto_threshold %llu, %zu classes (%zu extensions), %zu dir rules, %zu process rules",
		cfg->path ? cfg->path : "(built-in)", policy_name(cfg->default_policy),
		(long long)cfg->min_size, (unsigned long long)cfg->auto_threshold, cfg->n_classes,
		exts, cfg->n_dirs, cfg->n_procs);
}

/*
 * The config in force: reloads install a new one, each open takes a
 * reference for as long as it decides (policy.c), so a reload never frees
 * a config in use.
 */
static struct {
	pthread_mutex_t config_lock;
	struct dcfs_config *current;
} installed = { .config_lock = PTHREAD_MUTEX_INITIALIZER };

void config_install(struct dcfs_config *cfg)
{
	struct dcfs_config *old;

	cfg->refs = 1;
	pthread_mutex_lock(&installed.config_lock);
	old = installed.current;
	installed.current = cfg;
	pthread_mutex_unlock(&installed.config_lock);
	if (old)
		config_put(old);
}

struct dcfs_config *config_get(void)
{
	struct dcfs_config *cfg;

	pthread_mutex_lock(&installed.config_lock);
	cfg = installed.current;
	if (cfg)
		cfg->refs++;
	pthread_mutex_unlock(&installed.config_lock);
	return cfg;
}

void config_put(struct dcfs_config *cfg)
{
	bool last;

	pthread_mutex_lock(&installed.config_lock);
	last = --cfg->refs == 0;
	pthread_mutex_unlock(&installed.config_lock);
	if (last)
		config_free(cfg);
}
