/* First contact (issue 26): what a new user meets before the daemon does
 * anything.
 *
 * TCase install: `make install DESTDIR=...` lays mount.dcfs in /sbin
 *   whatever PREFIX is and the units in /lib/systemd/system; then, in a
 *   private mount namespace that sees only the installed files (the real
 *   /sbin, where this run may have linked mount.dcfs to the build tree, is
 *   covered), an fstab line mounts through `mount -a -T FILE`
 *   (tests/install/fstab.sh).
 * TCase config: without config= the installed /etc/dcfs.conf is used,
 *   config=none and a missing file mean the built-in defaults, a bad one
 *   refuses the mount; the log names the config (tests/install/defconf.sh,
 *   with /etc replaced in a private namespace only).
 * TCase cli: a mount over a live dcfs mount says "already mounted by dcfs"
 *   first; `dcfs stat --help`; `--watch 0.05` names the minimum; the stat
 *   table fits 100 columns (`--wide` has every counter); a failed SIGHUP
 *   reload shows in the root's user.dcfs.policy and in `dcfs stat`.
 *   cp(1) of a film (copy_file_range) through the mount leaves nothing
 *   cached; the cache class keeps the server-side copy.
 * TCase docs: every -o option, stat option, JSON key and Prometheus metric
 *   the code knows is documented (dcfs(8), mount.dcfs(8), README.md); the
 *   dcfs.conf keys are compared with their table in test_config.c.
 *
 * make check sets DCFS_SRCDIR (the source tree) and DCFS_SBINDIR. */
#include "harness.h"
#include "own_mount.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void fresh_dir(char *out, const char *name)
{
	snprintf(out, PATH_MAX, "%s/%s", g_tmpdir, name);
	rm_rf(out);
	ck_assert_int_eq(mkdir(out, 0755), 0);
}

/* ---- install ------------------------------------------------------------ */

static void expect_file(const char *dest, const char *rel, mode_t mode)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof p, "%s%s", dest, rel);
	ck_assert_msg(lstat(p, &st) == 0, "make install did not create %s", rel);
	ck_assert_msg(S_ISREG(st.st_mode) && (st.st_mode & 07777) == mode,
		      "%s: mode %o, expected a regular file %o", rel, st.st_mode, mode);
}

START_TEST(install_layout_and_fstab)
{
	const char *sbindir = getenv("DCFS_SBINDIR");
	ck_assert_msg(sbindir && *sbindir, "DCFS_SBINDIR is not set (run through make check)");
	char dest[PATH_MAX], work[PATH_MAX], out[16384];
	fresh_dir(dest, "destdir");
	fresh_dir(work, "fstab");
	int rc = run_cmd(out, sizeof out,
			 "make -s --no-print-directory -C '%s' install DESTDIR='%s'", srcdir(),
			 dest);
	ck_assert_msg(rc == 0, "make install: %d: %s", rc, out);
	/* mount(8) runs helpers from /sbin only; systemd loads /lib/systemd/system */
	expect_file(dest, "/sbin/mount.dcfs", 0755);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/dcfs", sbindir);
	expect_file(dest, p, 0755);
	expect_file(dest, "/etc/dcfs.conf", 0644);
	const char *units[] = { "dcfs@.service", "dcfs-textfile@.service", "dcfs-textfile@.timer" };
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof p, "/lib/systemd/system/%s", units[i]);
		expect_file(dest, p, 0644);
	}
	snprintf(p, sizeof p, "%s/lib/systemd/system/dcfs@.service", dest);
	size_t n;
	char *unit = slurp(p, &n);
	char want[PATH_MAX + 32];
	snprintf(want, sizeof want, "ExecStart=%s/dcfs ", sbindir);
	ck_assert_msg(unit && strstr(unit, want), "dcfs@.service lacks %s", want);
	free(unit);
	rc = run_cmd(out, sizeof out,
		     "find '%s' -name 'dcfs.8' -o -name 'dcfs.conf.5' -o -name "
		     "'mount.dcfs.8' | wc -l",
		     dest);
	ck_assert_msg(rc == 0 && atoi(out) == 3, "man pages installed: %s", out);

	rc = run_cmd(out, sizeof out,
		     "unshare -m --propagation private sh '%s/tests/install/fstab.sh' "
		     "'%s' '%s' '%s' 2>&1",
		     srcdir(), dest, work, sbindir);
	ck_assert_msg(rc == 0, "fstab mount through the installed helper: %d:\n%s", rc, out);
	fprintf(stderr, "install_layout_and_fstab: %s", out);
	rm_rf(dest);
	rm_rf(work);
}
END_TEST

