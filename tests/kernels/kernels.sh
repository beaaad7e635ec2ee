#!/bin/bash
# make check-kernels: dcfs on the kernels its users run.  Boots Debian's own
# kernel packages (6.1 of Debian 12, 6.12 of Debian 12's backports/13) and
# the patched 6.12 of kernel-patches/ under QEMU with the host's root shared
# read-only over 9p (kernel-patches/scripts/qemu-x86.sh), the backing
# filesystems on virtual disks, and runs the host's build/dcfs there
# (tests/kernels/guest.sh, stages in tests/kernels/stages.sh); the same
# stages run on the host's own kernel too.  Prints a table per kernel x
# filesystem, every stage PASS, FAIL or SKIP with its reason.
#
#   tests/kernels/kernels.sh [KERNEL...]   KERNEL: host 6.1 6.12 patched
#                                          (default: all four)
# Environment:
#   KFS="ext4 xfs btrfs f2fs exfat nfs nfs-export"  backing filesystems
#   K_STREAM_MIB=1024  bytes streamed per filesystem (the residency and
#                      hot-set stages)
#   K_HOT_MIB=128 K_CG_MIB=384  the hot file and its memory cgroup's limit
#                      (a hot file larger than the limit fills the cgroup:
#                      write streams then go to the daemon's engine)
#   K_STAGES="..."     only these stages (names as in the table)
#   K_CPUS=2 K_MEM=2G  guest size
#   K_TIMEOUT=3600     wall-clock limit per guest
#   DCFS_KERNELS_CACHE=/var/cache/dcfs/kernels  downloads, initramfs, runs
#   DCFS_KCACHE=/var/cache/dcfs/kernel  kernel-patches' cache (make x86)
#   K61_PKG, K612_PKG  the Debian packages (default: the pinned ones below
#                      if the archive has them, else its newest of 6.1/6.12)
#   QEMU_X86=...       the launcher (default kernel-patches/scripts/qemu-x86.sh)
#   QEMU_ACCEL=auto|kvm|tcg  (the launcher's)
# Exit status: 0 when no stage failed, 1 otherwise.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd -P)
HERE=$REPO/tests/kernels
CACHE=${DCFS_KERNELS_CACHE:-/var/cache/dcfs/kernels}
KCACHE=${DCFS_KCACHE:-/var/cache/dcfs/kernel}
QEMU_X86=${QEMU_X86:-$REPO/kernel-patches/scripts/qemu-x86.sh}
KFS=${KFS:-"ext4 xfs btrfs f2fs exfat nfs nfs-export"}
STREAM_MIB=${K_STREAM_MIB:-1024}
CPUS=${K_CPUS:-2}
MEM=${K_MEM:-2G}
TMO=${K_TIMEOUT:-3600}
# Pinned: the images this harness was written against (issue 41).
K61_PIN=linux-image-6.1.0-57-amd64
K612_PIN=linux-image-6.12.118+deb12-amd64
# What the root mount needs before the 9p root exists (the rest is loaded
# in the guest with modprobe -d from the unpacked package, over 9p).
ROOT_MODULES="virtio_pci virtio_blk 9pnet_virtio 9p"

log() { echo "[check-kernels] $*" >&2; }
die() { log "error: $*"; exit 2; }

# The newest package of the archive matching an extended regex.
newest_pkg() {
	apt-cache search --names-only "$1" 2>/dev/null | awk '{ print $1 }' | sort -V | tail -1
}

# K61_PKG/K612_PKG, else the pin if the archive has it, else the newest.
resolve_pkg() {	# $1 = 6.1 | 6.12
	local want pin re
	case $1 in
	6.1) want=${K61_PKG:-} pin=$K61_PIN re='^linux-image-6\.1\.0-[0-9]+-amd64$' ;;
	6.12) want=${K612_PKG:-} pin=$K612_PIN re='^linux-image-6\.12\.[0-9]+\+deb[0-9]+-amd64$' ;;
	esac
	if [ -n "$want" ]; then echo "$want"; return; fi
	if ls "$CACHE/debs/${pin}_"*.deb >/dev/null 2>&1 ||
	   apt-cache show "$pin" >/dev/null 2>&1; then
		echo "$pin"; return
	fi
	newest_pkg "$re"
}

# The package's .deb in the cache, downloaded with apt-get download.
fetch_deb() {	# $1 = package -> path
	local deb
	mkdir -p "$CACHE/debs"
	deb=$(ls "$CACHE/debs/${1}_"*.deb 2>/dev/null | head -1 || true)
	if [ -z "$deb" ]; then
		apt-cache show "$1" >/dev/null 2>&1 || apt-get update -qq >&2 ||
			die "apt-get update failed"
		log "downloading $1"
		(cd "$CACHE/debs" && apt-get download -q "$1" >&2 2>&1) ||
			die "apt-get download $1 failed"
		deb=$(ls "$CACHE/debs/${1}_"*.deb 2>/dev/null | head -1 || true)
	fi
	[ -n "$deb" ] || die "no .deb for $1 in $CACHE/debs"
	echo "$deb"
}

