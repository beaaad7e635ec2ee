#!/bin/sh
# Benchmark matrix, run inside the patched UML guest on the F2FS mount $1.
# BENCH_MIB (file size), BENCH_SIZES and BENCH_CG_MIB come from the kernel
# command line (see scripts/bench.sh).
mnt=$1
b=$T_RUN/bin/bench
mib=${BENCH_MIB:-512}
sizes=$(echo "${BENCH_SIZES_CSV:-4096,16384,65536,262144,1048576}" | tr , ' ')
cgmib=${BENCH_CG_MIB:-244}

hdr() {
	printf '%8s %-9s %8s %10s %10s %12s %12s %12s %12s\n' req mode MB/s \
		resident avgCached kswapd_scan kswapd_steal direct_scan \
		direct_steal
}

clean() {
	rm -f "$mnt/bench.dat"
	sync
	echo 3 > /proc/sys/vm/drop_caches
	sleep 1
}

matrix() {	# $1 = prefix command (e.g. cgexec-like wrapper)
	hdr
	for s in $sizes; do
		for m in normal dontcache; do
			clean
			"$@" "$b" "$mnt/bench.dat" "$mib" "$s" "$m" || return 1
		done
	done
}

echo "== bench: ${mib} MiB sequential write per run, $(grep MemTotal /proc/meminfo)"
echo "== table 1: no cgroup limit"
matrix env || exit 1

cg=/sys/fs/cgroup/memory
mkdir -p /sys/fs/cgroup
mount -t tmpfs cgroup_root /sys/fs/cgroup
mkdir -p "$cg"
mount -t cgroup -o memory memory "$cg" || { echo "no memory cgroup"; exit 1; }
mkdir -p "$cg/bench"
echo $((cgmib * 1024 * 1024)) > "$cg/bench/memory.limit_in_bytes"

in_cg() {
	sh -c 'echo $$ > '"$cg"'/bench/tasks; exec "$@"' sh "$@"
}
echo "== table 2: writer in a ${cgmib} MiB memory cgroup (v1)"
matrix in_cg || exit 1
clean
