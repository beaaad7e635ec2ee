#!/bin/bash
# make test / test-control / test-kasan: boot a UML kernel on F2FS and run
# test/dontcache_test.c in it (and test/fuse_pt_test.c, patched and control).
#
#   test.sh patched   F2FS on ubd (full test + unlink/truncate/umount race
#                     + write/delete/GC workload + fsck.f2fs), the same on
#                     an image made with mkfs.f2fs -s 128,
#                     F2FS on null_blk with irqmode 0, 1 and 2 (residency
#                     checks), the raw ubd device, ext2, exFAT, ext4 and
#                     xfs (blockfs), uncached FUSE passthrough
#                     (fuse-pt: fuse_pt_test's own FUSE server, backing
#                     files on F2FS, ext4, xfs; refused on tmpfs), then
#                     dcfs over F2FS, with uncached
#                     passthrough and with its own engine (gating; fails if
#                     build/dcfs is missing or lacks the dontcache class)
#                     and the meta stage: FUSE round trips per file of
#                     dcfs's metadata operations over ext4 (exact counts,
#                     gating), set-id clearing through passthrough
#                     nowait-block: B4, RWF_NOWAIT uncached writes while
#                     another writeback holds F2FS's writepages mutex;
#                     then the stages that switch the flusher off
#                     (patched, nullblk-irq0/1/2, blockfs, fuse-pt, dcfs)
#                     again with the kernel's default writeback settings,
#                     named <stage>-wbdef
#   KP_STAGES="meta dcfs" test.sh patched   only the stages named (a run
#                     in which no stage ran fails; a dcfs/meta stage that
#                     cannot run fails unless KP_ALLOW_SKIP=1)
#   test.sh control   unpatched kernel: RWF_DONTCACHE must fail (EOPNOTSUPP);
#                     FUSE_PASSTHROUGH_DONTCACHE not offered, its open
#                     flags refused (fuse-pt-control)
#   test.sh kasan     CONFIG_KASAN kernel: full test + a longer race
#                     (stage kasan), then the fuse-pt, dcfs and meta stages
#                     as above (patches 21-22, 27-29 under KASAN);
#                     KP_STAGES="kasan meta" picks among them
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/uml-run.sh"

variant=${1:-patched}
ensure_deps
# UML_KERNEL=path runs the stages on another kernel binary (e.g. one with a
# fix reverted, to see that the tests catch it)
KERNEL=${UML_KERNEL:-$CACHE/build/$variant/out/linux}
[ -x "$KERNEL" ] || die "no $variant UML kernel: run make -C $KP_DIR uml${variant#patched}"
[ "$variant" = patched ] || [ "$variant" = control ] || [ "$variant" = kasan ] ||
	die "unknown variant $variant"

RUN=$CACHE/run/test-$variant
rm -rf "$RUN"
mkdir -p "$RUN/bin" "$RUN/mnt" "$RUN/host"
gcc -O2 -Wall -Wextra -Werror -static -pthread -o "$RUN/bin/dontcache_test" \
	"$KP_DIR/test/dontcache_test.c" || die "building the test program failed"
gcc -O2 -Wall -Wextra -Werror -static -pthread -I"$KP_DIR/../include" \
	-o "$RUN/bin/fuse_pt_test" \
	"$KP_DIR/test/fuse_pt_test.c" || die "building fuse_pt_test failed"

# shellcheck disable=SC2034 # counted and read by uml-run.sh's stage()
pass=0 fail=0 skip=0 t_start=$(date +%s)

# The FUSE stages, run by the patched and the kasan variant.
# 3b. FUSE passthrough with uncached backing I/O (patches 21-22),
#     without dcfs: fuse_pt_test is its own FUSE server; backing
#     files on F2FS (ubd0), ext4 (ubd1) and xfs (ubd2), the refusal
#     on tmpfs
run_fuse_pt() {
	want "fuse-pt$S" || return 0
	cp "$KP_DIR/test/fuse-pt-guest.sh" "$RUN/"
	make_f2fs_image "$RUN/f2fs.img" 1G
	make_blockfs_images "$RUN"
	UML_EXTRA="T_SCRIPT=fuse-pt-guest.sh ubd1=$RUN/ext4.img ubd2=$RUN/xfs.img" \
		uml_boot "$KERNEL" "fuse-pt$S" script "$RUN" "$RUN/f2fs.img" \
		$((900 * TMO_SCALE)) "$GUEST_MEM"
	stage "fuse-pt$S"
	rm -f "$RUN"/{ext2,exfat,ext4,xfs}.img
}

