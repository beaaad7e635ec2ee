/* The "stream" suite's shared part (tests/test_stream.c): one daemon per
 * TCase (stream-ext4, stream-xfs, stream-btrfs) with STREAM_CONF, whose
 * tests live in one file per mechanism -- test_stream_residency.c (page
 * cache left by streams), test_stream_integrity.c (data through every I/O
 * path, the random-operation model, kill -9), test_stream_writes.c (the
 * write engine: coalescing, one request per unaligned 1 MiB write, adopted
 * request buffers), test_stream_reads.c (fuse_readahead, passthrough_reads)
 * and test_stream_errors.c (ENOSPC, EDQUOT, deferred errors, EIO, set-id
 * bits, write errors, and the same for kernel-served writes).  Each file adds its tests to a TCase in the order
 * stream_suite() calls it. */
#ifndef DCFS_TESTS_STREAM_H
#define DCFS_TESTS_STREAM_H

#include "own_mount.h"

enum skind {
	SK_EXT4,
	SK_XFS,
	SK_BTRFS
};

#define WINDOW_PAGES 256 /* window = 1M */
#define SLACK_PAGES 64
#define BIG (64u << 20)

/*
 * Each TCase's config: one class per policy, auto below /auto; the daemon's
 * engine writes every stream (passthrough_writes = no), these are the
 * engine's tests.  KW_CONF: the same with kernel-served writes (write
 * streams on ext4 and xfs written by the kernel, io/writebehind.c).
 */
#define STREAM_GLOBAL           \
	"[global]\n"            \
	"default = cache\n"     \
	"min_size = 0\n"        \
	"auto_threshold = 1M\n" \
	"window = 1M\n"         \
	"readahead = 256K\n"    \
	"writeback_limit = 4M\n"
#define STREAM_CLASSES               \
	"\n"                         \
	"[class video]\n"            \
	"extensions = mkv\n"         \
	"policy = dontcache\n"       \
	"\n"                         \
	"[class audio]\n"            \
	"extensions = flac\n"        \
	"policy = dontcache-read\n"  \
	"\n"                         \
	"[class rec]\n"              \
	"extensions = rec\n"         \
	"policy = dontcache-write\n" \
	"\n"                         \
	"[class data]\n"             \
	"extensions = dat\n"         \
	"policy = cache\n"           \
	"\n"                         \
	"[dir /auto]\n"              \
	"policy = auto\n"
#define STREAM_CONF STREAM_GLOBAL "passthrough_writes = no\n" STREAM_CLASSES
#define KW_CONF STREAM_GLOBAL STREAM_CLASSES
extern const char *const sk_names[];
extern enum skind g_sk;		 /* the TCase's backing filesystem */
extern struct own_mount g_sm;	 /* its daemon */
extern char g_sm_root[PATH_MAX]; /* its backing fs */
extern struct own_mount g_one;	 /* a second daemon of a test, killed at teardown */

/* Through the TCase's mount, and in its exported backing dir. */
#define SM(...) path_at(g_sm.mnt, __VA_ARGS__)
#define SE(...) path_at(g_sm.exp, __VA_ARGS__)

/* Every test starts with st_begin(): the daemon is up, the log marked. */
#define st_begin() st_begin_(__func__)
void st_begin_(const char *name);

/* Resident pages a streamed file may keep after close. */
long long max_left(void);
/* The counter a streamed read or write of this TCase's fs adds to. */
const char *dc_counter(int write);
/* BIG bytes of fill_pattern(seed), malloc'd. */
unsigned char *big_pattern(unsigned seed);
void write_all_chunks(int fd, const unsigned char *buf, size_t len, size_t rs);
void read_compare(const char *path, const unsigned char *want, size_t len, size_t rs);
uint32_t xs32(uint32_t *s);

/* DCFS_STREAM_ONLY=name[,name...] runs only those cases (and the unmount). */
int stream_test_wanted(const char *name);
#define ADD_STREAM_TEST(tc, fn)                 \
	do {                                    \
		if (stream_test_wanted(#fn))    \
			tcase_add_test(tc, fn); \
	} while (0)

/* Each mechanism's tests, added to the TCase of backing fs k. */
void stream_residency_tests(TCase *tc, enum skind k);
void stream_integrity_tests(TCase *tc, enum skind k);
void stream_kill9_tests(TCase *tc, enum skind k);
void stream_coalescing_tests(TCase *tc, enum skind k);
void stream_request_tests(TCase *tc, enum skind k);
void stream_reads_tests(TCase *tc, enum skind k);
void stream_space_tests(TCase *tc, enum skind k);
void stream_error_tests(TCase *tc, enum skind k);
/* What each leaves behind, undone at the TCase's teardown. */
void stream_integrity_cleanup(void);
void stream_errors_cleanup(void);

#endif
