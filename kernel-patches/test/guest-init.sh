#!/bin/sh
# PID 1 of the UML guest (root is the host's / on hostfs).  Parameters come
# from the kernel command line as environment variables:
#   T_MODE   run | control | bench | dcfs
#   T_RUN    host directory for results (visible through hostfs)
#   T_NAME   name used for result files
# Results: $T_RUN/$T_NAME.out (program output), $T_NAME.rc (exit status),
# $T_NAME.dmesg (kernel log).  The guest powers off at the end.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run

out=$T_RUN/$T_NAME.out
rc=1
mnt=$T_RUN/mnt
bin=$T_RUN/bin

echo "guest: $(uname -r) mode=$T_MODE" > "$out"
if mount -t f2fs /dev/ubda "$mnt" >> "$out" 2>&1; then
	case "$T_MODE" in
	run)
		"$bin/dontcache_test" run "$mnt" /dev/ubda /sys/fs/f2fs/ubda \
			"$T_RUN/host" >> "$out" 2>&1
		rc=$?
		;;
	control)
		"$bin/dontcache_test" control "$mnt" >> "$out" 2>&1
		rc=$?
		;;
	bench)
		"$T_RUN/bench-guest.sh" "$mnt" >> "$out" 2>&1
		rc=$?
		;;
	dcfs)
		"$T_RUN/dcfs-guest.sh" "$mnt" >> "$out" 2>&1
		rc=$?
		;;
	*)
		echo "unknown T_MODE=$T_MODE" >> "$out"
		;;
	esac
	umount "$mnt" >> "$out" 2>&1 || { echo "umount failed" >> "$out"; rc=1; }
else
	echo "mounting F2FS on /dev/ubda failed" >> "$out"
fi

cat "$out"
dmesg > "$T_RUN/$T_NAME.dmesg" 2>&1
echo "$rc" > "$T_RUN/$T_NAME.rc"
sync
echo "guest: done rc=$rc, powering off"
echo o > /proc/sysrq-trigger
sleep 5
poweroff -f