# Unpacks a kernel package to $CACHE/k/NAME/root (once; modules.dep made
# with depmod) and writes NAME's kernel image, release and initramfs to
# $CACHE/k/NAME/{vmlinuz,release,initrd}.  $3 = no: no initramfs (every
# driver built in).
unpack_kernel() {	# $1 = NAME, $2 = .deb, $3 = initrd yes|no
	local d=$CACHE/k/$1 rel id
	id="$(basename "$2") $(stat -c '%s %Y' "$2") $(sha256sum < "$HERE/initramfs-init.sh" | cut -c1-16) $ROOT_MODULES"
	if [ "$(cat "$d/id" 2>/dev/null)" = "$id" ]; then return 0; fi
	rm -rf "$d"
	mkdir -p "$d"
	dpkg-deb -x "$2" "$d/root" || die "dpkg-deb -x $2 failed"
	rel=$(ls "$d/root/lib/modules" 2>/dev/null | head -1 || true)
	[ -n "$rel" ] || rel=$(ls "$d/root/boot" | sed -n 's/^vmlinuz-//p' | head -1)
	[ -f "$d/root/boot/vmlinuz-$rel" ] || die "$2 has no boot/vmlinuz-$rel"
	ln -s "root/boot/vmlinuz-$rel" "$d/vmlinuz"
	echo "$rel" > "$d/release"
	if [ -d "$d/root/lib/modules/$rel" ]; then
		depmod -b "$d/root" "$rel" || die "depmod for $rel failed"
	fi
	if [ "$3" = yes ]; then
		make_initramfs "$d" "$rel"
	fi
	echo "$id" > "$d/id"
}

# busybox-static, the modules of ROOT_MODULES with their dependencies in
# load order (decompressed: busybox insmod takes plain .ko), /init.
make_initramfs() {	# $1 = dir, $2 = release
	local d=$1 rel=$2 t=$1/initramfs m n=0
	rm -rf "$t"
	mkdir -p "$t/bin" "$t/lib/modules"
	cp /bin/busybox "$t/bin/busybox"
	ldd "$t/bin/busybox" 2>&1 | grep -q 'not a dynamic executable' ||
		die "/bin/busybox is not static (install busybox-static)"
	ln -s busybox "$t/bin/sh"
	cp "$HERE/initramfs-init.sh" "$t/init"
	chmod 755 "$t/init"
	: > "$t/modules"
	for m in $ROOT_MODULES; do
		modprobe -d "$d/root" -S "$rel" --show-depends "$m" ||
			die "modprobe --show-depends $m failed for $rel"
	done | awk '$1 == "insmod" { print $2 }' | while read -r m; do
		grep -qxF "$m" "$t/seen" 2>/dev/null && continue
		echo "$m" >> "$t/seen"
		n=$((n + 1))
		local to
		to=$t/lib/modules/$(printf '%02d' "$n")-$(basename "${m%.xz}")
		to=${to%.zst}
		case $m in
		*.xz) xz -dc "$m" > "$to" ;;
		*.zst) zstd -qdc "$m" > "$to" ;;
		*) cp "$m" "$to" ;;
		esac
		echo "/lib/modules/$(basename "$to")" >> "$t/modules"
	done
	rm -f "$t/seen"
	(cd "$t" && find . | cpio -o -H newc --quiet | gzip -1) > "$d/initrd" ||
		die "making the initramfs failed"
	rm -rf "$t"
}

# An empty sparse image of FS for a guest disk (made here: the host kernel
# cannot mount F2FS, exFAT or NFS, but their mkfs tools run anywhere).
make_image() {	# FS PATH
	rm -f "$2"
	truncate -s 3G "$2"
	case $1 in
	ext4|nfs|nfs-export) mkfs.ext4 -q -F "$2" ;;
	xfs) mkfs.xfs -q -f "$2" ;;
	btrfs) mkfs.btrfs -q -f "$2" ;;
	f2fs) mkfs.f2fs -q -f "$2" ;;
	exfat) mkfs.exfat "$2" ;;
	*) die "no image recipe for $1" ;;
	esac > "$2.mkfs.log" 2>&1 || die "mkfs of $1 failed: $(tail -2 "$2.mkfs.log")"
}

# The patched kernel from kernel-patches' x86 package (make -C
# kernel-patches x86), or nothing.
patched_deb() {
	local dir rel
	dir=$(readlink -f "$KCACHE/build/x86" 2>/dev/null || true)
	rel=$(cat "$dir/release" 2>/dev/null || true)
	[ -n "$rel" ] || return 1
	ls "$dir"/linux-image-"$rel"_*.deb 2>/dev/null | head -1 | grep .
}

