#!/bin/sh
# Guest part of the blockfs stage (T_MODE=blockfs): RWF_DONTCACHE on the
# raw block device and on the other file systems that opt in (the
# refusal by one that does not is checked on hostfs in the ubd stage).
# Disks (made on the host by test.sh):
#   ubda  raw, no file system      ubdb  ext2
#   ubdc  exFAT                    ubdd  ext4
#   ubde  xfs
# $1 = directory of dontcache_test, $2 = mount point.
bin=$1 mnt=$2 rc=0

# each step gives its device a min_ratio of 50 %; the sum must stay <= 100
reset_min_ratio() {
	for f in /sys/class/bdi/*/min_ratio; do echo 0 > "$f"; done
}

"$bin/dontcache_test" bdev ${DISK:-/dev/ubd}a || rc=1
reset_min_ratio

for spec in ext2:${DISK:-/dev/ubd}b exfat:${DISK:-/dev/ubd}c ext4:${DISK:-/dev/ubd}d xfs:${DISK:-/dev/ubd}e; do
	fs=${spec%%:*} dev=${spec#*:}
	echo "== $fs on $dev"
	if ! mount -t "$fs" "$dev" "$mnt"; then
		echo "mounting $fs on $dev failed"
		rc=1
		continue
	fi
	"$bin/dontcache_test" fs "$mnt" "$dev" "$fs" || rc=1
	umount "$mnt" || { echo "umount $fs failed"; rc=1; }
	reset_min_ratio
done

exit $rc
