#!/bin/sh
# dcfs stage, run inside the patched UML guest: mount dcfs from this repo over
# the F2FS mount $1 with everything in the dontcache class, stream files
# through it and check that the backing files on F2FS keep 0 resident pages:
#  1. with uncached passthrough (patches 21-22, dcfs's default where the
#     kernel offers it): the kernel reads and writes the backing file with
#     RWF_DONTCACHE itself, so no READ or WRITE request may reach dcfs;
#  2. with passthrough_uncached = no and passthrough_writes = no (reload):
#     dcfs's own streaming engine does the I/O, as on a kernel without
#     FUSE passthrough;
#  3. with passthrough_uncached = no alone: on ext4 and xfs the kernel writes
#     the streams (plain passthrough) and dcfs writes them behind, as on a
#     stock kernel with passthrough; other filesystems keep the engine.
mnt=$1
run=$T_RUN
dcfs=$(cat "$run/dcfs-path")
t=$run/bin/dontcache_test
backing=$mnt/dcfs-backing
mp=$run/dcfs-mnt
cfg=$run/dcfs.conf
# shellcheck source=kernel-patches/test/dcfs-common.sh
. "$run/dcfs-common.sh"

# requests of opcode $1 dcfs has received (dcfs stat --json), 0 if none
requests() {
	"$dcfs" stat --json "$mp" 2>/dev/null |
		sed -n 's/.*"requests":{\([^}]*\)}.*/\1/p' | tr ',' '\n' |
		sed -n "s/^\"$1\":\([0-9]*\)\$/\1/p" | grep . || echo 0
}

# a number of the "passthrough" object of dcfs stat --json
pt_count() {
	"$dcfs" stat --json "$mp" 2>/dev/null |
		sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" | head -1
}

# the stage's config (everything in the dontcache class) plus the [global]
# lines $1, loaded by a SIGHUP to the running daemon
reload_with() {
	printf '[global]\ndefault = dontcache\nmin_size = 0\n%b' "$1" > "$cfg"
	kill -HUP "$pid"
	sleep 1
}

# the sum of a per-class counter $1 of dcfs stat --json over the classes
class_sum() {
	"$dcfs" stat --json "$mp" 2>/dev/null | grep -o "\"$1\":[0-9]*" |
		awk -F: '{ s += $2 } END { print s + 0 }'
}

# file $1 written through the mount with $3 writes of $2 bytes, then read
# back through the mount and compared (never read natively here: that
# would cache the backing file)
dd_write() {
	head -c $(($2 * $3)) /dev/urandom > "$run/src.bin" &&
		dd if="$run/src.bin" of="$mp/$1" bs="$2" 2>/dev/null &&
		cmp -s "$run/src.bin" "$mp/$1"
}

mkdir -p "$backing" "$mp"
# Flusher off (as in dontcache_test run): only the RWF_DONTCACHE writes
# and their kick can get the backing file's pages written back and dropped.
# T_WB=default: the kernel's settings (periodic writeback on) instead.
if [ "${T_WB:-off}" != default ]; then
	echo 0 > /proc/sys/vm/dirty_writeback_centisecs
	echo 360000 > /proc/sys/vm/dirty_expire_centisecs
	echo 90 > /proc/sys/vm/dirty_ratio
	echo 80 > /proc/sys/vm/dirty_background_ratio
fi
# a fresh device's share of the background threshold is ~0 (see
# dontcache_test.c flusher_off())
echo 50 > "/sys/class/bdi/$(stat -c %Hd:%Ld "$mnt")/min_ratio"
echo "dcfs: writeback ${T_WB:-off}: writeback_centisecs=$(cat /proc/sys/vm/dirty_writeback_centisecs) expire_centisecs=$(cat /proc/sys/vm/dirty_expire_centisecs) bdi min_ratio=$(cat "/sys/class/bdi/$(stat -c %Hd:%Ld "$mnt")/min_ratio")"
printf '[global]\ndefault = dontcache\nmin_size = 0\n' > "$cfg"

echo "== 0. fuse.passthrough_private off: dcfs says how to turn it on"
# The series offers uncached passthrough only while the administrator has
# the fuse module parameter on (guest-init.sh turns it on); with it off,
# the daemon's log must say so and how to turn it on.
param=/sys/module/fuse/parameters/passthrough_private
if [ -e "$param" ]; then
	echo N > "$param"
	if dcfs_start "$dcfs" "$backing" "$mp" "$cfg" "$run/dcfs-private-off.log"; then
		if grep -q 'fuse.passthrough_private=1' "$run/dcfs-private-off.log" &&
		   grep -q 'uncached passthrough not offered' "$run/dcfs-private-off.log"; then
			pass "parameter off: uncached passthrough not offered, and the log says how to turn it on"
		else
			fail "parameter off: no hint in the dcfs log"
		fi
		grep -E 'passthrough_private|uncached passthrough' "$run/dcfs-private-off.log"
		umount "$mp" || fail "umount $mp"
		wait $pid
	else
		fail "dcfs with fuse.passthrough_private off did not mount"
	fi
	echo Y > "$param"
else
	fail "no $param: not the dcfs kernel?"
fi

echo "dcfs: $dcfs -f -o config=$cfg $backing $mp"
dcfs_start "$dcfs" "$backing" "$mp" "$cfg" "$run/dcfs.log" || exit 1
pass "dcfs mounted on $mp"

