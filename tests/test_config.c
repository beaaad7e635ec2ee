/* Suite "config": the keys of dcfs.conf, driven by the table the parser
 * itself reads (fusefs/policy/keys.c, printed by `dcfs --list-config-keys`).
 *
 * TCase table: every key of every section is validated through
 *   `dcfs --check-config` from its row alone (its type, its range and what 0
 *   means, its alias), and dcfs.conf(5) as a reader sees it (rendered by
 *   groff) documents exactly the table's keys in each section, each
 *   [global] key with the table's default, the DEFAULTS section lists every
 *   [global] default, VALIDATION every range message, and the sample
 *   dcfs.conf sets every [global] key.
 * TCase behaviour: what a key does, on a mount of its own, for the keys no
 *   other suite sets: write_expire, writeback_limit, inflight,
 *   inflight_mount, prefetch (each compared with its "off" value),
 *   force_fallback.
 */
#include "own_mount.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- the table ------------------------------------------------------------ */

struct key_row {
	char sec[16], name[40], alias[40], type[48], range[128], def[40];
};

#define MAX_ROWS 64

/* The rows of `dcfs --list-config-keys`; returns how many. */
static int list_keys(struct key_row *rows)
{
	static char out[65536];
	int rc = run_cmd(out, sizeof out, "'%s' --list-config-keys", g_dcfs_bin);
	ck_assert_msg(rc == 0, "dcfs --list-config-keys: %d: %s", rc, out);
	int n = 0;
	char *save;
	for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (*l == '#')
			continue;
		ck_assert_int_lt(n, MAX_ROWS);
		struct key_row *r = &rows[n++];
		char *f[7], *fs;
		int k = 0;
		for (char *t = strtok_r(l, "\t", &fs); t && k < 7; t = strtok_r(NULL, "\t", &fs))
			f[k++] = t;
		ck_assert_msg(k == 7, "--list-config-keys: %d fields in a row", k);
		snprintf(r->sec, sizeof r->sec, "%s", f[0]);
		snprintf(r->name, sizeof r->name, "%s", f[1]);
		snprintf(r->alias, sizeof r->alias, "%s", strcmp(f[2], "-") ? f[2] : "");
		snprintf(r->type, sizeof r->type, "%s", f[3]);
		snprintf(r->range, sizeof r->range, "%s", strcmp(f[4], "-") ? f[4] : "");
		snprintf(r->def, sizeof r->def, "%s", strcmp(f[5], "-") ? f[5] : "");
	}
	ck_assert_int_gt(n, 15);
	return n;
}

/* ---- validation, from the rows ---------------------------------------------- */

/* What must stand in front of a key of the section for a file to be valid. */
static const char *section_head(const struct key_row *r)
{
	if (!strcmp(r->sec, "global"))
		return "[global]\n";
	if (!strcmp(r->sec, "dir"))
		return "[dir /t]\n";
	if (!strcmp(r->sec, "class"))
		return strcmp(r->name, "extensions") ? "[class t]\nextensions = tst\n"
						     : "[class t]\n";
	ck_assert_str_eq(r->sec, "process");
	return strcmp(r->name, "policy") ? "[process t]\npolicy = cache\n" : "[process t]\n";
}

/* `dcfs --check-config` of head + "KEY = VALUE\n": its exit status, and
 * its output in msg with the file name taken out of every line. */
static int check_line(const struct key_row *r, const char *key, const char *value, char *msg,
		      size_t len)
{
	char file[PATH_MAX], text[512], out[4096];
	snprintf(file, sizeof file, "%s/keys.conf", g_tmpdir);
	snprintf(text, sizeof text, "%s%s = %s\n", section_head(r), key, value);
	ck_assert_int_eq(write_file(file, text, strlen(text), 0644), 0);
	int rc = run_cmd(out, sizeof out, "'%s' --check-config '%s' 2>&1", g_dcfs_bin, file);
	size_t at = 0, fl = strlen(file);
	for (const char *p = out; *p && at + 1 < len; p++) {
		if ((p == out || p[-1] == '\n') && !strncmp(p, file, fl))
			p += fl;
		msg[at++] = *p;
	}
	msg[at] = 0;
	return rc;
}

