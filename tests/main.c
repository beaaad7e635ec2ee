/* dcfs integration test runner.
 *
 * Suites "files", "dirs", "meta", "locks", "perms" each get one TCase per
 * configuration (backing filesystem x mount method); the "cli" suite tests
 * the command line and the mount helper. Each configured TCase mounts dcfs
 * once in an unchecked fixture and its last test unmounts and checks the
 * daemon's exit status and log.
 *
 * Environment: DCFS_BIN, MOUNT_DCFS_BIN (required), DCFS_SANITIZED=1 (longer
 * deadlines), DCFS_TEST_SELF=1 (run the suites against a bind mount of the
 * backing dir instead of dcfs: validates the tests themselves),
 * DCFS_TEST_CONFIGS=ext4-dcfs,xfs-dcfs,... (subset), plus Check's
 * CK_RUN_SUITE / CK_RUN_CASE / CK_FORK / CK_VERBOSITY.
 * Exit status: 0 all passed, 1 failures, 77 skipped (SKIP: reason printed).
 */
#include "harness.h"

#include <stdlib.h>
#include <unistd.h>

Suite *policy_suite(void);	/* test_policy.c */
Suite *stream_suite(void);	/* test_stream*.c */
Suite *security_suite(void);	/* test_security.c */
Suite *scale_suite(void);	/* test_scale.c */
Suite *ops_suite(void);		/* test_ops.c */
Suite *passthrough_suite(void); /* test_passthrough.c */
Suite *uring_suite(void);	/* test_uring.c */
Suite *coherence_suite(void);	/* test_coherence.c */
Suite *install_suite(void);	/* test_install.c */
Suite *config_suite(void);	/* test_config.c */
Suite *mountopts_suite(void);	/* test_mountopts.c */
Suite *hotset_suite(void);	/* test_hotset.c */

static const struct config configs[] = {
	{ "ext4-dcfs", FS_EXT4, MM_DAEMON, NULL, NULL, 0 },
	{ "xfs-dcfs", FS_XFS, MM_DAEMON, NULL, NULL, 0 },
	{ "ext4-helper", FS_EXT4, MM_HELPER, NULL, NULL, 0 },
	/* every file uncached: all I/O through the streaming engine */
	{ "ext4-dontcache", FS_EXT4, MM_DAEMON,
	  "[global]\ndefault = dontcache\nmin_size = 0\nwindow = 64K\nreadahead = 64K\n", NULL, 0 },
	/* auto policy switching to dontcache after 1M of sequential I/O */
	{ "xfs-auto", FS_XFS, MM_DAEMON,
	  "[global]\ndefault = auto\nmin_size = 0\nauto_threshold = 1M\nwindow = 128K\n"
	  "readahead = 256K\n\n[class video]\nextensions = mkv\npolicy = dontcache-read\n",
	  NULL, 0 },
	/* cached files forwarded by the daemon instead of kernel passthrough;
	 * and the kernel's permission checks honour POSIX ACLs */
	{ "ext4-fwd", FS_EXT4, MM_DAEMON, NULL, "nopassthrough,acl", 0 },
	/* mounted over its own backing directory (issue 38 #4); requests
	 * over /dev/fuse, not io_uring (lock waits take another path there) */
	{ "ext4-inplace", FS_EXT4, MM_DAEMON, NULL, "nouring", 1 },
	{ "ext4-bind", FS_EXT4, MM_BIND, NULL, NULL, 0 },
	{ "xfs-bind", FS_XFS, MM_BIND, NULL, NULL, 0 },
};
#define NCONFIGS (int)(sizeof configs / sizeof configs[0])

#define FX(i)                               \
	static void fx_setup_##i(void)      \
	{                                   \
		fixture_setup(&configs[i]); \
	}
FX(0)
FX(1)
FX(2)
FX(3)
FX(4)
FX(5)
FX(6)
FX(7)
FX(8)
static void (*const fx_setup[])(void) = { fx_setup_0, fx_setup_1, fx_setup_2,
					  fx_setup_3, fx_setup_4, fx_setup_5,
					  fx_setup_6, fx_setup_7, fx_setup_8 };

START_TEST(zz_unmount_and_check_daemon)
{
	check_unmount_and_daemon();
}
END_TEST

static int config_enabled(int i)
{
	const char *self = getenv("DCFS_TEST_SELF");
	int selfmode = self && atoi(self);
	if ((configs[i].mm == MM_BIND) != selfmode)
		return 0;
	const char *want = getenv("DCFS_TEST_CONFIGS");
	if (!want || !*want)
		return 1;
	char buf[512];
	snprintf(buf, sizeof buf, ",%s,", want);
	char key[64];
	snprintf(key, sizeof key, ",%s,", configs[i].name);
	return strstr(buf, key) != NULL;
}

static Suite *make_suite(const char *name, void (*add)(TCase *))
{
	Suite *s = suite_create(name);
	for (int i = 0; i < NCONFIGS; i++) {
		if (!config_enabled(i))
			continue;
		TCase *tc = tcase_create(configs[i].name);
		tcase_add_unchecked_fixture(tc, fx_setup[i], fixture_teardown);
		tcase_set_timeout(tc, 120 * deadline_scale());
		g_adding_cfg = &configs[i];
		add(tc);
		tcase_add_test(tc, zz_unmount_and_check_daemon);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	int rc = harness_init();
	if (rc != 0)
		return rc;
	double t0 = now_s();
	SRunner *sr = srunner_create(make_suite("files", add_files_tests));
	srunner_add_suite(sr, make_suite("dirs", add_dirs_tests));
	srunner_add_suite(sr, make_suite("meta", add_meta_tests));
	srunner_add_suite(sr, make_suite("locks", add_locks_tests));
	srunner_add_suite(sr, make_suite("perms", add_perms_tests));
	const char *self = getenv("DCFS_TEST_SELF");
	if (!(self && atoi(self))) {
		srunner_add_suite(sr, cli_suite());
		srunner_add_suite(sr, policy_suite());
		srunner_add_suite(sr, stream_suite());
		srunner_add_suite(sr, security_suite());
		srunner_add_suite(sr, scale_suite());
		srunner_add_suite(sr, ops_suite());
		srunner_add_suite(sr, passthrough_suite());
		srunner_add_suite(sr, uring_suite());
		srunner_add_suite(sr, coherence_suite());
		srunner_add_suite(sr, install_suite());
		srunner_add_suite(sr, config_suite());
		srunner_add_suite(sr, mountopts_suite());
		srunner_add_suite(sr, hotset_suite());
	}
	if (!getenv("CK_FORK"))
		srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	harness_cleanup();
	if (harness_verify_clean() < 0)
		failed++;
	printf("dcfs-tests: runtime %.1fs\n", now_s() - t0);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
