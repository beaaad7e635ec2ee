#!/bin/bash
# make bench (second part) / make bench-seeds: benchmarks in the shapes of
# seeds 003, 004 and 001 (test/bench-seeds-guest.sh), tables by
# scripts/bench-seeds-report.py.  Every guest command line and every fio /
# bench command is printed.
#
#   seed 003  raw block device (ubd, BENCH3_DEV_SIZE = 2 x guest RAM):
#             read normal vs RWF_DONTCACHE; write in a memcg with
#             memory.max 255852544, normal vs RWF_DONTCACHE (patched kernel;
#             BENCH3_KERNELS="before after" runs the before kernel too)
#   seed 004  fio io_uring 4 KiB buffered randwrite, iodepth 1..16, F2FS on
#             memory-backed null_blk, before vs after
#   seed 001  fio bs=512k size=1536M rw=write io_uring iodepth=64
#             end_fsync=1, F2FS on memory-backed null_blk made with
#             mkfs.f2fs -s 1 (default) and -s 128, before vs after
#   fs        bench write normal vs RWF_DONTCACHE on F2FS, ext4 and xfs
#             (memory-backed null_blk), BENCH_FS_SIZES (4096 65536
#             1048576), BENCH_FS (f2fs ext4 xfs), BENCH_FS_MIB (256)
#             per file, BENCH_FS_MEM (3G), BENCH_FS_ROUND0 (1: number
#             of the first round, to add rounds to a saved run),
#             BENCH_FS_WARMUP (MiB written to the guest's tmpfs first),
#             BENCH_FS_MODES ("normal dontcache"), BENCH_TRACE (trace
#             events counted per run), see test/bench-seeds-guest.sh;
#             before vs after, one
#             boot per kernel and round, the kernels' order alternating by
#             round (the before kernel must support RWF_DONTCACHE: set
#             BENCH_BEFORE to a kernel of the series without the patches
#             under test, not the control kernel)
#
# Kernels: after = the patched kernel (make uml), before = BENCH_BEFORE
# (default: the unpatched control kernel, make uml-control; any kernel
# binary, e.g. one built from the series without the patch under test).
# Knobs: BENCH_SEEDS ("003 004 001"), BENCH_ROUNDS (3), BENCH4_RUNTIME (10).
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/uml-run.sh"

ensure_deps
command -v fio > /dev/null || {
	[ "$(id -u)" -eq 0 ] || die "fio missing (apt-get install fio)"
	apt-get install -y -qq fio >&2 || die "installing fio failed"
}
AFTER=${UML_KERNEL:-$CACHE/build/patched/out/linux}
BEFORE=${BENCH_BEFORE:-$CACHE/build/control/out/linux}
[ -x "$AFTER" ] || die "no patched UML kernel: run make uml"
seeds=${BENCH_SEEDS:-003 004 001}
case " $seeds " in
*" 004 "*|*" 001 "*|*" fs "*)
	[ -x "$BEFORE" ] ||
		die "no 'before' kernel $BEFORE: run make uml-control or set BENCH_BEFORE"
	;;
esac
rounds=${BENCH_ROUNDS:-3}

RUN=$CACHE/run/bench-seeds
rm -rf "$RUN"
mkdir -p "$RUN/bin" "$RUN/mnt"
gcc -O2 -Wall -Wextra -Werror -static -pthread -o "$RUN/bin/bench" \
	"$KP_DIR/test/bench.c" || die "building bench failed"
cp "$KP_DIR/test/bench-seeds-guest.sh" "$RUN/"
make_f2fs_image "$RUN/f2fs.img" 64M	# ubd0 must exist; unused

