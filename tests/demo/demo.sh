#!/usr/bin/env bash
# make demo: what dcfs does, on a throw-away ext4 image.
# Writes and reads a film natively and through dcfs (bundled dcfs.conf)
# and prints how much of each stays in the page cache afterwards.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
dcfs=${DCFS_BIN:-$repo/build/dcfs}
io=${DCFS_IO_BIN:-$repo/build/dcfs-io}
size=${DEMO_SIZE:-512M}
work=$(mktemp -d /var/tmp/dcfs-demo.XXXXXX)
loop=""

cleanup() {
	set +e
	mountpoint -q "$work/mnt" && fusermount3 -u -z "$work/mnt"
	mountpoint -q "$work/fs" && umount -l "$work/fs"
	[ -n "$loop" ] && losetup -d "$loop"
	rm -rf "$work"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "demo: run as root (loop devices, mounts)"; exit 1; }

mib() { echo $(( $1 * 4096 / 1048576 )); }
resident() { "$io" resident "$1" | cut -d' ' -f1; }
# Drop-behind finishes when writeback completes: wait for it briefly.
settle() {
	for _ in $(seq 50); do
		[ "$(resident "$1")" = 0 ] && break
		sleep 0.1
	done
}

truncate -s 2G "$work/ext4.img"
loop=$(losetup --direct-io=on -f --show "$work/ext4.img")
mkfs.ext4 -q "$loop"
mkdir -p "$work/fs" "$work/mnt"
mount "$loop" "$work/fs"
mkdir -p "$work/fs/media"
"$dcfs" -o "config=$repo/dcfs.conf" "$work/fs/media" "$work/mnt"

echo "dcfs demo: $size film on ext4 ($(uname -r)), bundled dcfs.conf"
echo
printf '%-34s %10s %18s\n' "step" "MiB/s" "page cache after"

sync; echo 3 > /proc/sys/vm/drop_caches
r=$("$io" write "$work/fs/media/native.mkv" "$size" 1M fsync)
printf '%-34s %10s %14s MiB\n' "write natively (buffered)" "$(echo "$r" | cut -d" " -f3)" "$(mib "$(resident "$work/fs/media/native.mkv")")"
sync; echo 3 > /proc/sys/vm/drop_caches
r=$("$io" read "$work/fs/media/native.mkv" 1M)
printf '%-34s %10s %14s MiB\n' "read natively (buffered)" "$(echo "$r" | cut -d" " -f3)" "$(mib "$(resident "$work/fs/media/native.mkv")")"

r=$("$io" write "$work/mnt/Movie.mkv" "$size" 1M fsync)
settle "$work/fs/media/Movie.mkv"
printf '%-34s %10s %14s MiB\n' "write through dcfs" "$(echo "$r" | cut -d" " -f3)" "$(mib "$(resident "$work/fs/media/Movie.mkv")")"
sync; echo 3 > /proc/sys/vm/drop_caches
r=$("$io" read "$work/mnt/Movie.mkv" 1M)
settle "$work/fs/media/Movie.mkv"
printf '%-34s %10s %14s MiB\n' "read through dcfs" "$(echo "$r" | cut -d" " -f3)" "$(mib "$(resident "$work/fs/media/Movie.mkv")")"

echo
echo "getfattr -n user.dcfs.policy Movie.mkv:"
echo "  $(cd "$work/mnt" && getfattr --only-values -n user.dcfs.policy Movie.mkv)"
echo
"$dcfs" stat "$work/mnt"