static void expect_valid(const struct key_row *r, const char *key, const char *value)
{
	char msg[1024];
	int rc = check_line(r, key, value, msg, sizeof msg);
	ck_assert_msg(rc == 0, "[%s] %s = %s refused: %s", r->sec, key, value, msg);
}

/* One message is want at the line of the key (after the section head). */
static void expect_error(const struct key_row *r, const char *value, const char *want)
{
	char msg[4096], full[512];
	int line = 1;
	for (const char *p = section_head(r); *p; p++)
		line += *p == '\n';
	snprintf(full, sizeof full, "\n:%d: %s\n", line, want);
	int rc = check_line(r, r->name, value, msg + 1, sizeof msg - 1);
	msg[0] = '\n';
	ck_assert_msg(rc == 1 && strstr(msg, full), "[%s] %s = %s: expected '%s', got %d '%s'",
		      r->sec, r->name, value, full + 1, rc, msg + 1);
}

/* "64K" -> 65536, "100ms" -> 100, "1h" -> 3600000: sizes in bytes, durations
 * in milliseconds, as the range text writes them. */
static uint64_t range_value(const char *t, int duration)
{
	char *end;
	uint64_t v = strtoull(t, &end, 10);
	const char *units = "KMGT", *u = *end ? strchr(units, *end) : NULL;

	if (!duration)
		return u ? v << (10 * (u - units + 1)) : v;
	if (!strncmp(end, "ms", 2))
		return v;
	if (*end == 's')
		return v * 1000;
	if (*end == 'm')
		return v * 60000;
	ck_assert_msg(*end == 'h', "range value '%s'", t);
	return v * 3600000;
}

/* A number in the file's syntax: bytes, or milliseconds. */
static const char *num(uint64_t v, int duration)
{
	static char buf[4][32];
	static int i;
	char *b = buf[i++ % 4];
	snprintf(b, 32, duration ? "%llums" : "%llu", (unsigned long long)v);
	return b;
}

/* The row's range, tried at its ends and just outside them. */
static void validate_range(const struct key_row *r)
{
	int dur = !strcmp(r->type, "duration");
	uint64_t lo = 0, hi = 0;
	const char *t = r->range;
	char want[256];
	snprintf(want, sizeof want, "%s must be %s", r->name, r->range);
	if (!strncmp(t, "between ", 8)) {
		lo = range_value(t + 8, dur);
		hi = range_value(strstr(t, " and ") + 5, dur);
	} else if (!strncmp(t, "at most ", 8)) {
		hi = range_value(t + 8, dur);
	} else if (!strncmp(t, "greater than 0", 14)) {
		lo = 1;
	} else {
		ck_assert_msg(!strncmp(t, "at least ", 9), "range '%s' of %s", t, r->name);
		lo = range_value(t + 9, dur);
	}
	int zero_ok = strstr(t, "(0") != NULL;
	expect_valid(r, r->name, num(lo, dur));
	if (lo > 0 && (lo > 1 || !zero_ok))
		expect_error(r, num(lo - 1, dur), want);
	if (hi) {
		expect_valid(r, r->name, num(hi, dur));
		expect_error(r, num(hi + 1, dur), want);
	}
	if (zero_ok)
		expect_valid(r, r->name, "0");
	else if (lo > 0)
		expect_error(r, "0", want);
}

