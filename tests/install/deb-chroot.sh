#!/bin/sh
# The package on a clean Debian 12: debootstrap a minimal bookworm (once,
# kept in CHROOT), then, in a private mount namespace, apt install the .deb
# there and mount through an fstab line (`mount -a`) and `mount -t dcfs`,
# with nothing but what the package and its Depends brought.  As root:
#   tests/install/deb-chroot.sh build/deb/dcfs_0.1.0_amd64.deb [CHROOT]
# Not part of make check (debootstrap downloads ~100 MiB); run after make deb.
set -eu
[ "$(id -u)" = 0 ] || { echo "deb-chroot: run as root" >&2; exit 1; }
deb=$(realpath "$1")
root=${2:-/var/tmp/dcfs-chroot}
if [ ! -x "$root/usr/bin/apt-get" ]; then
	command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
	debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
fi
if [ -z "${DCFS_IN_NS:-}" ]; then
	DCFS_IN_NS=1 exec unshare -m --propagation private "$0" "$deb" "$root"
fi
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t sysfs sys "$root/sys"
cp "$deb" "$root/tmp/dcfs.deb"
chroot "$root" sh -ec '
dpkg -s dcfs >/dev/null 2>&1 && apt-get purge -y -qq dcfs >/dev/null
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /tmp/dcfs.deb >/tmp/apt.log 2>&1 || {
	cat /tmp/apt.log; exit 1; }
echo "installed: $(dpkg-query -W -f="\${Package} \${Version}, Depends: \${Depends}" dcfs)"
dpkg -L dcfs | grep -E "^/(sbin|usr/sbin|lib/systemd/system|etc)/." 
echo "conffiles: $(dpkg-query -W -f="\${Conffiles}" dcfs)"
mkdir -p /data/media /mnt/media /mnt/other
head -c 33554432 /dev/urandom >/data/media/film.mkv
sed -i "\\| dcfs |d" /etc/fstab
echo "/data/media  /mnt/media  dcfs  allow_other,nofail  0 0" >>/etc/fstab
mount -a
grep -q " /mnt/media .* - fuse.dcfs " /proc/self/mountinfo
cmp /data/media/film.mkv /mnt/media/film.mkv
cp /mnt/media/film.mkv /mnt/media/copy.mkv
cmp /data/media/film.mkv /data/media/copy.mkv
echo "fstab mount (mount -a): a film read back and copied through it"
umount /mnt/media
mount -t dcfs -o allow_other /data/media /mnt/other
grep -q " /mnt/other .* - fuse.dcfs " /proc/self/mountinfo
umount /mnt/other
echo "mount -t dcfs: ok"
'
