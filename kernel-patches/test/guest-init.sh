#!/bin/sh
# PID 1 of the test guests: UML (root is the host's / on hostfs, read-write)
# and x86-64 under QEMU (scripts/qemu-x86.sh: the host's / over 9p,
# read-only, the results directory T_RUN mounted over itself from the 9p
# share "out").  Parameters come from the kernel command line as
# environment variables:
#   T_MODE   run | quick | control | bench | dcfs | blockfs | script
#   T_SCRIPT (T_MODE=script) the script in T_RUN to run; it sets up its own
#            devices, nothing is mounted first
#   T_RUN    host directory for results (visible through hostfs)
#   T_NAME   name used for result files
#   T_DISK   prefix of the disks' device names: /dev/ubd (UML, default) or
#            /dev/vd (virtio); exported to the stage scripts as DISK
#   T_DEV    block device holding the F2FS (default ${DISK}a)
#   T_MKFS   1: make the F2FS on T_DEV first (e.g. a null_blk device)
#   T_RACE   rounds of the unlink/truncate/umount race after "run" (3)
#   T_GCWORK rounds of the write/delete/GC workload after the race (0)
# Results: $T_RUN/$T_NAME.out (program output), $T_NAME.rc (exit status),
# $T_NAME.dmesg (kernel log).  The guest powers off at the end.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null	# x86: mounted already
DISK=${T_DISK:-/dev/ubd}
export DISK
# the series' private FUSE passthrough extensions (dcfs uses them) are off
# unless asked for; the patched kernels' stages want them
p=/sys/module/fuse/parameters/passthrough_private
[ ! -e $p ] || [ "${T_FUSE_PRIVATE:-1}" = 0 ] || echo Y > $p
# QEMU: the results directory is the host's, shared read-write as "out"
if [ "${T_DISK:-}" = /dev/vd ]; then
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out "$T_RUN" ||
		echo "guest: mounting the 9p share out on $T_RUN failed"
fi
# Private /tmp and /run, unless the results directory or this repository
# live there (a cache or a clone under /tmp): then keep the host's.
kp=$(cd "$(dirname "$0")/.." && pwd)
for d in /tmp /run; do
	case "$T_RUN/ $kp/" in
	"$d"/*|*" $d"/*) ;;
	*) mount -t tmpfs tmpfs "$d" ;;
	esac
done

out=$T_RUN/$T_NAME.out
rc=1
mnt=$T_RUN/mnt
bin=$T_RUN/bin

dev=${T_DEV:-${DISK}a}
echo "guest: $(uname -r) mode=$T_MODE dev=$dev" > "$out"
if [ "${T_MKFS:-0}" = 1 ]; then
	echo "guest: mkfs.f2fs $dev ($(cat /sys/block/${dev#/dev/}/queue/logical_block_size)-byte blocks)" >> "$out"
	mkfs.f2fs -q -f -O extra_attr,compression "$dev" >> "$out" 2>&1
fi
if [ "$T_MODE" = script ]; then
	# a benchmark script that sets up its own devices (scripts/bench-seeds.sh)
	"$T_RUN/$T_SCRIPT" "$bin" "$mnt" >> "$out" 2>&1
	rc=$?
elif [ "$T_MODE" = blockfs ]; then
	# raw ubd device and the buffer_head file systems (no F2FS)
	"$kp/test/blockfs-guest.sh" "$bin" "$mnt" >> "$out" 2>&1
	rc=$?
elif mount -t f2fs "$dev" "$mnt" >> "$out" 2>&1; then
	case "$T_MODE" in
	run)
		"$bin/dontcache_test" run "$mnt" "$dev" "/sys/fs/f2fs/${dev#/dev/}" \
			"$T_RUN/host" >> "$out" 2>&1
		rc=$?
		"$bin/dontcache_test" race "$mnt" "$dev" "${T_RACE:-3}" \
			>> "$out" 2>&1 || rc=1
		if [ "${T_GCWORK:-0}" -gt 0 ]; then
			"$bin/dontcache_test" gcwork "$mnt" "$dev" "$T_GCWORK" \
				>> "$out" 2>&1 || rc=1
		fi
		;;
	quick)
		"$bin/dontcache_test" quick "$mnt" >> "$out" 2>&1
		rc=$?
		;;
	control)
		"$bin/dontcache_test" control "$mnt" >> "$out" 2>&1
		rc=$?
		;;
	bench)
		"$T_RUN/bench-guest.sh" "$mnt" >> "$out" 2>&1
		rc=$?
		;;
	dcfs)
		"$T_RUN/dcfs-guest.sh" "$mnt" >> "$out" 2>&1
		rc=$?
		;;
	*)
		echo "unknown T_MODE=$T_MODE" >> "$out"
		;;
	esac
	umount "$mnt" >> "$out" 2>&1 || { echo "umount failed" >> "$out"; rc=1; }
else
	echo "mounting F2FS on $dev failed" >> "$out"
fi

cat "$out"
dmesg > "$T_RUN/$T_NAME.dmesg" 2>&1
echo "$rc" > "$T_RUN/$T_NAME.rc"
sync
echo "guest: done rc=$rc, powering off"
echo o > /proc/sysrq-trigger
# Wait for the power-off without running another program: on x86 it
# tears down the 9p root first, an exec would fail and PID 1's exit
# would panic the kernel ("Attempted to kill init").
while :; do :; done
