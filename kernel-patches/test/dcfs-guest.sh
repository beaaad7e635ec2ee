#!/bin/sh
# dcfs stage, run inside the patched UML guest: mount dcfs from this repo over
# the F2FS mount $1 with everything in the dontcache class, stream a file
# through it and check that the backing file on F2FS keeps 0 resident pages.
mnt=$1
run=$T_RUN
dcfs=$(cat "$run/dcfs-path")
t=$run/bin/dontcache_test
backing=$mnt/dcfs-backing
mp=$run/dcfs-mnt
cfg=$run/dcfs.conf
rc=0

mkdir -p "$backing" "$mp"
# Flusher off (as in dontcache_test run): only dcfs's RWF_DONTCACHE writes
# and their kick can get the backing file's pages written back and dropped.
echo 0 > /proc/sys/vm/dirty_writeback_centisecs
echo 360000 > /proc/sys/vm/dirty_expire_centisecs
echo 90 > /proc/sys/vm/dirty_ratio
echo 80 > /proc/sys/vm/dirty_background_ratio
# a fresh device's share of the background threshold is ~0 (see
# dontcache_test.c flusher_off())
echo 50 > "/sys/class/bdi/$(stat -c %Hd:%Ld "$mnt")/min_ratio"
echo "dcfs: flusher off: writeback_centisecs=$(cat /proc/sys/vm/dirty_writeback_centisecs) expire_centisecs=$(cat /proc/sys/vm/dirty_expire_centisecs) bdi min_ratio=$(cat "/sys/class/bdi/$(stat -c %Hd:%Ld "$mnt")/min_ratio")"
printf '[global]\ndefault = dontcache\nmin_size = 0\n' > "$cfg"
echo "dcfs: $dcfs -f -o config=$cfg $backing $mp"
"$dcfs" -f -o config="$cfg" "$backing" "$mp" > "$run/dcfs.log" 2>&1 &
pid=$!
i=0
until grep -q " $mp fuse" /proc/mounts; do
	i=$((i + 1))
	if [ $i -gt 100 ] || ! kill -0 $pid 2>/dev/null; then
		echo "FAIL: dcfs did not mount"
		cat "$run/dcfs.log"
		echo "0 passed, 1 failed"
		exit 1
	fi
	sleep 0.2
done
echo "PASS: dcfs mounted on $mp"

# write a file through dcfs: the backing file on F2FS must not stay cached
# The backing file is checked while the dcfs file is still open: dcfs
# drops what it wrote uncached when the file is released, which would
# hide pages the kernel left behind.
"$t" stream "$mp/stream.mkv" 64 write "$backing/stream.mkv" || rc=1
"$t" resident "$backing/stream.mkv" 15 || rc=1
# read it back through dcfs (cold caches): again nothing may stay cached
echo 3 > /proc/sys/vm/drop_caches
"$t" stream "$mp/stream.mkv" 64 read || rc=1
"$t" resident "$backing/stream.mkv" 30 || rc=1
"$dcfs" stat "$mp" 2>/dev/null | head -20

umount "$mp" || rc=1
wait $pid
echo "---- dcfs log (tail) ----"
tail -20 "$run/dcfs.log"
exit $rc