/* ---- the default config --------------------------------------------------- */

START_TEST(config_default_etc)
{
	char work[PATH_MAX], out[16384];
	fresh_dir(work, "defconf");
	int rc = run_cmd(out, sizeof out,
			 "unshare -m --propagation private sh "
			 "'%s/tests/install/defconf.sh' '%s' '%s' 2>&1",
			 srcdir(), g_dcfs_bin, work);
	ck_assert_msg(rc == 0, "default config: %d:\n%s", rc, out);
	rm_rf(work);
}
END_TEST

/* ---- the command line ------------------------------------------------------ */

static struct own_mount g_im;

static void im_teardown(void)
{
	own_mount_kill(&g_im);
}

START_TEST(cli_already_mounted_first)
{
	own_mount_ck(&g_im, FS_EXT4, "inst-twice", "[global]\ndefault = cache\n");
	char p[PATH_MAX], out[4096];
	snprintf(p, sizeof p, "%s/f", g_im.mnt);
	ck_assert_int_eq(write_file(p, "x", 1, 0644), 0);
	int rc = run_cmd(out, sizeof out, "'%s' -f '%s' '%s' 2>&1", g_dcfs_bin, g_im.exp, g_im.mnt);
	ck_assert_msg(rc != 0, "a second dcfs mounted over a live one: %s", out);
	char want[PATH_MAX + 64];
	snprintf(want, sizeof want, "dcfs: %s is already mounted by dcfs\n", g_im.mnt);
	ck_assert_msg(strncmp(out, want, strlen(want)) == 0 && !strstr(out, "nonempty"),
		      "expected only '%s', got: %s", want, out);
	own_unmount_ck(&g_im);
}
END_TEST

static int longest_line(const char *t)
{
	int most = 0, cur = 0;
	for (; *t; t++) {
		if (*t == '\n') {
			most = cur > most ? cur : most;
			cur = 0;
		} else if ((*t & 0xc0) != 0x80) {
			cur++;
		}
	}
	return cur > most ? cur : most;
}

START_TEST(cli_stat_usage_and_width)
{
	char out[32768];
	int rc = run_cmd(out, sizeof out, "'%s' stat --help", g_dcfs_bin);
	ck_assert_msg(rc == 0 && strstr(out, "--wide") && strstr(out, "--count"),
		      "dcfs stat --help: %d: %s", rc, out);
	rc = run_cmd(out, sizeof out, "'%s' --help", g_dcfs_bin);
	ck_assert_msg(rc == 0 && strstr(out, "--count") && strstr(out, "--wide"),
		      "dcfs --help lacks stat's options: %s", out);
	own_mount_ck(&g_im, FS_EXT4, "inst-stat",
		     "[global]\ndefault = cache\n[class video]\nextensions = mkv\n"
		     "policy = dontcache\n");
	rc = run_cmd(out, sizeof out, "'%s' stat --watch 0.05 '%s' 2>&1", g_dcfs_bin, g_im.mnt);
	ck_assert_msg(rc == 2 && strstr(out, "0.1"), "--watch 0.05 should name the minimum: %d: %s",
		      rc, out);
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/film.mkv", g_im.mnt);
	ck_assert_int_eq(write_file(p, "film", 4, 0644), 0);
	rc = run_cmd(out, sizeof out, "'%s' stat '%s'", g_dcfs_bin, g_im.mnt);
	ck_assert_msg(rc == 0 && strstr(out, "k_rd"), "dcfs stat: %d: %s", rc, out);
	ck_assert_msg(longest_line(out) <= 100, "dcfs stat is %d columns wide:\n%s",
		      longest_line(out), out);
	rc = run_cmd(out, sizeof out, "'%s' stat --wide '%s'", g_dcfs_bin, g_im.mnt);
	ck_assert_msg(rc == 0 && strstr(out, "written_kernel") && strstr(out, "dropped_behind") &&
			      strstr(out, "adopted"),
		      "dcfs stat --wide: %d: %s", rc, out);
	own_unmount_ck(&g_im);
}
END_TEST

