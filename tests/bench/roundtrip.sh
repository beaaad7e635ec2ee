#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# What one FUSE round trip costs on this machine, and how much of it is
# CPU placement: stat(2) of one file through a dcfs mount that caches
# nothing (-o cache=never: every stat is a LOOKUP and GETATTRs), against
# the same stat natively.  Rows: the scheduler's own placement, the
# application and every daemon thread pinned to the same CPU, and pinned
# to different CPUs.  Medians of --runs runs; the request counter of the
# mount gives the round trips per stat.
#
#   tests/bench/roundtrip.sh [--runs N] [--stats N]     (as root)
#
# This bounds every metadata ratio of `make bench-meta`: an operation
# that needs k round trips cannot run faster than k times the latency
# printed here, whatever the daemon does.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
DCFS_BIN=${DCFS_BIN:-$REPO/build/dcfs}
IO=${DCFS_IO_BIN:-$REPO/build/dcfs-io}
RUNS=5
STATS=20000

while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift 2 ;;
	--stats) STATS=$2; shift 2 ;;
	*) echo "usage: $0 [--runs N] [--stats N]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "$0: must run as root (mount)" >&2; exit 1; }
NCPU=$(nproc)
[ "$NCPU" -ge 2 ] || { echo "$0: needs two CPUs" >&2; exit 1; }

W=$(mktemp -d /var/tmp/dcfs-roundtrip.XXXXXX)
MNT=$W/mnt
cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/back" "$MNT"
echo x > "$W/back/f"

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

requests() {
	"$DCFS_BIN" stat --prometheus "$MNT" |
		awk '/^dcfs_requests_total\{/ && !/forget/ { n += $2 } END { print n + 0 }'
}

# mount_dcfs CPUS: a fresh daemon, all threads on CPUS ("" = anywhere)
mount_dcfs() {
	if [ -n "$1" ]; then
		taskset -c "$1" "$DCFS_BIN" "$W/back" "$MNT" -o cache=never
	else
		"$DCFS_BIN" "$W/back" "$MNT" -o cache=never
	fi
	for _ in $(seq 50); do mountpoint -q "$MNT" && return 0; sleep 0.1; done
	echo "$0: mount failed" >&2
	exit 1
}

# row LABEL DAEMON_CPUS APP_CPUS
row() {
	local label=$1 dcpu=$2 acpu=$3 us r0 r1 per
	mount_dcfs "$dcpu"
	r0=$(requests)
	us=$(for _ in $(seq "$RUNS"); do
		if [ -n "$acpu" ]; then taskset -c "$acpu" "$IO" statloop "$MNT/f" "$STATS"
		else "$IO" statloop "$MNT/f" "$STATS"; fi
	done | median)
	r1=$(requests)
	per=$(awk -v a="$r0" -v b="$r1" -v n="$((RUNS * STATS))" 'BEGIN { printf "%.2f", (b - a) / n }')
	fusermount3 -u "$MNT"
	awk -v l="$label" -v us="$us" -v per="$per" -v nat="$NATIVE" 'BEGIN {
		printf "| %s | %.2f | %s | %.2f | %.0f× |\n", l, us, per, us / per, us / nat }'
}

NATIVE=$(for _ in $(seq "$RUNS"); do "$IO" statloop "$W/back/f" "$STATS"; done | median)
echo "stat(2) of one file, $STATS per run, medians of $RUNS runs ($(date -u +%F), $(uname -r), $NCPU CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
echo
echo "| placement | µs per stat | round trips per stat | µs per round trip | × native stat |"
echo "|---|---:|---:|---:|---:|"
printf "| native (no FUSE) | %.2f | 0 | — | 1× |\n" "$NATIVE"
row "dcfs -o cache=never, scheduler's placement" "" ""
row "dcfs, application and daemon on CPU 0" 0 0
row "dcfs, application on CPU 1, daemon on CPU 0" 0 1
