// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Subcommands that do not mount: `dcfs --check-config FILE`,
 * `dcfs --list-config-keys`,
 * `dcfs stat [--json | --prometheus | --files | --watch [SECS]] MOUNTPOINT`
 * and the internal `dcfs --read-config FILE` of reload.c.
 *
 * `dcfs stat` only reads the mount root's virtual xattrs (fuse_xattr.c),
 * so it needs no socket and no privilege of its own: the daemon answers
 * each caller by uid (counters to root, open files to their owner).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"

/* Loads path; prints every error as FILE:LINE: message. */
int cli_load_config(const char *path, struct dcfs_config **out)
{
	struct cfg_errors errs = { 0 };
	int err = config_load(path, out, &errs);

	config_errors_print(&errs, stderr);
	config_errors_free(&errs);
	return err;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * `dcfs --read-config FILE`: the bytes config_load() would parse on stdout
 * and exit 0, or its error message and exit 1.  reload.c runs this so that
 * a read stuck in the kernel holds this process, not the daemon.
 */
int cli_read_config(int argc, char *argv[])
{
	struct cfg_errors errs = { 0 };
	char *buf = NULL;
	ssize_t len;
	int ret = 1;

	if (argc != 3)
		return 2;
	/* Nothing the daemon had open may stay open while this may hang. */
	close_range(3, ~0U, 0);
	len = config_read(argv[2], &buf, &errs);
	if (len >= 0)
		ret = write_all(STDOUT_FILENO, buf, (size_t)len) == 0 ? 0 : 2;
	else if (errs.n > 0)
		write_all(STDOUT_FILENO, errs.msgs[0], strlen(errs.msgs[0]));
	free(buf);
	config_errors_free(&errs);
	return ret;
}

/* The keys dcfs.conf may hold, from the table the parser reads (keys.c). */
int cli_list_config_keys(void)
{
	cfg_key_print(stdout);
	return fflush(stdout) == 0 ? 0 : 1;
}

int cli_check_config(int argc, char *argv[])
{
	struct dcfs_config *cfg;
	char summary[512];

	if (argc != 3) {
		fprintf(stderr, "usage: %s --check-config FILE\n", argv[0]);
		return 2;
	}
	if (cli_load_config(argv[2], &cfg) < 0)
		return 1;
	config_summary(cfg, summary, sizeof(summary));
	printf("%s\n", summary);
	config_free(cfg);
	return 0;
}

/*
 * One call with the kernel's maximum value size: asking for the size first
 * would race with a listing that grows in between.
 */
static char *read_xattr(const char *path, const char *name)
{
	size_t cap = 65536;
	char *buf = malloc(cap + 1);
	ssize_t n;

	if (!buf)
		return NULL;
	n = getxattr(path, name, buf, cap);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

static int report_xattr_error(const char *mnt, const char *what)
{
	if (errno == EACCES)
		fprintf(stderr, "dcfs: %s: %s are shown to root only (%m)\n", mnt, what);
	else
		fprintf(stderr, "dcfs: %s: not a dcfs mount point (%m)\n", mnt);
	return 1;
}

/* ---- --watch: rates from two samples of the Prometheus text ---------- */

#define WATCH_CLASSES 8
/* Shorter intervals measure the sampling more than the traffic. */
#define WATCH_MIN_SECS 0.1

enum {
	W_DC_R,
	W_DC_W,
	W_FB_R,
	W_FB_W,
	W_C_R,
	W_C_W,
	W_K_R,
	W_K_W,
	W_OPENS,
	W_SWITCHES,
	W__N
};

struct sample {
	char cls[WATCH_CLASSES][24];
	double v[WATCH_CLASSES][W__N];
	int n;
	double t;
};

/* Value of label key in a Prometheus line's {...}, unescaped; false if absent. */
static bool prom_label(const char *line, const char *key, char *out, size_t size)
{
	const char *p = strchr(line, '{');
	size_t klen = strlen(key), o = 0;

	while (p && *p && *p != '}') {
		p++;
		const char *eq = strchr(p, '=');

		if (!eq || eq[1] != '"')
			return false;
		bool match = (size_t)(eq - p) == klen && strncmp(p, key, klen) == 0;

		for (p = eq + 2; *p && *p != '"'; p++) {
			char c = *p;

			if (c == '\\' && p[1]) {
				c = *++p;
				if (c == 'n')
					c = '\n';
			}
			if (match && o + 1 < size)
				out[o++] = c;
		}
		if (match) {
			out[o] = '\0';
			return true;
		}
		if (*p)
			p++; /* the closing quote; now at ',' or '}' */
	}
	return false;
}

static int sample_class(struct sample *s, const char *cls)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->cls[i], cls) == 0)
			return i;
	if (s->n == WATCH_CLASSES)
		return -1;
	snprintf(s->cls[s->n], sizeof(s->cls[0]), "%s", cls);
	memset(s->v[s->n], 0, sizeof(s->v[0]));
	return s->n++;
}

