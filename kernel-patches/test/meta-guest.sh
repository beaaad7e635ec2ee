#!/bin/sh
# meta stage (T_MODE=script), run inside the UML guest: FUSE round trips
# per file of dcfs's metadata operations, counted exactly by dcfs's own
# request counters, and their time against native ext4 in the same guest.
# ubd1 is an ext4 image; dcfs is mounted over a directory of it.
#
#   $1 = bin directory, $2 = mount directory (host side: T_RUN/bin, T_RUN/mnt),
#   not used: everything it needs is in $T_RUN
#
# Environment (kernel command line, scripts/test.sh):
#   T_META_FILES  files of the counted phases (default 2000)
#   T_META_TIME   files of the timed runs, 0 = none (default 0)
#   T_META_ROUNDS timed rounds, native and dcfs alternating (default 3)
#   T_META_BASE   another dcfs binary (a path the guest sees through
#                 hostfs) timed in the same rounds with the default
#                 options: a daemon change measured before/after in one boot;
#                 or build/fuse-floor, the least a FUSE server does
#   T_META_SIZE   bytes written per file in the timed runs (default 1K; 0:
#                 create + close, as fuse-floor, which keeps no data, is
#                 compared fairly)
#   T_META_GATE   1: fail unless the counts reach what this kernel's patches
#                 promise (create+write+close <= 3, stat after write 0,
#                 unlink <= 2, no GETXATTR); 0: only print them
#
# Phases, each in a fresh directory state, as tests/bench/roundtrip.sh --ops
# does them on the host: create + 1 KiB write + close, stat, unlink,
# stat-missing+create (a stat that finds the name missing, then O_CREAT
# without O_EXCL), find -printf '%s' cold (fresh mount) and warm.  With
# the default options each phase starts 2 s after the one before, so the
# 1 s entry and attribute timeouts have expired ("stat" is then a LOOKUP).
# "stat after write" is stat(2) of every file right after the create phase
# on a mount whose timeouts outlast both phases: what is left is what the
# writes invalidated.  Those timeouts are 30 s, or 8 times the default
# create phase's time where the guest is slower (QEMU TCG on a loaded
# host takes minutes for 2000 files); the phases are named after them
# ("/30s"), and the gate fails as inconclusive unless the create and stat
# passes together took less than the timeouts.
run=$T_RUN
dcfs=$(cat "$run/dcfs-path")
io=$(dirname "$dcfs")/dcfs-io
N=${T_META_FILES:-2000}
NT=${T_META_TIME:-0}
ROUNDS=${T_META_ROUNDS:-3}
BASE=${T_META_BASE:-}
SZ=${T_META_SIZE:-1K}
GATE=${T_META_GATE:-1}
# shellcheck source=kernel-patches/test/dcfs-common.sh
. "$run/dcfs-common.sh"

# Short paths: dcfs-io meta names its files in a 64-byte buffer.  /tmp is
# the guest's own tmpfs unless the run directory is below it.
top=$(mktemp -d /tmp/meta.XXXXXX)
chmod 755 "$top"	# uid 1000 writes below it (set-id checks)
ext4=$top/e
mkdir -p "$ext4"
mount -t ext4 ${DISK:-/dev/ubd}b "$ext4" || { echo "FAIL: mount ext4 ${DISK:-/dev/ubd}b"; exit 1; }
backing=$ext4/b
native=$ext4/n
mp=$top/m
mkdir -p "$backing/tree" "$native" "$mp"
echo "meta: $(uname -r), ext4 on ${DISK:-/dev/ubd}b, $(nproc) CPU, dcfs $dcfs"

# seconds since boot (the guest's monotonic clock, which the kernel's
# entry and attribute timeouts also follow)
now() { cut -d' ' -f1 /proc/uptime; }

# "opcode count" lines of dcfs's request counters
op_counts() {
	"$dcfs" stat --json "$mp" 2>/dev/null |
		sed -n 's/.*"requests":{\([^}]*\)}.*/\1/p' | tr ',' '\n' |
		tr -d '"' | tr ':' ' ' | sort
}

# mount_dcfs [OPTS [BINARY]]: dcfs over $backing on $mp, default config
mount_dcfs() {
	dcfs_start "${2:-$dcfs}" "$backing" "$mp" none "$run/meta-dcfs.log" \
		"${1:-}" || exit 1
}

umount_dcfs() {
	umount "$mp" || { fail "umount $mp"; umount -l "$mp"; }
	wait "$pid"
}

