#!/bin/sh
# Run by tests/test_install.c inside `unshare -m`: mounts through an fstab
# line with `mount -a -T`, using only what `make install DESTDIR=DEST` put
# there.  The real /sbin (where a test run may have linked mount.dcfs to
# the build tree) and SBINDIR are covered by DEST's, and DEST's
# /etc/dcfs.conf is laid over /etc (read-only overlay).
#   fstab.sh DEST WORK SBINDIR
set -eu
dest=$1 work=$2 sbindir=$3
mount --bind "$dest/sbin" /sbin
mount --bind "$dest$sbindir" "$sbindir"
mount -t overlay overlay -o "lowerdir=$dest/etc:/etc" /etc
unset DCFS_BIN
mkdir -p "$work/backing" "$work/mnt"
printf '%s %s dcfs allow_other,nofail 0 0\n' "$work/backing" "$work/mnt" >"$work/fstab"
mount -a -T "$work/fstab"
grep -q " $work/mnt .* - fuse.dcfs " /proc/self/mountinfo || {
	echo "FAIL: $work/mnt is not a fuse.dcfs mount"; exit 1; }
echo "mounted by $(ls -l /sbin/mount.dcfs)"
head -c 1048576 /dev/urandom >"$work/mnt/film.mkv"
cmp "$work/mnt/film.mkv" "$work/backing/film.mkv"
root=$(getfattr --absolute-names --only-values -n user.dcfs.policy "$work/mnt")
echo "root: $root"
case $root in
"config /etc/dcfs.conf "*) ;;
*) echo "FAIL: the installed /etc/dcfs.conf is not the config in use"; exit 1 ;;
esac
umount "$work/mnt"
# The daemon exits once unmounted; don't leave it to the test's cleanup.
for _ in $(seq 100); do
	pgrep -f -- "$work/mnt" >/dev/null || exit 0
	sleep 0.1
done
echo "FAIL: the daemon did not exit after umount"; exit 1
