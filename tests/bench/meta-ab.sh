#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Two dcfs binaries against each other and native ext4, interleaved in
# one run: a daemon change measured before/after on the same loaded
# machine.  Each round runs `dcfs-io meta DIR N 1K` (create + 1 KiB write
# + close, stat, unlink of N files in one directory; seconds per phase)
# natively, through dcfs A and through dcfs B (default options, config
# none, a fresh mount each), on an ext4 loop device (direct I/O) with the
# caches dropped before each.  Prints every round, then medians and the
# paired B/A ratio (median over rounds of B's time / A's time in the same
# round), which shrugs off load that changes between rounds.
#
#   tests/bench/meta-ab.sh [--files N] [--rounds R] DCFS_A DCFS_B   (as root)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
IO=${DCFS_IO_BIN:-$REPO/build/dcfs-io}
N=20000 R=5
while [ $# -gt 2 ]; do
	case $1 in
	--files) N=$2; shift 2 ;;
	--rounds) R=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# = 2 ] || { echo "usage: $0 [--files N] [--rounds R] DCFS_A DCFS_B" >&2; exit 2; }
A=$(realpath "$1") B=$(realpath "$2")
[ "$(id -u)" = 0 ] || { echo "$0: must run as root (mount)" >&2; exit 1; }

W=$(mktemp -d /var/tmp/dcfs-meta-ab.XXXXXX)
LOOP=""
cleanup() {
	mountpoint -q "$W/m" && umount "$W/m"
	mountpoint -q "$W/b" && umount "$W/b"
	[ -z "$LOOP" ] || losetup -d "$LOOP"
	rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/b" "$W/m"
truncate -s 4G "$W/img"
mkfs.ext4 -q -N $((N * 2 + 10000)) "$W/img"
LOOP=$(losetup --direct-io=on -f --show "$W/img")
mount "$LOOP" "$W/b"

echo "dcfs-io meta, $N files of 1 KiB, $R rounds ($(date -u '+%F %H:%M'), $(uname -r), load $(cut -d' ' -f1 /proc/loadavg))"
echo "A: $A"
echo "B: $B"
for r in $(seq "$R"); do
	for sys in native A B; do
		rm -rf "$W/b/native" "$W/b/dcfs"
		mkdir -p "$W/b/dcfs"
		d=$W/b/native
		if [ "$sys" != native ]; then
			bin=$A
			[ "$sys" = B ] && bin=$B
			"$bin" -o config=none "$W/b/dcfs" "$W/m"
			d=$W/m/t
		fi
		mkdir "$d"
		sync
		echo 3 > /proc/sys/vm/drop_caches
		echo "$r $sys $("$IO" meta "$d" "$N" 1K)" | tee -a "$W/times"
		[ "$sys" = native ] || umount "$W/m"
	done
done
echo
echo "| phase | native s | A s | × native | B s | × native | paired B/A |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for c in 3:create 4:stat 5:unlink; do
	awk -v c="${c%%:*}" -v l="${c#*:}" '
		function med(a, n,   i, j, t) {
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
				if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
			return a[int((n + 1) / 2)] }
		$2 == "native" { nat[++nn] = $c }
		$2 == "A" { a[++na] = $c; ra[$1] = $c }
		$2 == "B" { b[++nb] = $c; rb[$1] = $c }
		END {
			for (r in ra) if (r in rb && ra[r] > 0) p[++np] = rb[r] / ra[r]
			mn = med(nat, nn); ma = med(a, na); mb = med(b, nb)
			printf "| %s | %.3f | %.3f | %.2f× | %.3f | %.2f× | %.2f |\n",
				l, mn, ma, ma / mn, mb, mb / mn, med(p, np) }' "$W/times"
done
