#!/bin/sh
# Guest part of test-x86's largefolio stage (T_MODE=script): xfs on
# ${DISK}a (made on the host), THP always (kernel command line); then
# test/large_folio_test.c.  Flusher off unless
# T_WB=default, as in the other stages.
# $1 = directory of the test programs, $2 = mount point.
bin=$1 mnt=$2
if [ "${T_WB:-off}" != default ]; then
	echo 0 > /proc/sys/vm/dirty_writeback_centisecs
	echo 360000 > /proc/sys/vm/dirty_expire_centisecs
	echo 90 > /proc/sys/vm/dirty_ratio
	echo 80 > /proc/sys/vm/dirty_background_ratio
fi
echo "largefolio: $(uname -r), $(nproc) CPUs, writeback ${T_WB:-off} (dirty_writeback_centisecs $(cat /proc/sys/vm/dirty_writeback_centisecs))"
mount -t xfs "${DISK}a" "$mnt" || { echo "FAIL: mount xfs ${DISK}a"; exit 1; }
echo 50 > "/sys/class/bdi/$(stat -c %Hd:%Ld "$mnt")/min_ratio"
"$bin/large_folio_test" "$mnt" "${T_LF_ROUNDS:-3}"
rc=$?

# Reclaim under memory pressure (patch 4's deferral): 512 MiB overwritten
# uncached from a memory cgroup limited to 64 MiB
cg=/sys/fs/cgroup
if mount -t cgroup2 none $cg 2>/dev/null || [ -e $cg/cgroup.controllers ]; then
	echo +memory > $cg/cgroup.subtree_control
	mkdir -p $cg/lf
	echo 64M > $cg/lf/memory.max
	echo "== pressure: memory.max $(cat $cg/lf/memory.max)"
	sh -c "echo \$\$ > $cg/lf/cgroup.procs && exec '$bin/large_folio_test' pressure '$mnt' 512" || rc=1
	echo "memory.events: $(tr '\n' ' ' < $cg/lf/memory.events)"
	echo "memory.peak: $(cat $cg/lf/memory.peak 2>/dev/null)"
	grep -q '^oom_kill 0' $cg/lf/memory.events ||
		{ echo "FAIL: OOM kills in the cgroup"; rc=1; }
else
	echo "FAIL: no cgroup2"
	rc=1
fi
echo 0 > "/sys/class/bdi/$(stat -c %Hd:%Ld "$mnt")/min_ratio"
umount "$mnt" || { echo "FAIL: umount xfs"; rc=1; }
exit $rc
