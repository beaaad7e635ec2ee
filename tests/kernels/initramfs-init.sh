#!/bin/sh
# /init of the initramfs tests/kernels/kernels.sh builds for Debian's stock
# kernels, whose virtio and 9p drivers are modules: load the modules listed
# in /modules (dependencies first), mount the host's root from the 9p tag
# "hostroot" read-only (cached: it does not change during a run, and every
# program the stages run is read from it) and hand over to the init= of the kernel command line
# (a stage script on the host's root).  busybox-static is the only program.
/bin/busybox mkdir -p /proc /sys /dev /newroot
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
while read -r m; do
	/bin/busybox insmod "$m" || echo "initramfs: insmod $m failed"
done < /modules
init=
for w in $(/bin/busybox cat /proc/cmdline); do
	case $w in init=*) init=${w#init=} ;; esac
done
if ! /bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=loose,ro \
	hostroot /newroot; then
	echo "initramfs: cannot mount the host's root (9p tag hostroot)"
	/bin/busybox poweroff -f
fi
/bin/busybox umount /proc /sys
/bin/busybox mount --move /dev /newroot/dev 2>/dev/null || /bin/busybox umount /dev
exec /bin/busybox switch_root /newroot "${init:-/sbin/init}"