# 4. dcfs over F2FS inside the guest, 5. the meta stage
run_dcfs_stages() {
	local DCFS DCFS_BIN
	DCFS=$KP_DIR/../build/dcfs
	if ! want "dcfs$S" && { [ -n "$S" ] || ! want meta; }; then
		:
	elif [ ! -x "$DCFS" ]; then
		stage_skipped "dcfs$S" "$DCFS does not exist (build it with make -C $(cd "$KP_DIR/.." && pwd))"
	elif ! "$KP_DIR/test/dcfs-supported.sh" "$DCFS"; then
		stage_skipped "dcfs$S" "$DCFS does not support the dontcache class"
	else
		cp "$KP_DIR/test/dcfs-guest.sh" "$KP_DIR/test/dcfs-common.sh" \
			"$KP_DIR/test/meta-guest.sh" "$RUN/"
		make_f2fs_image "$RUN/f2fs.img" 512M
		DCFS_BIN=$(cd "$(dirname "$DCFS")" && pwd)/dcfs
		echo "$DCFS_BIN" > "$RUN/dcfs-path"
		if want "dcfs$S"; then
			uml_boot "$KERNEL" "dcfs$S" dcfs "$RUN" "$RUN/f2fs.img" \
				$((600 * TMO_SCALE)) "$GUEST_MEM"
			stage "dcfs$S"
		fi

		# 5. metadata round trips of dcfs over ext4 (counted by
		#    dcfs; gating: META_GATE=0 only prints them), set-id
		#    bits and capabilities dropped by passthrough writes;
		#    META_TIME=N adds timed runs of N files against native
		#    ext4 (META_ROUNDS rounds; META_SIZE bytes written per
		#    file, 1K; META_BASE=BINARY times another dcfs, or
		#    build/fuse-floor, in the same rounds)
		if [ -z "$S" ] && want meta; then
			# make -C runs this in kernel-patches/
			[ -z "${META_BASE:-}" ] || [ -x "$META_BASE" ] ||
				die "META_BASE=$META_BASE is not a program here (an absolute path is safest)"
			rm -f "$RUN/ext4.img"
			truncate -s 2G "$RUN/ext4.img"
			mkfs.ext4 -q -F "$RUN/ext4.img" >/dev/null ||
				die "mkfs.ext4 failed"
			UML_EXTRA="T_SCRIPT=meta-guest.sh ubd1=$RUN/ext4.img
T_META_FILES=${META_FILES:-2000} T_META_TIME=${META_TIME:-0}
T_META_ROUNDS=${META_ROUNDS:-3} T_META_GATE=${META_GATE:-1}
${META_BASE:+T_META_BASE=$(realpath "$META_BASE")} T_META_SIZE=${META_SIZE:-1K}" \
				uml_boot "$KERNEL" meta script "$RUN" \
				"$RUN/f2fs.img" \
				"${META_TIMEOUT:-$((900 * TMO_SCALE))}" "$GUEST_MEM"
			stage meta
			rm -f "$RUN/ext4.img"
		fi
	fi
}

# Guests of the kasan variant are slower and need more memory.
TMO_SCALE=1 GUEST_MEM=512M
[ "$variant" != kasan ] || { TMO_SCALE=3; GUEST_MEM=768M; }