START_TEST(cli_failed_reload_visible)
{
	const char *good = "[global]\ndefault = cache\n";
	own_mount_ck(&g_im, FS_EXT4, "inst-reload", good);
	ck_assert_int_eq(own_reload(&g_im, "[global]\ndefault = nonsense\n"), 0);
	char *pol = xattr_str(g_im.mnt, "user.dcfs.policy");
	ck_assert_msg(pol && strstr(pol, "last reload failed at ") && strstr(pol, ":2:"),
		      "root policy after a failed reload: %s", pol ?: strerror(errno));
	free(pol);
	char out[32768];
	int rc = run_cmd(out, sizeof out, "'%s' stat '%s'", g_dcfs_bin, g_im.mnt);
	ck_assert_msg(rc == 0 && strstr(out, "LAST RELOAD failed at"), "dcfs stat: %s", out);
	char *json = xattr_str(g_im.mnt, "user.dcfs.stats");
	ck_assert_msg(json && strstr(json, "\"reload\":{\"failures\":1,\"last_failed\":true"),
		      "JSON: %s", json);
	free(json);
	/* a good reload clears it, the count stays */
	ck_assert_int_eq(own_reload(&g_im, good), 1);
	pol = xattr_str(g_im.mnt, "user.dcfs.policy");
	ck_assert_msg(pol && !strstr(pol, "last reload"), "after a good reload: %s", pol);
	free(pol);
	json = xattr_str(g_im.mnt, "user.dcfs.stats");
	ck_assert_msg(json && strstr(json, "\"reload\":{\"failures\":1,\"last_failed\":false"),
		      "JSON: %s", json);
	free(json);
	own_unmount_ck(&g_im);
}
END_TEST

/* ---- a film copied with cp(1) ----------------------------------------------- */

/*
 * cp uses copy_file_range: a copy inside the backing filesystem left the
 * whole copy in its page cache.  Between streaming files the kernel now
 * copies through the handles, uncached; the cache class keeps the
 * server-side copy.
 */
START_TEST(film_cp_leaves_nothing_cached)
{
	own_mount_ck(&g_im, FS_EXT4, "inst-cp",
		     "[global]\ndefault = cache\nmin_size = 0\n"
		     "[class video]\nextensions = mkv\npolicy = dontcache\n");
	size_t len = 64u << 20;
	char *m = malloc(len);
	fill_pattern(m, len, 2612);
	char src[PATH_MAX], dst[PATH_MAX], bsrc[PATH_MAX], bdst[PATH_MAX], out[4096];
	snprintf(bsrc, sizeof bsrc, "%s/film.mkv", g_im.exp);
	snprintf(bdst, sizeof bdst, "%s/copy.mkv", g_im.exp);
	snprintf(src, sizeof src, "%s/film.mkv", g_im.mnt);
	snprintf(dst, sizeof dst, "%s/copy.mkv", g_im.mnt);
	ck_assert_int_eq(write_file(bsrc, m, len, 0644), 0);
	drop_caches();
	long long w0 = stats_get(g_im.mnt, "dontcache", "written_dontcache") +
		       stats_get(g_im.mnt, "dontcache", "written_fallback");
	int rc = run_cmd(out, sizeof out, "cp '%s' '%s'", src, dst);
	ck_assert_msg(rc == 0, "cp: %s", out);
	/* the copy went through the streaming engine (others' drop_caches can
	 * empty the page cache at any time: the counters are the proof) */
	long long w1 = stats_get(g_im.mnt, "dontcache", "written_dontcache") +
		       stats_get(g_im.mnt, "dontcache", "written_fallback");
	ck_assert_msg(w1 - w0 == (long long)len, "cp wrote %lld bytes uncached of %zu", w1 - w0,
		      len);
	long long a = wait_resident_le(bsrc, 16384 / 4, 5),
		  b = wait_resident_le(bdst, 16384 / 4, 5);
	/* drop-behind keeps two read-ahead windows at most while reading; 0 after */
	ck_assert_msg(a <= 16384 / 4 && b <= 16384 / 4,
		      "after cp of a 64 MiB film: %lld + %lld pages cached", a, b);
	size_t n;
	char *c = slurp(bdst, &n);
	ck_assert_msg(c && n == len && memcmp(c, m, len) == 0, "the copy differs");
	free(c);
	/* the cache class still copies inside the backing filesystem */
	snprintf(src, sizeof src, "%s/doc.txt", g_im.mnt);
	snprintf(dst, sizeof dst, "%s/doc2.txt", g_im.mnt);
	ck_assert_int_eq(write_file(src, m, 1 << 20, 0644), 0);
	char *json = xattr_str(g_im.mnt, "user.dcfs.stats");
	const char *p = json ? strstr(json, "\"copy_file_range\":") : NULL;
	long before = p ? atol(p + 18) : 0;
	free(json);
	rc = run_cmd(out, sizeof out, "cp '%s' '%s' && cmp '%s' '%s'", src, dst, src, dst);
	ck_assert_msg(rc == 0, "cp of a cache-class file: %s", out);
	json = xattr_str(g_im.mnt, "user.dcfs.stats");
	p = json ? strstr(json, "\"copy_file_range\":") : NULL;
	ck_assert_msg(p && atol(p + 18) > before, "no server-side copy for the cache class: %s",
		      json);
	free(json);
	free(m);
	own_unmount_ck(&g_im);
}
END_TEST