boot() {	# name kernel label mem params...
	local name=$1 kernel=$2 label=$3 mem=$4 params
	shift 4
	params="T_SCRIPT=bench-seeds-guest.sh B_KERNEL=$label B_ROUNDS=$rounds $*"
	echo "== $name: linux mem=$mem $params  [$kernel]"
	UML_EXTRA=$params uml_boot "$kernel" "$name" script "$RUN" \
		"$RUN/f2fs.img" 3600 "$mem"
	kernel_log_clean "$RUN" "$name" || die "kernel problems in $name"
	[ "$(cat "$RUN/$name.rc" 2>/dev/null)" = 0 ] ||
		{ tail -40 "$RUN/$name.console"; die "$name failed"; }
	grep -E '^(==|cmd:)' "$RUN/$name.out" | sort -u
	cat "$RUN/$name.out" >> "$RUN/all.out"
}

nullblk="null_blk.nr_devices=1 null_blk.memory_backed=1 null_blk.bs=4096"
for s in $seeds; do
	case $s in
	003)
		mem=${BENCH3_MEM:-512M}
		rm -f "$RUN/raw.img"
		truncate -s "${BENCH3_DEV_SIZE:-1G}" "$RUN/raw.img"
		# BENCH3_KERNELS="before after": also the before kernel
		# (which must support RWF_DONTCACHE on block devices)
		for k in ${BENCH3_KERNELS:-after}; do
			kern=$AFTER
			[ $k = before ] && kern=$BEFORE
			boot "seed003-$k" "$kern" $k "$mem" B_SEED=003 \
				"ubd1=$RUN/raw.img"
		done
		rm -f "$RUN/raw.img"
		;;
	004)
		for k in before after; do
			kern=$AFTER
			[ $k = before ] && kern=$BEFORE
			boot "seed004-$k" "$kern" $k 1G B_SEED=004 \
				"B_RUNTIME=${BENCH4_RUNTIME:-10}" $nullblk \
				null_blk.gb=1 null_blk.irqmode=1
		done
		;;
	001)
		# the seed's null_blk: memory-backed, hw_queue_depth 64,
		# max_sectors 512; 16 GiB: -s 128 reserves 7 GiB for GC;
		# discard, so that mkfs gives the previous run's memory back
		for k in before after; do
			kern=$AFTER
			[ $k = before ] && kern=$BEFORE
			boot "seed001-$k" "$kern" $k 4G B_SEED=001 $nullblk \
				null_blk.gb=16 null_blk.irqmode=1 \
				null_blk.hw_queue_depth=64 null_blk.max_sectors=512 \
				null_blk.discard=1
		done
		;;
	fs)
		r=${BENCH_FS_ROUND0:-1}
		while [ $r -lt $((${BENCH_FS_ROUND0:-1} + rounds)) ]; do
			ks="before after"
			[ $((r % 2)) = 1 ] || ks="after before"
			for k in $ks; do
				kern=$AFTER
				[ $k = before ] && kern=$BEFORE
				boot "fs-$k-$r" "$kern" $k "${BENCH_FS_MEM:-3G}" \
					B_SEED=fs B_ROUND=$r \
					"B_MIB=${BENCH_FS_MIB:-256}" \
					"B_FS=$(echo ${BENCH_FS:-f2fs ext4 xfs} | tr ' ' ,)" \
					"B_SIZES=$(echo ${BENCH_FS_SIZES:-4096 65536 1048576} | tr ' ' ,)" \
					${BENCH_TRACE:+B_TRACE=$BENCH_TRACE} \
					${BENCH_FS_WARMUP:+B_WARMUP=$BENCH_FS_WARMUP} \
					${BENCH_FS_MODES:+B_MODES=$(echo $BENCH_FS_MODES | tr ' ' ,)} \
					$nullblk null_blk.gb=2 null_blk.irqmode=1 \
					null_blk.discard=1
			done
			r=$((r + 1))
		done
		;;
	*)
		die "unknown seed $s (003, 004, 001, fs)"
		;;
	esac
done
rm -f "$RUN/f2fs.img"
python3 "$KP_DIR/scripts/bench-seeds-report.py" "$RUN" < "$RUN/all.out"
