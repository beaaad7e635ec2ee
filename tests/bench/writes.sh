#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Stream writes, side by side in one run (issue 40): native buffered, native
# RWF_DONTCACHE, dcfs's engine (the daemon writes with RWF_DONTCACHE or the
# fallback window) and dcfs kernel-served writes (passthrough with
# write-behind, io/writebehind.c), at 4 KiB, 64 KiB and 1 MiB requests, on
# ext4, xfs and btrfs, with the CPUs idle and busy (stress-ng --cpu
# $(nproc)); the stream's peak and final page cache; the daemon's CPU per
# GiB; and hot-set survival (a hot file read under a memory cgroup while a
# stream is written beside it).  Runs are interleaved (run, then request
# size, then system) and every figure is a median.  See tests/bench/README.md.
#
#   tests/bench/writes.sh [--quick] [--out DIR] [options]     (as root)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/bench/lib.sh
. "$REPO/tests/bench/lib.sh"
DCFS_BIN=${DCFS_BIN:-$REPO/build/dcfs}
IO=${DCFS_IO_BIN:-$REPO/build/dcfs-io}

OUT=/var/tmp/dcfs-bench-writes
RUNS=3
SIZE=1G
SIZE_4K=256M
FSLIST="ext4 xfs btrfs"
BSLIST="4K 64K 1M"
SYSTEMS="nat-buf nat-dc dcfs-engine dcfs-kernel"
LOADS="idle busy"
HOT=2G
STREAM=8G
CG_LIMIT=1G
HOT_RUNS=3
HOTFS="ext4 xfs"
DO_HOT=1 DO_STREAM=1 REPORT_ONLY=0

usage() {
	cat <<EOF
usage: $0 [options]
  --quick          256M files (64M at 4K), 1 run, hot set 512M under 256M + 2G stream
  --out DIR        output directory (default $OUT)
  --runs N         runs per cell (default $RUNS)
  --size S         file size at 64K and 1M (default $SIZE); --size-4k S (default $SIZE_4K)
  --fs "LIST"      filesystems (default "$FSLIST")
  --bs "LIST"      request sizes (default "$BSLIST")
  --systems "LIST" (default "$SYSTEMS")
  --loads "LIST"   idle and/or busy (default "$LOADS")
  --hot S --stream S --cg-limit S --hot-runs N --hot-fs "LIST"
                   hot-set part (default $HOT, $STREAM, $CG_LIMIT, $HOT_RUNS, "$HOTFS")
  --no-hot | --no-stream
  --report-only    only redo writes.md from OUT/raw
EOF
}

ARGS="$*"
while [ $# -gt 0 ]; do
	case $1 in
	--quick) RUNS=1 SIZE=256M SIZE_4K=64M HOT=512M STREAM=2G CG_LIMIT=256M HOT_RUNS=1 ;;
	--out) OUT=$2; shift ;;
	--runs) RUNS=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--size-4k) SIZE_4K=$2; shift ;;
	--fs) FSLIST=$2; shift ;;
	--bs) BSLIST=$2; shift ;;
	--systems) SYSTEMS=$2; shift ;;
	--loads) LOADS=$2; shift ;;
	--hot) HOT=$2; shift ;;
	--stream) STREAM=$2; shift ;;
	--cg-limit) CG_LIMIT=$2; shift ;;
	--hot-runs) HOT_RUNS=$2; shift ;;
	--hot-fs) HOTFS=$2; shift ;;
	--no-hot) DO_HOT=0 ;;
	--no-stream) DO_STREAM=0 ;;
	--report-only) REPORT_ONLY=1 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "writes: unknown option $1" >&2; usage >&2; exit 2 ;;
	esac
	shift
done

[ "$(id -u)" = 0 ] || die "must run as root (loop devices, drop_caches, cgroups)"
[ -x "$DCFS_BIN" ] && [ -x "$IO" ] || die "build first (make)"
for t in losetup mkfs.ext4 mkfs.xfs mkfs.btrfs fusermount3 findmnt stress-ng; do
	command -v $t >/dev/null || die "$t not found"
done

