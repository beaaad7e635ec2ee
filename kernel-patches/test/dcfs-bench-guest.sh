#!/bin/sh
# dcfs streaming benchmark inside the patched UML guest (T_MODE=script,
# scripts/bench-dcfs.sh): what uncached passthrough (patches 21-22) gives
# dcfs, against native RWF_DONTCACHE and against dcfs's own streaming
# engine, on F2FS, ext4 and xfs on memory-backed null_blk devices.
#
# Systems, each on the same file system in the same round:
#   native   dcfs-io with RWF_DONTCACHE on the backing file system
#   pt       dcfs, default config: writes by the kernel, uncached
#            (passthrough_uncached); reads by the kernel, uncached
#            (passthrough_reads = no, so not the drop-behind path)
#   pt-db    reads only: dcfs's default for read-only streams
#            (passthrough_reads: buffered by the kernel, dropped behind)
#   engine   dcfs with passthrough_uncached = no, passthrough_reads = no:
#            the daemon's streaming engine (what a kernel without the
#            patches gets)
# Request sizes: $T_RUN/sizes (BENCH_SIZES on the host).
# Every result is one line "B fs= op= sys= bs= round= mibs= cpu= dcpu= res="
# (cpu: the application's CPU seconds, dcpu: the daemon's, res: pages of
# the backing file resident after close); scripts/bench-dcfs-report.py
# prints the tables.  $1 = directory of the test programs (unused), $2 = a
# mount point.
mnt=$2
dcfs=$(cat "$T_RUN/dcfs-path")
io=$(dirname "$dcfs")/dcfs-io
mib=${BENCH_MIB:-256}
rounds=${BENCH_ROUNDS:-3}
sizes=$(cat "$T_RUN/sizes" 2>/dev/null || echo "4096 65536 1048576")
mp=$T_RUN/dcfs-mnt
cfg=$T_RUN/dcfs.conf
hz=$(getconf CLK_TCK)
pid=
. "$T_RUN/dcfs-common.sh"

echo "== dcfs bench: $(grep MemTotal /proc/meminfo), $(nproc) CPU(s), ${mib} MiB files, $rounds rounds, sizes $sizes"
swapoff -a 2>/dev/null
mkdir -p "$mp"

# CPU seconds the daemon has used (all its threads, live and exited)
daemon_cpu() {
	awk -v hz="$hz" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$pid/stat"
}

config() {	# $1 = passthrough_uncached, $2 = passthrough_reads
	printf '[global]\ndefault = dontcache\nmin_size = 0\npassthrough_uncached = %s\npassthrough_writes = %s\npassthrough_reads = %s\n' \
		"$1" "$1" "$2" > "$cfg"
	kill -HUP "$pid"
	sleep 0.5
}

clean() {
	sync
	echo 3 > /proc/sys/vm/drop_caches
	sleep 0.5
}

# resident pages of backing file $1, once writeback drops have settled
resident_after() {
	i=0
	while [ $i -lt 50 ]; do
		r=$("$io" resident "$1" | cut -d' ' -f1)
		[ "$r" = 0 ] && break
		sleep 0.1
		i=$((i + 1))
	done
	echo "$r"
}

# one measurement: $1 fs, $2 op, $3 sys, $4 bs, $5 round, $6 file through
# which to do the I/O, $7 the backing file, $8 dontcache|plain
measure() {
	clean
	d0=$(daemon_cpu)
	if [ "$2" = write ]; then
		out=$("$io" write "$6" "${mib}M" "$4" "$8" fsync) || return 1
	else
		out=$("$io" read "$6" "$4" "$8") || return 1
	fi
	d1=$(daemon_cpu)
	sleep 0.2 # the asynchronous RELEASE and dcfs's last drop
	res=$(resident_after "$7")
	set -- "$@" $out
	echo "B fs=$1 op=$2 sys=$3 bs=$4 round=$5 mibs=${11} cpu=${12} dcpu=$(awk -v a="$d0" -v b="$d1" 'BEGIN { printf "%.3f", b - a }') res=$res"
}

start_dcfs() {	# $1 = backing directory
	printf '[global]\ndefault = dontcache\nmin_size = 0\n' > "$cfg"
	dcfs_start "$dcfs" "$1" "$mp" "$cfg" "$T_RUN/dcfs-$fs.log" || return 1
	grep "passthrough:" "$T_RUN/dcfs-$fs.log"
}

stop_dcfs() {
	umount "$mp"
	wait "$pid"
}

rc=0
n=0
for spec in f2fs:/dev/nullb0 ext4:/dev/nullb1 xfs:/dev/nullb2; do
	fs=${spec%%:*} dev=${spec#*:}
	case $fs in
	f2fs) mkfs.f2fs -q -f "$dev" > /dev/null ;;
	ext4) mkfs.ext4 -q -F "$dev" > /dev/null ;;
	xfs) mkfs.xfs -q -f "$dev" > /dev/null ;;
	esac || { echo "mkfs.$fs failed"; rc=1; continue; }
	mount -t "$fs" "$dev" "$mnt" || { echo "mount $fs failed"; rc=1; continue; }
	b=$mnt/backing
	mkdir -p "$b"
	echo "== $fs on $dev"
	start_dcfs "$b" || { umount "$mnt"; rc=1; continue; }
	r=1
	while [ $r -le "$rounds" ]; do
		for s in $sizes; do
			n=$((n + 1))
			# the order of the systems turns every measurement
			case $((n % 3)) in
			0) order="native pt engine" ;;
			1) order="pt engine native" ;;
			2) order="engine native pt" ;;
			esac
			for sys in $order; do
				case $sys in
				native)
					rm -f "$mp/w.dat"
					measure "$fs" write native "$s" "$r" "$b/w.dat" "$b/w.dat" dontcache ;;
				pt)
					config yes yes
					rm -f "$mp/w.dat"
					measure "$fs" write pt "$s" "$r" "$mp/w.dat" "$b/w.dat" plain ;;
				engine)
					config no no
					rm -f "$mp/w.dat"
					measure "$fs" write engine "$s" "$r" "$mp/w.dat" "$b/w.dat" plain ;;
				esac || { echo "write $sys $s failed"; rc=1; }
			done
		done
		# reads of one source file, written once per round (files are
		# removed through the mount: dcfs must not keep a stale name)
		rm -f "$mp/w.dat"
		"$io" write "$b/r.dat" "${mib}M" 1M dontcache fsync > /dev/null || rc=1
		for s in $sizes; do
			n=$((n + 1))
			case $((n % 4)) in
			0) order="native pt pt-db engine" ;;
			1) order="pt pt-db engine native" ;;
			2) order="pt-db engine native pt" ;;
			3) order="engine native pt pt-db" ;;
			esac
			for sys in $order; do
				case $sys in
				native)
					measure "$fs" read native "$s" "$r" "$b/r.dat" "$b/r.dat" dontcache ;;
				pt)
					config yes no
					measure "$fs" read pt "$s" "$r" "$mp/r.dat" "$b/r.dat" plain ;;
				pt-db)
					config yes yes
					measure "$fs" read pt-db "$s" "$r" "$mp/r.dat" "$b/r.dat" plain ;;
				engine)
					config no no
					measure "$fs" read engine "$s" "$r" "$mp/r.dat" "$b/r.dat" plain ;;
				esac || { echo "read $sys $s failed"; rc=1; }
			done
		done
		rm -f "$mp/r.dat"
		r=$((r + 1))
	done
	"$dcfs" stat "$mp" | sed -n '/^passthrough:/,/backing ids/p'
	stop_dcfs
	umount "$mnt"
done
exit $rc
