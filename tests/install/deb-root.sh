#!/bin/sh
# The package as dpkg installs it, in every `make check` (make deb-check):
# dpkg -i into a throw-away root (the package has no maintainer scripts, so
# nothing runs inside it), then
#  - the installed paths are exactly tests/install/deb-files.txt (a moved or
#    renamed file breaks this check, not a release),
#  - /etc/dcfs.conf is the one conffile,
#  - the installed daemon prints the version of include/dcfs_version.h,
#  - apt could install it here (its Depends resolve on this Debian),
#  - remove keeps only the conffile and purge leaves nothing.
#   tests/install/deb-root.sh DEB FILE-LIST VERSION
# The full route (apt in a clean bookworm, fstab, mount -t dcfs) is
# tests/install/deb-chroot.sh, which downloads a system and is not in check.
set -eu
deb=$1 want=$2 version=$3
tmp=$(mktemp -d /var/tmp/dcfs-debroot.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
fail() { echo "deb-check: $*" >&2; exit 1; }

mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
: >"$root/var/lib/dpkg/status"
# --force-depends: the root is empty; the Depends are checked with apt below.
dpkg --root="$root" --force-depends -i "$deb" >"$tmp/dpkg.log" 2>&1 ||
	{ cat "$tmp/dpkg.log" >&2; fail "dpkg -i failed"; }

dpkg --root="$root" -L dcfs | grep -v '^/\.$' | sort >"$tmp/got"
sort "$want" | diff -u - "$tmp/got" >&2 ||
	fail "installed paths differ from $want (- expected, + installed)"

conf=$(dpkg-query --root="$root" -W -f='${Conffiles}' dcfs | awk 'NF { print $1 }')
[ "$conf" = /etc/dcfs.conf ] || fail "conffiles: '$conf', expected /etc/dcfs.conf"

got=$("$root/usr/sbin/dcfs" --version | head -n 1)
case $got in
"dcfs $version "*) ;;
*) fail "installed dcfs --version says '$got', include/dcfs_version.h $version" ;;
esac
[ -x "$root/sbin/mount.dcfs" ] || fail "no /sbin/mount.dcfs"

apt-get install -s "$(realpath "$deb")" >"$tmp/apt.log" 2>&1 ||
	{ cat "$tmp/apt.log" >&2; fail "apt cannot resolve the package's Depends"; }

dpkg --root="$root" -r dcfs >/dev/null 2>&1 || fail "dpkg -r failed"
left=$(cd "$root" && find . -path ./var -prune -o ! -type d -print | tr '\n' ' ')
[ "$left" = "./etc/dcfs.conf " ] || fail "after dpkg -r: '$left' left, expected the conffile"
dpkg --root="$root" -P dcfs >/dev/null 2>&1 || fail "dpkg -P failed"
left=$(cd "$root" && find . -path ./var -prune -o -print | tr '\n' ' ')
[ "$left" = ". " ] || fail "after dpkg -P: '$left' left"
echo "deb-check: $(basename "$deb") installs $(wc -l <"$want") paths as listed, version $version, removes and purges cleanly"