# phase NAME CMD...: runs CMD and appends "NAME opcode per-file" lines for
# the requests it caused to $run/meta.ops (INIT and STATFS are the mount's,
# the counters' own GETXATTR is below 1/N and rounds away), and
# "NAME start end" (seconds since boot) to $run/meta.secs
phase() {
	name=$1
	shift
	op_counts > "$run/meta.before"
	t0=$(now)
	"$@" > /dev/null || fail "$name: $* failed"
	echo "$name $t0 $(now)" >> "$run/meta.secs"
	op_counts > "$run/meta.after"
	join -a 2 -e 0 -o 0,1.2,2.2 "$run/meta.before" "$run/meta.after" |
		awk -v p="$name" -v n="$N" '$1 != "init" && $1 != "statfs" &&
			$3 - $2 > 0 { printf "%s %s %.2f\n", p, $1, ($3 - $2) / n }' \
		>> "$run/meta.ops"
}

# total NAME: round trips per file of phase NAME (forgets get no reply)
total() {
	awk -v p="$1" '$1 == p && $2 != "forget" && $2 != "batch_forget" {
		t += $3 } END { printf "%.2f", t }' "$run/meta.ops"
}

# secs NAME: seconds phase NAME took; span FIRST LAST: seconds from the
# start of phase FIRST to the end of phase LAST
secs() { span "$1" "$1"; }
span() {
	awk -v a="$1" -v b="$2" '$1 == a { s = $2 } $1 == b { e = $3 }
		END { printf "%.1f", e - s }' "$run/meta.secs"
}

# count NAME OPCODE: requests of OPCODE per file in phase NAME
count() {
	awk -v p="$1" -v o="$2" '$1 == p && $2 == o { t += $3 }
		END { printf "%.2f", t }' "$run/meta.ops"
}

: > "$run/meta.ops"
: > "$run/meta.secs"
"$io" tree "$backing/tree" "$N" 1K || fail "dcfs-io tree"

echo "== round trips per file, default options, $N files of 1 KiB"
mount_dcfs
mkdir "$mp/meta"
sleep 2; phase create+write+close "$io" meta "$mp/meta" "$N" 1K create
sleep 2; phase stat "$io" meta "$mp/meta" "$N" 1K stat
sleep 2; phase unlink "$io" meta "$mp/meta" "$N" 1K unlink
sleep 2; phase stat-missing+create "$io" meta "$mp/meta" "$N" 1K probe
sleep 2; "$io" meta "$mp/meta" "$N" 1K unlink > /dev/null
umount_dcfs
mount_dcfs
phase find-cold find "$mp/tree" -printf '%s\n'
sleep 2; phase find-warm find "$mp/tree" -printf '%s\n'
umount_dcfs

# The long timeouts: 30 s, or 8 times what the create phase took with the
# default options (the same files, a minute ago), whichever is longer.
TO=$(awk -v t="$(secs create+write+close)" 'BEGIN { t = 8 * t
	t = int(t) + (t > int(t)); print (t > 30 ? t : 30) }')
L=/${TO}s
echo "== round trips per file, attr_timeout=$TO,entry_timeout=$TO (the default create phase took $(secs create+write+close) s)"
mount_dcfs "-o attr_timeout=$TO,entry_timeout=$TO"
mkdir -p "$mp/meta"
phase "create+write+close$L" "$io" meta "$mp/meta" "$N" 1K create
phase "stat-after-write$L" "$io" meta "$mp/meta" "$N" 1K stat
# what that stat answered from the kernel's cache is the backing file's
# size, blocks, mtime and ctime
bad=0
for i in 0000000 0000999 $(printf %07d $((N - 1))); do
	a=$(stat -c '%s %b %Y %Z' "$mp/meta/f$i") b=$(stat -c '%s %b %Y %Z' "$backing/meta/f$i")
	[ "$a" = "$b" ] || { bad=1; echo "f$i: mount $a, ext4 $b (size blocks mtime ctime)"; }
done
if [ $bad = 0 ]; then
	pass "size, blocks, mtime, ctime through the mount after the writes are the backing files'"
else
	fail "attributes through the mount differ from the backing files'"
fi
phase "unlink$L" "$io" meta "$mp/meta" "$N" 1K unlink
umount_dcfs

echo
echo "| phase | round trips per file | requests per file by opcode | s |"
echo "|---|---:|---|---:|"
for p in create+write+close stat unlink stat-missing+create find-cold \
	 find-warm "create+write+close$L" "stat-after-write$L" "unlink$L"; do
	ops=$(awk -v p="$p" '$1 == p { printf "%s%s %s", s, $2, $3; s = ", " }' \
		"$run/meta.ops")
	echo "| $p | $(total "$p") | ${ops:-none} | $(secs "$p") |"
