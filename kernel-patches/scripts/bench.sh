#!/bin/bash
# make bench: F2FS write benchmark (normal vs RWF_DONTCACHE) in the patched
# UML kernel.  Knobs: BENCH_MIB, BENCH_SIZES, BENCH_CG_MIB, BENCH_MEM.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/uml-run.sh"

ensure_deps
PATCHED=$CACHE/build/patched/out/linux
[ -x "$PATCHED" ] || die "no UML kernel: run make uml"

RUN=$CACHE/run/bench
rm -rf "$RUN"
mkdir -p "$RUN/bin" "$RUN/mnt"
gcc -O2 -Wall -Wextra -Werror -static -pthread -o "$RUN/bin/bench" \
	"$KP_DIR/test/bench.c" || die "building bench failed"
cp "$KP_DIR/test/bench-guest.sh" "$RUN/bench-guest.sh"

export BENCH_MIB=${BENCH_MIB:-512}
export BENCH_SIZES=${BENCH_SIZES:-4096 16384 65536 262144 1048576}
export BENCH_CG_MIB=${BENCH_CG_MIB:-244}
make_f2fs_image "$RUN/f2fs.img" 3G
# the kernel command line cannot carry spaces: pass the sizes with commas
UML_EXTRA="BENCH_MIB=$BENCH_MIB BENCH_SIZES_CSV=${BENCH_SIZES// /,} BENCH_CG_MIB=$BENCH_CG_MIB" \
	uml_boot "$PATCHED" bench bench "$RUN" "$RUN/f2fs.img" 3000 \
	"${BENCH_MEM:-384M}"
rm -f "$RUN/f2fs.img"
cat "$RUN/bench.out" 2>/dev/null || tail -40 "$RUN/bench.console"
kernel_log_clean "$RUN" bench || die "kernel problems during the benchmark"
[ "$(cat "$RUN/bench.rc" 2>/dev/null)" = 0 ] || die "benchmark failed"
