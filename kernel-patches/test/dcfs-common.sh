#!/bin/sh
# Sourced by the dcfs guest scripts (dcfs-guest.sh, dcfs-bench-guest.sh),
# which the host copies into $T_RUN together with this file.

# dcfs_start DCFS BACKING MOUNTPOINT CONFIG LOG: mounts dcfs in the
# foreground in the background, sets $pid; fails (with the log) if the
# mount does not appear within 20 s
dcfs_start() {
	"$1" -f -o config="$4" "$2" "$3" > "$5" 2>&1 &
	pid=$!
	i=0
	until grep -q " $3 fuse" /proc/mounts; do
		i=$((i + 1))
		if [ $i -gt 100 ] || ! kill -0 $pid 2>/dev/null; then
			echo "FAIL: dcfs did not mount on $3"
			cat "$5"
			return 1
		fi
		sleep 0.2
	done
}