bytes() {
	local v=${1%[kKmMgG]}
	case $1 in
	*[kK]) echo $((v << 10)) ;; *[mM]) echo $((v << 20)) ;;
	*[gG]) echo $((v << 30)) ;; *) echo "$1" ;;
	esac
}

OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
W=$OUT/work RAW=$OUT/raw
mkdir -p "$W/bin" "$W/tmp" "$RAW" "$OUT/logs"
cp "$DCFS_BIN" "$W/bin/dcfs" && cp "$IO" "$W/bin/dcfs-io"
DCFS_ID="sha256 $(sha256sum "$DCFS_BIN" | cut -c1-12), tree $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo ?)"
DCFS_BIN=$W/bin/dcfs IO=$W/bin/dcfs-io
LOOPS=() MNTS=() FUSEMNTS=() DAEMONS=() CGS=() STRESS="" SAMPLER=""
MEMCG_ROOT=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
MEMCG_ROOT=${MEMCG_ROOT%/}
CPUACCT=/sys/fs/cgroup/cpuacct

cleanup() {
	local rc=$? i
	trap - EXIT INT TERM
	set +e
	[ -n "$STRESS" ] && kill "$STRESS" 2>/dev/null && wait "$STRESS" 2>/dev/null
	[ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null && wait "$SAMPLER" 2>/dev/null
	for i in "${FUSEMNTS[@]}"; do mountpoint -q "$i" && { fusermount3 -u "$i" || fusermount3 -uz "$i"; }; done
	for i in "${DAEMONS[@]}"; do kill -0 "$i" 2>/dev/null && kill "$i"; wait "$i" 2>/dev/null; done
	for i in "${MNTS[@]}"; do mountpoint -q "$i" && { umount "$i" || umount -l "$i"; }; done
	for i in "${LOOPS[@]}"; do losetup -d "$i"; done
	for i in "${CGS[@]}"; do [ -d "$i" ] && rmdir "$i"; done
	rm -f "$W"/*.img
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# No drop_caches: the machine is shared, and other people's test runs
# judge page-cache residency; a written file is new, a read one is dropped
# by itself (dd iflag=nocache count=0: POSIX_FADV_DONTNEED of the file).
settle() { sync; }
drop_file() { sync; dd if="$1" iflag=nocache count=0 status=none; }
drops() { awk '$1 == "drop_pagecache" { print $2 }' /proc/vmstat; }

make_fs() { # fs size -> mounted at $W/$fs
	local img=$W/$1.img loop dir=$W/$1
	# A written image, and no discard of any kind: the image is a file on
	# the host's filesystem, and a write into a hole of it (a sparse image,
	# or blocks a discard or fstrim gave back) waits for the host to
	# allocate.  With sparse images trimmed after each delete, which run
	# found allocated blocks decided its speed (1 MiB on xfs: 0.20-0.30 s
	# or 0.48-1.28 s to write 1 GiB, natively and through dcfs alike); on
	# a written image every run took 0.26-0.42 s (tests/bench/README.md).
	# Online discard (-o discard) made allocations wait for the discard of
	# the file the run before deleted: 0.22-0.46 s in every other run.
	dd if=/dev/zero of="$img" bs=4M count=$(($(bytes "$2") >> 22)) oflag=direct status=none
	loop=$(losetup --direct-io=on -f --show "$img")
	LOOPS+=("$loop")
	case $1 in
	ext4) mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0,nodiscard "$loop" ;;
	xfs) mkfs.xfs -q -f -K "$loop" ;;
	btrfs) mkfs.btrfs -q -f -K "$loop" >/dev/null ;;
	esac
	mkdir -p "$dir"
	mount "$loop" "$dir"
	MNTS+=("$dir")
}

# The whole machine's busy CPU time in clock ticks (user, nice, system,
# irq, softirq of /proc/stat): what a write costs wherever it is spent
# (the writer, the daemon, the flusher, I/O completion), for the "system
# CPU" column; it counts everyone else's too, so read it on a quiet machine.
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# The daemon's CPU in microseconds: its own cpuacct cgroup (v1).
cpu_us() { # name
	local f=$CPUACCT/dcfs-writes-$$-$1/cpuacct.usage
	[ -r "$f" ] && echo $(($(cat "$f") / 1000)) || echo 0
}

start_dcfs() { # name fs conf-text
	local name=$1 back=$W/$2/$1 mnt=$W/mnt-$1 cg=$CPUACCT/dcfs-writes-$$-$1
	mkdir -p "$back" "$mnt"
	printf "$3" > "$W/$name.conf"
	mkdir -p "$cg"
	CGS+=("$cg")
	(
		echo $BASHPID > "$cg/tasks"
		exec "$DCFS_BIN" -f -o "config=$W/$name.conf" "$back" "$mnt"
	) >>"$OUT/logs/dcfs-$name.log" 2>&1 &
	dcfs_started "$name" $! "$mnt"
}

ENGINE_CONF='[global]\ndefault = dontcache\nmin_size = 0\npassthrough_writes = no\n'
KERNEL_CONF='[global]\ndefault = dontcache\nmin_size = 0\n'

# sys fs -> DIR BDIR FLAG NAME (daemon name, "" natively)
sys_setup() {
	FLAG="" NAME=""
	case $1 in
	nat-buf) DIR=$W/$2/native BDIR=$DIR ;;
	nat-dc) DIR=$W/$2/native BDIR=$DIR FLAG=dontcache ;;
	dcfs-engine) NAME=engine-$2 DIR=$W/mnt-$NAME BDIR=$W/$2/$NAME ;;
	dcfs-kernel) NAME=kernel-$2 DIR=$W/mnt-$NAME BDIR=$W/$2/$NAME ;;
	*) die "unknown system $1" ;;
	esac
	mkdir -p "$BDIR"
}

label() {
	case $1 in
	nat-buf) echo "native buffered" ;; nat-dc) echo "native RWF_DONTCACHE" ;;
	dcfs-engine) echo "dcfs engine" ;; dcfs-kernel) echo "dcfs kernel-served" ;;
	*) echo "$1" ;;
	esac
}

# One write: appends rep,load,fs,bs,sys,mibs,peak_pages,final_pages,daemon_us,bytes,disturbed,busy_ticks
one_write() {
	local rep=$1 load=$2 fs=$3 bs=$4 sys=$5 size=$6 f out c0=0 c1=0 x0 peak fin b0 b1
	sys_setup "$sys" "$fs"
	f=w-$bs.dat
	rm -f "$DIR/$f"
	settle
	x0=$(drops)
	rm -f "$W/tmp/fp.ready"
	"$IO" filepeak "$BDIR/$f" 1000 "$W/tmp/fp.ready" > "$W/tmp/fp.out" &
	local fp=$!
	SAMPLER=$fp
	while [ ! -e "$W/tmp/fp.ready" ]; do sleep 0.01; done
	[ -n "$NAME" ] && c0=$(cpu_us "$NAME")
	b0=$(busy_ticks)
	out=$("$IO" write "$DIR/$f" "$size" "$bs" $FLAG fsync) || out=""
	[ -n "$NAME" ] && c1=$(cpu_us "$NAME")
	sleep 0.5 # FUSE release is asynchronous
	b1=$(busy_ticks)
	kill -TERM $fp; wait $fp || true
	SAMPLER=""
	peak=$(cut -d' ' -f1 "$W/tmp/fp.out")
	fin=$("$IO" resident "$BDIR/$f" | cut -d' ' -f1)
	# Deleted where it was written: a file deleted behind a dcfs mount's
	# back keeps its blocks until the daemon's reaper closes its cached fd
	# (every 5 s), so the next run, of another system, found them in use.
	rm -f "$DIR/$f"
	[ -n "$out" ] || { log "$rep $load $fs $bs $sys FAILED"; return 0; }
	set -- $out
	echo "$rep,$load,$fs,$bs,$sys,$3,$peak,$fin,$((c1 - c0)),$1,$([ "$(drops)" = "$x0" ] && echo 0 || echo 1),$((b1 - b0))" >> "$RAW/writes.csv"
	log "run $rep $load $fs $bs $sys: $3 MiB/s, peak $((peak / 256)) MiB, after $fin pages, daemon $(((c1 - c0) / 1000)) ms"
}

stress_start() {
	stress-ng --cpu "$(nproc)" --timeout 0 >/dev/null 2>&1 &
	STRESS=$!
	sleep 1
}
stress_stop() { [ -n "$STRESS" ] && { kill "$STRESS"; wait "$STRESS" 2>/dev/null || true; STRESS=""; }; }

# The systems in the order of run REP: each run starts one later, so no
# system always follows the same other one.  With a fixed order dcfs
# always followed native RWF_DONTCACHE, and ran at 0.70x it on ext4 where
# the other order gave 0.92x (1 MiB, 2 runs each, same session; then with
# online discard, whose work for the run before the next one met).
rotated_systems() { # rep
	local -a all
	read -ra all <<<"$SYSTEMS"
	local n=${#all[@]} i
	for ((i = 0; i < n; i++)); do
		printf '%s ' "${all[$(((i + $1 - 1) % n))]}"
	done
}

stream_part() {
	local rep load fs bs sys size
	: > "$RAW/writes.csv"
	for rep in $(seq "$RUNS"); do
		for load in $LOADS; do
			[ "$load" = busy ] && stress_start
			for bs in $BSLIST; do
				size=$SIZE
				[ "$(bytes "$bs")" -lt 65536 ] && size=$SIZE_4K
				for fs in $FSLIST; do
					for sys in $(rotated_systems "$rep"); do
						one_write "$rep" "$load" "$fs" "$bs" "$sys" "$size"
						# someone else's drop_caches: once more
						[ "$(tail -n1 "$RAW/writes.csv" | cut -d, -f11)" = 1 ] &&
							one_write "$rep" "$load" "$fs" "$bs" "$sys" "$size"
					done
				done
			done
			if [ "$load" = busy ]; then stress_stop; fi
		done
	done
}

# ------------------------------------------------------------------ hot set
# The hot file read natively into a memory cgroup limited to CG_LIMIT, then
# STREAM bytes written (1 MiB, fsync) beside it in the same cgroup (with the
# daemon); survival of the hot pages (mincore).  Appends
# rep,fs,sys,before,still,fraction,stream_mibs,cg_peak_mib,disturbed,served
# (served: how dcfs served the stream's writes, "kernel" or "engine": a
# writer whose memory cgroup is at its limit gets the engine, "-" native).
hot_run() {
	local rep=$1 fs=$2 sys=$3 cg hot out sv x0 mnt="" wb0 served=-
	cg=$MEMCG_ROOT/dcfs-writes-$$-hot
	mkdir -p "$cg"
	echo "$(bytes "$CG_LIMIT")" > "$cg/memory.limit_in_bytes"
	hot=$W/$fs/hot/hot.dat
	sys_setup "$sys" "$fs"
	[ -n "$NAME" ] && echo "$(eval echo "\$PID_${NAME//-/_}")" > "$cg/cgroup.procs"
	drop_file "$hot"
	x0=$(drops)
	( echo $BASHPID > "$cg/cgroup.procs"; exec "$IO" read "$hot" 1M ) >/dev/null
	"$IO" pages "$hot" "$W/tmp/hot.before" >/dev/null
	[ -n "$NAME" ] && wb0=$(write_behind_opens "$DIR")
	out=$( ( echo $BASHPID > "$cg/cgroup.procs"; exec "$IO" write "$DIR/s.dat" "$STREAM" 1M $FLAG fsync ) )
	[ -n "$NAME" ] && served=$([ "$(write_behind_opens "$DIR")" = "$wb0" ] && echo engine || echo kernel)
	sleep 0.5
	sv=$("$IO" survival "$hot" "$W/tmp/hot.before")
	rm -f "$DIR/s.dat"
	# the daemon back to where it was: its cgroup goes
	[ -n "$NAME" ] && echo "$(eval echo "\$PID_${NAME//-/_}")" > "$MEMCG_ROOT/cgroup.procs"
	local peak=$(($(cat "$cg/memory.max_usage_in_bytes") >> 20))
	rmdir "$cg"
	set -- $sv; local had=$1 still=$2 frac=$3
	set -- $out
	echo "$rep,$fs,$sys,$had,$still,$frac,$3,$peak,$([ "$(drops)" = "$x0" ] && echo 0 || echo 1),$served" >> "$RAW/hot.csv"
	log "hot $rep $fs $sys: survival $frac ($still of $had), stream $3 MiB/s, cgroup peak $peak MiB, writes by $served"
}

# Kernel-served write streams a dcfs mount has opened so far.
write_behind_opens() {
	"$DCFS_BIN" stat --json "$1" 2>/dev/null | grep -o '"opened_write_behind":[0-9]*' |
		awk -F: '{ s += $2 } END { print s + 0 }'
}

hot_part() {
	local rep fs sys t
	: > "$RAW/hot.csv"
	for fs in $HOTFS; do
		mkdir -p "$W/$fs/hot"
		"$IO" write "$W/$fs/hot/hot.dat" "$HOT" 1M fsync >/dev/null
	done
	for rep in $(seq "$HOT_RUNS"); do
		for fs in $HOTFS; do
			for sys in $(rotated_systems "$rep"); do
				for t in 1 2 3; do # up to two retries of a disturbed run
					hot_run "$rep" "$fs" "$sys"
					[ "$(tail -n1 "$RAW/hot.csv" | cut -d, -f9)" = 1 ] || break
				done
			done
		done
	done
}

# ------------------------------------------------------------------ report

report_writes() {
	echo "| load | fs | req | system | MiB/s | × native RWF_DONTCACHE | × native buffered | stream peak MiB (worst) | pages after close | daemon CPU s/GiB | system CPU s/GiB | runs used |"
	echo "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	awk -F, "$median_awk"'
	FNR == NR { if ($11 == 0) clean[$2 "," $3 "," $4 "," $5]++; next }
	$11 == 1 { excl[$2 "," $3 "," $4 "," $5]++; if (clean[$2 "," $3 "," $4 "," $5]) next }
	{ k = $2 "," $3 "," $4 "," $5; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
	  mibs[k] = mibs[k] " " $6; peak[k] = peak[k] " " $7 / 256; fin[k] = fin[k] " " $8
	  if ($7 / 256 > worst[k]) worst[k] = $7 / 256
	  cpu[k] = cpu[k] " " ($9 / 1e6) / ($10 / 1073741824); runs[k]++
	  sysc[k] = sysc[k] " " ($12 == "" ? "-" : ($12 / hz) / ($10 / 1073741824)) }
	END {
	  for (i = 1; i <= n; i++) { k = order[i]; m[k] = med(mibs[k]) }
	  for (i = 1; i <= n; i++) { k = order[i]; split(k, p, ",")
	    dc = p[1] "," p[2] "," p[3] ",nat-dc"; bf = p[1] "," p[2] "," p[3] ",nat-buf"
	    native = p[4] ~ /^nat/
	    r1 = ((dc in m) && m[dc] > 0) ? sprintf("%.2f", m[k] / m[dc]) : "-"
	    r2 = ((bf in m) && m[bf] > 0) ? sprintf("%.2f", m[k] / m[bf]) : "-"
	    c = native ? "-" : sprintf("%.3f", med(cpu[k]))
	    sc = med(sysc[k]); sc = p[1] == "busy" || sc == "-" || sc == "" ? "-" : sprintf("%.2f", sc)
	    x = excl[k] ? sprintf(" (%d disturbed)", excl[k]) : ""
	    printf "| %s | %s | %s | %s | %.0f | %s | %s | %.0f (%.0f) | %s | %s | %s | %d%s |\n", p[1], p[2], p[3], p[4], m[k],
	      r1, r2, med(peak[k]), worst[k], med(fin[k]), c, sc, runs[k], x } }' hz="$(getconf CLK_TCK)" "$RAW/writes.csv" "$RAW/writes.csv" |
	sed -e 's/| nat-buf |/| native buffered |/; s/| nat-dc |/| native RWF_DONTCACHE |/' \
	    -e 's/| dcfs-engine |/| dcfs engine |/; s/| dcfs-kernel |/| dcfs kernel-served |/'
}

report_hot() {
	echo "| fs | system | writes served by | hot pages resident before | survival median (worst) | stream MiB/s | cgroup peak MiB | runs used |"
	echo "|---|---|---|---:|---:|---:|---:|---:|"
	awk -F, "$median_awk"'
	FNR == NR { if ($9 == 0) clean[$2 "," $3]++; next }
	$9 == 1 { dist[$2 "," $3]++; if (clean[$2 "," $3]) next }
	{ k = $2 "," $3; if (!(k in seen)) { seen[k] = 1; order[++n] = k; worst[k] = 2 }
	  b[k] = b[k] " " $4; fr[k] = fr[k] " " $6; s[k] = s[k] " " $7; pk[k] = pk[k] " " $8; runs[k]++
	  sv = $10 == "" ? "-" : $10; if (!(k in by)) by[k] = sv; else if (index(by[k], sv) == 0) by[k] = by[k] " and " sv
	  if ($6 + 0 < worst[k]) worst[k] = $6 + 0 }
	END { for (i = 1; i <= n; i++) { k = order[i]; split(k, p, ",")
	  x = dist[k] ? sprintf(" (%d disturbed)", dist[k]) : ""
	  printf "| %s | %s | %s | %d | %.1f %% (%.1f %%) | %.0f | %.0f | %d%s |\n", p[1], p[2], by[k], med(b[k]), 100 * med(fr[k]),
	    100 * worst[k], med(s[k]), med(pk[k]), runs[k], x } }' \
		"$RAW/hot.csv" "$RAW/hot.csv" |
	sed -e 's/| nat-buf |/| native buffered |/; s/| nat-dc |/| native RWF_DONTCACHE |/' \
	    -e 's/| dcfs-engine |/| dcfs engine |/; s/| dcfs-kernel |/| dcfs kernel-served |/'
}

write_report() {
	{
		echo "# dcfs stream writes (tests/bench/writes.sh $ARGS)"
		echo
		echo "dcfs $DCFS_ID; kernel $(uname -r); $(nproc) CPUs; load average at start $LOAD0, at end $LOAD1;"
		echo "busy: stress-ng --cpu $(nproc) beside the writer; writes: open, write SIZE in requests of req bytes, fsync, close"
		echo "($SIZE, $SIZE_4K at 4K); medians of $RUNS runs; stream peak: most pages of the file resident at once (cachestat every 1 ms)."
		echo
		[ -s "$RAW/writes.csv" ] && report_writes
		echo
		if [ -s "$RAW/hot.csv" ]; then
			echo "Hot set: $HOT read natively under a $CG_LIMIT memory cgroup, then $STREAM streamed (1 MiB, fsync) in it (the daemon too); medians of $HOT_RUNS runs."
			echo
			report_hot
		fi
	} > "$OUT/writes.md"
	cat "$OUT/writes.md"
}

# ------------------------------------------------------------------ main
if [ $REPORT_ONLY = 1 ]; then
	trap - EXIT
	# shellcheck disable=SC1091
	. "$RAW/params.sh"
	write_report
	exit 0
fi
log "output $OUT, dcfs $DCFS_ID, load $(cut -d' ' -f1-3 /proc/loadavg)"
for fs in $FSLIST $HOTFS; do
	mountpoint -q "$W/$fs" && continue
	make_fs "$fs" 16G
done
for fs in $FSLIST $HOTFS; do
	[ -n "$(eval echo "\${PID_engine_$fs:-}")" ] && continue
	start_dcfs "engine-$fs" "$fs" "$ENGINE_CONF"
	start_dcfs "kernel-$fs" "$fs" "$KERNEL_CONF"
done
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
[ $DO_STREAM = 1 ] && stream_part
[ $DO_HOT = 1 ] && hot_part
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
for v in DCFS_ID ARGS RUNS SIZE SIZE_4K HOT STREAM CG_LIMIT HOT_RUNS LOAD0 LOAD1; do
	printf '%s=%q\n' $v "${!v}"
done > "$RAW/params.sh"
for n in "${FUSEMNTS[@]}"; do "$DCFS_BIN" stat "$n" > "$OUT/logs/stat-$(basename "$n").txt" 2>&1 || true; done
write_report
