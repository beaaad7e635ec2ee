#!/bin/bash
# PID 1 of a kernel-matrix guest (tests/kernels/kernels.sh boots it with
# kernel-patches/scripts/qemu-x86.sh): the host's root is / (9p, read-only),
# the results directory K_OUT comes from the 9p tag "out"; this script runs
# from kernels.sh's snapshot of tests/kernels (with bin/dcfs, bin/dcfs-io).
# Parameters arrive as environment variables from the kernel command line:
# K_NAME, K_OUT, K_DISKS, K_KROOT (the unpacked kernel package, whose
# modules are loaded from there; empty: everything built in), K_CONFIG,
# K_STREAM_MIB, K_STAGES.  Runs the stages (stages.sh), then powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LC_ALL=C
K_KT=$(cd "$(dirname "$0")" && pwd)
export K_KT

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
# devtmpfs has no /dev/fd: bash's process substitution (diff <(...)) needs it
for l in fd:/proc/self/fd stdin:/proc/self/fd/0 stdout:/proc/self/fd/1 stderr:/proc/self/fd/2; do
	[ -e "/dev/${l%%:*}" ] || ln -s "${l#*:}" "/dev/${l%%:*}"
done
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 out "$K_OUT" ||
	echo "guest: cannot mount the results share on $K_OUT"
exec >> "$K_OUT/guest.log" 2>&1 < /dev/null
# the host's /tmp, /run and /var/tmp are read-only here (dcfs keeps its
# node ids in /run/dcfs, nfs-utils its state in /var/lib/nfs): tmpfs over
# them, unless the snapshot or the results live below one: then the
# scratch tmpfs goes on /mnt
K_WORK=
for d in /tmp /run /var/tmp /var/lib/nfs; do
	case "$K_KT/ $K_OUT/" in
	"$d"/*|*" $d"/*) continue ;;
	esac
	mount -t tmpfs tmpfs "$d"
	[ "$d" != /tmp ] || K_WORK=/tmp/k41
done
if [ -z "$K_WORK" ]; then
	mount -t tmpfs tmpfs /mnt
	K_WORK=/mnt/k41
fi
# K_DISKS=ext4:vda,xfs:vdb (one word on the kernel command line)
K_DISKS=$(echo "$K_DISKS" | tr , ' ' | sed 's|:|=/dev/|g')
K_STAGES=$(echo "${K_STAGES:-}" | tr , ' ')
export K_WORK K_DISKS K_STAGES
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mount -t configfs configfs /sys/kernel/config 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
ip link set lo up 2>/dev/null || busybox ip link set lo up
hostname k41-guest 2>/dev/null || true
echo "guest: $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ { print int($2 / 1024) }' /proc/meminfo) MiB"

# Modules from the unpacked package (kmod reads .ko.xz; softdeps such as
# f2fs's crc32 follow).  A module that is missing or fails is not fatal:
# the stages of its filesystem say SKIP.
if [ -n "${K_KROOT:-}" ]; then
	for m in fuse loop ext4 xfs btrfs f2fs exfat nfsd nfs nfsv3 nfsv4 crc32c_generic crc32_generic; do
		modprobe -d "$K_KROOT" "$m" 2>/dev/null || echo "guest: modprobe $m failed"
	done
fi
# the patched series' private FUSE extensions are off unless asked for
# (kernel-patches): a user of that kernel sets this
p=/sys/module/fuse/parameters/passthrough_private
[ ! -e "$p" ] || echo Y > "$p"
echo "guest: filesystems: $(grep -v nodev /proc/filesystems | tr -d '\t' | tr '\n' ' ')"

# shellcheck source=stages.sh
. "$K_KT/stages.sh"
# shellcheck source=nfs.sh
. "$K_KT/nfs.sh"
{
	echo "kernel $(uname -r)"
	echo "cpus $(nproc)"
	echo "cachestat $(python3 -c 'import ctypes, os; l = ctypes.CDLL(None, use_errno=True); r = l.syscall(451, -1, 0, 0, 0); print("no" if ctypes.get_errno() == 38 else "yes")')"
} > "$K_OUT/kernel.txt"
t0=$(date +%s)
run_matrix
echo "guest: stages took $(( $(date +%s) - t0 )) s"
dmesg > "$K_OUT/dmesg.txt"
echo finished > "$K_OUT/done"
sync
umount "$K_OUT" 2>/dev/null
echo o > /proc/sysrq-trigger
sleep 30
