#!/bin/sh
# Sourced by the dcfs guest scripts (dcfs-guest.sh, meta-guest.sh,
# dcfs-bench-guest.sh), which the host copies into $T_RUN together with
# this file.

# Checks of the gating guest scripts: PASS/FAIL lines, counted; rc fails
# the stage.
# shellcheck disable=SC2034 # rc, passed, failed: read by those scripts
rc=0
passed=0
failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); rc=1; }

# dcfs_start DCFS BACKING MOUNTPOINT CONFIG LOG [OPTIONS]: mounts dcfs in
# the foreground in the background (OPTIONS, e.g. "-o allow_other", added
# to its command line), sets $pid; fails (with the log) if the mount does
# not appear within 20 s
dcfs_start() {
	# shellcheck disable=SC2086
	"$1" -f -o config="$4" ${6:-} "$2" "$3" > "$5" 2>&1 &
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
	# The mount is listed before the daemon has answered INIT (the kernel
	# sends INIT asynchronously), and the daemon logs what INIT agreed on
	# before it replies.  A stat of the root waits for that reply, so what
	# the callers grep in the log is there once this returns.
	if ! stat "$3" > /dev/null; then
		echo "FAIL: dcfs on $3 does not answer"
		cat "$5"
		return 1
	fi
}