done
echo

# check NAME LIMIT WHAT: the phase's round trips per file are <= LIMIT
check() {
	t=$(total "$1")
	if awk -v t="$t" "BEGIN { exit !(t <= $2) }"; then
		pass "$1: $t round trips per file (<= $2: $3)"
	elif [ "$GATE" = 1 ]; then
		fail "$1: $t round trips per file, more than $2 ($3)"
	else
		echo "info: $1: $t round trips per file (patched target <= $2)"
	fi
}
# With the default 1 s timeouts the kernel rightly refreshes the
# directory's entry and attributes once a second during a phase (a LOOKUP
# of the directory, a GETATTR): up to 2 requests a second, 0.02 per file
# once a phase of N files takes 20 s, as under KASAN, 0.06 at 60 s under
# TCG on a loaded host.  Those phases get slack for what they took, at
# least 0.05, and fail as inconclusive where that reaches 0.5 (a request
# more per file could then hide in it); the long-timeout ones are exact.
# slack NAME: round trips per file allowed to phase NAME's refreshes
slack() {
	awk -v t="$(secs "$1")" -v n="$N" 'BEGIN { s = 2 * (t + 1) / n
		s = int(s * 100 + 0.999) / 100; printf "%.2f", (s > 0.05 ? s : 0.05) }'
}
for p in create+write+close unlink; do
	s=$(slack "$p")
	if awk -v s="$s" 'BEGIN { exit !(s >= 0.5) }'; then
		fail "$p took $(secs "$p") s for $N files: slack $s per file for the directory's refreshes, too slow to tell a request more per file"
	fi
done
# The long timeouts outlasted the create and stat passes: every file's
# entry and attributes were still valid at its stat.
w=$(span "create+write+close$L" "stat-after-write$L")
if awk -v w="$w" -v t="$TO" 'BEGIN { exit !(w < t) }'; then
	pass "create and stat passes took $w s, within the $TO s timeouts"
else
	fail "create and stat passes took $w s, not within the $TO s timeouts: stat-after-write$L cannot tell (entries expired)"
fi
# exact NAME OPCODE WANT: requests of OPCODE per file in phase NAME are
# exactly WANT.  The bounds above are upper bounds: counters that could not
# be read (a changed JSON, a failed dcfs stat) count 0 and would pass them.
exact() {
	c=$(count "$1" "$2")
	if [ "$c" = "$3" ]; then
		pass "$1: $2 $c per file (exactly $3)"
	else
		fail "$1: $2 $c per file, want exactly $3 (counters unread?)"
	fi
}
exact create+write+close create 1.00
exact "create+write+close$L" create 1.00
exact unlink unlink 1.00
exact "unlink$L" unlink 1.00
check create+write+close "3 + $(slack create+write+close)" "LOOKUP, CREATE, RELEASE; + 2 refreshes a second"
check "create+write+close$L" 3 "LOOKUP, CREATE, RELEASE"
check "stat-after-write$L" 0 "attributes copied from the backing inode"
check unlink "2 + $(slack unlink)" "LOOKUP, UNLINK; + 2 refreshes a second"
check "unlink$L" 2 "LOOKUP, UNLINK"
for p in create+write+close "create+write+close$L" unlink "unlink$L"; do
	for op in getattr getxattr; do
		c=$(count "$p" "$op")
		lim=0
		case $p in *"$L") ;; *) [ "$op" = getattr ] && lim=$(slack "$p") ;; esac
		if awk -v c="$c" -v l="$lim" 'BEGIN { exit !(c <= l) }'; then
			pass "$p: $op $c per file (<= $lim)"
		elif [ "$GATE" = 1 ]; then
			fail "$p: $c $op per file"
		else
			echo "info: $p: $c $op per file"
		fi
	done
done

echo "== set-id bits and file capabilities are still dropped by writes"
# Written by uid 1000 through the mount (allow_other): the kernel must
# still drop the set-id bits (the writer has no CAP_FSETID) and the
# capability (always), although passthrough inodes take S_NOSEC from the
# backing inode.
mount_dcfs "-o allow_other"
w1k() { head -c 1024 /dev/zero | setpriv --reuid=1000 --regid=1000 --clear-groups \
	dd of="$1" bs=1024 conv=notrunc 2>/dev/null; }