# The patched kernel's stages; $S is "" or "-wbdef" (then the stages that
# set writeback knobs run again with the kernel's defaults: UML_WB=default)
run_patched() {
	# 1. the F2FS proof on ubd (completes in the ubd interrupt handler)
	if want "patched$S"; then
	make_f2fs_image "$RUN/f2fs.img" 1G
	UML_EXTRA="T_GCWORK=1" \
		uml_boot "$KERNEL" "patched$S" run "$RUN" "$RUN/f2fs.img" 900
	f2fs_image_clean "$RUN/f2fs.img" "$RUN/patched$S.fsck" ||
		echo fsck > "$RUN/patched$S.rc"
	stage "patched$S"
	fi

	# 1b. the same on large sections (mkfs.f2fs -s 128: 256 MiB sections,
	#     and 7 GiB of GC reserve, so a 16 GiB sparse image) with more
#     rounds of the write/delete/GC workload:
	#     the per-section ckpt_valid_blocks cache (CONFIG_F2FS_CHECK_FS
	#     cross-checks it in the guest), fsck.f2fs on the host afterwards
	if [ -z "$S" ] && want f2fs-s128; then
	make_f2fs_image "$RUN/f2fs.img" 16G -s 128
	UML_EXTRA="T_GCWORK=3" \
		uml_boot "$KERNEL" f2fs-s128 run "$RUN" "$RUN/f2fs.img" 900
	f2fs_image_clean "$RUN/f2fs.img" "$RUN/f2fs-s128.fsck" ||
		echo fsck > "$RUN/f2fs-s128.rc"
	stage f2fs-s128
	fi

	# 2. F2FS on memory-backed null_blk: completion in the submitter's
	#    context (irqmode=0), in softirq (1) and from a timer (2)
	make_f2fs_image "$RUN/f2fs.img" 64M	# ubd0 must exist; unused
	for irq in 0 1 2; do
		want "nullblk-irq$irq$S" || continue
		UML_EXTRA="T_DEV=/dev/nullb0 T_MKFS=1 null_blk.nr_devices=1
null_blk.memory_backed=1 null_blk.gb=1 null_blk.bs=4096 null_blk.irqmode=$irq" \
			uml_boot "$KERNEL" "nullblk-irq$irq$S" quick "$RUN" \
			"$RUN/f2fs.img" 600 768M
		stage "nullblk-irq$irq$S"
	done

	# 2b. B4: RWF_NOWAIT uncached writes while another writeback holds
	#     F2FS's writepages mutex (null_blk completing after 20 ms)
	if [ -z "$S" ] && want nowait-block; then
	cp "$KP_DIR/test/nowait-guest.sh" "$RUN/"
	UML_EXTRA="T_SCRIPT=nowait-guest.sh $NOWAIT_NULLBLK" \
		uml_boot "$KERNEL" nowait-block script "$RUN" "$RUN/f2fs.img" 600 768M
	stage nowait-block
	fi

	# 3. the raw block device, ext2, exFAT, ext4 and xfs
	if want "blockfs$S"; then
	truncate -s 0 "$RUN/raw.img"
	truncate -s 64M "$RUN/raw.img"
	make_blockfs_images "$RUN"
	UML_EXTRA="ubd1=$RUN/ext2.img ubd2=$RUN/exfat.img ubd3=$RUN/ext4.img
ubd4=$RUN/xfs.img" \
		uml_boot "$KERNEL" "blockfs$S" blockfs "$RUN" "$RUN/raw.img" 600
	stage "blockfs$S"
	rm -f "$RUN"/{raw,ext2,exfat,ext4,xfs}.img
	fi

	run_fuse_pt
	run_dcfs_stages
}

case $variant in
control)
	# the unpatched kernel must refuse RWF_DONTCACHE
	make_f2fs_image "$RUN/f2fs.img" 256M
	uml_boot "$KERNEL" control control "$RUN" "$RUN/f2fs.img" 300
	stage control

	# ... and must not offer FUSE_PASSTHROUGH_DONTCACHE; opens using its
	# flags anyway fail (same image, reused)
	cp "$KP_DIR/test/fuse-pt-guest.sh" "$RUN/"
	UML_EXTRA="T_SCRIPT=fuse-pt-guest.sh T_FUSE_PT=control" \
		uml_boot "$KERNEL" fuse-pt-control script "$RUN" \
		"$RUN/f2fs.img" 300
	stage fuse-pt-control
	;;
kasan)
	if want kasan; then
	make_f2fs_image "$RUN/f2fs.img" 1G
	UML_EXTRA="T_RACE=${KASAN_RACE_ROUNDS:-20}" \
		uml_boot "$KERNEL" kasan run "$RUN" "$RUN/f2fs.img" 3000 768M
	stage kasan
	fi
	S='' run_fuse_pt
	S='' run_dcfs_stages
	;;
patched)
	S='' UML_WB='' run_patched
	# every stage that switches the flusher off, again with the defaults
	# (not f2fs-s128, nowait-block, meta: they leave the knobs alone)
	S=-wbdef UML_WB=default run_patched
	;;
esac

rm -f "$RUN/f2fs.img"
stages_done "$variant"
