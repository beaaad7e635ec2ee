#!/bin/sh
# Benchmark matrix, run inside the patched UML guest on the F2FS mount $1.
# Parameters come from the kernel command line (scripts/bench.sh):
#   BENCH_MIB      file size of the write and read tables (MiB)
#   BENCH_CG_MIB   file size of the memcg table (MiB)
#   BENCH_CG_MAX   memory.max of the memcg table (bytes)
#   BENCH_CG_ROUNDS rounds of the memcg table
# Every result is one line "<table> round=<n> <bench output>"; the host
# (scripts/bench-report.py) turns them into the README tables.
mnt=$1
b=$T_RUN/bin/bench
mib=${BENCH_MIB:-256}
cgmib=${BENCH_CG_MIB:-1024}
cgmax=${BENCH_CG_MAX:-255852544}
cgrounds=${BENCH_CG_ROUNDS:-3}
sizes="4096 8192 16384 32768 65536 131072 262144 524288 1048576"
rsizes="1048576 524288 262144 131072 65536 32768 16384 8192 4096"
f=$mnt/bench.dat

clean() {
	rm -f "$f"
	sync
	echo 3 > /proc/sys/vm/drop_caches
	sleep 1
}

run() {	# table round args...
	t=$1 r=$2
	shift 2
	clean
	line=$("$b" "$@") || { echo "bench failed: $*"; exit 1; }
	echo "$t round=$r $line"
}

echo "== bench: $(grep MemTotal /proc/meminfo), $(nproc) CPU(s), device $(awk -v m="$mnt" '$2 == m { print $1 }' /proc/mounts), swap: $(awk 'NR > 1' /proc/swaps | wc -l) devices"
swapoff -a 2>/dev/null

# write table: round 1 ascending, normal first; round 2 descending,
# dontcache first; a normal-vs-normal noise pair at 64 KiB in each round
for s in $sizes; do
	run W 1 write "$f" "$mib" "$s" normal
	run W 1 write "$f" "$mib" "$s" dontcache
done
run N 1 write "$f" "$mib" 65536 normal
run N 1 write "$f" "$mib" 65536 normal
for s in $rsizes; do
	run W 2 write "$f" "$mib" "$s" dontcache
	run W 2 write "$f" "$mib" "$s" normal
done
run N 2 write "$f" "$mib" 65536 normal
run N 2 write "$f" "$mib" 65536 normal

# read table: the source file is written once (normal, fsync), evicted,
# then read normal and uncached (order alternating by size)
rm -f "$f"
"$b" write "$mnt/src.dat" "$mib" 1048576 normal > /dev/null || exit 1
i=0
for s in $sizes; do
	i=$((i + 1))
	if [ $((i % 2)) = 1 ]; then order="normal dontcache"; else order="dontcache normal"; fi
	for m in $order; do
		sync
		echo 3 > /proc/sys/vm/drop_caches
		sleep 1
		line=$("$b" read "$mnt/src.dat" "$s" "$m") || exit 1
		echo "R round=1 $line"
	done
done
rm -f "$mnt/src.dat"

# memcg table: the writer in a cgroup v2 memory cgroup, swap off
cg=/sys/fs/cgroup
mount -t cgroup2 none "$cg" || { echo "no cgroup2"; exit 1; }
echo +memory > "$cg/cgroup.subtree_control"
mkdir -p "$cg/bench"
echo "$cgmax" > "$cg/bench/memory.max"
echo "== memcg: memory.max $(cat "$cg/bench/memory.max"), file ${cgmib} MiB"
in_cg() {
	sh -c 'echo $$ > '"$cg"'/bench/cgroup.procs; exec "$@"' sh "$@"
}
r=1
while [ $r -le "$cgrounds" ]; do
	for s in 8192 1048576; do
		if [ $((r % 2)) = 1 ]; then order="normal dontcache"; else order="dontcache normal"; fi
		for m in $order; do
			clean
			line=$(in_cg "$b" write "$f" "$cgmib" "$s" "$m" "$cg/bench") ||
				{ echo "bench failed"; exit 1; }
			echo "M round=$r $line"
		done
	done
	r=$((r + 1))
done
clean