static int byte_slot(const char *dir, const char *mode)
{
	int w = strcmp(dir, "write") == 0;

	if (strcmp(mode, "dontcache") == 0)
		return w ? W_DC_W : W_DC_R;
	if (strcmp(mode, "fallback") == 0)
		return w ? W_FB_W : W_FB_R;
	if (strcmp(mode, "kernel") == 0)
		return w ? W_K_W : W_K_R;
	return w ? W_C_W : W_C_R;
}

static void parse_line(struct sample *s, char *line)
{
	char cls[24], dir[16], mode[16];
	char *val = strrchr(line, ' ');
	int c, slot;

	if (line[0] == '#' || !val || !prom_label(line, "class", cls, sizeof(cls)))
		return;
	if (strncmp(line, "dcfs_bytes_total{", 17) == 0) {
		if (!prom_label(line, "direction", dir, sizeof(dir)) ||
		    !prom_label(line, "mode", mode, sizeof(mode)))
			return;
		slot = byte_slot(dir, mode);
	} else if (strncmp(line, "dcfs_opens_total{", 17) == 0) {
		slot = W_OPENS;
	} else if (strncmp(line, "dcfs_switches_total{", 20) == 0) {
		slot = W_SWITCHES;
	} else {
		return;
	}
	c = sample_class(s, cls);
	if (c >= 0)
		s->v[c][slot] = strtod(val + 1, NULL);
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int take_sample(const char *mnt, struct sample *s)
{
	char *text = read_xattr(mnt, "user.dcfs.stats.prometheus");
	char *save, *line;

	if (!text)
		return -errno;
	s->n = 0;
	s->t = mono_now();
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		parse_line(s, line);
	free(text);
	return 0;
}

static void print_rates(const struct sample *a, const struct sample *b)
{
	double dt = b->t - a->t, mib = 1024.0 * 1024.0;
	char when[16];
	time_t now = time(NULL);
	struct tm tm;
	bool any = false;

	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	for (int i = 0; i < b->n; i++) {
		int j = 0;
		double d[W__N];
		bool active = false;

		while (j < a->n && strcmp(a->cls[j], b->cls[i]) != 0)
			j++;
		for (int k = 0; k < W__N; k++) {
			d[k] = b->v[i][k] - (j < a->n ? a->v[j][k] : 0);
			active |= d[k] != 0;
		}
		if (!active)
			continue;
		any = true;
		printf("%-8s %-15s", when, b->cls[i]);
		for (int k = 0; k < W_OPENS; k++)
			printf(" %7.1f", d[k] / mib / dt);
		printf(" %5.0f %4.0f\n", d[W_OPENS], d[W_SWITCHES]);
	}
	if (!any)
		printf("%-8s (idle)\n", when);
	fflush(stdout);
}

/*
 * Prints, every secs, the rates of each class that moved anything: MiB/s
 * through RWF_DONTCACHE, through the fallback and cached, for reads and
 * writes, and the opens and switches of the interval.
 */
static int stat_watch(const char *mnt, double secs, long count)
{
	struct sample s[2];
	int cur = 0;

	if (take_sample(mnt, &s[0]) < 0)
		return report_xattr_error(mnt, "counters");
	printf("every %.1f s: MiB/s by backing I/O (dc RWF_DONTCACHE, fb fallback, c cache,\n"
	       "k kernel passthrough, estimated), opens and switches in the interval\n",
	       secs);
	printf("%-8s %-15s %7s %7s %7s %7s %7s %7s %7s %7s %5s %4s\n", "time", "class", "dc_rd",
	       "dc_wr", "fb_rd", "fb_wr", "c_rd", "c_wr", "k_rd", "k_wr", "opens", "swi");
	for (long i = 0; count <= 0 || i < count; i++) {
		struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };

		while (nanosleep(&ts, &ts) < 0)
			;
		if (take_sample(mnt, &s[!cur]) < 0)
			return report_xattr_error(mnt, "counters");
		print_rates(&s[cur], &s[!cur]);
		cur = !cur;
	}
	return 0;
}

/* ---- --files: the daemon's tab-separated listing, aligned ------------- */

#define FILES_COLS 8

