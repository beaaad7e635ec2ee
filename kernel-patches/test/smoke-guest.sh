#!/bin/sh
# Guest part of test-x86's smoke stage, the x86-64 SMP check CI runs: one
# boot, default writeback settings unless T_WB says otherwise.
#   ${DISK}a F2FS   dontcache_test quick (write/read/append residency)
#   ${DISK}b xfs    large_folio_test (large folios, B1's split)
#   ${DISK}c ext4   dcfs-guest.sh: dcfs with uncached passthrough and with
#                   its own engine, backing files with 0 pages resident
# $1 = directory of the test programs, $2 = mount point.
bin=$1 mnt=$2 rc=0
# each part gives its device a min_ratio of 50 %; the sum must stay < 100
reset_min_ratio() {
	for f in /sys/class/bdi/*/min_ratio; do echo 0 > "$f"; done
}
echo "smoke: $(uname -r), $(nproc) CPUs, THP $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
[ "$(nproc)" -ge 2 ] || { echo "FAIL: fewer than 2 CPUs"; rc=1; }

echo "== F2FS on ${DISK}a: dontcache_test quick"
if mount -t f2fs "${DISK}a" "$mnt"; then
	"$bin/dontcache_test" quick "$mnt" || rc=1
	umount "$mnt" || rc=1
	reset_min_ratio
else
	echo "FAIL: mount f2fs"; rc=1
fi

echo "== xfs on ${DISK}b: large folios"
if mount -t xfs "${DISK}b" "$mnt"; then
	"$bin/large_folio_test" "$mnt" 2 || rc=1
	umount "$mnt" || rc=1
	reset_min_ratio
else
	echo "FAIL: mount xfs"; rc=1
fi

echo "== ext4 on ${DISK}c: dcfs uncached passthrough"
e=/tmp/smoke-ext4
mkdir -p "$e"
if mount -t ext4 "${DISK}c" "$e"; then
	"$T_RUN/dcfs-guest.sh" "$e" || rc=1
	umount "$e" || rc=1
else
	echo "FAIL: mount ext4"; rc=1
fi
exit $rc