# Results of a kernel that did not run: every stage of every filesystem.
skip_kernel() {	# NAME REASON
	local fs
	mkdir -p "$CACHE/run/$1"
	: > "$CACHE/run/$1/results.tsv"
	for fs in $KFS; do
		printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$fs" all SKIP "$2" >> "$CACHE/run/$1/results.tsv"
	done
	log "$1: SKIP: $2"
}

# Boots kernel NAME (unpacked in $CACHE/k/NAME) with one disk per KFS entry.
boot_kernel() {	# NAME
	local name=$1 d=$CACHE/k/$1 run=$CACHE/run/$1 fs n=0 disks=() map='' rc=0
	local kroot='' initrd=() rel cfg t0
	rel=$(cat "$d/release")
	rm -rf "$run"
	mkdir -p "$run/img"
	for fs in $KFS; do
		make_image "$fs" "$run/img/$fs.img"
		disks+=(-d "$run/img/$fs.img")
		# shellcheck disable=SC2059
		map+="${map:+,}$fs:vd$(printf "\\$(printf '%03o' $((97 + n)))")"
		n=$((n + 1))
	done
	[ ! -f "$d/initrd" ] || initrd=(-i "$d/initrd")
	[ ! -d "$d/root/lib/modules/$rel" ] || kroot=$d/root
	cfg=$d/root/boot/config-$rel
	log "$name: booting $rel ($CPUS vCPUs, $MEM, disks $map)"
	t0=$(date +%s)
	# the root cached in the guest (the initramfs mounts it so too): the
	# stages run thousands of programs from it, each read over 9p
	"$QEMU_X86" -k "$d/vmlinuz" "${initrd[@]}" -s "$SNAP/guest.sh" -r "$run" \
		-c "$CPUS" -m "$MEM" -t "$TMO" "${disks[@]}" \
		-a "rootflags=trans=virtio,version=9p2000.L,msize=262144,cache=loose" -- \
		K_NAME="$name" K_OUT="$run" K_DISKS="$map" \
		K_KROOT="$kroot" K_CONFIG="$cfg" K_STREAM_MIB="$STREAM_MIB" \
		K_HOT_MIB="${K_HOT_MIB:-128}" K_CG_MIB="${K_CG_MIB:-384}" \
		K_STAGES="$(echo "${K_STAGES:-}" | tr ' ' ,)" || rc=$?
	echo "$(( $(date +%s) - t0 ))" > "$run/seconds"
	rm -rf "$run/img"
	if [ ! -f "$run/done" ]; then
		log "$name: the guest did not finish (exit $rc); console: $run/console.log"
		tail -20 "$run/console.log" >&2 || true
		printf '%s\t%s\t%s\t%s\t%s\n' "$name" - boot FAIL \
			"the guest did not finish (qemu exit $rc, $(cat "$run/seconds") s): $run/console.log" \
			>> "$run/results.tsv"
	fi
	log "$name: $(cat "$run/seconds") s"
}

prepare_and_boot() {	# NAME
	local pkg deb
	case $1 in
	6.1|6.12)
		pkg=$(resolve_pkg "$1")
		[ -n "$pkg" ] || { skip_kernel "$1" "no linux-image of $1 in the archive (apt-cache)"; return; }
		deb=$(fetch_deb "$pkg")
		unpack_kernel "$1" "$deb" yes
		;;
	patched)
		if ! deb=$(patched_deb); then
			skip_kernel patched "the patched kernel is not built (make -C kernel-patches x86)"
			return
		fi
		unpack_kernel patched "$deb" no
		;;
	host)
		K_KT=$SNAP "$SNAP/host.sh" "$CACHE/run/host" || true
		return
		;;
	*) die "unknown kernel $1 (host, 6.1, 6.12 or patched)" ;;
	esac
	[ -x "$QEMU_X86" ] || die "no QEMU launcher $QEMU_X86 (kernel-patches/scripts/qemu-x86.sh)"
	boot_kernel "$1"
}

main() {
	local k t0 names=()
	[ "$(id -u)" = 0 ] || die "needs root (loop devices, mounts, apt-get download)"
	for k in "$REPO/build/dcfs" "$REPO/build/dcfs-io"; do
		[ -x "$k" ] || die "$k is missing: run make first"
	done
	[ $# -gt 0 ] || set -- host 6.1 6.12 patched
	t0=$(date +%s)
	# What the guests run: a copy, so that a rebuild or an edit during
	# the run does not reach them (the root is cached in the guest)
	SNAP=$CACHE/snap
	rm -rf "$SNAP"
	mkdir -p "$SNAP/bin"
	cp "$HERE"/*.sh "$HERE"/*.py "$SNAP/"
	cp "$REPO/build/dcfs" "$REPO/build/dcfs-io" "$SNAP/bin/"
	for k in "$@"; do
		names+=("$k")
		prepare_and_boot "$k"
	done
	local dirs=()
	for k in "${names[@]}"; do dirs+=("$CACHE/run/$k"); done
	python3 "$HERE/report.py" --seconds $(( $(date +%s) - t0 )) "${dirs[@]}"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
