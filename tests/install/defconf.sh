#!/bin/sh
# Run by tests/test_install.c inside `unshare -m`: which config a mount
# without config= uses.  /etc is replaced for this namespace only (an
# overlay with a test dcfs.conf, then an empty tmpfs), so the host's
# /etc/dcfs.conf, if any, is neither read nor changed.
#   defconf.sh DCFS_BIN WORK
set -eu
dcfs=$1 work=$2
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$work/etc" "$work/b" "$work/m"
printf '[global]\nmin_size = 0\n[class video]\nextensions = mkv\npolicy = dontcache\n' >"$work/etc/dcfs.conf"
printf 'x' >"$work/b/film.mkv"

# mount OPTS LOG: dcfs in the foreground, logging to LOG; returns once mounted.
start() {
	"$dcfs" -f ${1:+-o "$1"} "$work/b" "$work/m" 2>"$2" &
	pid=$!
	for _ in $(seq 100); do
		grep -q " $work/m .* - fuse.dcfs " /proc/self/mountinfo && return 0
		kill -0 $pid 2>/dev/null || { cat "$2"; fail "dcfs ${1:-} exited"; }
		sleep 0.1
	done
	fail "not mounted after 10 s"
}
stop() { umount "$work/m"; wait $pid; }
policy() { getfattr --absolute-names --only-values -n user.dcfs.policy "$1"; }
expect() { # what file text
	grep -qF -- "$2" "$1" || { cat "$1"; fail "no '$2' in $1"; }
}

mount -t overlay overlay -o "lowerdir=$work/etc:/etc" /etc
start "" "$work/log1"
policy "$work/m/film.mkv" >"$work/p1"
expect "$work/p1" "dontcache (class video"
policy "$work/m" >"$work/r1"
expect "$work/r1" "config /etc/dcfs.conf "
expect "$work/log1" "config /etc/dcfs.conf (the default, no config=)"
stop
echo "ok: /etc/dcfs.conf used without config="

start "config=none" "$work/log2"
policy "$work/m/film.mkv" >"$work/p2"
expect "$work/p2" "cache ("
expect "$work/log2" "config none: built-in defaults (config=none)"
stop
echo "ok: config=none"

printf '[global]\nbogus = 1\n' >"$work/bad.conf"
umount /etc
mkdir -p "$work/etc2" && cp "$work/bad.conf" "$work/etc2/dcfs.conf"
mount -t overlay overlay -o "lowerdir=$work/etc2:/etc" /etc
if "$dcfs" -f "$work/b" "$work/m" 2>"$work/log3"; then fail "mounted with a bad /etc/dcfs.conf"; fi
expect "$work/log3" "/etc/dcfs.conf:2:"
grep -q " $work/m " /proc/self/mountinfo && fail "mounted with a bad /etc/dcfs.conf"
echo "ok: a bad /etc/dcfs.conf refuses the mount"

umount /etc
mount -t tmpfs none /etc
start "" "$work/log4"
policy "$work/m" >/dev/null
expect "$work/log4" "config none: built-in defaults (no config=, no /etc/dcfs.conf)"
stop
echo "ok: no /etc/dcfs.conf: built-in defaults"
