#!/bin/sh
# Benchmarks in the shapes of seeds 003, 004 and 001, run inside the UML
# guest (T_MODE=script, started by scripts/bench-seeds.sh).  $1 = directory
# of the bench tool, $2 = mount point.  From the kernel command line:
#   B_SEED    003 | 004 | 001
#   B_KERNEL  label of the kernel (before / after), copied into every line
#   B_ROUNDS  rounds per cell (3)
# 003: B_DEV (${DISK:-/dev/ubd}b, ~2x guest RAM), B_CG_MAX (255852544)
# 004: B_FIO_SIZE (256M), B_RUNTIME (10 s per iodepth)
# 001: B_MKFS_S ("1 128": mkfs.f2fs -s values to run)
# fs:  B_FS (f2fs,ext4,xfs), B_SIZES (4096,65536,1048576), B_MIB (256),
#      B_ROUND (one round per boot, this number)
# B_WARMUP (fs only): MiB written to (and removed from) the guest's tmpfs
#      before the first measurement
# B_MODES (fs only): "normal,dontcache" (default), or one of them alone
#      (e.g. for a host-side profile of one mode)
# B_TRACE (fs only): comma list of trace events (e.g.
#      writeback:writeback_written,xfs:xfs_setfilesize) counted per bench
#      run, printed as "TRC kernel= fs= round= req= mode= event=count ...";
#      writeback_start / _written also per reason (<event>_<reason>=
#      count, <event>_<reason>_pages= sum of nr_pages: asked for at
#      start, left over at written).  Tracing costs time: use it in separate runs.
# Every result is one line "<table> kernel=<label> round=<n> key=value...";
# fio's JSON goes to $T_RUN/fio-<seed>-<label>-<cell>-<round>.json.  The
# host (scripts/bench-seeds-report.py) turns them into the README tables.
bin=$1 mnt=$2
b=$bin/bench
fio=/usr/bin/fio
k=${B_KERNEL:-unknown}
rounds=${B_ROUNDS:-3}

swapoff -a 2>/dev/null
echo "== seed $B_SEED, kernel $k ($(uname -r)): $(grep MemTotal /proc/meminfo), $(nproc) CPU(s)"

drop() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
	sleep 1
}

order() {	# round -> the two modes in counterbalanced order
	if [ $(($1 % 2)) = 1 ]; then echo "$2 $3"; else echo "$3 $2"; fi
}

runfio() {	# json-file fio-args...
	out=$1
	shift
	echo "cmd: fio $*"
	"$fio" "$@" --output-format=json --output="$out" || {
		echo "fio failed"
		exit 1
	}
}

case $B_SEED in
003)
	dev=${B_DEV:-${DISK:-/dev/ubd}b}
	bytes=$(blockdev --getsize64 "$dev")
	mib=$((bytes / 1048576))
	echo "== device $dev: $mib MiB"
	# fill the device once, uncached, so that it does not start cached
	"$b" write "$dev" "$mib" 1048576 dontcache > /dev/null || exit 1
	r=1
	while [ $r -le "$rounds" ]; do
		for m in $(order $r normal dontcache); do
			drop
			echo "cmd: bench read $dev 1048576 $m"
			line=$("$b" read "$dev" 1048576 "$m") || exit 1
			echo "S3R kernel=$k round=$r $line"
		done
		r=$((r + 1))
	done
	cg=/sys/fs/cgroup
	mount -t cgroup2 none "$cg" || { echo "no cgroup2"; exit 1; }
	echo +memory > "$cg/cgroup.subtree_control"
	mkdir -p "$cg/bench"
	echo "${B_CG_MAX:-255852544}" > "$cg/bench/memory.max"
	echo "== memcg: memory.max $(cat "$cg/bench/memory.max")"
	r=1
	while [ $r -le "$rounds" ]; do
		for m in $(order $r normal dontcache); do
			drop
			echo "cmd: bench write $dev $mib 1048576 $m $cg/bench (in the memcg)"
			line=$(sh -c 'echo $$ > '"$cg"'/bench/cgroup.procs; exec "$@"' \
				sh "$b" write "$dev" "$mib" 1048576 "$m" "$cg/bench") ||
				exit 1
			echo "S3W kernel=$k round=$r $line"
		done
		r=$((r + 1))
	done
	;;
004)
	mkfs.f2fs -q -f /dev/nullb0 > /dev/null || exit 1
	mount -t f2fs /dev/nullb0 "$mnt" || exit 1
	f=$mnt/fio.dat
	size=${B_FIO_SIZE:-256M}
	# lay the file out once; every run then overwrites it
	"$fio" --name=layout --filename="$f" --size="$size" --rw=write \
		--bs=1M --end_fsync=1 > /dev/null || exit 1
	r=1
	while [ $r -le "$rounds" ]; do
		for d in 1 2 4 8 16; do
			drop
			runfio "$T_RUN/fio-004-$k-qd$d-$r.json" --name=randwrite \
				--filename="$f" --size="$size" --bs=4k \
				--rw=randwrite --ioengine=io_uring --iodepth=$d \
				--direct=0 --time_based --runtime="${B_RUNTIME:-10}" \
				--ramp_time=2
			echo "F4 kernel=$k round=$r qd=$d json=fio-004-$k-qd$d-$r.json"
		done
		r=$((r + 1))
	done
	umount "$mnt"
	;;
