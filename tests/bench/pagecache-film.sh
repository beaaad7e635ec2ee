#!/usr/bin/env bash
# The README's picture: the page cache over time while a film is copied
# with cp(1), natively and through dcfs (bundled dcfs.conf), on one
# throw-away ext4 image.  Samples, every 100 ms, the pages of the two
# files resident in the page cache (cachestat of the backing files, plus
# the mount's own cache of the dcfs files), and plots both runs.
#
#   tests/bench/pagecache-film.sh [--size 2G] [--out DIR]
#
# Writes DIR/film.csv (run,seconds,MiB) and DIR/pagecache-film.png
# (gnuplot-nox); default DIR /var/tmp/dcfs-film.  Needs root (loop device,
# mounts, drop_caches) and `make` (build/dcfs, build/dcfs-io).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
dcfs=${DCFS_BIN:-$repo/build/dcfs}
io=${DCFS_IO_BIN:-$repo/build/dcfs-io}
size=2G
out=/var/tmp/dcfs-film
while [ $# -gt 0 ]; do
	case $1 in
	--size) size=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) echo "usage: $0 [--size SIZE] [--out DIR]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "pagecache-film: run as root" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "pagecache-film: gnuplot missing (apt-get install gnuplot-nox)" >&2; exit 1; }

work=$(mktemp -d /var/tmp/dcfs-film.XXXXXX)
loop=""
cleanup() {
	set +e
	mountpoint -q "$work/mnt" && umount "$work/mnt"
	mountpoint -q "$work/fs" && umount -l "$work/fs"
	[ -n "$loop" ] && losetup -d "$loop"
	rm -rf "$work"
}
trap cleanup EXIT

truncate -s 12G "$work/ext4.img"
loop=$(losetup --direct-io=on -f --show "$work/ext4.img")
mkfs.ext4 -q "$loop"
mkdir -p "$work/fs" "$work/mnt" "$out"
mount "$loop" "$work/fs"
mkdir -p "$work/fs/media"
"$io" write "$work/fs/media/film.mkv" "$size" 1M fsync >/dev/null
"$dcfs" -o "config=$repo/dcfs.conf" "$work/fs/media" "$work/mnt"

pages() { # resident pages of each existing file given
	local n=0 f
	for f in "$@"; do
		[ -e "$f" ] && n=$((n + $("$io" resident "$f" | cut -d' ' -f1)))
	done
	echo "$n"
}

# run NAME SRC DST [MOUNT_SRC MOUNT_DST]: cp SRC DST, sampled from 1 s
# before to 3 s after, the backing files and (dcfs) the mount's files.
run() {
	local name=$1 src=$2 dst=$3 msrc=${4:-} mdst=${5:-} t0 t1 t2 pid now p
	rm -f "$work/fs/media/copy.mkv"
	sync
	echo 3 >/proc/sys/vm/drop_caches
	t0=$(date +%s.%N)
	sample() {
		now=$(date +%s.%N)
		p=$(pages "$work/fs/media/film.mkv" "$work/fs/media/copy.mkv" ${msrc:+"$msrc"} ${mdst:+"$mdst"})
		echo "$name,$(awk "BEGIN { print $now - $t0 }"),$((p * 4096 / 1048576))" >>"$out/film.csv"
	}
	for _ in $(seq 10); do sample; sleep 0.1; done
	t1=$(date +%s.%N)
	cp "$src" "$dst" &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do sample; sleep 0.1; done
	wait "$pid"
	t2=$(date +%s.%N)
	for _ in $(seq 30); do sample; sleep 0.1; done
	echo "$name: cp of $size took $(awk "BEGIN { printf \"%.1f\", $t2 - $t1 }") s," \
		"$(tail -1 "$out/film.csv" | cut -d, -f3) MiB of the two files cached after" >&2
}

echo "run,seconds,MiB" >"$out/film.csv"
run native "$work/fs/media/film.mkv" "$work/fs/media/copy.mkv"
run dcfs "$work/mnt/film.mkv" "$work/mnt/copy.mkv" "$work/mnt/film.mkv" "$work/mnt/copy.mkv"

gnuplot <<EOF
set terminal pngcairo noenhanced size 900,420 font 'sans,10'
set output '$out/pagecache-film.png'
set datafile separator ','
set title 'Page cache held by a $size film and its copy (cp), ext4, $(uname -r)'
set xlabel 'seconds'
set ylabel 'MiB in the page cache'
set key top left
set grid
plot '< grep ^native, $out/film.csv' using 2:3 with lines lw 2 title 'native cp', \
     '< grep ^dcfs, $out/film.csv' using 2:3 with lines lw 2 title 'cp through dcfs (dcfs.conf)'
EOF
echo "wrote $out/film.csv and $out/pagecache-film.png" >&2
