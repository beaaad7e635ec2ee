#!/bin/sh
# Guest part of the fuse-pt stage (T_MODE=script T_SCRIPT=fuse-pt-guest.sh):
# FUSE passthrough with uncached backing I/O (patches 0021-0022), checked
# by fuse_pt_test, which is its own FUSE server, with the backing files on
# F2FS, ext4 and xfs, and the refusal on tmpfs; on F2FS also the page cache
# invalidation after direct writes of a non-passthrough open (dio, patch 24).
# Disks (made on the host by test.sh): ubda F2FS, ubdb ext4, ubdc xfs.
# T_FUSE_PT=control (the unpatched kernel; only ubda): the kernel must not
# offer FUSE_PASSTHROUGH_DONTCACHE, and opens using its flags must fail.
# $1 = directory of fuse_pt_test, $2 = mount point.
bin=$1 mnt=$2 rc=0
t=$bin/fuse_pt_test
backing=$mnt/fuse-pt-backing

# Flusher off (as in dcfs-guest.sh) unless T_WB=default: only the uncached writes' own kick can
# get the backing files written back and dropped, so 0 resident pages after
# the writes is their doing, not the periodic flusher's.
# T_WB=default: the kernel's settings (periodic writeback on) instead.
if [ "${T_WB:-off}" != default ]; then
	echo 0 > /proc/sys/vm/dirty_writeback_centisecs
	echo 360000 > /proc/sys/vm/dirty_expire_centisecs
	echo 90 > /proc/sys/vm/dirty_ratio
	echo 80 > /proc/sys/vm/dirty_background_ratio
fi

run() {	# fuse_pt_test arguments
	echo "-- fuse_pt_test $*"
	"$t" "$@" || rc=1
}

# B2 with its window widened by the attrdelay module (test/attrdelay.c;
# test-x86.sh builds it against the booted kernel's headers package; UML
# has no modules): $1 = backing directory
attrrace_delay() {
	ko=$bin/attrdelay.ko
	if [ ! -f "$ko" ]; then
		echo "-- attrrace-delay: not run (no $ko: UML, or no headers)"
		return
	fi
	# the completions run on the CPUs that submitted: one queue per CPU?
	echo "-- $(ls -d /sys/block/${DISK#/dev/}c/mq/* 2>/dev/null | wc -l) hardware queues on ${DISK}c"
	if ! insmod "$ko"; then
		echo "FAIL: insmod $ko"
		rc=1
		return
	fi
	run attrrace-delay "$1"
	rmmod attrdelay || { echo "FAIL: rmmod attrdelay"; rc=1; }
}

# B6 over a lower FUSE mount: the passthrough write holds the upper FUSE
# super block's sb_writers and the backing write takes the lower one's, of
# the same lock class (fuse), so lockdep reports recursive locking.  That
# is mainline's code (fuse_passthrough_write_iter(), backing_file_write_iter())
# and two different super blocks, not this series; lockdep's checking is off
# for this case only (the rest of the boot keeps it): $1 = backing directory
stacked() {
	pl=/proc/sys/kernel/prove_locking
	old=$(cat "$pl" 2>/dev/null)
	[ -z "$old" ] || echo 0 > "$pl"
	run stacked "$1"
	[ -z "$old" ] || echo "$old" > "$pl"
}

# $1 = file system, $2 = device, $3... = subcommands run on a backing
# directory there
on_fs() {
	fs=$1 dev=$2
	shift 2
	echo "== $fs on $dev"
	if ! mount -t "$fs" "$dev" "$mnt"; then
		echo "FAIL: mounting $fs on $dev"
		rc=1
		return
	fi
	# a fresh device's share of the background threshold is ~0, which
	# would start background writeback at the first dirty page (see
	# dontcache_test.c flusher_off()); reset below, the sum must stay <= 100
	min_ratio=/sys/class/bdi/$(stat -c %Hd:%Ld "$mnt")/min_ratio
	echo 50 > "$min_ratio"
	mkdir -p "$backing"
	for cmd in "$@"; do
		if [ "$cmd" = attrrace-delay ]; then
			attrrace_delay "$backing"
		elif [ "$cmd" = stacked ]; then
			stacked "$backing"
		elif [ "$cmd" = stacked-blk ]; then
			# the lower mount fuseblk (ntfs-3g's kind) on the
			# first disk, unmounted while xfs is
			export FUSE_PT_BLKDEV=${DISK:-/dev/ubd}a
			run stacked-blk "$backing"
			unset FUSE_PT_BLKDEV
		else
			run "$cmd" "$backing"
		fi
	done
	echo 0 > "$min_ratio"
	umount "$mnt" || { echo "FAIL: umount $fs"; rc=1; }
}

if [ "${T_FUSE_PT:-patched}" = control ]; then
	run offer expect-no
	on_fs f2fs ${DISK:-/dev/ubd}a unnegotiated
	exit $rc
fi

# T_FUSE_PT=attrrace: only B2's and B6's cases, on xfs
if [ "${T_FUSE_PT:-patched}" = attrrace ]; then
	on_fs xfs ${DISK:-/dev/ubd}c attrrace attrrace-delay stacked stacked-blk
	exit $rc
fi

# The private extensions are offered only while the fuse module parameter
# passthrough_private is on (guest-init.sh turns it on): B3.
param=/sys/module/fuse/parameters/passthrough_private
if [ -e "$param" ]; then
	echo N > "$param"
	echo "fuse.passthrough_private=$(cat "$param")"
else
	echo "FAIL: no $param"
	rc=1
fi
run offer expect-no
[ ! -e "$param" ] || echo Y > "$param"
echo "fuse.passthrough_private=$(cat "$param" 2>/dev/null)"
run offer expect-yes
on_fs f2fs ${DISK:-/dev/ubd}a uncached mixed unnegotiated dio
on_fs ext4 ${DISK:-/dev/ubd}b uncached mixed unnegotiated
on_fs xfs ${DISK:-/dev/ubd}c uncached mixed unnegotiated attrrace attrrace-delay stacked stacked-blk

echo "== tmpfs (no RWF_DONTCACHE)"
if mount -t tmpfs -o size=64m tmpfs "$mnt"; then
	mkdir -p "$backing"
	run refuse "$backing"
	umount "$mnt" || { echo "FAIL: umount tmpfs"; rc=1; }
else
	echo "FAIL: mounting tmpfs"
	rc=1
fi
exit $rc
