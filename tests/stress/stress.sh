#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Held-out style stress of a real dcfs mount: every stress-ng stressor of
# the "filesystem" class, one after the other, run as an unprivileged user
# inside an allow_other mount over a fresh loop filesystem; then the tree
# is removed through the mount.  Fails if a stressor fails, the daemon
# dies, or the tree cannot be walked and removed.
#
#   tests/stress/stress.sh [--fs ext4|xfs] [--class cache|dontcache] [--secs N]   (as root)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
DCFS_BIN=${DCFS_BIN:-$REPO/build/dcfs}
FS=xfs CLASS=cache SECS=8
while [ $# -gt 0 ]; do
	case $1 in
	--fs) FS=$2; shift ;;
	--class) CLASS=$2; shift ;;
	--secs) SECS=$2; shift ;;
	*) echo "stress: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
case $FS in ext4|xfs) ;; *) echo "stress: --fs ext4|xfs" >&2; exit 2 ;; esac
case $CLASS in cache|dontcache) ;; *) echo "stress: --class cache|dontcache" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "stress: must run as root" >&2; exit 1; }
command -v stress-ng >/dev/null || { echo "stress: stress-ng missing (make deps)" >&2; exit 1; }

W=$(mktemp -d /var/tmp/dcfs-stress.XXXXXX)
chmod 755 "$W" # the stressors run as uid 65534
LOOP="" PID=""
cleanup() {
	set +e
	cd /
	mountpoint -q "$W/mnt" && { fusermount3 -u "$W/mnt" || fusermount3 -uz "$W/mnt"; }
	[ -n "$PID" ] && wait "$PID" 2>/dev/null
	mountpoint -q "$W/fs" && { umount "$W/fs" || umount -l "$W/fs"; }
	[ -n "$LOOP" ] && losetup -d "$LOOP"
	rm -rf "$W"
}
trap cleanup EXIT

truncate -s 4G "$W/img"
LOOP=$(losetup --direct-io=on -f --show "$W/img")
if [ "$FS" = ext4 ]; then mkfs.ext4 -q -F "$LOOP"; else mkfs.xfs -q -f "$LOOP"; fi
mkdir -p "$W/fs" "$W/mnt"
mount "$LOOP" "$W/fs"
mkdir "$W/fs/back"
chmod 1777 "$W/fs/back"
printf '[global]\ndefault = %s\nmin_size = 0\n' "$CLASS" > "$W/dcfs.conf"
"$DCFS_BIN" -f -o "config=$W/dcfs.conf,allow_other" "$W/fs/back" "$W/mnt" 2> "$W/daemon.log" &
PID=$!
for _ in $(seq 100); do
	findmnt -rn -M "$W/mnt" -t fuse.dcfs >/dev/null && break
	sleep 0.1
done
findmnt -rn -M "$W/mnt" -t fuse.dcfs >/dev/null || { cat "$W/daemon.log"; exit 1; }
mkdir "$W/mnt/u"
chown 65534:65534 "$W/mnt/u"
cd "$W/mnt/u"
echo "stress: stress-ng --class filesystem, ${SECS}s per stressor, uid 65534, $CLASS class over $FS"
rc=0
setpriv --reuid=65534 --regid=65534 --clear-groups \
	stress-ng --seq 1 --class filesystem -t "$SECS" --temp-path "$W/mnt/u" --metrics-brief \
	> "$W/stress.log" 2>&1 || rc=$?
grep -E "^stress-ng: (fail|warn|info: .*(successful|skipping|not supported))" "$W/stress.log" || true
cd /
# 3: a stressor lacked a resource (binderfs, verity: not in this kernel or on FUSE)
if [ "$rc" != 0 ] && [ "$rc" != 3 ]; then
	echo "stress: stress-ng exit $rc"; tail -20 "$W/stress.log"; exit 1
fi
kill -0 "$PID" 2>/dev/null || { echo "stress: the daemon died"; cat "$W/daemon.log"; exit 1; }
n=$(find "$W/mnt/u" | wc -l)
rm -rf "$W/mnt/u" || { echo "stress: rm -rf through the mount failed"; exit 1; }
[ -z "$(ls -A "$W/fs/back")" ] || { echo "stress: entries left in the backing tree"; ls -la "$W/fs/back"; exit 1; }
echo "stress: passed ($n entries left by the stressors removed through the mount; daemon alive)"
