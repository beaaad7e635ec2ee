#!/bin/bash
# Issue 23's dcfs-stage flake in isolation: uncached writes that end while
# a WB_SYNC_ALL writeback of the same F2FS is running (test/wbsync_race.c,
# test/wbsync-race-guest.sh).  One boot per kernel in WBSYNC_KERNELS
# (default: the patched kernel); WBSYNC_ROUNDS (30), WBSYNC_WAIT_MS (1000),
# WBSYNC_CONTROL=1 (the rounds again without the fsync loop).
# null_blk completes from a timer after 100 us with queue depth 2, so that
# fsync's submission waits for tags and the flusher runs meanwhile.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/uml-run.sh"

ensure_deps
RUN=$CACHE/run/wbsync-race
rm -rf "$RUN"
mkdir -p "$RUN/bin" "$RUN/mnt"
gcc -O2 -Wall -Wextra -Werror -static -I"$KP_DIR/../include" -o "$RUN/bin/wbsync_race" \
	"$KP_DIR/test/wbsync_race.c" || die "building wbsync_race failed"
cp "$KP_DIR/test/wbsync-race-guest.sh" "$RUN/"
make_f2fs_image "$RUN/f2fs.img" 64M	# ubd0 must exist; unused
i=0
for kern in ${WBSYNC_KERNELS:-$CACHE/build/patched/out/linux}; do
	i=$((i + 1))
	name=wbsync-$i
	echo "== $name: $kern"
	UML_EXTRA="T_SCRIPT=wbsync-race-guest.sh W_ROUNDS=${WBSYNC_ROUNDS:-30} W_WAIT_MS=${WBSYNC_WAIT_MS:-1000} W_CONTROL=${WBSYNC_CONTROL:-0} null_blk.nr_devices=1 null_blk.memory_backed=1 null_blk.bs=4096 null_blk.gb=1 null_blk.irqmode=2 null_blk.completion_nsec=100000 null_blk.hw_queue_depth=2" \
		uml_boot "$kern" "$name" script "$RUN" "$RUN/f2fs.img" 1800 1G
	kernel_log_clean "$RUN" "$name" || die "kernel problems in $name"
	grep -E "^(==|cmd:|round|rounds=)" "$RUN/$name.out"
	[ "$(cat "$RUN/$name.rc" 2>/dev/null)" = 0 ] || die "$name failed"
done
rm -f "$RUN/f2fs.img"
