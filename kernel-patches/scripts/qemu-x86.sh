#!/bin/bash
# Boot an x86-64 kernel under QEMU with the host's root file system shared
# read-only and run one stage script in it as PID 1.  Used by test-x86
# (scripts/test-x86.sh) and meant for any other kernel too (e.g. Debian's
# stock 6.1/6.12 images with an initrd).
#
# qemu-x86.sh -k KERNEL -s SCRIPT -r RESULTDIR [options] [-- KEY=VALUE ...]
#   -k KERNEL     kernel image (bzImage, /boot/vmlinuz-*)            required
#   -s SCRIPT     absolute host path of the guest's PID 1 (passed as
#                 init=SCRIPT; the guest sees the host's / so the same
#                 path works there)                                     required
#   -r RESULTDIR  host directory shared read-write over 9p with mount tag
#                 "out" (the guest mounts it, e.g. over the same path:
#                 mount -t 9p -o trans=virtio,version=9p2000.L out DIR)  required
#   -i INITRD     initrd/initramfs (for kernels whose virtio/9p drivers are
#                 modules: its /init mounts the root from tag "hostroot"
#                 with -t 9p -o trans=virtio,version=9p2000.L and execs
#                 the init= of /proc/cmdline)
#   -d DISK       a raw disk image, attached as the next virtio disk
#                 (/dev/vda, /dev/vdb, ... in the order given); repeatable
#   -c CPUS       vCPUs (default 2)
#   -m MEM        guest memory (default 2G)
#   -t SECONDS    wall-clock limit; QEMU is killed after it (default 900)
#   -l FILE       serial console log (default RESULTDIR/console.log)
#   -a ARGS       more kernel command-line arguments
#   KEY=VALUE     after --: appended to the kernel command line; the
#                 kernel hands those it does not know to init as
#                 environment variables (no dot in KEY)
# Environment: QEMU_ACCEL=auto (default) | kvm | tcg.  auto takes KVM only
# where /dev/kvm runs a normal kernel (a read-write /dev/kvm, a CPU with
# vmx/svm, and not the kvm_pvm software virtualizer); otherwise TCG,
# multi-threaded.  Prints "qemu-x86: accel=... cpus=... mem=..." to stderr.
# Exit status: 0 when the guest powered off by itself (e.g. echo o >
# /proc/sysrq-trigger), 124 on timeout, else QEMU's.  What the stage
# passed or failed it writes into RESULTDIR; the launcher does not judge.
set -euo pipefail

usage() { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

kernel='' script='' result='' initrd='' cpus=2 mem=2G tmo=900 console='' extra=''
disks=()
while getopts "k:s:r:i:d:c:m:t:l:a:h" o; do
	case $o in
	k) kernel=$OPTARG ;;
	s) script=$OPTARG ;;
	r) result=$OPTARG ;;
	i) initrd=$OPTARG ;;
	d) disks+=("$OPTARG") ;;
	c) cpus=$OPTARG ;;
	m) mem=$OPTARG ;;
	t) tmo=$OPTARG ;;
	l) console=$OPTARG ;;
	a) extra=$OPTARG ;;
	*) usage ;;
	esac
done
shift $((OPTIND - 1))
[ "${1:-}" != -- ] || shift
[ -n "$kernel" ] && [ -n "$script" ] && [ -n "$result" ] || usage
[ -f "$kernel" ] || { echo "qemu-x86: no kernel image $kernel" >&2; exit 2; }
[ -d "$result" ] || { echo "qemu-x86: no result directory $result" >&2; exit 2; }
case $script in /*) ;; *) echo "qemu-x86: -s needs an absolute path" >&2; exit 2 ;; esac
console=${console:-$result/console.log}

# Can /dev/kvm run a normal x86-64 kernel here?
kvm_usable() {
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	# PVM (kvm_pvm) is a software virtualizer for specially built
	# guests: a stock kernel does not boot on it
	[ ! -d /sys/module/kvm_pvm ] || return 1
	grep -qwE 'vmx|svm' /proc/cpuinfo || return 1
	[ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]
}

accel=${QEMU_ACCEL:-auto}
if [ "$accel" = auto ]; then
	if kvm_usable; then accel=kvm; else accel=tcg; fi
fi
# shellcheck disable=SC2054 # commas inside QEMU option values
case $accel in
kvm) accel_args=(-accel kvm -cpu host) ;;
tcg) accel_args=(-accel tcg,thread=multi,tb-size=256) ;;
*) echo "qemu-x86: QEMU_ACCEL=$accel (auto, kvm or tcg)" >&2; exit 2 ;;
esac

# shellcheck disable=SC2054 # commas inside QEMU option values
args=("${accel_args[@]}" -smp "$cpus" -m "$mem"
	-nographic -no-reboot -serial "file:$console" -monitor none
	-kernel "$kernel"
	-fsdev "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap"
	-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot
	-fsdev "local,id=out,path=$result,security_model=none,multidevs=remap"
	-device virtio-9p-pci,fsdev=out,mount_tag=out)
[ -z "$initrd" ] || args+=(-initrd "$initrd")
for d in "${disks[@]}"; do
	args+=(-drive "file=$d,if=virtio,format=raw,cache=unsafe,discard=unmap")
done

cmdline="console=ttyS0 panic=-1 no_timer_check root=hostroot rootfstype=9p"
cmdline+=" rootflags=trans=virtio,version=9p2000.L,msize=262144,cache=none ro"
cmdline+=" init=$script $extra $*"

echo "qemu-x86: accel=$accel cpus=$cpus mem=$mem disks=${#disks[@]} kernel=$kernel" >&2
rc=0
timeout -k 10 "$tmo" qemu-system-x86_64 "${args[@]}" -append "$cmdline" \
	< /dev/null > "$console.qemu" 2>&1 || rc=$?
[ ! -s "$console.qemu" ] || cat "$console.qemu" >> "$console"
rm -f "$console.qemu"
[ $rc -ne 124 ] || echo "qemu-x86: TIMEOUT after ${tmo}s" >&2
exit $rc
