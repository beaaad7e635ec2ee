#!/bin/bash
# make test-x86: boot the x86-64 kernel of the test-config package (make x86)
# under QEMU (scripts/qemu-x86.sh: 2 vCPUs by default, KVM where usable,
# else multi-threaded TCG) and run the guest stages of the UML test plus
# the large-folio cases, each with the flusher off (as UML) and again with
# the kernel's default writeback settings (stage name + "-wbdef"; not for
# meta and nowait-block, which leave the writeback settings alone).
#
#   stages: patched (F2FS: dontcache_test run + race + gc workload, fsck),
#           nullblk-irq0/1/2, blockfs (raw virtio disk, ext2, exFAT, ext4,
#           xfs), fuse-pt, dcfs, meta, wbsync-race, largefolio (xfs, THP
#           always), and smoke (one boot: F2FS residency, xfs large folios,
#           dcfs uncached passthrough over ext4; what CI runs)
#   KP_STAGES="smoke"          only the stages named (a "-wbdef" name too)
#   X86_CPUS=N (2)  X86_MEM (2G)  X86_KERNEL=IMAGE (another kernel image,
#   e.g. one without a fix; X86_HEADERS=its linux-headers .deb, for the
#   fuse-pt stage's attrdelay module)  KP_ALLOW_SKIP=1 (a missing build/dcfs skips
#   the dcfs stages instead of failing them)  X86_RUN=DIR (results; default
#   $DCFS_KCACHE/run/test-x86)
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/uml-run.sh"

ensure_deps
command -v qemu-system-x86_64 >/dev/null || install_missing qemu-system-x86
RUN=${X86_RUN:-$CACHE/run/test-x86}
rm -rf "$RUN"
mkdir -p "$RUN/bin" "$RUN/mnt" "$RUN/host"
CPUS=${X86_CPUS:-2}
MEM=${X86_MEM:-2G}

# the kernel: from the linux-image package make x86 built
HEADERS=${X86_HEADERS:-}
if [ -n "${X86_KERNEL:-}" ]; then
	KERNEL=$X86_KERNEL
else
	dir=$(readlink -f "$CACHE/build/x86" 2>/dev/null || true)
	rel=$(cat "$dir/release" 2>/dev/null || true)
	deb=$(ls "$dir"/linux-image-"$rel"_*.deb 2>/dev/null | head -1)
	[ -n "$deb" ] || die "no x86 kernel package: run make -C $KP_DIR x86"
	dpkg-deb -x "$deb" "$RUN/pkg" || die "dpkg-deb -x $deb failed"
	KERNEL=$RUN/pkg/boot/vmlinuz-$rel
	log "kernel from package $(basename "$deb")"
	[ -n "$HEADERS" ] || HEADERS=$(ls "$dir"/linux-headers-"$rel"_*.deb 2>/dev/null | head -1)
fi
[ -f "$KERNEL" ] || die "no kernel image $KERNEL"

for prog in dontcache_test fuse_pt_test wbsync_race large_folio_test; do
	gcc -O2 -Wall -Wextra -Werror -static -pthread -I"$KP_DIR/../include" \
		-o "$RUN/bin/$prog" "$KP_DIR/test/$prog.c" ||
		die "building $prog failed"
done
# The fuse-pt stage's attrdelay module (B2, test/attrdelay.c), built against
# the booted kernel's headers package; without one the stage says it did
# not run that case.
build_attrdelay() {
	local k=$RUN/kmod
	[ -n "$HEADERS" ] || { log "no linux-headers package: attrdelay.ko not built"; return 0; }
	mkdir -p "$k"
	dpkg-deb -x "$HEADERS" "$RUN/hdr" || die "dpkg-deb -x $HEADERS failed"
	cp "$KP_DIR/test/attrdelay.c" "$k/"
	echo 'obj-m := attrdelay.o' > "$k/Kbuild"
	make -C "$(ls -d "$RUN"/hdr/usr/src/linux-headers-* | head -1)" M="$k" \
		modules > "$k/build.log" 2>&1 || {
		tail -20 "$k/build.log" >&2
		die "building attrdelay.ko failed (log: $k/build.log)"
	}
	cp "$k/attrdelay.ko" "$RUN/bin/"
	rm -rf "$RUN/hdr"
}
if want fuse-pt || want fuse-pt-wbdef; then
	build_attrdelay
fi

