#!/bin/bash
# The fallback windows against native I/O on one filesystem, side by side
# in one run (issue 41): a stream written and read back
#   native-buffered   plain writes and reads on the backing filesystem
#   native-dontcache  the same with RWF_DONTCACHE (where the kernel has it)
#   dcfs-dontcache    through dcfs, the daemon doing RWF_DONTCACHE I/O
#   dcfs-fallback     through dcfs with force_fallback = yes: the daemon's
#                     fallback windows (what kernels before 6.14 and
#                     filesystems without RWF_DONTCACHE get)
#   dcfs-default      through dcfs as shipped (reads by the kernel,
#                     dropped behind, where passthrough exists)
# Both dcfs streaming rows run with passthrough_reads and
# passthrough_uncached off, so that the daemon does every byte.
#
#   tests/bench/fallback.sh [--fs ext4|xfs|btrfs] [--size 1G] [--bs 1M]
#                           [--runs 3] [--out DIR]
#
# Prints a Markdown table (medians of the runs, interleaved: every system
# once per round): write and read MiB/s and their ratio to native
# buffered, the stream's peak resident MiB on the backing file (sampled
# every 20 ms) and its pages after close, the daemon's CPU seconds per GiB.
# Times are the host's own (no VM): on a shared machine read the ratios
# of one run, not absolute figures.  Runs as root (a loop device); pages
# are dropped per file (POSIX_FADV_DONTNEED), never the whole page cache.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd -P)
DCFS=${DCFS_BIN:-$REPO/build/dcfs}
IO=${DCFS_IO_BIN:-$REPO/build/dcfs-io}
FS=ext4 SIZE=1G BS=1M RUNS=3 OUT=/var/tmp/dcfs-fallback
SYSTEMS="native-buffered native-dontcache dcfs-dontcache dcfs-fallback dcfs-default"

while [ $# -gt 0 ]; do
	case $1 in
	--fs) FS=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--bs) BS=$2; shift ;;
	--runs) RUNS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--systems) SYSTEMS=$2; shift ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "fallback.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || { echo "fallback.sh: needs root (a loop device)" >&2; exit 2; }
for b in "$DCFS" "$IO"; do
	[ -x "$b" ] || { echo "fallback.sh: $b missing: run make" >&2; exit 2; }
done

W=$(mktemp -d /var/tmp/dcfs-fallback.XXXXXX)
LOOP='' PIDS=()
cleanup() {
	local p
	for p in "$W"/mnt-*; do
		mountpoint -q "$p" 2>/dev/null && umount "$p"
	done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	mountpoint -q "$W/back" 2>/dev/null && umount "$W/back"
	[ -z "$LOOP" ] || losetup -d "$LOOP"
	rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$OUT" "$W/back"
truncate -s 4G "$W/img"
case $FS in
ext4) mkfs.ext4 -q -F "$W/img" ;;
xfs) mkfs.xfs -q -f "$W/img" ;;
btrfs) mkfs.btrfs -q -f "$W/img" ;;
*) echo "fallback.sh: --fs ext4, xfs or btrfs" >&2; exit 2 ;;
esac > /dev/null
LOOP=$(losetup --direct-io=on -f --show "$W/img")
mount "$LOOP" "$W/back"
mkdir -p "$W/back/native" "$W/back/export"

conf() {	# SYSTEM -> config file
	local c=$W/$1.conf
	{
		echo '[global]'
		echo 'default = cache'
		case $1 in
		dcfs-dontcache|dcfs-fallback)
			echo 'passthrough_reads = no'
			echo 'passthrough_uncached = no'
			[ "$1" = dcfs-fallback ] && echo 'force_fallback = yes' ;;
		esac
		echo '[class video]'
		echo 'extensions = mkv'
		echo 'policy = dontcache'
	} > "$c"
	echo "$c"
}

# One daemon per dcfs system for the whole run
declare -A MNT PID
for s in $SYSTEMS; do
	case $s in dcfs-*) ;; *) continue ;; esac
	MNT[$s]=$W/mnt-$s
	mkdir -p "${MNT[$s]}" "$W/back/export/$s"
	"$DCFS" -f -o "config=$(conf "$s")" "$W/back/export/$s" "${MNT[$s]}" 2> "$OUT/$s.log" &
	PID[$s]=$!
	PIDS+=("${PID[$s]}")
	for _ in $(seq 100); do
		grep -q " ${MNT[$s]} fuse" /proc/mounts && break
		sleep 0.1
	done
done