/* ---- the documentation covers what the code knows ---------------------------- */

/* Each "quoted" word of text between start and end markers, NUL-separated. */
static int quoted_words(const char *text, const char *start, const char *end, char words[][64],
			int max)
{
	const char *p = strstr(text, start), *stop;
	ck_assert_msg(p, "marker '%s' not found", start);
	stop = end ? strstr(p, end) : p + strlen(p);
	ck_assert_msg(stop, "marker '%s' not found", end);
	int n = 0;
	while ((p = strchr(p, '"')) && p < stop && n < max) {
		const char *q = strchr(p + 1, '"');
		if (!q || q > stop)
			break;
		snprintf(words[n++], 64, "%.*s", (int)(q - p - 1), p + 1);
		p = q + 1;
	}
	return n;
}

/* Man page source with groff's \- and \(em etc. reduced to plain text. */
static char *man_text(const char *rel)
{
	char *t = src_file(rel), *o = t;
	for (const char *s = t; *s;) {
		if (s[0] == '\\' && s[1] == '-') {
			*o++ = '-';
			s += 2;
		} else if (s[0] == '\\' && (s[1] == 'f' || s[1] == '&')) {
			s += s[1] == 'f' ? 3 : 2;
		} else {
			*o++ = *s++;
		}
	}
	*o = 0;
	return t;
}

static void must_mention(const char *doc, const char *docname, const char *word)
{
	ck_assert_msg(strstr(doc, word), "%s does not document '%s'", docname, word);
}

START_TEST(docs_cover_options)
{
	char *options = src_file("fusefs/daemon/options.c");
	char *dcfs8 = man_text("man/dcfs.8");
	char *mount8 = man_text("man/mount.dcfs.8");
	char w[64][64], list[4096], *save;
	/* -o options: the option table, as `dcfs --list-options` prints it */
	ck_assert_int_eq(run_cmd(list, sizeof list, "'%s' --list-options", g_dcfs_bin), 0);
	int n = 0;
	for (char *o = strtok_r(list, "\n", &save); o; o = strtok_r(NULL, "\n", &save)) {
		char *pct = strchr(o, '%');
		if (pct)
			*pct = 0; /* "config=%s" -> "config=" */
		n++;
		if (o[0] != '-' || o[1] == '-')
			must_mention(dcfs8, "dcfs(8)", o);
	}
	ck_assert_int_gt(n, 10);
	/* mount.dcfs passes these on: its page names the dcfs ones */
	char *helper = src_file("fusefs/helper/mount_dcfs.c");
	n = quoted_words(helper, "known[] = {", "NULL", w, 64);
	for (int i = 0; i < n; i++)
		must_mention(mount8, "mount.dcfs(8)", w[i]);
	/* stat's options, in dcfs(8) and in --help */
	char *cli = src_file("fusefs/daemon/cli.c");
	const char *stat_opts[] = { "--wide",  "--json",  "--prometheus",
				    "--files", "--watch", "--count" };
	for (size_t i = 0; i < sizeof stat_opts / sizeof *stat_opts; i++) {
		must_mention(dcfs8, "dcfs(8)", stat_opts[i]);
		must_mention(cli, "stat --help (daemon/cli.c)", stat_opts[i]);
		must_mention(options, "dcfs --help (daemon/options.c)", stat_opts[i]);
	}
	must_mention(dcfs8, "dcfs(8)", "config=none");
	free(options);
	free(dcfs8);
	free(mount8);
	free(helper);
	free(cli);
}
END_TEST