001)
	# a fresh file system for every run: mkfs.f2fs discards the whole
	# device, which is what gives null_blk's memory back (fstrim on a
	# -s 128 file system does not free enough; the guest ran out of
	# memory in the third round)
	for s in ${B_MKFS_S:-1 128}; do
		r=1
		while [ $r -le "$rounds" ]; do
			echo "cmd: mkfs.f2fs -q -f -s $s /dev/nullb0"
			mkfs.f2fs -q -f -s "$s" /dev/nullb0 > /dev/null || exit 1
			mount -t f2fs /dev/nullb0 "$mnt" || exit 1
			drop
			runfio "$T_RUN/fio-001-$k-s$s-$r.json" --bs=512k \
				--size=1536M --rw=write --name=1 \
				--filename="$mnt/seq_write" --ioengine=io_uring \
				--iodepth=64 --end_fsync=1
			echo "F1 kernel=$k round=$r segs_per_sec=$s json=fio-001-$k-s$s-$r.json"
			umount "$mnt"
			r=$((r + 1))
		done
	done
	;;
fs)
	# uncached vs buffered sequential writes on each file system, a
	# fresh file system per file system (mkfs discards the device, which
	# gives null_blk's memory back); order of the modes alternates by
	# round and size
	mib=${B_MIB:-256}
	r=${B_ROUND:-1}
	tr=/sys/kernel/tracing
	trace_start() {
		echo 0 > $tr/tracing_on
		echo > $tr/trace
		echo 1 > $tr/tracing_on
	}
	trace_count() {	# event counts since trace_start
		echo 0 > $tr/tracing_on
		awk -v evs="$B_TRACE" '
		BEGIN { n = split(evs, e, ","); for (i = 1; i <= n; i++) {
			sub(/.*:/, "", e[i]); c[e[i]] = 0 } }
		/^#/ { next }
		{ for (i = 1; i <= NF; i++) if ($i ~ /^[a-z0-9_]+:$/) {
			ev = substr($i, 1, length($i) - 1); break }
		  c[ev]++
		  if (ev ~ /^writeback_(start|written)$/ &&
		      match($0, /reason=[a-z_]+/)) {
			k = ev "_" substr($0, RSTART + 7, RLENGTH - 7); ww[k]++
			if (match($0, /nr_pages=[0-9]+/))
				wp[k] += substr($0, RSTART + 9, RLENGTH - 9) } }
		END { for (x in c) printf "%s=%d ", x, c[x]
		      for (x in ww) printf "%s=%d %s_pages=%d ", x, ww[x], x, wp[x]
		}' $tr/trace
		grep -h . $tr/per_cpu/cpu*/stats 2>/dev/null |
			awk '/^overrun:/ { o += $2 } END { printf "overrun=%d", o }'
	}
	if [ -n "$B_TRACE" ]; then
		mountpoint -q $tr || mount -t tracefs none $tr || exit 1
		echo 65536 > $tr/buffer_size_kb
		for e in $(echo "$B_TRACE" | tr , ' '); do
			echo 1 > "$tr/events/${e%%:*}/${e#*:}/enable" || exit 1
		done
	fi
	fss=$(echo "${B_FS:-f2fs,ext4,xfs}" | tr , ' ')
	sizes=$(echo "${B_SIZES:-4096,65536,1048576}" | tr , ' ')
	echo "== fs round $r: $fss, sizes $sizes, $mib MiB per file"
	if [ -n "$B_WARMUP" ]; then
		# the first write of a boot runs ~2x slower (the host backs
		# guest memory on first touch): touch B_WARMUP MiB once
		echo "cmd: dd if=/dev/zero of=/tmp/warmup bs=1M count=$B_WARMUP; rm"
		dd if=/dev/zero of=/tmp/warmup bs=1M count="$B_WARMUP" 2> /dev/null
		rm -f /tmp/warmup
	fi
	for fs in $fss; do
		case $fs in
		f2fs) mk="mkfs.f2fs -q -f" ;;
		ext4) mk="mkfs.ext4 -q -F" ;;
		xfs) mk="mkfs.xfs -q -f" ;;
		*) echo "unknown file system $fs"; exit 1 ;;
		esac
		echo "cmd: $mk /dev/nullb0"
		$mk /dev/nullb0 > /dev/null || exit 1
		mount -t "$fs" /dev/nullb0 "$mnt" || exit 1
		i=$r
		for s in $sizes; do
			i=$((i + 1))
			# shellcheck disable=SC2046 # the modes, one word each
			for m in $(order $i $(echo "${B_MODES:-normal,dontcache}" | tr , " ")); do
				rm -f "$mnt/bench.dat"
				drop
				[ -z "$B_TRACE" ] || trace_start
				echo "cmd: bench write $mnt/bench.dat $mib $s $m ($fs)"
				line=$("$b" write "$mnt/bench.dat" "$mib" "$s" "$m") ||
					exit 1
				echo "FSW kernel=$k fs=$fs round=$r $line"
				[ -z "$B_TRACE" ] ||
					echo "TRC kernel=$k fs=$fs round=$r req=$s mode=$m $(trace_count)"
			done
		done
		rm -f "$mnt/bench.dat"
		umount "$mnt" || exit 1
	done
	;;
*)
	echo "unknown B_SEED=$B_SEED"
	exit 1
	;;
esac
