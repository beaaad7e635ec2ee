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

# memory-pressure variant: the writer in a small cgroup v2 memory cgroup.
# Reclaim there is memcg reclaim, which /proc/vmstat does not count; the
# cgroup's own memory.stat pgscan/pgsteal are appended as two more columns.
cg=/sys/fs/cgroup
mount -t cgroup2 none "$cg" || { echo "no cgroup2"; exit 1; }
echo +memory > "$cg/cgroup.subtree_control"
mkdir -p "$cg/bench"
echo $((cgmib * 1024 * 1024)) > "$cg/bench/memory.max"

mstat() { awk -v k="$1" '$1 == k { print $2 }' "$cg/bench/memory.stat"; }

in_cg() {
	local s0 t0 line
	s0=$(mstat pgscan)
	t0=$(mstat pgsteal)
	line=$(sh -c 'echo $$ > '"$cg"'/bench/cgroup.procs; exec "$@"' sh "$@") ||
		return 1
	printf '%s %12s %12s\n' "$line" $(( $(mstat pgscan) - s0 )) \
		$(( $(mstat pgsteal) - t0 ))
}
echo "== table 2: writer in a ${cgmib} MiB memory cgroup (cgroup v2 memory.max)"
echo "   (last two columns: the cgroup's memory.stat pgscan / pgsteal deltas)"
matrix in_cg || exit 1
clean