# requests of opcode $1 dcfs has received so far
nreq() { op_counts | awk -v o="$1" '$1 == o { n = $2 } END { print n + 0 }'; }
# setid_check NAME WANT: the mode of NAME through the mount and on ext4 after
# a write by uid 1000.  On ext4 at once; through the mount at once when
# the write was a passthrough write (no WRITE request reached dcfs: the
# kernel took the mode's set-id bits from the backing inode), else after
# the attribute timeout (dcfs wrote, the kernel's cached mode may be stale
# until then, as on a stock kernel)
setid_check() {
	now=$(stat -c %a "$mp/$1") back=$(stat -c %a "$backing/$1")
	how="passthrough write"
	if [ "$(nreq write)" != "$w0" ]; then
		how="written by dcfs"
		sleep 1.2
	fi
	later=$(stat -c %a "$mp/$1")
	if [ "$back" = "$2" ] && [ "$later" = "$2" ] &&
	   { [ "$how" != "passthrough write" ] || [ "$now" = "$2" ]; }; then
		pass "$1 written by uid 1000 ($how): mode $now through the mount at once, $later later, $back on ext4"
	else
		fail "$1 written by uid 1000 ($how): mode $now through the mount at once, $later later, $back on ext4 (want $2)"
	fi
}
for spec in suid:4755:755 sgid:2775:775 both:6775:775; do
	f=${spec%%:*} m=${spec#*:} want=${spec##*:}
	m=${m%%:*}
	head -c 4096 /dev/zero > "$mp/$f"
	chown 1000:1000 "$mp/$f"
	chmod "$m" "$mp/$f"
	w0=$(nreq write)
	op_counts > "$run/meta.before"
	echo "$f: before the write: mount $(stat -c %a "$mp/$f"), ext4 $(stat -c %a "$backing/$f")"
	w1k "$mp/$f" || fail "write $f as uid 1000"
	op_counts > "$run/meta.after"
	echo "$f: requests of the write: $(join -a 2 -e 0 -o 0,1.2,2.2 "$run/meta.before" "$run/meta.after" | awk '$3 != $2 { printf "%s %d ", $1, $3 - $2 }')"
	setid_check "$f" "$want"
done
# a plain file, written once (S_NOSEC taken from the backing inode), then
# made set-uid and written again
head -c 4096 /dev/zero > "$mp/later"
chown 1000:1000 "$mp/later"
chmod 755 "$mp/later"
w1k "$mp/later" || fail "write later as uid 1000"
chmod 4755 "$mp/later"
w0=$(nreq write)
w1k "$mp/later" || fail "write later (set-uid) as uid 1000"
setid_check later 755
# File capabilities (patch 29's capability case; needs security.* xattrs
# on ext4, CONFIG_EXT4_FS_SECURITY).  A v2 capability set (cap_net_raw
# permitted) set on the backing file; a write by uid 1000 through the mount
# must remove it from the backing file (its filesystem's own
# file_remove_privs() at the backing write) and the mount must not report
# it afterwards.  Three files:
#   cap        capability set before the first write through the mount
#   cap-later  on a mount with 30 s timeouts: written once first (S_NOSEC
#              taken from the backing inode), then the capability set on
#              the backing file behind the FUSE inode's back, then written
#              again while the FUSE inode still has S_NOSEC (no GETXATTR):
#              the backing filesystem's own write must remove it
#   plain      no capability: written, then written again after the
#              attribute timeout (the refresh clears S_NOSEC): no GETXATTR
#              (the round trip patch 29 saves), gated like the counts above
# dcfs's counters see their own query as one GETXATTR: xreq subtracts it.
CAPV=0sAQAAAgAgAAAAAAAAAAAAAAAAAAA=
xreq() { echo $(( $(nreq "$1") - ${2:-0} )); }
xbase=$(( $(nreq getxattr) ))
xbase=$(( $(nreq getxattr) - xbase ))
# cap_write NAME: write 1 KiB as uid 1000 and say what it cost
cap_write() {
	w0=$(nreq write) g0=$(nreq getxattr)
	w1k "$mp/$1" || fail "write $1 as uid 1000"
	g1=$(xreq getxattr "$xbase") w1=$(nreq write)
	how="passthrough write"
	[ "$w1" = "$w0" ] || how="written by dcfs"
	echo "$1: the write: $how, $((g1 - g0)) GETXATTR"
}
# cap_gone NAME: the capability is neither on ext4 nor through the mount
cap_gone() {
	if getfattr -n security.capability "$backing/$1" > /dev/null 2>&1; then
		fail "$1: security.capability still on ext4 after a write by uid 1000 through the mount"
	elif getfattr -n security.capability "$mp/$1" > /dev/null 2>&1; then
		fail "$1: ext4 dropped security.capability, but the mount still reports it"
	else
		pass "$1: security.capability removed by a write by uid 1000 ($how; $((g1 - g0)) GETXATTR), on ext4 and through the mount"
	fi
}
# cap_set NAME: set the capability on the backing file; the mount shows it
cap_set() {
	setfattr -n security.capability -v "$CAPV" "$backing/$1" || return 1
	if [ "$(getfattr -n security.capability -e base64 "$mp/$1" 2>/dev/null |
		sed -n 's/^security.capability=//p')" = "$CAPV" ]; then
		echo "$1: security.capability set on ext4, reported through the mount"
	else
		fail "$1: security.capability set on ext4 but not reported through the mount"
	fi
}
# mkfile NAME: 4 KiB, uid 1000, mode 755, made through the mount
mkfile() {
	head -c 4096 /dev/zero > "$mp/$1"
	chown 1000:1000 "$mp/$1"
	chmod 755 "$mp/$1"
}
mkfile cap
mkfile plain
capok=0
if cap_set cap; then
	capok=1
	cap_write cap
	cap_gone cap
else
	if [ "$GATE" = 1 ]; then
		fail "setfattr security.capability on ext4 failed (no CONFIG_EXT4_FS_SECURITY?)"
	else
		echo "info: setfattr security.capability failed; capability checks skipped"
	fi
fi
cap_write plain
sleep 1.2
cap_write plain
if [ "$((g1 - g0))" = 0 ] && [ "$how" = "passthrough write" ]; then
	pass "plain: a passthrough write after the attribute timeout asks no GETXATTR"
elif [ "$GATE" = 1 ]; then
	fail "plain: write after the attribute timeout: $how, $((g1 - g0)) GETXATTR"
else
	echo "info: plain: write after the attribute timeout: $how, $((g1 - g0)) GETXATTR"
fi
umount_dcfs
if [ $capok = 1 ]; then
	mount_dcfs "-o allow_other,attr_timeout=30,entry_timeout=30"
	mkfile cap-later
	cap_write cap-later
	if cap_set cap-later; then
		cap_write cap-later
		cap_gone cap-later
	else
		fail "setfattr security.capability on ext4 (cap-later)"
	fi
	umount_dcfs
fi

if [ "$NT" -gt 0 ]; then
	echo "== time: dcfs-io meta DIR $NT $SZ (create+write+close, stat, unlink), $ROUNDS rounds"
	echo "   native ext4, dcfs with the default options, dcfs -o cache=always${BASE:+, base $BASE}"
	: > "$run/meta.times"
	for r in $(seq "$ROUNDS"); do
		for sys in native dcfs dcfs-always ${BASE:+base}; do
			case $sys in
			native) d=$native/t ;;
			dcfs) mount_dcfs; d=$mp/t ;;
			dcfs-always) mount_dcfs "-o cache=always"; d=$mp/t ;;
			base) mount_dcfs "" "$BASE"; d=$mp/t ;;
			esac
			rm -rf "$native/t" "$backing/t"
			mkdir "$d"
			sync; echo 3 > /proc/sys/vm/drop_caches
			if t=$("$io" meta "$d" "$NT" "$SZ"); then
				echo "$sys $t" >> "$run/meta.times"
				echo "round $r $sys: create stat unlink $t s"
			else
				fail "$sys: dcfs-io meta $d $NT $SZ"
			fi
			[ "$sys" = native ] || umount_dcfs
		done
	done
	med() { awk -v s="$1" -v c="$2" '$1 == s { print $c }' "$run/meta.times" |
		sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
	echo
	echo "| $NT files, medians of $ROUNDS | native s | dcfs s | × native | dcfs cache=always s | × native |${BASE:+ base s | × native |}"
	echo "|---|---:|---:|---:|---:|---:|${BASE:+---:|---:|}"
	for c in 2:create 3:stat 4:unlink; do
		n=$(med native "${c%%:*}") d=$(med dcfs "${c%%:*}") a=$(med dcfs-always "${c%%:*}")
		b=${BASE:+$(med base "${c%%:*}")}
		awk -v l="${c#*:}" -v n="$n" -v d="$d" -v a="$a" -v b="$b" 'BEGIN {
			rd = 0; ra = 0; rb = 0
			if (n > 0) { rd = d / n; ra = a / n; rb = b / n }
			printf "| %s | %.3f | %.3f | %.2f× | %.3f | %.2f× |", l, n, d, rd, a, ra
			if (b != "") printf " %.3f | %.2f× |", b, rb
			printf "\n" }'
	done
	echo
fi

umount "$ext4" || rc=1
rmdir "$ext4" "$mp" "$top"
echo "meta stage: $passed passed, $failed failed"
exit $rc
