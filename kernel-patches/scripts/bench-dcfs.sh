#!/bin/bash
# make bench-dcfs: dcfs's streaming classes in the patched UML guest, with
# uncached passthrough (patches 21-22) against native RWF_DONTCACHE and
# against dcfs's own streaming engine, on F2FS, ext4 and xfs on
# memory-backed null_blk (test/dcfs-bench-guest.sh), formatted by
# scripts/bench-dcfs-report.py.  Needs build/dcfs and build/dcfs-io (make
# in the repository root).
#
# Knobs: BENCH_MIB (256), BENCH_ROUNDS (3), BENCH_SIZES ("4096 65536
# 1048576"), BENCH_MEM (3G), BENCH_IRQMODE (1: softirq completion).
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/uml-run.sh"

ensure_deps
PATCHED=${UML_KERNEL:-$CACHE/build/patched/out/linux}
[ -x "$PATCHED" ] || die "no UML kernel: run make uml"
DCFS=$(cd "$KP_DIR/.." && pwd)/build/dcfs
[ -x "$DCFS" ] && [ -x "$(dirname "$DCFS")/dcfs-io" ] ||
	die "build dcfs first: make -C $(cd "$KP_DIR/.." && pwd)"

RUN=$CACHE/run/bench-dcfs
rm -rf "$RUN"
mkdir -p "$RUN/bin" "$RUN/mnt"
cp "$KP_DIR/test/dcfs-bench-guest.sh" "$KP_DIR/test/dcfs-common.sh" "$RUN/"
echo "$DCFS" > "$RUN/dcfs-path"
make_f2fs_image "$RUN/f2fs.img" 64M	# ubd0 must exist; unused
params="T_SCRIPT=dcfs-bench-guest.sh BENCH_MIB=${BENCH_MIB:-256}
BENCH_ROUNDS=${BENCH_ROUNDS:-3} null_blk.nr_devices=3
null_blk.memory_backed=1 null_blk.gb=1 null_blk.bs=4096
null_blk.irqmode=${BENCH_IRQMODE:-1}"
mem=${BENCH_MEM:-3G}
t0=$(date +%s)
# the sizes contain blanks: they reach the guest through a file
echo "${BENCH_SIZES:-4096 65536 1048576}" > "$RUN/sizes"
UML_EXTRA=$params uml_boot "$PATCHED" bench-dcfs script "$RUN" \
	"$RUN/f2fs.img" 7200 "$mem"
rm -f "$RUN/f2fs.img"
kernel_log_clean "$RUN" bench-dcfs || die "kernel problems during the benchmark"
[ "$(cat "$RUN/bench-dcfs.rc" 2>/dev/null)" = 0 ] ||
	{ tail -40 "$RUN/bench-dcfs.out"; die "benchmark failed"; }
echo "bench-dcfs: linux mem=$mem $(echo $params) ($(( $(date +%s) - t0 ))s)"
grep -v '^B ' "$RUN/bench-dcfs.out"
python3 "$KP_DIR/scripts/bench-dcfs-report.py" < "$RUN/bench-dcfs.out"