cp "$KP_DIR"/test/{fuse-pt-guest.sh,dcfs-guest.sh,dcfs-common.sh,meta-guest.sh,wbsync-race-guest.sh,largefolio-guest.sh,smoke-guest.sh,nowait-guest.sh} "$RUN/"

DCFS=$KP_DIR/../build/dcfs
dcfs_ok() {	# $1 = stage name
	if [ ! -x "$DCFS" ]; then
		stage_skipped "$1" "$DCFS does not exist (build it with make -C $(cd "$KP_DIR/.." && pwd))"
	elif ! "$KP_DIR/test/dcfs-supported.sh" "$DCFS"; then
		stage_skipped "$1" "$DCFS does not support the dontcache class"
	else
		(cd "$(dirname "$DCFS")" && pwd -P | sed 's|$|/dcfs|') > "$RUN/dcfs-path"
		return 0
	fi
	return 1
}

# shellcheck disable=SC2034 # counted and read by uml-run.sh's stage()
pass=0 fail=0 skip=0 t_start=$(date +%s)

# x86_boot NAME MODE TIMEOUT DISK... ; X86_EXTRA: more KEY=VALUE for the
# guest (T_SCRIPT=..., module parameters)
x86_boot() {
	local name=$1 mode=$2 tmo=$3 rc=0
	shift 3
	local d disks=()
	for d in "$@"; do disks+=(-d "$d"); done
	rm -f "$RUN/$name".{out,rc,dmesg,console}
	local try
	for try in 1 2; do
		log "booting $name ($mode, $CPUS vCPUs, ${tmo}s timeout)"
		rc=0
		# shellcheck disable=SC2086
		"$KP_DIR/scripts/qemu-x86.sh" -k "$KERNEL" -s "$KP_DIR/test/guest-init.sh" \
			-r "$RUN" -c "$CPUS" -m "$MEM" -t "$tmo" -l "$RUN/$name.console" \
			-a "transparent_hugepage=always" "${disks[@]}" -- \
			T_DISK=/dev/vd T_MODE="$mode" T_RUN="$RUN" T_NAME="$name" \
			${WB:+T_WB=$WB} ${X86_EXTRA:-} || rc=$?
		[ $rc -ne 124 ] || log "$name: TIMEOUT after ${tmo}s"
		# A guest that died before its stage script started (no
		# output at all; seen: an int3 Oops while the boot patched a
		# static key, under multi-threaded TCG) is booted once more.
		[ ! -f "$RUN/$name.out" ] && [ $try = 1 ] || break
		mv "$RUN/$name.console" "$RUN/$name.console.boot1"
		log "$name: the guest died before the stage started ($(grep -m1 -E 'Oops|panic' "$RUN/$name.console.boot1" || echo no output)); booting once more, console of the first boot: $name.console.boot1"
	done
	return 0
}

img() {	# $1 = name, $2 = size: an empty image
	rm -f "$RUN/$1"
	truncate -s "$2" "$RUN/$1"
	echo "$RUN/$1"
}