START_TEST(docs_cover_stats)
{
	char *stats = src_file("fusefs/base/stats.c");
	char *dcfs8 = man_text("man/dcfs.8");
	char *readme = src_file("README.md");
	char w[64][64];
	/* per-class JSON keys */
	int n = quoted_words(stats, "kind_names[ST__COUNT] = {", "};", w, 64);
	ck_assert_int_gt(n, 20);
	for (int i = 0; i < n; i++)
		must_mention(dcfs8, "dcfs(8) (JSON)", w[i]);
	/* top-level JSON objects and the keys of each, as the daemon prints them */
	own_mount_ck(&g_im, FS_EXT4, "inst-docs", "[global]\ndefault = cache\n");
	char *json = xattr_str(g_im.mnt, "user.dcfs.stats");
	char *prom = xattr_str(g_im.mnt, "user.dcfs.stats.prometheus");
	ck_assert_ptr_nonnull(json);
	ck_assert_ptr_nonnull(prom);
	own_unmount_ck(&g_im);
	/* keys only; the per-opcode counts of "requests" are FUSE's own names */
	const char *rq = strstr(json, "\"requests\":{");
	const char *rq_end = rq ? strchr(rq, '}') : NULL;
	for (const char *p = json; (p = strchr(p, '"'));) {
		const char *q = strchr(p + 1, '"');
		char key[64];
		if (!q)
			break;
		snprintf(key, sizeof key, "%.*s", (int)(q - p - 1), p + 1);
		int is_key = q[1] == ':', in_rq = rq && p > rq && p < rq_end;
		p = q + 1;
		if (is_key && !in_rq)
			must_mention(dcfs8, "dcfs(8) (JSON)", key);
	}
	/* every Prometheus metric, in dcfs(8) and README.md */
	for (const char *p = prom; (p = strstr(p, "# TYPE "));) {
		char metric[64];
		ck_assert_int_eq(sscanf(p, "# TYPE %63s", metric), 1);
		must_mention(dcfs8, "dcfs(8)", metric);
		must_mention(readme, "README.md", metric);
		p += 7;
	}
	ck_assert_msg(strstr(prom, "mode=\"kernel\""), "no kernel byte series");
	must_mention(dcfs8, "dcfs(8)", "kernel");
	free(json);
	free(prom);
	free(stats);
	free(dcfs8);
	free(readme);
}
END_TEST

Suite *install_suite(void)
{
	Suite *s = suite_create("install");
	TCase *tc = tcase_create("install");
	tcase_set_timeout(tc, 180 * deadline_scale());
	tcase_add_test(tc, install_layout_and_fstab);
	suite_add_tcase(s, tc);
	tc = tcase_create("config");
	tcase_set_timeout(tc, 60 * deadline_scale());
	tcase_add_test(tc, config_default_etc);
	suite_add_tcase(s, tc);
	tc = tcase_create("cli");
	tcase_set_timeout(tc, 60 * deadline_scale());
	tcase_add_checked_fixture(tc, NULL, im_teardown);
	tcase_add_test(tc, cli_already_mounted_first);
	tcase_add_test(tc, cli_stat_usage_and_width);
	tcase_add_test(tc, cli_failed_reload_visible);
	tcase_add_test(tc, film_cp_leaves_nothing_cached);
	suite_add_tcase(s, tc);
	tc = tcase_create("docs");
	tcase_set_timeout(tc, 60 * deadline_scale());
	tcase_add_checked_fixture(tc, NULL, im_teardown);
	tcase_add_test(tc, docs_cover_options);
	tcase_add_test(tc, docs_cover_stats);
	suite_add_tcase(s, tc);
	return s;
}