static void validate_row(const struct key_row *r)
{
	char want[256];
	if (!strcmp(r->type, "yes|no")) {
		const char *good[] = { "yes", "no", "On", "off", "1", "0" };
		for (int i = 0; i < 6; i++)
			expect_valid(r, r->name, good[i]);
		snprintf(want, sizeof want, "%s must be yes or no", r->name);
		expect_error(r, "maybe", want);
	} else if (!strcmp(r->type, "policy")) {
		expect_valid(r, r->name, "dontcache-read");
		expect_error(r, "fast",
			     "bad policy 'fast' (expected cache, dontcache, "
			     "dontcache-read, dontcache-write or auto)");
	} else if (!strcmp(r->type, "size") || !strcmp(r->type, "duration")) {
		int dur = !strcmp(r->type, "duration");
		snprintf(want, sizeof want,
			 "%s: bad %s '1.5' (a number with an optional %s suffix)", r->name, r->type,
			 dur ? "ms, s, m or h" : "K, M, G or T");
		expect_error(r, "1.5", want);
		snprintf(want, sizeof want, "%s: %s '99999999999999999999' is too large", r->name,
			 r->type);
		expect_error(r, "99999999999999999999", want);
		if (r->range[0])
			validate_range(r);
		else
			expect_valid(r, r->name, dur ? "5s" : "16M");
	} else if (!strcmp(r->type, "error|warning|info|debug")) {
		expect_valid(r, r->name, "Debug");
		expect_error(r, "loud",
			     "bad log_level 'loud' (expected error, warning, info or debug)");
	} else {
		ck_assert_msg(!strcmp(r->type, "extensions"), "a type the test does not know: %s",
			      r->type);
		expect_valid(r, r->name, ".MKV, mp4 webm");
	}
	/* the default, as written in the row, is a valid value */
	if (r->def[0])
		expect_valid(r, r->name, r->def);
	/* an alias is the key: accepted, and both at once are a duplicate */
	if (r->alias[0]) {
		char msg[1024];
		expect_valid(r, r->alias, r->def[0] ? r->def : "cache");
		char value[128];
		snprintf(value, sizeof value, "cache\n%s = cache", r->alias);
		int rc = check_line(r, r->name, value, msg, sizeof msg);
		ck_assert_msg(rc == 1 && strstr(msg, "duplicate key"), "%s and %s: %d %s", r->name,
			      r->alias, rc, msg);
	}
}

START_TEST(config_every_key_validated)
{
	struct key_row rows[MAX_ROWS];
	int n = list_keys(rows);
	for (int i = 0; i < n; i++)
		validate_row(&rows[i]);
}
END_TEST

/* ---- dcfs.conf(5) and the sample, against the table --------------------------- */

/* dcfs.conf(5) as man(1) shows it: no hyphenation, one line per paragraph. */
static char *man_rendered(void)
{
	size_t len = 1 << 20;
	char *out = malloc(len);
	int rc = run_cmd(out, len,
			 "groff -man -Tascii -rLL=4000n -rHY=0 -P-cbou '%s/man/dcfs.conf.5' "
			 "2>/dev/null",
			 srcdir());
	ck_assert_msg(rc == 0 && strlen(out) > 10000, "groff: %d", rc);
	return out;
}

/* The text from the line that is exactly start to the next line that
 * starts with at most `depth` blanks and a non-blank (malloc'd). */
static char *man_part(const char *text, const char *start, int depth)
{
	char pat[128];
	snprintf(pat, sizeof pat, "\n%s\n", start);
	const char *p = strstr(text, pat);
	ck_assert_msg(p, "dcfs.conf(5) has no '%s'", start);
	p += strlen(pat);
	const char *e = p;
	for (;;) {
		const char *nl = strchr(e, '\n');
		if (!nl)
			break;
		int blanks = (int)strspn(nl + 1, " ");
		if (nl[1 + blanks] && nl[1 + blanks] != '\n' && blanks <= depth) {
			e = nl;
			break;
		}
		e = nl + 1;
	}
	return strndup(p, (size_t)(e - p));
}

/* The keys an entry list documents: lines of 7 blanks and a lower-case
 * word, followed by a description (indented 14, or after " -- " on the
 * same line).  NUL-separated names in keys. */
static int man_entries(const char *part, char keys[][40], int max)
{
	int n = 0;
	for (const char *l = part; *l && n < max;) {
		const char *nl = strchr(l, '\n');
		const char *next = nl ? nl + 1 : l + strlen(l);
		while (*next == '\n')
			next++;
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		int tag = strspn(l, " ") == 7 && l[7] >= 'a' && l[7] <= 'z' &&
			  (strspn(next, " ") >= 14 || memmem(l, len, " -- ", 4));
		if (tag)
			snprintf(keys[n++], 40, "%.*s", (int)strcspn(l + 7, " \n"), l + 7);
		l = next;
	}
	return n;
}