run_all() {	# $1 = suffix of the stage names ("" or "-wbdef")
	local sfx=$1 n irq
	n=patched$sfx
	if want "$n"; then
		make_f2fs_image "$RUN/f2fs.img" 1G
		X86_EXTRA="T_GCWORK=1" x86_boot "$n" run 1800 "$RUN/f2fs.img"
		f2fs_image_clean "$RUN/f2fs.img" "$RUN/$n.fsck" || echo fsck > "$RUN/$n.rc"
		stage "$n"
	fi
	for irq in 0 1 2; do
		n=nullblk-irq$irq$sfx
		want "$n" || continue
		make_f2fs_image "$RUN/f2fs.img" 64M	# vda must exist; unused
		X86_EXTRA="T_DEV=/dev/nullb0 T_MKFS=1 null_blk.nr_devices=1 null_blk.memory_backed=1 null_blk.gb=1 null_blk.bs=4096 null_blk.irqmode=$irq" \
			x86_boot "$n" quick 900 "$RUN/f2fs.img"
		stage "$n"
	done
	n=nowait-block$sfx
	if want "$n"; then
		make_f2fs_image "$RUN/f2fs.img" 64M	# vda must exist; unused
		# shellcheck disable=SC2086
		X86_EXTRA="T_SCRIPT=nowait-guest.sh $(echo $NOWAIT_NULLBLK)" \
			x86_boot "$n" script 900 "$RUN/f2fs.img"
		stage "$n"
	fi
	n=blockfs$sfx
	if want "$n"; then
		make_blockfs_images "$RUN"
		x86_boot "$n" blockfs 1200 "$(img raw.img 64M)" "$RUN/ext2.img" \
			"$RUN/exfat.img" "$RUN/ext4.img" "$RUN/xfs.img"
		stage "$n"
	fi
	n=fuse-pt$sfx
	if want "$n"; then
		make_f2fs_image "$RUN/f2fs.img" 1G
		make_blockfs_images "$RUN"
		X86_EXTRA="T_SCRIPT=fuse-pt-guest.sh ${X86_FUSE_PT:+T_FUSE_PT=$X86_FUSE_PT}" \
			x86_boot "$n" script 1800 \
			"$RUN/f2fs.img" "$RUN/ext4.img" "$RUN/xfs.img"
		stage "$n"
	fi
	n=largefolio$sfx
	if want "$n"; then
		rm -f "$RUN/xfs.img"
		truncate -s 2G "$RUN/xfs.img"
		mkfs.xfs -q -f "$RUN/xfs.img" || die "mkfs.xfs failed"
		X86_EXTRA="T_SCRIPT=largefolio-guest.sh" x86_boot "$n" script 1200 \
			"$RUN/xfs.img"
		stage "$n"
	fi
	n=wbsync-race$sfx
	if want "$n"; then
		make_f2fs_image "$RUN/f2fs.img" 64M	# unused
		X86_EXTRA="T_SCRIPT=wbsync-race-guest.sh W_ROUNDS=${WBSYNC_ROUNDS:-30} W_WAIT_MS=${WBSYNC_WAIT_MS:-1000} W_CONTROL=0 null_blk.nr_devices=1 null_blk.memory_backed=1 null_blk.bs=4096 null_blk.gb=1 null_blk.irqmode=2 null_blk.completion_nsec=100000 null_blk.hw_queue_depth=2" \
			x86_boot "$n" script 1800 "$RUN/f2fs.img"
		stage "$n"
	fi
	n=dcfs$sfx
	if want "$n" && dcfs_ok "$n"; then
		make_f2fs_image "$RUN/f2fs.img" 1G
		x86_boot "$n" dcfs 1500 "$RUN/f2fs.img"
		stage "$n"
	fi
	n=meta$sfx
	if want "$n" && dcfs_ok "$n"; then
		make_f2fs_image "$RUN/f2fs.img" 64M
		rm -f "$RUN/ext4.img"
		truncate -s 2G "$RUN/ext4.img"
		mkfs.ext4 -q -F "$RUN/ext4.img" >/dev/null || die "mkfs.ext4 failed"
		X86_EXTRA="T_SCRIPT=meta-guest.sh T_META_FILES=${META_FILES:-2000} T_META_TIME=0 T_META_GATE=1" \
			x86_boot "$n" script 1800 "$RUN/f2fs.img" "$RUN/ext4.img"
		stage "$n"
	fi
	n=smoke$sfx
	if want "$n" && dcfs_ok "$n"; then
		make_f2fs_image "$RUN/f2fs.img" 512M
		rm -f "$RUN/xfs.img" "$RUN/ext4.img"
		truncate -s 1G "$RUN/xfs.img" "$RUN/ext4.img"
		mkfs.xfs -q -f "$RUN/xfs.img" || die "mkfs.xfs failed"
		mkfs.ext4 -q -F "$RUN/ext4.img" >/dev/null || die "mkfs.ext4 failed"
		X86_EXTRA="T_SCRIPT=smoke-guest.sh" x86_boot "$n" script 1200 \
			"$RUN/f2fs.img" "$RUN/xfs.img" "$RUN/ext4.img"
		stage "$n"
	fi
	rm -f "$RUN"/*.img
}

# KP_STAGES unset: every stage, then every stage again with the default
# writeback settings; smoke only when named
# (meta and nowait-block leave the writeback settings alone: once)
if [ -z "${KP_STAGES:-}" ]; then
	both="patched nullblk-irq0 nullblk-irq1 nullblk-irq2 blockfs fuse-pt largefolio wbsync-race dcfs"
	KP_STAGES="$both nowait-block meta $(for s in $both; do printf '%s-wbdef ' "$s"; done)"
fi
WB='' run_all ''
! grep -q -- '-wbdef' <<<"$KP_STAGES" || WB=default run_all "-wbdef"
stages_done "x86-64, $CPUS vCPUs"
