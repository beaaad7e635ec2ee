#!/bin/bash
# The kernel matrix's stages on the host's own kernel (make check-kernels
# runs it as kernel "host"): each filesystem of KFS the host kernel has on
# a loop device (--direct-io=on), the rest SKIP with the reason, in a
# private mount namespace, everything torn down at the end.
#   host.sh RUNDIR      (K_KT: the snapshot of tests/kernels, with bin/)
# The stages drop only their own files' pages (POSIX_FADV_DONTNEED), never
# the whole page cache: the machine is shared.
set -u
run=$1
K_KT=${K_KT:-$(cd "$(dirname "$0")" && pwd)}
rm -rf "$run"
mkdir -p "$run"
work=$(mktemp -d /var/tmp/k41-host.XXXXXX)
export K_NAME=host K_OUT=$run K_KT K_WORK=$work/w
export K_STREAM_MIB=${K_STREAM_MIB:-1024} K_STAGES=${K_STAGES:-}
KFS=${KFS:-"ext4 xfs btrfs f2fs exfat nfs nfs-export"}

loops=()
cleanup() {
	local l
	for l in "${loops[@]}"; do losetup -d "$l" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

# the host kernel's config, for what it should offer
if [ -r /proc/config.gz ]; then
	zcat /proc/config.gz > "$work/config"
	export K_CONFIG=$work/config
elif [ -r "/boot/config-$(uname -r)" ]; then
	K_CONFIG=/boot/config-$(uname -r)
	export K_CONFIG
fi

disks=
for fs in $KFS; do
	case $fs in
	nfs|nfs-export) disks+=" $fs=none"; continue ;;
	esac
	grep -qw "$fs" /proc/filesystems || modprobe "$fs" 2>/dev/null
	if ! grep -qw "$fs" /proc/filesystems; then
		disks+=" $fs=none"
		continue
	fi
	truncate -s 3G "$work/$fs.img"
	case $fs in
	ext4) mkfs.ext4 -q -F "$work/$fs.img" ;;
	xfs) mkfs.xfs -q -f "$work/$fs.img" ;;
	btrfs) mkfs.btrfs -q -f "$work/$fs.img" ;;
	f2fs) mkfs.f2fs -q -f "$work/$fs.img" ;;
	exfat) mkfs.exfat "$work/$fs.img" ;;
	esac > /dev/null 2>&1
	l=$(losetup --direct-io=on -f --show "$work/$fs.img") || { disks+=" $fs=none"; continue; }
	loops+=("$l")
	disks+=" $fs=$l"
done
export K_DISKS=$disks
{
	echo "kernel $(uname -r)"
	echo "cpus $(nproc)"
	echo "cachestat $(python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); l.syscall(451, -1, 0, 0, 0); print("no" if ctypes.get_errno() == 38 else "yes")')"
} > "$run/kernel.txt"
t0=$(date +%s)
unshare -m --propagation private bash -c '
	. "$K_KT/stages.sh"
	. "$K_KT/nfs.sh"
	run_matrix
' > "$run/guest.log" 2>&1
echo "$(( $(date +%s) - t0 ))" > "$run/seconds"
echo finished > "$run/done"
