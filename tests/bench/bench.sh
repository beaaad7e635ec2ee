#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# dcfs benchmark: streaming throughput, page-cache footprint and hot-set
# survival of dcfs against the native filesystem, side by side in one run.
# See tests/bench/README.md for what every column means.
#
#   tests/bench/bench.sh [--quick] [--out DIR] [options]     (as root)
#
# Binaries: $DCFS_BIN (default build/dcfs) and $DCFS_IO_BIN (default
# build/dcfs-io), relative to the repository root.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"
DCFS_BIN=${DCFS_BIN:-$REPO/build/dcfs}
IO=${DCFS_IO_BIN:-$REPO/build/dcfs-io}

OUT=/var/tmp/dcfs-bench
MODE=full
RUNS=3
SIZE=4G          # streamed file at 64 KiB and 1 MiB requests
SIZE_4K=256M     # streamed file at 4 KiB requests (see README: time budget)
HOT=2G
STREAM=8G
HOT_RUNS=3
HOT_OP="write"
CG_LIMIT=1G
META_N="100000 1000000"
META_RUNS=3
META_RUNS_BIG=1  # runs of file counts >= 500000 (a 1 M run takes ~10 min)
META_NOFILE=4096 # RLIMIT_NOFILE of the metadata daemons, low on purpose
META_SYS="native dcfs"
FIND_N=1000000   # files of the find + stat test (0: none)
BSLIST="4K 64K 1M"
SYSTEMS="nat-buf nat-dc dcfs-cache dcfs-cache-fwd dcfs-auto dcfs-dc dcfs-dc-direct dcfs-dc-t1 dcfs-btrfs"
HOTSYS="nat-buf nat-dc dcfs-dc dcfs-dc-hotnative dcfs-btrfs"
HOTSYS_ALL="nat-buf nat-dc dcfs-cache dcfs-cache-fwd dcfs-dc dcfs-dc-hotnative dcfs-btrfs"
DO_STREAM=1 DO_HOT=1 DO_META=1 KEEP=0 REPORT_ONLY=0
FS=ext4          # filesystem of the native and dcfs rows (btrfs: fallback rows)