# stream_check NAME: 64 MiB written with 1 MiB writes through the mount and
# read back; the backing file is checked while the dcfs file is still
# open (dcfs drops what is left at release, which would hide pages the
# kernel left behind), and after each step.  Both handles are O_RDWR.
stream_check() {
	"$t" stream "$mp/$1" 64 write "$backing/$1" || rc=1
	"$t" resident "$backing/$1" 15 || rc=1
	echo 3 > /proc/sys/vm/drop_caches
	"$t" stream "$mp/$1" 64 read || rc=1
	"$t" resident "$backing/$1" 30 || rc=1
}

echo "== 1. uncached passthrough: the kernel does the streams' I/O"
if grep -q "uncached passthrough on" "$run/dcfs.log"; then
	pass "the kernel offers uncached passthrough and dcfs took it"
else
	fail "dcfs log has no 'uncached passthrough on'"
	grep passthrough "$run/dcfs.log"
fi
opens0=$(pt_count opens_kernel_uncached)
stream_check stream.mkv
# small and odd-sized writes: each a backing write of the kernel's
for spec in 4096:4096 65536:256 4000:2048 10000:820; do
	bs=${spec%%:*} n=${spec#*:}
	if dd_write "w$bs.mkv" "$bs" "$n"; then
		pass "$n writes of $bs bytes: content right"
	else
		fail "$n writes of $bs bytes through dcfs: content differs"
	fi
	"$t" resident "$backing/w$bs.mkv" 15 || rc=1
done
# a mapping is not uncached I/O: what it brought in goes when the last
# handle of a file that had nothing cached at open is released
echo 3 > /proc/sys/vm/drop_caches
if python3 -c 'import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, 0)
n = sum(m[i] for i in range(0, len(m), 4096))
m.close()
os.close(fd)' "$mp/stream.mkv"; then
	pass "stream.mkv read through a shared mapping"
else
	fail "mapping stream.mkv through dcfs"
fi
"$t" resident "$backing/stream.mkv" 15 || rc=1
opens1=$(pt_count opens_kernel_uncached)
w=$(requests write)
r=$(requests read)
# the counters were read at all (a missing one reads 0): a CREATE per file
c=$(requests create)
if [ "$c" -ge 5 ]; then
	pass "$c CREATE requests counted (5 files created)"
else
	fail "$c CREATE requests counted for 5 files created: counters unread?"
fi
if [ "$((opens1 - opens0))" -ge 7 ] && [ "$w" = 0 ] && [ "$r" = 0 ]; then
	pass "$((opens1 - opens0)) uncached passthrough opens, 0 WRITE and 0 READ requests reached dcfs"
else
	fail "uncached passthrough opens $opens0 -> $opens1, WRITE requests $w, READ requests $r"
fi

echo "== 2. passthrough_uncached = no: dcfs's streaming engine"
reload_with 'passthrough_uncached = no\npassthrough_writes = no\npassthrough_reads = no\n'
w0=$(requests write)
r0=$(requests read)
stream_check engine.mkv
w=$(requests write)
r=$(requests read)
opens2=$(pt_count opens_kernel_uncached)
if [ "$w" -gt "$w0" ] && [ "$opens2" = "$opens1" ]; then
	pass "the daemon wrote: WRITE requests $w0 -> $w, no new uncached passthrough open"
else
	fail "after the reload: WRITE requests $w0 -> $w, uncached passthrough opens $opens1 -> $opens2"
fi
if [ "$r" -gt "$r0" ]; then
	pass "the daemon read (passthrough_reads = no): READ requests $r0 -> $r"
else
	fail "after the reload: READ requests $r0 -> $r, none reached the daemon"
fi

echo "== 3. passthrough_uncached = no: streams written behind where dcfs does that"
# The window of write-behind may hold a few MiB while the file is open, so
# the backing file is checked after close only (0 pages: the release
# writes back and drops the rest).
reload_with 'passthrough_uncached = no\n'
w0=$(requests write)
wb0=$(class_sum opened_write_behind)
"$t" stream "$mp/behind.mkv" 64 write || rc=1
"$t" resident "$backing/behind.mkv" 15 || rc=1
w=$(requests write)
wb=$(class_sum opened_write_behind)
# what a write open of the file gets now, and why (user.dcfs.policy)
policy=$(python3 -c 'import os, sys
print(os.getxattr(sys.argv[1], "user.dcfs.policy").decode())' "$mp/behind.mkv")
if echo "$policy" | grep -q "by the kernel (passthrough), written behind"; then
	if [ "$w" = "$w0" ] && [ "$wb" -gt "$wb0" ]; then
		pass "written behind: WRITE requests $w0 -> $w, write-behind opens $wb0 -> $wb"
	else
		fail "written behind: WRITE requests $w0 -> $w, write-behind opens $wb0 -> $wb"
	fi
else
	echo "SKIP: write-behind: not on this filesystem (user.dcfs.policy: $policy)"
fi
"$dcfs" stat "$mp" 2>/dev/null | head -40

umount "$mp" || rc=1
wait $pid
echo "---- dcfs log (tail) ----"
tail -20 "$run/dcfs.log"
echo "dcfs stage: $passed passed, $failed failed (dontcache_test lines above count apart)"
exit $rc
