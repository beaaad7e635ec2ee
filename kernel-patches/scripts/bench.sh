#!/bin/bash
# make bench: normal vs RWF_DONTCACHE write, read and memcg tables in the
# patched UML kernel (test/bench-guest.sh, test/bench.c), formatted by
# scripts/bench-report.py.
#
# Knobs: BENCH_DEV=nullblk (default: memory-backed null_blk, F2FS made in
# the guest, BENCH_IRQMODE=1 softirq completion, BENCH_NULLB_GB=2) or ubd
# (F2FS image file on the host, BENCH_IMG_SIZE=3G); BENCH_MEM guest memory
# (default 3G for nullblk, whose data lives in guest memory, 512M for ubd);
# BENCH_MIB (256), BENCH_CG_MIB (1024), BENCH_CG_MAX (255852544),
# BENCH_CG_ROUNDS (3).  UML_KERNEL runs another kernel binary; BENCH_SAVE=FILE
# keeps the guest's result lines (scripts/bench-seed000-compare.py puts two
# such files, before and after, beside seed 000's published numbers).
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/uml-run.sh"

ensure_deps
PATCHED=${UML_KERNEL:-$CACHE/build/patched/out/linux}
[ -x "$PATCHED" ] || die "no UML kernel: run make uml"

RUN=$CACHE/run/bench
rm -rf "$RUN"
mkdir -p "$RUN/bin" "$RUN/mnt"
gcc -O2 -Wall -Wextra -Werror -static -pthread -o "$RUN/bin/bench" \
	"$KP_DIR/test/bench.c" || die "building bench failed"
cp "$KP_DIR/test/bench-guest.sh" "$RUN/bench-guest.sh"

dev=${BENCH_DEV:-nullblk}
params="BENCH_MIB=${BENCH_MIB:-256} BENCH_CG_MIB=${BENCH_CG_MIB:-1024}
BENCH_CG_MAX=${BENCH_CG_MAX:-255852544} BENCH_CG_ROUNDS=${BENCH_CG_ROUNDS:-3}"
case $dev in
nullblk)
	make_f2fs_image "$RUN/f2fs.img" 64M	# ubd0 must exist; unused
	params="$params T_DEV=/dev/nullb0 T_MKFS=1 null_blk.nr_devices=1
null_blk.memory_backed=1 null_blk.gb=${BENCH_NULLB_GB:-2} null_blk.bs=4096
null_blk.irqmode=${BENCH_IRQMODE:-1}"
	mem=${BENCH_MEM:-3G}
	;;
ubd)
	make_f2fs_image "$RUN/f2fs.img" "${BENCH_IMG_SIZE:-3G}"
	mem=${BENCH_MEM:-512M}
	;;
*)
	die "BENCH_DEV must be nullblk or ubd"
	;;
esac
t0=$(date +%s)
cmdline="linux mem=$mem $(echo $params)"
log "bench: $cmdline"
UML_EXTRA=$params uml_boot "$PATCHED" bench bench "$RUN" "$RUN/f2fs.img" \
	5400 "$mem"
rm -f "$RUN/f2fs.img"
kernel_log_clean "$RUN" bench || die "kernel problems during the benchmark"
[ "$(cat "$RUN/bench.rc" 2>/dev/null)" = 0 ] ||
	{ tail -40 "$RUN/bench.console"; die "benchmark failed"; }
echo "bench: $cmdline ($(( $(date +%s) - t0 ))s)"
grep '^==' "$RUN/bench.out"
[ -z "${BENCH_SAVE:-}" ] || cp "$RUN/bench.out" "$BENCH_SAVE"
python3 "$KP_DIR/scripts/bench-report.py" < "$RUN/bench.out"