usage() {
	cat <<EOF
usage: $0 [options]
  --quick            development sizes: ${SIZE_Q:=512M} file (128M at 4K),
                     256M hot + 1G stream, 1 run, 10000 meta files
  --out DIR          output directory (default $OUT)
  --runs N           runs per measurement, median reported (default $RUNS)
  --size S           streamed file size at 64K/1M (default $SIZE)
  --size-4k S        streamed file size at 4K (default $SIZE_4K)
  --hot S            hot file size (default $HOT)
  --stream S         bytes streamed past the hot set (default $STREAM)
  --hot-runs N       hot-set runs (default $HOT_RUNS)
  --hot-op write|read  the stream past the hot set is written (default) or read
                     (the file is written natively first)
  --cg-limit S       memory cgroup limit of the hot-set test (default $CG_LIMIT)
  --meta-files "N.." file counts of the metadata test (default "$META_N")
  --meta-runs N      runs per file count (default $META_RUNS; $META_RUNS_BIG
                     for counts >= 500000: --meta-runs-big N)
  --meta-nofile N    RLIMIT_NOFILE of the metadata daemons (default $META_NOFILE)
  --meta-systems "L" native, dcfs (default options), dcfs-always
                     (-o cache=always) (default "$META_SYS")
  --find-files N     files of the find + stat test (default $FIND_N; 0: none)
  --bs "LIST"        request sizes (default "$BSLIST")
  --fs ext4|xfs      filesystem of the native and dcfs rows (default $FS)
  --systems "LIST"   streaming systems (default "$SYSTEMS")
  --hot-systems "L"  hot-set systems (default "$HOTSYS";
                     all: "$HOTSYS_ALL", the --quick default)
  --no-stream | --no-hot | --no-meta   skip a part
  --meta-only        only the metadata and find tests (\`make bench-meta\`)
  --keep             keep the images
  --report-only      only redo bench.md/bench.png from OUT/raw (same options)
EOF
}

ARGS="$*"
WINDOW_PAGES=$((8 << 20 >> 12)) # dcfs.conf window default 8M, in 4 KiB pages
while [ $# -gt 0 ]; do
	case $1 in
	--quick) MODE=quick RUNS=1 SIZE=512M SIZE_4K=128M HOT=256M STREAM=1G
		 HOT_RUNS=1 META_N=10000 META_RUNS=1 FIND_N=10000 HOTSYS=$HOTSYS_ALL ;;
	--out) OUT=$2; shift ;;
	--out=*) OUT=${1#*=} ;;
	--runs) RUNS=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--size-4k) SIZE_4K=$2; shift ;;
	--hot) HOT=$2; shift ;;
	--stream) STREAM=$2; shift ;;
	--hot-runs) HOT_RUNS=$2; shift ;;
	--hot-op) HOT_OP=$2; shift ;;
	--cg-limit) CG_LIMIT=$2; shift ;;
	--meta-files) META_N=$2; shift ;;
	--meta-runs) META_RUNS=$2; shift ;;
	--meta-runs-big) META_RUNS_BIG=$2; shift ;;
	--meta-nofile) META_NOFILE=$2; shift ;;
	--meta-systems) META_SYS=$2; shift ;;
	--find-files) FIND_N=$2; shift ;;
	--bs) BSLIST=$2; shift ;;
	--fs) FS=$2; shift ;;
	--systems) SYSTEMS=$2; shift ;;
	--hot-systems) HOTSYS=$2; shift ;;
	--no-stream) DO_STREAM=0 ;;
	--no-hot) DO_HOT=0 ;;
	--no-meta) DO_META=0 ;;
	--meta-only) DO_STREAM=0 DO_HOT=0 ;;
	--keep) KEEP=1 ;;
	--report-only) REPORT_ONLY=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "bench: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done

case $HOT_OP in read|write) ;; *) die "--hot-op: read or write, not '$HOT_OP'" ;; esac

[ "$(id -u)" = 0 ] || die "must run as root (loop devices, drop_caches, cgroups)"
[ -x "$DCFS_BIN" ] || die "$DCFS_BIN missing (make)"
[ -x "$IO" ] || die "$IO missing (make)"
case $FS in ext4|xfs) ;; *) die "--fs: ext4 or xfs, not $FS" ;; esac
for t in losetup mkfs.$FS mkfs.btrfs fusermount3 findmnt; do
	command -v $t >/dev/null || die "$t not found"
done
command -v gnuplot >/dev/null || echo "bench: gnuplot not found, no chart" >&2

bytes() { # 4K / 64M / 2G -> bytes
	local v=${1%[kKmMgG]}
	case $1 in
	*[kK]) echo $((v << 10)) ;; *[mM]) echo $((v << 20)) ;;
	*[gG]) echo $((v << 30)) ;; *) echo "$1" ;;
	esac
}

OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
W=$OUT/work                  # images, mount points, scratch
RAW=$OUT/raw                 # per-run CSVs
mkdir -p "$W" "$RAW" "$OUT/logs"
E=$W/ext4 B=$W/btrfs M=$W/mnt
LOOPS=() DAEMONS=() FUSEMNTS=() CGS=()
MEMCG_ROOT=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
MEMCG_ROOT=${MEMCG_ROOT%/}

cleanup() {
	local rc=$? i
	trap - EXIT INT TERM
	set +e
	for i in "${FUSEMNTS[@]}"; do
		mountpoint -q "$i" && { fusermount3 -u "$i" || fusermount3 -uz "$i"; }
	done
	for i in "${DAEMONS[@]}"; do
		kill -0 "$i" 2>/dev/null && kill "$i" 2>/dev/null
		wait "$i" 2>/dev/null
	done
	for i in "$E" "$B"; do
		mountpoint -q "$i" && { umount "$i" || umount -l "$i"; }
	done
	for i in "${LOOPS[@]}"; do losetup -d "$i"; done
	for i in "${CGS[@]}"; do [ -d "$i" ] && rmdir "$i"; done
	[ "$KEEP" = 1 ] || rm -f "$W/main.img" "$W/ext4.img" "$W/xfs.img" "$W/btrfs.img"
	rm -rf "$W/tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# drop_caches by anyone: a change during a measurement means someone else on
# the machine dropped the page cache under it (the run is then excluded).
drops() { awk '$1 == "drop_pagecache" { print $2 }' /proc/vmstat; }
kswapd_scan() { awk '$1 == "pgscan_kswapd" { print $2 }' /proc/vmstat; }
# CPU time of a daemon in units of 1/HZ s.  /proc/PID/stat counts clock
# ticks (10 ms here): a passthrough daemon's whole share of a run is one or
# two of them, so each daemon gets its own cpuacct cgroup (cgroup v1) when
# the machine has one, and the unit is then the microsecond.
CLK_TCK=$(getconf CLK_TCK)
CPUACCT_ROOT=/sys/fs/cgroup/cpuacct
HZ=$CLK_TCK
[ -w "$CPUACCT_ROOT/cgroup.procs" ] && HZ=1000000
cpu_ticks() { # utime + stime of all threads of a pid, ever; 0 without one
	local cg
	[ -n "${1:-}" ] && [ -r /proc/$1/stat ] || { echo 0; return; }
	cg=$(awk -F: '$2 ~ /(^|,)cpuacct(,|$)/ { print $3 }' /proc/$1/cgroup 2>/dev/null)
	if [ "$HZ" = 1000000 ] && [[ $cg == /dcfs-bench-* ]] &&
		[ -r "$CPUACCT_ROOT$cg/cpuacct.usage" ]; then
		echo $(( $(cat "$CPUACCT_ROOT$cg/cpuacct.usage") / 1000 ))
		return
	fi
	sed 's/.*) //' /proc/$1/stat | awk -v u=$((HZ / CLK_TCK)) '{ print ($12 + $13) * u }'
}
# Peak RSS of a daemon over one measurement: clear_refs 5 resets VmHWM.
rss_reset() { [ -n "${1:-}" ] && [ -w /proc/$1/clear_refs ] && echo 5 > /proc/$1/clear_refs || true; }
rss_peak() { # KiB, - without a daemon
	[ -n "${1:-}" ] && [ -r /proc/$1/status ] || { echo -; return; }
	awk '$1 == "VmHWM:" { print $2 }' /proc/$1/status
}
# The in-flight bound the peak RSS is compared with (dcfs.conf defaults;
# the bench configs do not set inflight): one handle streams at a time.
INFLIGHT_MIB=8

make_fs() { # kind size dir
	local img=$W/$1.img loop
	[ "$1" = btrfs ] || img=$W/main.img
	rm -f "$img"
	truncate -s "$2" "$img"
	loop=$(losetup --direct-io=on -f --show "$img")
	LOOPS+=("$loop")
	if [ "$1" = ext4 ]; then
		# an inode per 8 KiB: the metadata test needs over a million
		mkfs.ext4 -q -F -i 8192 -E lazy_itable_init=0,lazy_journal_init=0 "$loop"
	elif [ "$1" = xfs ]; then
		mkfs.xfs -q -f "$loop"
	else
		mkfs.btrfs -q -f "$loop" >/dev/null
	fi
	mkdir -p "$3"
	mount "$loop" "$3"
	log "$1 on $loop ($(cat /sys/block/${loop#/dev/}/loop/dio 2>/dev/null || echo ?) = direct-io) at $3"
}

write_conf() {
	mkdir -p "$W/conf"
	printf '[global]\ndefault = dontcache\nmin_size = 0\n' > "$W/conf/dontcache.conf"
	printf '[global]\ndefault = dontcache\nmin_size = 0\nfuse_readahead = no\n' > "$W/conf/dcdirect.conf"
	printf '[global]\ndefault = cache\n' > "$W/conf/cache.conf"
	printf '[global]\ndefault = auto\nmin_size = 0\n' > "$W/conf/auto.conf"
	# Hot-set mounts: the hot file is ordinary data, *.stream streams.
	printf '[global]\ndefault = cache\nmin_size = 0\n\n[class bench]\nextensions = stream\npolicy = dontcache\n' \
		> "$W/conf/hot.conf"
}

# start_dcfs NAME CONF BACKING MNT CGROUP|"" [extra -o options]
# Runs the daemon in the foreground (backgrounded here) so its pid is
# known; with a cgroup it is started from a shell already in it.
start_dcfs() {
	local name=$1 conf=$2 back=$3 mnt=$4 cg=$5 extra=${6:-}
	local cpucg=""
	mkdir -p "$back" "$mnt"
	if [ "$HZ" = 1000000 ]; then
		cpucg=$CPUACCT_ROOT/dcfs-bench-$$-cpu-$name
		[ -d "$cpucg" ] && rmdir "$cpucg"
		mkdir "$cpucg"
		CGS+=("$cpucg")
	fi
	(
		[ -n "$cg" ] && echo $BASHPID > "$cg/tasks"
		[ -n "$cpucg" ] && echo $BASHPID > "$cpucg/tasks"
		# the metadata daemons get a low fd limit on purpose
		[ -n "${DAEMON_NOFILE:-}" ] && ulimit -n "$DAEMON_NOFILE"
		exec "$DCFS_BIN" -f -o "config=$conf${extra:+,$extra}" "$back" "$mnt"
	) >>"$OUT/logs/dcfs-$name.log" 2>&1 &
	dcfs_started "$name" $! "$mnt"
}

stop_dcfs() { # NAME MNT
	local v=PID_${1//-/_}
	fusermount3 -u "$2"
	wait "${!v}" 2>/dev/null || true
	eval "$v="
}

new_cgroup() { # prints the path of a fresh memory cgroup limited to CG_LIMIT
	local cg=$MEMCG_ROOT/dcfs-bench-$$-$1
	[ -d "$cg" ] && rmdir "$cg"
	mkdir "$cg"
	CGS+=("$cg")
	echo "$(bytes "$CG_LIMIT")" > "$cg/memory.limit_in_bytes"
	echo "$cg"
}
open_cgroup() { # NAME: prints the path of a fresh memory cgroup without a limit
	local cg=$MEMCG_ROOT/dcfs-bench-$$-$1
	[ -d "$cg" ] && rmdir "$cg"
	mkdir "$cg"
	CGS+=("$cg")
	echo "$cg"
}
# Page cache charged to the writer's and to the daemon's memory cgroup is
# what a write costs in memory, whoever else uses the machine (the system
# wide ΔCached also counts other people's files): a passthrough write
# charges one copy to the writer, a forwarded one a copy to each.
cg_peak_reset() { [ -n "${1:-}" ] && echo 0 > "$1/memory.max_usage_in_bytes"; return 0; }
cg_usage() { [ -n "${1:-}" ] && cat "$1/memory.usage_in_bytes" || echo 0; }
cg_peak() { [ -n "${1:-}" ] && cat "$1/memory.max_usage_in_bytes" || echo 0; }
incg() { # CGROUP CMD... : run CMD inside the cgroup
	local cg=$1; shift
	( echo $BASHPID > "$cg/tasks"; exec "$@" )
}

watch_start() { # waits until the sampler has its first sample
	rm -f "$W/tmp/watch.ready"
	"$IO" watch 50 "$W/tmp/watch.ready" > "$W/tmp/watch" & WATCH=$!
	while [ ! -e "$W/tmp/watch.ready" ] && kill -0 $WATCH 2>/dev/null; do sleep 0.01; done
}
watch_stop() { # sets WOUT; not in a subshell: it must reap the sampler
	kill -TERM $WATCH; wait $WATCH || true
	WOUT=$(cat "$W/tmp/watch")
	set -- $WOUT
	[ $# = 5 ] || { log "warning: meminfo sampler said '$WOUT'"; WOUT=""; }
}

# ---------------------------------------------------------------- systems
# sys_setup SYSTEM -> DIR (where the app does I/O), BDIR (backing dir),
# FLAG (dontcache for native RWF_DONTCACHE), DPID (daemon pid or empty).
sys_setup() {
	FLAG="" DPID="" DCG=""
	case $1 in
	nat-buf) DIR=$E/native BDIR=$DIR ;;
	nat-dc) DIR=$E/native BDIR=$DIR FLAG=dontcache ;;
	dcfs-cache) DIR=$M/cache BDIR=$E/cache DPID=$PID_cache DCG=${CG_cache:-} ;;
	dcfs-cache-fwd) DIR=$M/cachefwd BDIR=$E/cachefwd DPID=$PID_cachefwd DCG=${CG_cachefwd:-} ;;
	dcfs-auto) DIR=$M/auto BDIR=$E/auto DPID=$PID_auto ;;
	dcfs-dc) DIR=$M/dc BDIR=$E/dc DPID=$PID_dc ;;
	dcfs-dc-t1) DIR=$M/dc1 BDIR=$E/dc1 DPID=$PID_dc1 ;;
	dcfs-dc-direct) DIR=$M/dcdirect BDIR=$E/dcdirect DPID=$PID_dcdirect ;;
	dcfs-dc-devfuse) DIR=$M/dcdevfuse BDIR=$E/dcdevfuse DPID=$PID_dcdevfuse ;;
	dcfs-btrfs) DIR=$M/btrfs BDIR=$B/dc DPID=$PID_btrfs ;;
	nat-buf-btrfs) DIR=$B/native BDIR=$DIR ;;
	*) die "unknown system $1" ;;
	esac
	mkdir -p "$BDIR"
}

sys_label() {
	case $1 in
	nat-buf) echo "native buffered" ;;
	nat-dc) echo "native RWF_DONTCACHE" ;;
	dcfs-cache) echo "dcfs cache class" ;;
	dcfs-cache-fwd) echo "dcfs cache class, -o nopassthrough" ;;
	dcfs-auto) echo "dcfs auto class (unknown large file)" ;;
	dcfs-dc) echo "dcfs dontcache class" ;;
	dcfs-dc-t1) echo "dcfs dontcache, max_threads=1" ;;
	dcfs-dc-direct) echo "dcfs dontcache, fuse_readahead = no" ;;
	dcfs-dc-devfuse) echo "dcfs dontcache, -o nouring" ;;
	dcfs-btrfs) echo "dcfs dontcache over btrfs (fallback)" ;;
	nat-buf-btrfs) echo "native buffered, btrfs" ;;
	dcfs-dc-hotnative) echo "dcfs dontcache class, hot file read natively" ;;
	*) echo "$1" ;;
	esac
}

# One measured operation; appends a CSV line to $RAW/stream.csv:
# rep,sys,bs,op,bytes,secs,mibs,res_backing,res_fuse,dcached_kb,ddirty_kb,kswapd,cpu_ticks,disturbed,rss_peak_kb
one_op_try() {
	local rep=$1 sys=$2 bs=$3 op=$4 size=$5 f out k0 k1 c0 c1 w rb rf x0 x1 ext=0
	sys_setup "$sys"
	f=bench-$bs.dat
	[ "$op" = write ] && rm -f "$DIR/$f"
	drop_caches
	k0=$(kswapd_scan); c0=$(cpu_ticks "$DPID"); x0=$(drops)
	rss_reset "$DPID"
	watch_start
	if [ "$op" = write ]; then
		local wcg d0
		wcg=$(open_cgroup "w-$rep-$sys-$bs")
		cg_peak_reset "$DCG"; d0=$(cg_usage "$DCG")
		out=$(incg "$wcg" "$IO" write "$DIR/$f" "$size" "$bs" $FLAG fsync) || out=""
		echo "$rep,$sys,$bs,$(( $(cg_peak "$wcg") >> 10 )),$(( ($(cg_peak "$DCG") - d0) >> 10 ))" \
			>> "$RAW/charge.csv"
	else
		out=$("$IO" read "$DIR/$f" "$bs" $FLAG) || out=""
	fi
	watch_stop; w=$WOUT
	if [ -z "$out" ]; then
		log "run $rep $sys $bs $op FAILED (not counted)"
		EXT=0
		return 0
	fi
	k1=$(kswapd_scan); c1=$(cpu_ticks "$DPID")
	local rss; rss=$(rss_peak "$DPID")
	sleep 0.5 # FUSE release is asynchronous: let it finish
	rb=$("$IO" resident "$BDIR/$f" | cut -d' ' -f1)
	rf=-
	[ "$DIR" != "$BDIR" ] && rf=$("$IO" resident "$DIR/$f" | cut -d' ' -f1)
	x1=$(drops)
	[ "$x1" = "$x0" ] || { ext=1; log "warning: someone dropped the page cache during this run: excluded"; }
	set -- $out; local nb=$1 secs=$2 mibs=$3
	echo "$rep,$sys,$bs,$op,$nb,${4:--},$((c1 - c0)),$ext" >> "$RAW/cpu.csv"
	local dcached=- ddirty=-
	[ -n "$w" ] && { set -- $w; dcached=$(($3 - $1)) ddirty=$(($4 - $2)); }
	echo "$rep,$sys,$bs,$op,$nb,$secs,$mibs,$rb,$rf,$dcached,$ddirty,$((k1 - k0)),$((c1 - c0)),$ext,$rss" \
		>> "$RAW/stream.csv"
	log "run $rep $sys $bs $op: $mibs MiB/s resident $rb/$rf"
	EXT=$ext
	return 0
}

# A run someone else's drop_caches disturbed is recorded (and excluded from
# the medians if clean runs exist) and retried once.
one_op() {
	EXT=0
	[ "$4" = read ] && [ $(($1 % 2)) = 1 ] && same_file_read "$@"
	one_op_try "$@"
	[ "$EXT" = 1 ] && one_op_try "$@"
	[ "$4" = read ] && [ $(($1 % 2)) = 0 ] && same_file_read "$@"
	[ "$4" = read ] && rm -f "$DIR/bench-$3.dat"
	return 0
}

# Native and dcfs rows read different files, which sit in different places
# of the image (and of the host's disk): a placement effect of ±30 % on
# cold reads here.  So each dcfs read is also compared with a native read
# of its own backing file, before it in odd runs and after it in even
# ones (buffered for the cache rows, RWF_DONTCACHE for the dontcache
# rows); appends rep,sys,bs,native_mibs,disturbed to $RAW/samefile.csv.
same_file_read() {
	local rep=$1 sys=$2 bs=$3 out x0 nflag=""
	sys_setup "$sys"
	[ "$DIR" = "$BDIR" ] && return 0
	[ -f "$BDIR/bench-$bs.dat" ] || return 0
	# the native row a dcfs row is judged against
	case $sys in dcfs-dc*) nflag=dontcache ;; esac
	drop_caches
	x0=$(drops)
	out=$("$IO" read "$BDIR/bench-$bs.dat" "$bs" $nflag) || return 0
	set -- $out
	echo "$rep,$sys,$bs,$3,$([ "$(drops)" = "$x0" ] && echo 0 || echo 1)" >> "$RAW/samefile.csv"
}

stream_part() {
	local rep bs sys size
	: > "$RAW/stream.csv"
	: > "$RAW/samefile.csv"
	for rep in $(seq "$RUNS"); do
		for bs in $BSLIST; do
			size=$SIZE
			[ "$(bytes "$bs")" -lt 65536 ] && size=$SIZE_4K
			for sys in $SYSTEMS; do
				one_op "$rep" "$sys" "$bs" write "$size"
				one_op "$rep" "$sys" "$bs" read "$size"
			done
		done
	done
}

# ---------------------------------------------------------------- hot set
# One run: the hot reader reads the hot file into cache, then the writer
# streams STREAM bytes; reader, writer and (for dcfs) the daemon are all in
# one memory cgroup limited to CG_LIMIT.  Appends to $RAW/hot.csv:
# rep,sys,hot_pages_before,still,fraction,dcached_end_kb,dcached_peak_kb,stream_mibs,cpu_ticks,cg_max_usage,hot_backing_before,hot_backing_still,disturbed,rss_peak_kb
hot_run() {
	local rep=$1 sys=$2 cg hot stream flag="" name="" mnt="" back pid=""
	local w c0 c1 sv out svb=" - - " bb="" kb x0 x1 ext=0
	cg=$(new_cgroup "$rep-$sys")
	case $sys in
	nat-buf|nat-dc) back=$E/hotset hot=$back/hot.dat stream=$back/s.stream
		[ "$sys" = nat-dc ] && flag=dontcache ;;
	dcfs-cache|dcfs-cache-fwd|dcfs-dc|dcfs-dc-hotnative|dcfs-btrfs)
		back=$E/hotset mnt=$M/hot name=hot
		[ "$sys" = dcfs-btrfs ] && back=$B/hotset
		start_dcfs hot "$W/conf/$(case $sys in dcfs-cache*) echo cache ;; *) echo hot ;; esac).conf" \
			"$back" "$mnt" "$cg" "$([ "$sys" = dcfs-cache-fwd ] && echo nopassthrough)"
		pid=$PID_hot
		hot=$mnt/hot.dat stream=$mnt/s.stream
		[ "$sys" = dcfs-dc-hotnative ] && hot=$back/hot.dat
		[ "$hot" != "$back/hot.dat" ] && bb=$back/hot.dat
		;;
	*) die "unknown hot-set system $sys" ;;
	esac
	drop_caches
	x0=$(drops)
	incg "$cg" "$IO" read "$hot" 1M >/dev/null
	"$IO" pages "$hot" "$W/tmp/hot.before" >/dev/null
	[ -n "$bb" ] && "$IO" pages "$bb" "$W/tmp/hotb.before" >/dev/null
	c0=$(cpu_ticks "$pid")
	rss_reset "$pid"
	watch_start
	if [ "$HOT_OP" = read ]; then
		out=$(incg "$cg" "$IO" read "$stream" 1M $flag)
	else
		out=$(incg "$cg" "$IO" write "$stream" "$STREAM" 1M $flag fsync)
	fi
	watch_stop; w=$WOUT
	c1=$(cpu_ticks "$pid")
	local rss; rss=$(rss_peak "$pid")
	sleep 0.5
	sv=$("$IO" survival "$hot" "$W/tmp/hot.before")
	[ -n "$bb" ] && svb=$("$IO" survival "$bb" "$W/tmp/hotb.before")
	kb=$(cat "$cg/memory.max_usage_in_bytes")
	x1=$(drops)
	[ "$x1" = "$x0" ] || { ext=1; log "warning: someone dropped the page cache during this run: excluded"; }
	[ "$HOT_OP" = read ] || rm -f "$stream"
	[ -n "$mnt" ] && stop_dcfs hot "$mnt"
	set -- $sv; local had=$1 still=$2 frac=$3
	set -- $svb; local bhad=$1 bstill=$2
	local dend=- dpeak=-
	[ -n "$w" ] && { set -- $w; dend=$(($5 - $1)) dpeak=$(($3 - $1)); }
	set -- $out
	echo "$rep,$sys,$had,$still,$frac,$dend,$dpeak,$3,$((c1 - c0)),$kb,$bhad,$bstill,$ext,$rss" >> "$RAW/hot.csv"
	HEXT=$ext
	log "hot run $rep $sys ($HOT_OP): survival $frac ($still of $had pages) backing $bstill/$bhad, Cached +$((dend / 1024)) MiB, stream $3 MiB/s"
	rmdir "$cg"
}

hot_part() {
	local rep sys d t
	: > "$RAW/hot.csv"
	for d in "$E/hotset" "$B/hotset"; do
		case " $HOTSYS " in *" dcfs-btrfs "*) ;; *) [ "$d" = "$B/hotset" ] && continue ;; esac
		mkdir -p "$d"
		[ -f "$d/hot.dat" ] && [ "$(stat -c %s "$d/hot.dat")" = "$(bytes "$HOT")" ] ||
			"$IO" write "$d/hot.dat" "$HOT" 1M fsync >/dev/null
		# a stream to read: written natively, outside the cgroup
		[ "$HOT_OP" = read ] && ! [ "$(stat -c %s "$d/s.stream" 2>/dev/null)" = "$(bytes "$STREAM")" ] &&
			"$IO" write "$d/s.stream" "$STREAM" 1M dontcache fsync >/dev/null
	done
	for rep in $(seq "$HOT_RUNS"); do
		for sys in $HOTSYS; do
			for t in 1 2 3; do # up to two retries of a disturbed run
				HEXT=0
				hot_run "$rep" "$sys"
				[ "$HEXT" = 1 ] || break
			done
		done
	done
}

# ---------------------------------------------------------------- metadata
# Peak fds of a daemon, sampled every 0.2 s until SIGTERM; prints the peak.
fd_sampler() { # PID
	local peak=0 n stop=0
	trap 'stop=1' TERM
	while [ $stop = 0 ] && [ -d /proc/$1/fd ]; do
		n=$(ls /proc/$1/fd 2>/dev/null | wc -l)
		[ "$n" -gt "$peak" ] && peak=$n
		sleep 0.2
	done
	echo "$peak"
}
sampler_start() { # PID
	fd_sampler "$1" > "$W/tmp/fds" & SAMPLER=$!
}
sampler_stop() { # PID -> PEAK_FDS, HWM_KB (peak RSS of the daemon)
	kill -TERM $SAMPLER 2>/dev/null; wait $SAMPLER 2>/dev/null || true
	PEAK_FDS=$(cat "$W/tmp/fds"); PEAK_FDS=${PEAK_FDS:--}
	HWM_KB=$(awk '$1 == "VmHWM:" { print $2 }' /proc/$1/status 2>/dev/null)
	HWM_KB=${HWM_KB:--}
}

meta_mount_opts() { # SYSTEM
	case $1 in dcfs) echo "" ;; dcfs-always) echo cache=always ;;
	*) die "unknown metadata system $1" ;; esac
}

# Requests per file of a dcfs run, from `dcfs stat --json`: "lookup 3.00 ..."
requests_per_file() { # JSON N
	grep -o '"requests":{[^}]*}' "$1" | sed 's/"requests":{//; s/}//' | tr ',' '\n' |
		awk -F: -v n="$2" '{ gsub(/"/, "", $1); if ($1 != "init") printf "%s%s %.2f", sep, $1, $2 / n; sep = ", " } END { print "" }'
}

# One run of `dcfs-io meta` by SYSTEM; a dcfs system gets a fresh daemon
# (fd limit META_NOFILE) so that peak fds, peak RSS and request counts are
# of this run.  Appends to $RAW/meta.csv:
# n,rep,sys,create_s,stat_s,unlink_s,peak_fds,peak_rss_kb,fds_after,disturbed
# (disturbed: someone else's drop_caches during the run, which also makes
# the kernel forget the mount's entries; such a run is logged, kept, and
# counted under the table)
meta_run() { # N REP SYSTEM
	local n=$1 rep=$2 sys=$3 d pid="" out after=- x0 ext=0
	rm -rf "$E/meta-native"
	find "$E/meta-dcfs" -mindepth 1 -delete
	d=$E/meta-native
	if [ "$sys" != native ]; then
		DAEMON_NOFILE=$META_NOFILE start_dcfs meta "$W/conf/cache.conf" "$E/meta-dcfs" "$M/meta" "" "$(meta_mount_opts "$sys")"
		pid=$PID_meta d=$M/meta
	fi
	mkdir -p "$d"
	drop_caches
	x0=$(drops)
	[ -n "$pid" ] && sampler_start "$pid"
	if ! out=$("$IO" meta "$d" "$n" 1K 2>"$W/tmp/meta.err"); then
		log "meta $n run $rep $sys FAILED: $(cat "$W/tmp/meta.err")"
		echo "$n,$rep,$sys,FAIL,$(sed 's/,/;/g' "$W/tmp/meta.err" | head -1)" >> "$RAW/meta.csv"
		out=""
	fi
	[ "$(drops)" = "$x0" ] || { ext=1; log "warning: someone dropped the page cache during meta $n run $rep $sys"; }
	PEAK_FDS=- HWM_KB=-
	if [ -n "$pid" ]; then
		sampler_stop "$pid"
		after=$(ls /proc/$pid/fd | wc -l)
		"$DCFS_BIN" stat --json "$M/meta" > "$OUT/logs/meta-$n-$rep-$sys.json" 2>&1 || true
		"$DCFS_BIN" stat "$M/meta" > "$OUT/logs/meta-$n-$rep-$sys.txt" 2>&1 || true
		echo "$n $rep $sys: $(requests_per_file "$OUT/logs/meta-$n-$rep-$sys.json" "$n")" >> "$RAW/meta-requests.txt"
		stop_dcfs meta "$M/meta"
	fi
	[ -n "$out" ] || return 0
	echo "$n,$rep,$sys,${out// /,},$PEAK_FDS,$HWM_KB,$after,$ext" >> "$RAW/meta.csv"
	log "meta $n run $rep $sys: create/stat/unlink $out s, peak fds $PEAK_FDS, peak RSS $HWM_KB KiB"
}

# find + stat (find -printf of size and inode: one lstat per entry) over a
# tree of FIND_N files in directories of 1000, cold (after drop_caches)
# then warm; natively and through a fresh dcfs (fd limit META_NOFILE) of
# the same tree.  Appends to $RAW/find.csv:
# sys,phase,secs,entries,peak_fds,peak_rss_kb
find_one() { # SYSTEM PHASE DIR PID
	local t0 t1 n x0
	[ "$2" = cold ] && drop_caches
	x0=$(drops)
	[ -n "$4" ] && sampler_start "$4"
	t0=$(date +%s.%N)
	n=$(find "$3" -printf '%s %i\n' | wc -l)
	t1=$(date +%s.%N)
	PEAK_FDS=- HWM_KB=-
	[ -n "$4" ] && sampler_stop "$4"
	[ "$(drops)" = "$x0" ] || log "warning: someone dropped the page cache during find $1 $2"
	echo "$1,$2,$(echo "$t1 - $t0" | bc),$n,$PEAK_FDS,$HWM_KB" >> "$RAW/find.csv"
	log "find $1 $2: $n entries in $(echo "$t1 - $t0" | bc) s, peak fds $PEAK_FDS, peak RSS $HWM_KB KiB"
}

find_part() {
	local sys
	: > "$RAW/find.csv"
	rm -rf "$E/find"; mkdir -p "$E/find/tree"
	log "find: creating $FIND_N files natively"
	"$IO" tree "$E/find/tree" "$FIND_N" 1K
	for sys in $META_SYS; do
		if [ "$sys" = native ]; then
			find_one native cold "$E/find/tree" ""
			find_one native warm "$E/find/tree" ""
			continue
		fi
		DAEMON_NOFILE=$META_NOFILE start_dcfs find "$W/conf/cache.conf" "$E/find" "$M/find" "" "$(meta_mount_opts "$sys")"
		find_one "$sys" cold "$M/find/tree" "$PID_find"
		find_one "$sys" warm "$M/find/tree" "$PID_find"
		"$DCFS_BIN" stat --json "$M/find" > "$OUT/logs/find-$sys.json" 2>&1 || true
		echo "find $sys: $(requests_per_file "$OUT/logs/find-$sys.json" "$FIND_N")" >> "$RAW/meta-requests.txt"
		stop_dcfs find "$M/find"
	done
	rm -rf "$E/find"
}

meta_part() {
	local rep sys n runs
	: > "$RAW/meta.csv"; : > "$RAW/meta-requests.txt"
	for n in $META_N; do
		runs=$META_RUNS
		[ "$n" -ge 500000 ] && runs=$META_RUNS_BIG
		for rep in $(seq "$runs"); do
			for sys in $META_SYS; do
				meta_run "$n" "$rep" "$sys"
			done
		done
	done
}

# ---------------------------------------------------------------- report

# charge.csv (rep,sys,bs,writer_kb,daemon_kb) -> $RAW/charge-median.csv:
# sys,bs,writer_mib,daemon_mib,total_mib
charge_medians() {
	[ -s "$RAW/charge.csv" ] || return 0
	awk -F, "$median_awk"'
	{ k = $2 "," $3; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
	  w[k] = w[k] " " $4 / 1024; d[k] = d[k] " " $5 / 1024; t[k] = t[k] " " ($4 + $5) / 1024 }
	END { for (i = 1; i <= n; i++) { k = order[i]; printf "%s,%.0f,%.0f,%.0f\n", k, med(w[k]), med(d[k]), med(t[k]) } }' \
		"$RAW/charge.csv" > "$RAW/charge-median.csv"
}

charge_table() {
	echo "| system | req | file MiB | writer cgroup peak MiB | daemon cgroup peak MiB | total ÷ file size |"
	echo "|---|---|---:|---:|---:|---:|"
	awk -F, '{ mib = ($2 == "4K" ? size4k : size) / 1048576
		printf "| %s | %s | %d | %s | %s | %.2f |\n", $1, $2, mib, $3, ($1 ~ /^dcfs-cache/ ? $4 : "-"), $5 / mib }' \
		size="$(bytes "$SIZE")" size4k="$(bytes "$SIZE_4K")" "$RAW/charge-median.csv"
}

# cpu.csv (rep,sys,bs,op,bytes,app_cpu_s,daemon_ticks,disturbed) ->
# $RAW/cpu-median.csv: sys,bs,op,app_s_per_gib,daemon_s_per_gib,total
cpu_medians() {
	[ -s "$RAW/cpu.csv" ] || return 0
	awk -F, "$median_awk"'
	$6 == "-" || $8 == 1 { next }
	{ k = $2 "," $3 "," $4; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
	  g = $5 / 1073741824; a[k] = a[k] " " $6 / g; d[k] = d[k] " " ($7 / hz) / g
	  t[k] = t[k] " " ($6 + $7 / hz) / g }
	END { for (i = 1; i <= n; i++) { k = order[i]; printf "%s,%.3f,%.3f,%.3f\n", k, med(a[k]), med(d[k]), med(t[k]) } }' \
		hz="$HZ" "$RAW/cpu.csv" > "$RAW/cpu-median.csv"
}

cpu_table() {
	echo "| system | req | op | application CPU s/GiB | daemon CPU s/GiB | total CPU s/GiB | total × native buffered |"
	echo "|---|---|---|---:|---:|---:|---:|"
	awk -F, 'FNR == NR { if ($1 == "nat-buf") nb[$2 "," $3] = $6; next }
	{ r = (nb[$2 "," $3] > 0) ? sprintf("%.2f", $6 / nb[$2 "," $3]) : "-"
	  printf "| %s | %s | %s | %.3f | %s | %.3f | %s |\n", $1, $2, $3, $4, ($1 ~ /^dcfs/ ? sprintf("%.3f", $5) : "-"), $6, r }' \
		"$RAW/cpu-median.csv" "$RAW/cpu-median.csv"
}

# stream.csv -> $RAW/stream-median.csv: sys,bs,op,mibs,res_b,res_f,dcached_mib,ddirty_mib,kswapd,cpu_s_per_gib
# stream.csv -> $RAW/stream-median.csv: sys,bs,op,mibs,res_b,res_f,dcached_mib,ddirty_mib,kswapd,cpu_s_per_gib,used,excluded,rss_peak_mib
stream_medians() {
	awk -F, "$median_awk"'
	FNR == NR { if ($14 != 1) clean[$2 "," $3 "," $4]++; next }
	{
		k = $2 "," $3 "," $4
		if ($14 == 1 && clean[k] > 0) { excl[k]++; next }
		used[k]++
		if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		mibs[k] = mibs[k] " " $7; rb[k] = rb[k] " " $8; rf[k] = rf[k] " " $9
		dc[k] = dc[k] " " ($10 == "-" ? "-" : $10 / 1024); dd[k] = dd[k] " " ($11 == "-" ? "-" : $11 / 1024)
		ks[k] = ks[k] " " $12
		cpu[k] = cpu[k] " " ($13 / hz) / ($5 / 1073741824)
		rss[k] = rss[k] " " (($15 == "" || $15 == "-") ? "-" : $15 / 1024)
	}
	END {
		for (i = 1; i <= n; i++) { k = order[i]; r = med(rss[k])
			printf "%s,%s,%s,%s,%.0f,%.0f,%s,%.2f,%d,%d,%s\n", k, med(mibs[k]), med(rb[k]), med(rf[k]), med(dc[k]), med(dd[k]), med(ks[k]), med(cpu[k]), used[k], excl[k], (r == "-" || r == "") ? "-" : sprintf("%.1f", r) }
	}' hz="$HZ" "$RAW/stream.csv" "$RAW/stream.csv" > "$RAW/stream-median.csv"
}

# samefile.csv + stream.csv -> table: each dcfs read against the native read
# of its own backing file in the same run (median of the per-run ratios).
samefile_table() {
	echo "| system | req | dcfs MiB/s | native MiB/s, same file | × native, same file (median of per-run ratios) | runs |"
	echo "|---|---|---:|---:|---:|---:|"
	awk -F, "$median_awk"'
	FNR == NR { if ($5 != 1) nat[$1 "," $2 "," $3] = $4; next }
	$4 == "read" && $14 != 1 && (($1 "," $2 "," $3) in nat) {
		k = $2 "," $3; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		nv = nat[$1 "," $2 "," $3]; d[k] = d[k] " " $7; na[k] = na[k] " " nv
		if (nv > 0) r[k] = r[k] " " $7 / nv; runs[k]++
	}
	END { for (i = 1; i <= n; i++) { k = order[i]; split(k, p, ",")
		printf "| %s | %s | %.1f | %.1f | %.2f | %d |\n", p[1], p[2], med(d[k]), med(na[k]), med(r[k]), runs[k] } }' \
		"$RAW/samefile.csv" "$RAW/stream.csv"
}

fmt_size() { # bytes -> 4 GiB / 512 MiB
	local b=$1
	if [ $((b % (1 << 30))) = 0 ]; then echo "$((b >> 30)) GiB"; else echo "$((b >> 20)) MiB"; fi
}

stream_table() { # op
	echo "| system | req | MiB/s | × native dontcache | × native buffered | resident pages after (backing) | resident pages after (FUSE) | peak ΔCached MiB | peak ΔDirty MiB | kswapd scan Δ | daemon CPU s/GiB | daemon peak RSS MiB (in-flight bound $INFLIGHT_MIB) |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	awk -F, -v op="$1" '
	FNR == NR { if ($3 == op) { if ($1 == "nat-dc") dc[$2] = $4; if ($1 == "nat-buf") bu[$2] = $4 }; next }
	$3 == op { row[$1 "," $2] = $0 }
	END {
		nb = split(bslist, B, " "); ns = split(syslist, S, " ")
		for (i = 1; i <= nb; i++) for (j = 1; j <= ns; j++) {
			k = S[j] "," B[i]
			if (!(k in row)) continue
			split(row[k], f, ",")
			r1 = (dc[f[2]] > 0) ? sprintf("%.2f", f[4] / dc[f[2]]) : "-"
			r2 = (bu[f[2]] > 0) ? sprintf("%.2f", f[4] / bu[f[2]]) : "-"
			cpu = (f[1] ~ /^dcfs/) ? f[10] : "-"
			rss = (f[1] ~ /^dcfs/ && f[13] != "") ? f[13] : "-"
			printf "| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[1], f[2], f[4], r1, r2, f[5], f[6], f[7], f[8], f[9], cpu, rss
		}
	}' bslist="$BSLIST" syslist="$SYSTEMS" "$RAW/stream-median.csv" "$RAW/stream-median.csv"
}

hot_medians() {
	awk -F, "$median_awk"'
	FNR == NR { if ($13 != 1) clean[$2]++; next }
	{
		k = $2
		if ($13 == 1 && clean[k] > 0) { excl[k]++; next }
		used[k]++
		if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		had[k] = had[k] " " $3; still[k] = still[k] " " $4; fr[k] = fr[k] " " $5
		de[k] = de[k] " " ($6 == "-" ? "-" : $6 / 1024); dp[k] = dp[k] " " ($7 == "-" ? "-" : $7 / 1024); mb[k] = mb[k] " " $8
		cpu[k] = cpu[k] " " $9; mu[k] = mu[k] " " $10 / 1048576
		bh[k] = bh[k] " " $11; bs[k] = bs[k] " " $12
		rss[k] = rss[k] " " (($14 == "" || $14 == "-") ? "-" : $14 / 1024)
		if (!(k in lo) || $5 < lo[k]) lo[k] = $5
	}
	END {
		for (i = 1; i <= n; i++) { k = order[i]; r = med(rss[k])
			printf "%s,%s,%s,%s,%.0f,%.0f,%s,%s,%.0f,%s,%s,%d,%d,%s,%s\n", k, med(had[k]), med(still[k]), med(fr[k]), med(de[k]), med(dp[k]), med(mb[k]), med(cpu[k]), med(mu[k]), med(bh[k]), med(bs[k]), used[k], excl[k], (r == "-" || r == "") ? "-" : sprintf("%.1f", r), lo[k] }
	}' "$RAW/hot.csv" "$RAW/hot.csv" > "$RAW/hot-median.csv"
}

meta_medians() { # N: one row per phase, a column per system of META_SYS
	awk -F, -v N="$1" -v systems="$META_SYS" "$median_awk"'
	$1 != N { next }
	$4 == "FAIL" { fail[$3] = fail[$3] "run " $2 ": " $5 "; "; next }
	{ c[$3] = c[$3] " " $4; s[$3] = s[$3] " " $5; u[$3] = u[$3] " " $6
	  t[$3] = t[$3] " " ($4 + $5 + $6); f[$3] = f[$3] " " $7; r[$3] = r[$3] " " $8; runs[$3]++
	  if ($10 == 1) dist++ }
	function cell(v) { return v == "" ? "FAILED" : sprintf("%.3f", v) }
	function ratio(a, b) { return (a == "" || b == "" || a == 0) ? "-" : sprintf("%.2f", b / a) }
	function row(name, arr,   i, line, nat) {
		nat = med(arr["native"]); line = "| " name
		for (i = 1; i <= ns; i++) line = line " | " cell(med(arr[S[i]]))
		for (i = 1; i <= ns; i++) if (S[i] != "native") line = line " | " ratio(nat, med(arr[S[i]]))
		print line " |"
	}
	END {
		ns = split(systems, S, " ")
		row("create + write 1 KiB + close", c); row("stat", s); row("unlink", u); row("total", t)
		line = "| daemon peak fds / peak RSS MiB"
		for (i = 1; i <= ns; i++) line = line " | " (S[i] == "native" ? "-" : med(f[S[i]]) " / " sprintf("%.0f", med(r[S[i]]) / 1024))
		for (i = 1; i <= ns; i++) if (S[i] != "native") line = line " | "
		print line " |"
		for (i = 1; i <= ns; i++) if (fail[S[i]] != "") printf "\n%s failures: %s\n", S[i], fail[S[i]]
		if (dist) printf "\n%d of these runs had a drop_caches by someone else in them (the kernel then forgets the mount'"'"'s entries: more LOOKUPs).\n", dist
	}' "$RAW/meta.csv"
}

meta_header() {
	local s line="| phase" sep="|---"
	for s in $META_SYS; do line+=" | $(meta_label "$s")"; sep+="|---:"; done
	for s in $META_SYS; do [ "$s" = native ] || { line+=" | $s / native"; sep+="|---:"; }; done
	echo "$line |"; echo "$sep|"
}
meta_label() {
	case $1 in native) echo "native ext4" ;; dcfs) echo "dcfs (defaults)" ;;
	dcfs-always) echo "dcfs -o cache=always" ;; *) echo "$1" ;; esac
}

find_table() {
	echo "| system | cold s | warm s | × native cold | × native warm | entries | daemon peak fds | daemon peak RSS MiB |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
	awk -F, '
	{ k = $1; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
	  sec[k, $2] = $3; ent[k] = $4
	  if ($5 != "-" && $5 > fds[k]) fds[k] = $5
	  if ($6 != "-" && $6 > rss[k]) rss[k] = $6 }
	function ratio(a, b) { return (a == "" || a == 0) ? "-" : sprintf("%.2f", b / a) }
	END { for (i = 1; i <= n; i++) { k = order[i]
		printf "| %s | %.2f | %.2f | %s | %s | %s | %s | %s |\n", k, sec[k, "cold"], sec[k, "warm"],
			ratio(sec["native", "cold"], sec[k, "cold"]), ratio(sec["native", "warm"], sec[k, "warm"]), ent[k],
			(k in fds) ? fds[k] : "-", (k in rss) ? sprintf("%.0f", rss[k] / 1024) : "-" } }' "$RAW/find.csv"
}

label_rows() { # replaces system ids in column 1 with labels
	local s script=""
	for s in $SYSTEMS $HOTSYS; do
		script+="s/^| $s |/| $(sys_label "$s") |/;"
	done
	sed "$script"
}

targets() {
	awk -F, -v win_pages="$WINDOW_PAGES" -v inflight="$INFLIGHT_MIB" -v fs="$FS" '
	function g(s, b, o, f) { return v[s "," b "," o, f] }
	FILENAME ~ /charge-median/ { charge[$1 "," $2] = $5; next }
	{ for (i = 4; i <= NF; i++) v[$1 "," $2 "," $3, i] = $i }
	function ratio(b, o) { return (g("nat-dc", b, o, 4) > 0 && g("dcfs-dc", b, o, 4) != "") ? g("dcfs-dc", b, o, 4) / g("nat-dc", b, o, 4) : -1 }
	function row(what, val, goal, ok) {
		printf "| %s | %s | %s | %s |\n", what, val, goal, (ok ? "met" : "**missed**") }
	function rrow(b, o, goal,   r) {
		r = ratio(b, o)
		if (r < 0) return
		row("dontcache class " b " " o "s vs native RWF_DONTCACHE", sprintf("%.2f×", r), "≥ " goal "×", r >= goal)
	}
	function crow(b, o,   r) {
		if (g("nat-buf", b, o, 4) <= 0 || g("dcfs-cache", b, o, 4) == "") return
		r = g("dcfs-cache", b, o, 4) / g("nat-buf", b, o, 4)
		row("cache class (passthrough) " b " " o "s vs native buffered", sprintf("%.2f×", r), "≥ 0.95×", r >= 0.95)
	}
	function copyrow(b,   mib, d, what) {
		mib = (b == "4K" ? size4k : size) / 1048576
		what = "peak page cache charged (writer + daemon cgroups)"
		d = charge["dcfs-cache," b]
		if (d == "") { d = g("dcfs-cache", b, "write", 7); what = "peak ΔCached (system wide)" }
		if (d == "") return
		row("cache class " b " write: " what " of a " mib " MiB file", d " MiB", "≤ " sprintf("%.0f", mib * 1.05) " MiB (one copy)", d <= mib * 1.05)
	}
	END {
		n = split(bslist, B, " ")
		for (i = 1; i <= n; i++) { crow(B[i], "write"); crow(B[i], "read"); copyrow(B[i]) }
		# issue 11: writes >= 1.0x at 64K and 1M (0.7x at 4K), reads >= 1.0x
		rrow("1M", "write", 1.0); rrow("1M", "read", 1.0)
		rrow("64K", "write", 1.0); rrow("64K", "read", 1.0)
		rrow("4K", "write", 0.70); rrow("4K", "read", 1.0)
		if (g("dcfs-dc", "1M", "write", 13) != "" && g("dcfs-dc", "1M", "write", 13) != "-")
			row("dcfs dontcache 1M write: daemon peak RSS", g("dcfs-dc", "1M", "write", 13) " MiB",
			    "≤ in-flight bound " inflight " MiB + 8 MiB", g("dcfs-dc", "1M", "write", 13) <= inflight + 8)
		n = split(bslist, B, " ")
		for (c = 1; c <= 2; c++) {
			sys = c == 1 ? "dcfs-dc" : "dcfs-btrfs"; max = -1; cases = ""
			for (i = 1; i <= n; i++) for (o = 1; o <= 2; o++) {
				op = o == 1 ? "write" : "read"
				if (g(sys, B[i], op, 5) == "") continue
				t = g(sys, B[i], op, 5) + g(sys, B[i], op, 6)
				cases = cases sprintf("%s%s %s: %d", cases == "" ? "" : ", ", B[i], op, t)
				if (t > max) max = t
			}
			if (max < 0) continue
			if (c == 1) row("dcfs dontcache (" fs "): resident pages after close, backing + FUSE (" cases ")", max, "0", max == 0)
			else row("dcfs fallback (btrfs): resident pages after close, backing + FUSE (" cases ")", max, "≤ " win_pages " (one window)", max <= win_pages)
		}
	}' bslist="$BSLIST" fs="$FS" size="$(bytes "$SIZE")" size4k="$(bytes "$SIZE_4K")" \
		"$RAW/charge-median.csv" "$RAW/stream-median.csv"
}

hot_targets() {
	# >= 97 % in every run: the worst run (column 15) is what counts
	awk -F, '$1 == "dcfs-dc" || $1 == "dcfs-dc-hotnative" || $1 == "dcfs-btrfs" {
		w = ($15 != "") ? $15 : $4
		printf "| hot-set survival, worst run (median %.1f %%), %s | %.1f %% | ≥ 97 %% | %s |\n", $4 * 100, $1, w * 100, (w >= 0.97) ? "met" : "**missed**"
		if ($14 != "" && $14 != "-")
			printf "| daemon peak RSS during the %s stream, %s | %s MiB | ≤ in-flight bound %d MiB + 8 MiB | %s |\n", stream, $1, $14, inflight, ($14 <= inflight + 8) ? "met" : "**missed**" }' \
		stream="$(fmt_size "$(bytes "$STREAM")")" inflight="$INFLIGHT_MIB" \
		"$RAW/hot-median.csv" | label_rows_hot
}
label_rows_hot() {
	local s script=""
	for s in $HOTSYS; do script+="s/, $s |/, $(sys_label "$s") |/;"; done
	sed "$script"
}

chart() {
	command -v gnuplot >/dev/null || return 0
	local bs sys
	[ -s "$RAW/stream-median.csv" ] && {
		printf 'bs'
		for sys in $SYSTEMS; do printf '\t"%s"' "$(sys_label "$sys")"; done
		echo
		for bs in $BSLIST; do
			printf '%s' "$bs"
			for sys in $SYSTEMS; do
				printf '\t%s' "$(awk -F, -v s="$sys" -v b="$bs" '$1 == s && $2 == b && $3 == "write" { print $4 }' "$RAW/stream-median.csv")"
			done
			echo
		done
	} > "$RAW/chart-write.dat"
	[ -s "$RAW/stream-median.csv" ] && {
		printf 'bs'
		for sys in $SYSTEMS; do printf '\t"%s"' "$(sys_label "$sys")"; done
		echo
		for bs in $BSLIST; do
			printf '%s' "$bs"
			for sys in $SYSTEMS; do
				printf '\t%s' "$(awk -F, -v s="$sys" -v b="$bs" '$1 == s && $2 == b && $3 == "read" { print $4 }' "$RAW/stream-median.csv")"
			done
			echo
		done
	} > "$RAW/chart-read.dat"
	local n; n=$(echo $SYSTEMS | wc -w)
	local hotplot=""
	if [ -s "$RAW/hot-median.csv" ]; then
		awk -F, '{ printf "\"%s\"\t%.1f\n", $1, $4 * 100 }' "$RAW/hot-median.csv" > "$RAW/chart-hot.dat"
		hotplot="set title 'hot-set survival (% of resident hot pages kept)'; set ylabel '%'; unset logscale y; set yrange [0:105]; set style fill solid 0.8; set xtics rotate by -20; plot '$RAW/chart-hot.dat' using 2:xtic(1) with boxes notitle, 95 with lines dt 2 title 'target 95 %'"
	fi
	local nplots=0 streamplot=""
	if [ -s "$RAW/stream-median.csv" ]; then
		nplots=2
		streamplot="set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right top vertical
set logscale y
set ylabel 'MiB/s (log)'
set title 'sequential write (fsync included)'
plot for [i=2:$((n + 1))] '$RAW/chart-write.dat' using i:xtic(1) title columnheader(i)
set title 'sequential read after drop_caches'
plot for [i=2:$((n + 1))] '$RAW/chart-read.dat' using i:xtic(1) title columnheader(i)"
	fi
	[ -n "$hotplot" ] && nplots=$((nplots + 1))
	[ $nplots -gt 0 ] || return 0
	gnuplot <<EOF
set terminal pngcairo noenhanced size 1400,$((nplots * 500)) font 'sans,10'
set output '$OUT/bench.png'
set multiplot layout $nplots,1 title 'dcfs bench ($MODE, $(date -u +%F), median of $RUNS)'
set grid ytics
$streamplot
set style data boxes
set boxwidth 0.6
$hotplot
unset multiplot
EOF
}

report() {
	local md=$OUT/bench.md bs sizes=""
	{
		echo "# dcfs bench — $MODE mode, $(date -u '+%F %H:%M UTC'), $(uname -r), $(nproc) CPUs"
		echo
		echo "dcfs binary: ${DCFS_ID:-?}"
		echo
		echo "Command: \`tests/bench/bench.sh${ARGS:+ $ARGS}\` (\`make bench\`${ARGS:+ with BENCH_ARGS=\"$ARGS\"})"
		echo
		if [ -s "$RAW/stream-median.csv" ]; then
			for bs in $BSLIST; do
				if [ "$(bytes "$bs")" -lt 65536 ]; then sizes+="$bs: $(fmt_size "$(bytes "$SIZE_4K")"), "
				else sizes+="$bs: $(fmt_size "$(bytes "$SIZE")"), "; fi
			done
			echo "## Streaming on a loop-backed $FS (btrfs for the fallback row), median of $RUNS run(s)"
			echo
			echo "File size per request size: ${sizes%, }.  dcfs rows: the application issues plain"
			echo "read/write; the class comes from the mount's dcfs.conf.  Ratios are against the"
			echo "native rows of the same run."
			echo
			echo "### Write (sequential, fsync before close)"
			echo
			stream_table write | label_rows
			echo
			echo "### Read (sequential, after drop_caches)"
			echo
			stream_table read | label_rows
			echo
			if [ -s "$RAW/samefile.csv" ]; then
				echo "### Read, the same file natively and through dcfs"
				echo
				echo "Each dcfs read above is also compared with a native read of its own backing file"
				echo "(after drop_caches, before it in odd runs and after it in even ones): the rows above read"
				echo "different files, and where a file lies on the image moves cold reads by up to ±30 % here."
				echo
				samefile_table | label_rows
				echo
			fi
			if [ -s "$RAW/cpu-median.csv" ]; then
				echo "### CPU per GiB moved: the application's own and the daemon's"
				echo
				echo "Throughput on a shared machine moves with other people's load; the CPU an operation"
				echo "costs moves much less.  With kernel passthrough the FUSE I/O runs in the application's"
				echo "context, so its CPU time is the whole cost; forwarded and streaming I/O add the daemon's."
				echo
				cpu_table | label_rows
				echo
			fi
			if [ -s "$RAW/charge-median.csv" ]; then
				echo "### Page cache a write costs: peaks of the writer's and the daemon's memory cgroups"
				echo
				echo "Each writer runs in a fresh memory cgroup, the cache-class daemons in their own; a"
				echo "passthrough write charges the backing file's pages to the writer (one copy), a forwarded"
				echo "one the FUSE copy to the writer and the backing copy to the daemon.  Unlike the system"
				echo "wide ΔCached this does not count other people's files."
				echo
				charge_table | label_rows
				echo
			fi
			awk -F, '$12 > 0 { printf "%s%s %s %s", n++ ? ", " : "Runs excluded because someone else dropped the page cache during them: ", $1, $2, $3 " (" $12 ")" } END { if (n) print ".\n" }' "$RAW/stream-median.csv"
		fi
		if [ -s "$RAW/hot-median.csv" ]; then
			echo "## Hot-set survival: $(fmt_size "$(bytes "$HOT")") hot file, $(fmt_size "$(bytes "$STREAM")") streamed at 1 MiB, one memory cgroup of $(fmt_size "$(bytes "$CG_LIMIT")") (median of $HOT_RUNS run(s))"
			echo
			echo "| system | hot pages resident before | still resident after | survival (worst run) | ΔCached at end MiB | peak ΔCached MiB | stream MiB/s | daemon CPU s | cgroup max usage MiB | hot backing pages before → after | daemon peak RSS MiB (in-flight bound $INFLIGHT_MIB) | runs used (excluded) |"
			echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
			awk -F, '{ cpu = ($1 ~ /^dcfs/) ? sprintf("%.2f", $8 / hz) : "-"
				bk = ($10 == "-") ? "-" : $10 " → " $11
				rss = ($1 ~ /^dcfs/ && $14 != "") ? $14 : "-"
				worst = ($15 != "") ? sprintf(" (%.1f %%)", $15 * 100) : ""
				printf "| %s | %s | %s | %.1f %%%s | %s | %s | %s | %s | %s | %s | %s | %d (%d) |\n", $1, $2, $3, $4 * 100, worst, $5, $6, $7, cpu, $9, bk, rss, $12, $13 }' \
				hz="$HZ" "$RAW/hot-median.csv" | label_rows
			echo
		fi
		if [ -s "$RAW/stream-median.csv" ] || [ -s "$RAW/hot-median.csv" ]; then
			echo "## Targets"
			echo
			echo "| target | measured | goal | |"
			echo "|---|---:|---:|---|"
			[ -e "$RAW/charge-median.csv" ] || : > "$RAW/charge-median.csv"
			[ -s "$RAW/stream-median.csv" ] && targets
			[ -s "$RAW/hot-median.csv" ] && hot_targets
			echo
		fi
		if [ -s "$RAW/meta.csv" ]; then
			for n in $META_N; do
				echo "## Metadata: $n files of 1 KiB in one directory, seconds (median of $(awk -F, -v n="$n" '$1 == n && $3 == "native"' "$RAW/meta.csv" | wc -l) run(s))"
				echo
				meta_header
				meta_medians "$n"
				echo
			done
			echo "RLIMIT_NOFILE of each metadata daemon: $META_NOFILE (\`ulimit -n\` before exec: the O_PATH fd cache gets half)."
			echo
			if [ -s "$RAW/meta-requests.txt" ]; then
				echo "FUSE requests per file (\`dcfs stat\`, all phases of a run):"
				echo
				sed 's/^/    /' "$RAW/meta-requests.txt"
				echo
			fi
		fi
		if [ -s "$RAW/find.csv" ]; then
			echo "## find + stat (\`find -printf '%s %i'\`) over $FIND_N files in directories of 1000"
			echo
			find_table
			echo
		fi
		[ -s "$OUT/bench.png" ] && echo "Chart: bench.png"
		echo "Elapsed: $((SECONDS / 60)) min $((SECONDS % 60)) s"
	} > "$md"
	cat "$md"
}

# ---------------------------------------------------------------- main
if [ "$REPORT_ONLY" = 1 ]; then
	trap - EXIT
	[ -r "$RAW/params.sh" ] && . "$RAW/params.sh"
	[ -s "$RAW/stream.csv" ] && stream_medians
	charge_medians
	cpu_medians
	[ -s "$RAW/hot.csv" ] && hot_medians
	chart || log "gnuplot failed"
	report
	exit 0
fi
mkdir -p "$W/tmp" "$M" "$W/bin"
# Pin the binaries: a rebuild of build/ during a long run must not change
# the daemon between one mount and the next.
cp "$DCFS_BIN" "$W/bin/dcfs" && cp "$IO" "$W/bin/dcfs-io"
DCFS_ID="sha256 $(sha256sum "$DCFS_BIN" | cut -c1-12), tree $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo ?)"
log "mode $MODE, output $OUT, dcfs $DCFS_BIN ($DCFS_ID)"
DCFS_BIN=$W/bin/dcfs IO=$W/bin/dcfs-io
write_conf
make_fs "$FS" "$( [ $MODE = quick ] && echo 8G || echo 16G )" "$E"
case " $SYSTEMS $HOTSYS " in *btrfs*)
	[ $DO_STREAM = 1 ] || [ $DO_HOT = 1 ] &&
		make_fs btrfs "$( [ $MODE = quick ] && echo 6G || echo 14G )" "$B" ;;
esac
PID_cache="" PID_cachefwd="" PID_auto="" PID_dc="" PID_dc1="" PID_dcdirect="" PID_dcdevfuse="" PID_btrfs="" PID_hot="" PID_meta="" PID_find=""
# dcfs keeps an fd per inode the kernel knows: 100k files need more than
# the usual 1024 (or this machine's 20000).  The daemons inherit this.
NOFILE=$(cat /proc/sys/fs/nr_open 2>/dev/null || echo 1048576)
ulimit -Hn "$NOFILE" 2>/dev/null && ulimit -Sn "$NOFILE" 2>/dev/null ||
	log "warning: could not raise RLIMIT_NOFILE ($(ulimit -n)); the metadata test may hit EMFILE in dcfs"
rm -f "$OUT/bench.png"
[ $DO_STREAM = 1 ] && rm -f "$RAW"/stream*.csv "$RAW"/charge*.csv "$RAW"/cpu*.csv
[ $DO_HOT = 1 ] && rm -f "$RAW"/hot*.csv
[ $DO_META = 1 ] && rm -f "$RAW"/meta*.csv "$RAW"/meta-requests.txt "$RAW"/find.csv
for v in HZ DCFS_ID FS MODE RUNS SIZE SIZE_4K HOT STREAM HOT_RUNS HOT_OP CG_LIMIT META_N META_RUNS META_RUNS_BIG META_NOFILE META_SYS FIND_N BSLIST SYSTEMS HOTSYS ARGS; do
	printf '%s=%q\n' $v "${!v}"
done > "$RAW/params.sh"

if [ $DO_STREAM = 1 ]; then
	CG_cache=$(open_cgroup d-cache) CG_cachefwd=$(open_cgroup d-cachefwd)
	start_dcfs cache "$W/conf/cache.conf" "$E/cache" "$M/cache" "$CG_cache"
	case " $SYSTEMS " in *" dcfs-cache-fwd "*)
		start_dcfs cachefwd "$W/conf/cache.conf" "$E/cachefwd" "$M/cachefwd" "$CG_cachefwd" nopassthrough ;; esac
	case " $SYSTEMS " in *" dcfs-auto "*)
		start_dcfs auto "$W/conf/auto.conf" "$E/auto" "$M/auto" "" ;; esac
	start_dcfs dc "$W/conf/dontcache.conf" "$E/dc" "$M/dc" ""
	case " $SYSTEMS " in *" dcfs-dc-t1 "*)
		start_dcfs dc1 "$W/conf/dontcache.conf" "$E/dc1" "$M/dc1" "" max_threads=1 ;; esac
	case " $SYSTEMS " in *" dcfs-dc-direct "*)
		start_dcfs dcdirect "$W/conf/dcdirect.conf" "$E/dcdirect" "$M/dcdirect" "" ;; esac
	case " $SYSTEMS " in *" dcfs-dc-devfuse "*)
		start_dcfs dcdevfuse "$W/conf/dontcache.conf" "$E/dcdevfuse" "$M/dcdevfuse" "" nouring ;; esac
	case " $SYSTEMS " in *" dcfs-btrfs "*)
		start_dcfs btrfs "$W/conf/dontcache.conf" "$B/dc" "$M/btrfs" "" ;; esac
	log "streaming part: $SYSTEMS × $BSLIST × $RUNS runs"
	stream_part
	for s in cache cachefwd auto dc dc1 dcdirect dcdevfuse btrfs; do
		v=PID_$s
		if [ -n "${!v}" ]; then
			"$DCFS_BIN" stat "$M/$s" > "$OUT/logs/dcfs-stat-$s.txt" 2>&1 || true
			stop_dcfs $s "$M/$s"
		fi
	done
	stream_medians
	charge_medians
	cpu_medians
fi
if [ $DO_HOT = 1 ]; then
	log "hot-set part: $HOTSYS × $HOT_RUNS runs"
	hot_part
	hot_medians
fi
if [ $DO_META = 1 ]; then
	log "metadata part: $META_N files × $META_RUNS runs ($META_RUNS_BIG from 500000), $META_SYS, daemon fd limit $META_NOFILE"
	mkdir -p "$E/meta-dcfs"
	meta_part
	if [ "$FIND_N" -gt 0 ]; then find_part; fi
fi
chart || log "gnuplot failed"
report
log "done: $OUT/bench.md $OUT/bench.png"