/* The entry of key in part (from its tag line to the next tag), or NULL. */
static char *man_entry(const char *part, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\n       %s", key);
	const char *p = strstr(part, pat);
	while (p && p[strlen(pat)] != '\n' && p[strlen(pat)] != ' ')
		p = strstr(p + 1, pat);
	if (!p)
		return NULL;
	const char *e = strstr(p + 1, "\n       ");
	while (e && e[8] == ' ')
		e = strstr(e + 1, "\n       ");
	return strndup(p, e ? (size_t)(e - p) : strlen(p));
}

static const char *const man_heads[] = { "   [global]", "   [class NAME]", "   [dir PATH]",
					 "   [process NAME]" };
static const char *const sections[] = { "global", "class", "dir", "process" };

START_TEST(config_docs_match_table)
{
	struct key_row rows[MAX_ROWS];
	int n = list_keys(rows);
	char *man = man_rendered();
	for (int s = 0; s < 4; s++) {
		char *part = man_part(man, man_heads[s], 3);
		char doc[64][40];
		int nd = man_entries(part, doc, 64), nt = 0;
		for (int i = 0; i < n; i++) {
			if (strcmp(rows[i].sec, sections[s]))
				continue;
			nt++;
			char *e = man_entry(part, rows[i].name);
			ck_assert_msg(e, "dcfs.conf(5) [%s] does not document %s", sections[s],
				      rows[i].name);
			char want[128];
			if (rows[i].alias[0]) {
				snprintf(want, sizeof want, "(alias %s)", rows[i].alias);
				ck_assert_msg(strstr(e, want), "dcfs.conf(5) [%s] %s: no '%s'",
					      sections[s], rows[i].name, want);
			}
			if (!strcmp(rows[i].sec, "global") && rows[i].def[0]) {
				snprintf(want, sizeof want, "Default: %s", rows[i].def);
				ck_assert_msg(strstr(e, want),
					      "dcfs.conf(5) [global] %s: no '%s':\n%s",
					      rows[i].name, want, e);
			}
			free(e);
		}
		/* and nothing the table does not have */
		for (int d = 0; d < nd; d++) {
			int known = 0;
			for (int i = 0; i < n; i++)
				known |= !strcmp(rows[i].sec, sections[s]) &&
					 !strcmp(rows[i].name, doc[d]);
			ck_assert_msg(known, "dcfs.conf(5) [%s] documents '%s', which is no key",
				      sections[s], doc[d]);
		}
		ck_assert_msg(nd == nt, "dcfs.conf(5) [%s]: %d entries, the table has %d keys",
			      sections[s], nd, nt);
		free(part);
	}
	/* DEFAULTS: every [global] default, and only those */
	char *defaults = man_part(man, "DEFAULTS", 0);
	int listed = 0;
	for (const char *l = defaults; (l = strstr(l, "\n              ")); l++) {
		char key[64], val[64];
		if (sscanf(l, " %63s = %63s", key, val) == 2 && key[0] != '#' &&
		    strcmp(key, "[global]")) {
			int found = 0;
			for (int i = 0; i < n; i++)
				if (!strcmp(rows[i].sec, "global") && !strcmp(rows[i].name, key)) {
					ck_assert_msg(!strcmp(rows[i].def, val),
						      "DEFAULTS: %s = %s, the table says %s", key,
						      val, rows[i].def);
					found = 1;
				}
			ck_assert_msg(found, "DEFAULTS lists %s, which is no [global] key", key);
			listed++;
		}
	}
	char *sample = src_file("dcfs.conf");
	char *validation = man_part(man, "VALIDATION", 0);
	int with_default = 0;
	for (int i = 0; i < n; i++) {
		if (!strcmp(rows[i].sec, "global")) {
			char want[128];
			snprintf(want, sizeof want, "\n%s = ", rows[i].name);
			ck_assert_msg(strstr(sample, want), "the sample dcfs.conf does not set %s",
				      rows[i].name);
			if (rows[i].def[0])
				with_default++;
			else
				ck_assert_msg(strstr(defaults, rows[i].name),
					      "DEFAULTS does not mention %s", rows[i].name);
		}
		if (rows[i].range[0]) {
			char want[256];
			snprintf(want, sizeof want, "\n       %s must be %s\n", rows[i].name,
				 rows[i].range);
			ck_assert_msg(strstr(validation, want), "VALIDATION lacks '%s'", want + 8);
		}
	}
	ck_assert_msg(listed == with_default, "DEFAULTS lists %d keys, the table has %d defaults",
		      listed, with_default);
	ck_assert_int_gt(listed, 10);
	ck_assert_msg(strstr(man, "config=none"), "dcfs.conf(5) does not document config=none");
	free(sample);
	free(validation);
	free(defaults);
	free(man);
}
END_TEST