ticks() { [ -n "${1:-}" ] && awk '{ print $14 + $15 }' "/proc/$1/stat" || echo 0; }
drop() {	# the clean pages of one file
	python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}
drops() { awk '$1 == "drop_pagecache" { print $2 }' /proc/vmstat; }
hz=$(getconf CLK_TCK)

# one_run RUN SYSTEM: appends "run,system,op,mibs,peak_pages,after_pages,daemon_ticks,disturbed"
one_run() {
	local r=$1 s=$2 f b flag='' op out t0 t1 d0 tr peak after
	case $s in
	native-*) f=$W/back/native/s.mkv b=$f ;;
	*) f=${MNT[$s]}/s.mkv b=$W/back/export/$s/s.mkv ;;
	esac
	[ "$s" = native-dontcache ] && flag=dontcache
	for op in write read; do
		[ "$op" = read ] && drop "$b"
		rm -f "$W/trail.ready"
		"$IO" trail "$b" 20 "$W/trail.ready" > "$W/trail" &
		tr=$!
		for _ in $(seq 50); do [ -e "$W/trail.ready" ] && break; sleep 0.05; done
		d0=$(drops) t0=$(ticks "${PID[$s]:-}")
		if [ "$op" = write ]; then
			out=$("$IO" write "$f" "$SIZE" "$BS" $flag fsync)
		else
			out=$("$IO" read "$f" "$BS" $flag)
		fi
		t1=$(ticks "${PID[$s]:-}")
		sleep 0.3
		after=$("$IO" resident "$b" | awk '{ print $1 }')
		kill "$tr"; wait "$tr" 2>/dev/null || true
		peak=$(awk '{ print $1 }' "$W/trail")
		echo "$r,$s,$op,$(awk '{ print $3 }' <<<"$out"),$peak,$after,$((t1 - t0)),$([ "$(drops)" = "$d0" ] && echo 0 || echo 1)" >> "$OUT/raw.csv"
	done
	rm -f "$f"
}

echo "run,system,op,mibs,peak_pages,after_pages,daemon_ticks,disturbed" > "$OUT/raw.csv"
for r in $(seq "$RUNS"); do
	for s in $SYSTEMS; do
		one_run "$r" "$s"
	done
done

python3 - "$OUT/raw.csv" "$FS" "$SIZE" "$BS" "$RUNS" "$hz" "$(uname -r)" <<'EOF' | tee "$OUT/fallback.md"
import csv, statistics, sys
path, fs, size, bs, runs, hz, rel = sys.argv[1:]
hz = float(hz)
rows = list(csv.DictReader(open(path)))
def med(sys_, op, key):
    v = [float(r[key]) for r in rows if r["system"] == sys_ and r["op"] == op and r["disturbed"] == "0"]
    if not v:
        v = [float(r[key]) for r in rows if r["system"] == sys_ and r["op"] == op]
    return statistics.median(v) if v else None
size_gib = {"K": 1 / 1048576, "M": 1 / 1024, "G": 1}.get(size[-1].upper(), 1 / 2**30) * float(size.rstrip("KMGkmg"))
systems = []
for r in rows:
    if r["system"] not in systems:
        systems.append(r["system"])
bw, br = med("native-buffered", "write", "mibs"), med("native-buffered", "read", "mibs")
print("fallback vs native, %s on a loop device, %s stream in %s requests, median of %s runs, kernel %s\n" % (fs, size, bs, runs, rel))
print("| system | write MiB/s | x buffered | read MiB/s | x buffered | peak MiB w / r | pages after w / r | daemon CPU s/GiB w / r |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for s in systems:
    w, r_ = med(s, "write", "mibs"), med(s, "read", "mibs")
    pw, pr = med(s, "write", "peak_pages"), med(s, "read", "peak_pages")
    aw, ar = med(s, "write", "after_pages"), med(s, "read", "after_pages")
    tw, tr = med(s, "write", "daemon_ticks"), med(s, "read", "daemon_ticks")
    cpu = "-" if s.startswith("native") else "%.2f / %.2f" % (tw / hz / size_gib, tr / hz / size_gib)
    print("| %s | %.0f | %.2f | %.0f | %.2f | %.1f / %.1f | %d / %d | %s |" % (
        s, w, w / bw, r_, r_ / br, pw * 4 / 1024, pr * 4 / 1024, aw, ar, cpu))
dist = sum(1 for r in rows if r["disturbed"] != "0")
if dist:
    print("\n%d measurements overlapped another process's drop_caches (left out where a clean one exists)" % dist)
EOF
