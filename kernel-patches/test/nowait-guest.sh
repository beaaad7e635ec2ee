#!/bin/sh
# Guest part of the nowait-block stage (T_MODE=script): F2FS on a slow
# null_blk (parameters on the kernel command line: completion after
# 20 ms, queue depth 1), then dontcache_test nowaitblock (B4).
# $1 = directory of dontcache_test, $2 = mount point.
bin=$1 mnt=$2
echo "nowait-block: $(uname -r), $(nproc) CPU(s), null_blk completion_nsec=$(cat /sys/module/null_blk/parameters/completion_nsec) hw_queue_depth=$(cat /sys/module/null_blk/parameters/hw_queue_depth)"
mkfs.f2fs -q -f /dev/nullb0 > /dev/null || exit 1
mount -t f2fs /dev/nullb0 "$mnt" || exit 1
# no dirty throttling of the test's own writes (it would refuse the
# RWF_NOWAIT writes before they get anywhere): high thresholds, and the
# fresh device's share of them (see dontcache_test.c flusher_off())
echo 90 > /proc/sys/vm/dirty_ratio
echo 80 > /proc/sys/vm/dirty_background_ratio
echo 50 > "/sys/class/bdi/$(stat -c %Hd:%Ld "$mnt")/min_ratio"
"$bin/dontcache_test" nowaitblock "$mnt"
rc=$?
umount "$mnt" || rc=1
exit $rc