/* ---- behaviour ------------------------------------------------------------------ */

static struct own_mount g_cm;

static void cm_teardown(void)
{
	own_mount_kill(&g_cm);
}

static off_t backing_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Seconds until the backing file has size bytes (checked on the backing
 * path only: anything through the mount would write the buffer). */
static double wait_backing_size(const char *path, off_t size, double limit)
{
	double t0 = now_s();
	while (backing_size(path) != size && now_s() - t0 < limit)
		sleep_ms(10);
	return backing_size(path) == size ? now_s() - t0 : -1;
}

/*
 * write_expire: 100 bytes written to a streamed file and the handle kept
 * open reach the backing file once they have waited write_expire; with 0
 * they wait for the close.  The value is the handle's, from its open: a
 * reload changes it for handles opened later.
 */
START_TEST(config_write_expire)
{
	const char *conf = "[global]\ndefault = dontcache\nmin_size = 0\npassthrough_writes = no\n"
			   "write_expire = 300ms\n";
	own_mount_ck(&g_cm, FS_EXT4, "cfg-expire", conf);
	char m[PATH_MAX], b[PATH_MAX], buf[100];
	memset(buf, 'e', sizeof buf);
	snprintf(m, sizeof m, "%s/slow.log", g_cm.mnt);
	snprintf(b, sizeof b, "%s/slow.log", g_cm.exp);
	int fd = open(m, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
	double t = wait_backing_size(b, 100, 10 * deadline_scale());
	ck_assert_msg(t >= 0, "100 bytes acknowledged did not reach the backing file in 10 s");
	ck_assert_msg(t > 0.1, "the write landed after %.3f s: not buffered at all?", t);
	ck_assert_int_eq(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
	t = wait_backing_size(b, 200, 10 * deadline_scale());
	ck_assert_msg(t >= 0, "the second write did not land");
	fprintf(stderr, "config_write_expire: 300ms: landed after %.3f s\n", t);
	close(fd);
	/* 0: the data wait for a sync point, here the close */
	ck_assert_int_eq(own_reload(&g_cm, "[global]\ndefault = dontcache\nmin_size = 0\n"
					   "passthrough_writes = no\nwrite_expire = 0\n"),
			 1);
	fd = open(m, O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
	ck_assert_msg(wait_backing_size(b, 300, 1.5) < 0, "write_expire = 0 wrote the buffer");
	ck_assert_int_eq(close(fd), 0);
	ck_assert_int_eq(backing_size(b), 300);
	size_t n;
	char *all = slurp(b, &n);
	ck_assert_msg(all && n == 300 && all[0] == 'e' && all[299] == 'e', "backing content");
	free(all);
	own_unmount_ck(&g_cm);
}
END_TEST

/*
 * The streaming class with the daemon doing the I/O (no kernel passthrough
 * of any kind), for the keys of the daemon's engine.
 */
#define ENGINE                                                                  \
	"[global]\ndefault = dontcache\nmin_size = 0\npassthrough_reads = no\n" \
	"passthrough_uncached = no\npassthrough_writes = no\nfuse_readahead = no\n"

/* Writes len bytes to rel through the mount in pieces of bs; the counter
 * key of class dontcache moved by how much. */
static long long write_counting(const char *rel, size_t len, size_t bs, const char *key)
{
	char *buf = malloc(bs);
	fill_pattern(buf, bs, 39);
	long long c0 = stats_get(g_cm.mnt, "dontcache", key);
	int fd = open(path_at(g_cm.mnt, "%s", rel), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	for (size_t at = 0; at < len; at += bs)
		ck_assert_int_eq(write(fd, buf, bs), (ssize_t)bs);
	ck_assert_int_eq(close(fd), 0);
	free(buf);
	long long c1 = stats_get(g_cm.mnt, "dontcache", key);
	ck_assert_msg(c1 >= 0, "no counter %s", key);
	return c1 - (c0 > 0 ? c0 : 0);
}

/* One line of conf with ENGINE in front; reloaded (values apply at open). */
static void cm_set(const char *line)
{
	char text[512];
	snprintf(text, sizeof text, ENGINE "%s\n", line);
	ck_assert_int_eq(own_reload(&g_cm, text), 1);
}

/* Writing len bytes in pieces of bs with line_on moves counter key, with
 * line_off it does not. */
static void on_and_off(const char *key, const char *line_on, const char *line_off, size_t len,
		       size_t bs)
{
	cm_set(line_on);
	long long on = write_counting("on", len, bs, key);
	cm_set(line_off);
	long long off = write_counting("off", len, bs, key);
	fprintf(stderr, "config: %zu MiB: %s %lld with '%s', %lld with '%s'\n", len >> 20, key, on,
		line_on, off, line_off);
	ck_assert_msg(on > 0 && off == 0, "%s: %lld with '%s', %lld with '%s'", key, on, line_on,
		      off, line_off);
}

/* writeback_limit: a stream waits for the writeback of what lies further
 * behind its front (writeback_waits); 0 turns the bound off. */
START_TEST(config_writeback_limit)
{
	own_mount_ck(&g_cm, FS_EXT4, "cfg-wb", ENGINE);
	on_and_off("writeback_waits", "writeback_limit = 1M", "writeback_limit = 0", 32u << 20,
		   1u << 20);
	own_unmount_ck(&g_cm);
}
END_TEST

/* inflight: 0 makes every backing write synchronous (no background
 * writes); inflight_mount bounds the jobs of all handles, so with 1M a
 * second job waits for the first (queue_waits). */
START_TEST(config_inflight)
{
	own_mount_ck(&g_cm, FS_EXT4, "cfg-inflight", ENGINE);
	on_and_off("background_writes", "inflight = 8M", "inflight = 0", 16u << 20, 64u << 10);
	cm_set("inflight_mount = 1M");
	/* a wait needs a writer ahead of its worker: on a loaded machine the
	 * worker may win a run, not three */
	long long waits = 0;
	for (int run = 0; run < 3 && waits == 0; run++)
		waits = write_counting("ifm", 32u << 20, 1u << 20, "queue_waits");
	fprintf(stderr, "config_inflight: inflight_mount = 1M: %lld queue waits\n", waits);
	ck_assert_msg(waits > 0, "inflight_mount = 1M: no write waited for room");
	own_unmount_ck(&g_cm);
}
END_TEST

/*
 * force_fallback: on ext4, which has RWF_DONTCACHE here, a stream written
 * and read with it is counted as fallback I/O (written_fallback,
 * read_fallback) and not as uncached, leaves nothing resident, and the
 * filesystem's own probe still says yes in dcfs stat; with no the same
 * stream is uncached again.
 */
START_TEST(config_force_fallback)
{
	own_mount_ck(&g_cm, FS_EXT4, "cfg-fallback", ENGINE);
	size_t len = 32u << 20;
	char *buf = malloc(1u << 20);
	for (int on = 1; on >= 0; on--) {
		cm_set(on ? "force_fallback = yes" : "force_fallback = no");
		const char *keys[] = { "written_fallback", "written_dontcache", "read_fallback",
				       "read_dontcache" };
		long long c0[4], d[4];
		for (int k = 0; k < 4; k++)
			c0[k] = stats_get(g_cm.mnt, "dontcache", keys[k]);
		char p[PATH_MAX], bp[PATH_MAX];
		snprintf(p, sizeof p, "%s", path_at(g_cm.mnt, "film%d.mkv", on));
		snprintf(bp, sizeof bp, "%s", path_at(g_cm.exp, "film%d.mkv", on));
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		ck_assert_int_ge(fd, 0);
		fill_pattern(buf, 1u << 20, 41);
		for (size_t at = 0; at < len; at += 1u << 20)
			ck_assert_int_eq(write(fd, buf, 1u << 20), 1 << 20);
		ck_assert_int_eq(close(fd), 0);
		fd = open(p, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		for (size_t at = 0; at < len; at += 1u << 20)
			ck_assert_int_eq(read(fd, buf, 1u << 20), 1 << 20);
		close(fd);
		for (int k = 0; k < 4; k++)
			d[k] = stats_get(g_cm.mnt, "dontcache", keys[k]) - (c0[k] > 0 ? c0[k] : 0);
		fprintf(stderr,
			"config_force_fallback: %s: written fallback %lld dontcache %lld, read fallback %lld dontcache %lld\n",
			on ? "yes" : "no", d[0], d[1], d[2], d[3]);
		if (on)
			ck_assert_msg(
				d[0] == (long long)len && d[1] == 0 && d[2] == (long long)len &&
					d[3] == 0,
				"force_fallback = yes: written fallback %lld dontcache %lld, read fallback %lld dontcache %lld",
				d[0], d[1], d[2], d[3]);
		else
			ck_assert_msg(
				d[0] == 0 && d[1] == (long long)len && d[3] > 0,
				"force_fallback = no: written fallback %lld dontcache %lld, read dontcache %lld",
				d[0], d[1], d[3]);
		long long res = wait_resident_le(bp, 16, 3 * deadline_scale());
		ck_assert_msg(res >= 0 && res <= 16, "%lld pages of the stream left resident", res);
	}
	char out[16384];
	ck_assert_int_eq(run_cmd(out, sizeof out, "'%s' stat --json '%s'", g_dcfs_bin, g_cm.mnt),
			 0);
	ck_assert_msg(strstr(out, "\"read\":\"yes\",\"write\":\"yes\""),
		      "the filesystem's probe no longer says yes: %s", out);
	ck_assert_msg(strstr(out, "\"force_fallback\":false"), "force_fallback in the JSON: %s",
		      out);
	free(buf);
	own_unmount_ck(&g_cm);
}
END_TEST

/* prefetch: a sequential reader whose requests divide readahead gets the
 * next window read in the background (prefetches); no with no. */
START_TEST(config_prefetch)
{
	own_mount_ck(&g_cm, FS_EXT4, "cfg-prefetch", ENGINE);
	size_t len = 16u << 20;
	char *buf = malloc(len);
	fill_pattern(buf, len, 40);
	ck_assert_int_eq(write_file(path_at(g_cm.exp, "film"), buf, len, 0644), 0);
	long long got[2];
	for (int on = 1; on >= 0; on--) {
		cm_set(on ? "prefetch = yes" : "prefetch = no");
		long long p0 = stats_get(g_cm.mnt, "dontcache", "prefetches");
		int fd = open(path_at(g_cm.mnt, "film"), O_RDONLY);
		ck_assert_int_ge(fd, 0);
		for (size_t at = 0; at < len; at += 65536)
			ck_assert_int_eq(pread(fd, buf, 65536, (off_t)at), 65536);
		close(fd);
		got[on] = stats_get(g_cm.mnt, "dontcache", "prefetches") - (p0 > 0 ? p0 : 0);
	}
	fprintf(stderr, "config_prefetch: 16 MiB in 64 KiB reads: %lld prefetches, %lld with no\n",
		got[1], got[0]);
	ck_assert_msg(got[1] > 0 && got[0] == 0, "prefetches: %lld with yes, %lld with no", got[1],
		      got[0]);
	free(buf);
	own_unmount_ck(&g_cm);
}
END_TEST

Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("table");
	tcase_set_timeout(tc, 120 * deadline_scale());
	tcase_add_test(tc, config_every_key_validated);
	tcase_add_test(tc, config_docs_match_table);
	suite_add_tcase(s, tc);
	tc = tcase_create("behaviour");
	tcase_set_timeout(tc, 120 * deadline_scale());
	tcase_add_checked_fixture(tc, NULL, cm_teardown);
	tcase_add_test(tc, config_write_expire);
	tcase_add_test(tc, config_writeback_limit);
	tcase_add_test(tc, config_inflight);
	tcase_add_test(tc, config_prefetch);
	tcase_add_test(tc, config_force_fallback);
	suite_add_tcase(s, tc);
	return s;
}