static int stat_files(const char *mnt)
{
	char *text = read_xattr(mnt, "user.dcfs.files");
	size_t width[FILES_COLS] = { 0 };
	char *p, *line, *save;

	if (!text)
		return report_xattr_error(mnt, "open files");
	/* Two passes: widths, then the rows; the last column is not padded. */
	for (int pass = 0; pass < 2; pass++) {
		char *copy = strdup(text);

		if (!copy) {
			free(text);
			return 1;
		}
		for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			int col = 0;

			if (line[0] == '#') {
				if (pass)
					printf("%s\n", line);
				continue;
			}
			for (p = line; col < FILES_COLS; col++) {
				size_t len = strcspn(p, "\t");
				bool last = col == FILES_COLS - 1 || !p[len];

				if (!pass && len > width[col])
					width[col] = len;
				if (pass)
					printf("%-*.*s%s", last ? 0 : (int)width[col], (int)len, p,
					       last ? "\n" : "  ");
				if (last)
					break;
				p += len + 1;
			}
		}
		free(copy);
	}
	free(text);
	return 0;
}

static void stat_usage(FILE *to, const char *prog)
{
	fprintf(to,
		"usage: %s stat [--wide | --json | --prometheus | --files |\n"
		"                 --watch [SECS] [--count N]] MOUNTPOINT\n"
		"  (none)        counters and state, within 100 columns\n"
		"  --wide        every counter, exact\n"
		"  --json        the same as JSON (a stable interface, see dcfs(8))\n"
		"  --prometheus  node_exporter textfile format\n"
		"  --files       the open files: owner, class, mode, bytes, rule\n"
		"  --watch SECS  MiB/s per class every SECS (%.1f to 86400, default 1)\n"
		"  --count N     with --watch: stop after N intervals\n",
		prog, WATCH_MIN_SECS);
}

enum {
	SECS_OK,
	SECS_NAN,
	SECS_RANGE
};

static int parse_secs(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end)
		return SECS_NAN;
	if (!(v >= WATCH_MIN_SECS && v <= 86400))
		return SECS_RANGE;
	*out = v;
	return SECS_OK;
}

/* A number that is not a valid interval is an error of its own. */
static bool watch_secs(const char *s, double *out)
{
	int r = parse_secs(s, out);

	if (r != SECS_OK)
		fprintf(stderr,
			"dcfs stat: --watch %s: the interval must be %.1f to 86400 seconds\n", s,
			WATCH_MIN_SECS);
	return r == SECS_OK;
}

int cli_stat(int argc, char *argv[])
{
	enum {
		TABLE,
		WIDE,
		JSON,
		PROM,
		FILES,
		WATCH
	} mode = TABLE;
	const char *mnt = NULL, *name;
	double secs = 1.0;
	long count = 0;
	bool bad = false;
	char *text;

	for (int i = 2; i < argc && !bad; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			stat_usage(stdout, argv[0]);
			return 0;
		} else if (strcmp(a, "--json") == 0 || strcmp(a, "--prometheus") == 0 ||
			   strcmp(a, "--files") == 0 || strcmp(a, "--wide") == 0) {
			bad = mode != TABLE;
			mode = a[2] == 'j' ? JSON : a[2] == 'p' ? PROM : a[2] == 'w' ? WIDE : FILES;
		} else if (strncmp(a, "--watch", 7) == 0 && (!a[7] || a[7] == '=')) {
			bad = mode != TABLE;
			mode = WATCH;
			if (a[7]) {
				if (!watch_secs(a + 8, &secs))
					return 2;
				/* An optional SECS: a number, not the mount point itself. */
			} else if (i + 1 < argc && (i + 2 < argc || mnt) &&
				   parse_secs(argv[i + 1], &secs) != SECS_NAN) {
				if (!watch_secs(argv[++i], &secs))
					return 2;
			}
		} else if (strcmp(a, "--count") == 0 && i + 1 < argc) {
			count = strtol(argv[++i], NULL, 10);
			bad = count <= 0;
		} else if (strncmp(a, "--count=", 8) == 0) {
			count = strtol(a + 8, NULL, 10);
			bad = count <= 0;
		} else if (!mnt && a[0] != '-') {
			mnt = a;
		} else {
			bad = true;
		}
	}
	if (!mnt || bad || (count && mode != WATCH)) {
		stat_usage(stderr, argv[0]);
		return 2;
	}
	if (mode == WATCH)
		return stat_watch(mnt, secs, count);
	if (mode == FILES)
		return stat_files(mnt);
	name = mode == JSON   ? "user.dcfs.stats"
	       : mode == PROM ? "user.dcfs.stats.prometheus"
	       : mode == WIDE ? "user.dcfs.stats.table.wide"
			      : "user.dcfs.stats.table";
	text = read_xattr(mnt, name);
	if (!text)
		return report_xattr_error(mnt, "counters");
	fputs(text, stdout);
	free(text);
	return 0;
}
