#!/bin/sh
# Guest side of scripts/wbsync-race.sh: F2FS on null_blk (parameters from
# the kernel command line), periodic writeback off, then wbsync_race.
# W_ROUNDS (30), W_WAIT_MS (1000); W_CONTROL=1: the same rounds again
# without the fsync loop.
bin=$1 mnt=$2
echo "== wbsync-race: $(uname -r), $(nproc) CPU(s), null_blk irqmode=$(cat /sys/module/null_blk/parameters/irqmode) completion_nsec=$(cat /sys/module/null_blk/parameters/completion_nsec) hw_queue_depth=$(cat /sys/module/null_blk/parameters/hw_queue_depth)"
mkfs.f2fs -q -f /dev/nullb0 > /dev/null || exit 1
mount -t f2fs /dev/nullb0 "$mnt" || exit 1
if [ "${T_WB:-off}" != default ]; then
	echo 0 > /proc/sys/vm/dirty_writeback_centisecs
	echo 360000 > /proc/sys/vm/dirty_expire_centisecs
fi
echo "cmd: wbsync_race $mnt ${W_ROUNDS:-30} ${W_WAIT_MS:-1000} (dirty_writeback_centisecs $(cat /proc/sys/vm/dirty_writeback_centisecs))"
# with periodic writeback on, whatever is left must be gone after
# dirty_expire_centisecs and a few flusher intervals
if [ "${T_WB:-off}" = default ]; then
	W_SETTLE_MS=$(( $(cat /proc/sys/vm/dirty_expire_centisecs) * 10 + 4 * $(cat /proc/sys/vm/dirty_writeback_centisecs) * 10 ))
	export W_SETTLE_MS
fi
"$bin/wbsync_race" "$mnt" "${W_ROUNDS:-30}" "${W_WAIT_MS:-1000}"
rc=$?
if [ "${W_CONTROL:-0}" = 1 ]; then
	echo "cmd: wbsync_race $mnt ${W_ROUNDS:-30} ${W_WAIT_MS:-1000} nosync (control)"
	"$bin/wbsync_race" "$mnt" "${W_ROUNDS:-30}" "${W_WAIT_MS:-1000}" nosync || rc=1
fi
umount "$mnt"
exit $rc
