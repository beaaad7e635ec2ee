#!/bin/bash
# The stages of the kernel matrix (make check-kernels), per backing
# filesystem, sourced by guest.sh (PID 1 of a QEMU guest) and host.sh (the
# host's own kernel).  Every stage writes one line to $K_OUT/results.tsv:
#   KERNEL FS STAGE PASS|FAIL|SKIP DETAIL
# and its figures to $K_OUT/metrics.tsv (KERNEL FS KEY VALUE); counts, not
# times (a TCG guest runs 7-18x slower than the host).
#
# Needs: K_NAME (kernel label), K_OUT (results directory), K_KT (the
# snapshot of tests/kernels that kernels.sh made, with bin/dcfs and
# bin/dcfs-io: a rebuild or an edit on the host during a run does not
# reach the guest), K_WORK (a scratch directory on tmpfs), K_DISKS
# ("FS=DEVICE ..."), K_STREAM_MIB, optional
# K_STAGES (names of the stages to run), K_CONFIG (the kernel's .config,
# for what it should offer).
#
# Stages: caps files perms coherence stream-write stream-read hotset
# shared-pages daemon, and for NFS nfs-cto nfs-errors nfs-restart; the
# nfs-export "filesystem" (dcfs exported by nfsd) has export-rw and
# export-restart.

KT=$K_KT
DCFS=$KT/bin/dcfs
IO=$KT/bin/dcfs-io
STREAM_MIB=${K_STREAM_MIB:-1024}
HOT_MIB=${K_HOT_MIB:-128}
CG_LIMIT_MIB=${K_CG_MIB:-384}
# The fallback's documented bound (dcfs.conf(5) "window", dcfs(8)
# FALLBACK): a write stream holds about two windows; reads drop behind at
# once; dcfs's read-ahead buffer and the kernel's read-ahead come on top.
# Bytes of a stream allowed resident at any time, and after its close.
WINDOW_MIB=8
PEAK_BOUND_MIB=${K_PEAK_BOUND_MIB:-$((2 * WINDOW_MIB + 8 + 8))}
# A read-only stream the kernel reads itself (passthrough_reads) is trailed
# by dropbehind.c, which keeps two read-ahead windows and a step, between
# 4 and 64 MiB (dcfs.conf(5) "Reads by the kernel"), plus what a fast
# reader gets ahead between two looks
PEAK_BOUND_PT_MIB=${K_PEAK_BOUND_PT_MIB:-$((64 + 16))}
# A write stream the kernel writes (passthrough_writes) is followed by
# writebehind.c: 16 MiB and what the writer adds between two looks; the
# test suite allows 64 MiB (dcfs.conf(5) "Writes by the kernel")
PEAK_BOUND_KW_MIB=${K_PEAK_BOUND_KW_MIB:-64}
AFTER_BOUND_PAGES=${K_AFTER_BOUND_PAGES:-64}
HOT_SURVIVAL_MIN=${K_HOT_SURVIVAL_MIN:-0.90}

result() {	# FS STAGE STATUS DETAIL
	printf '%s\t%s\t%s\t%s\t%s\n' "$K_NAME" "$1" "$2" "$3" "$4" >> "$K_OUT/results.tsv"
	echo "[$K_NAME] $1 $2: $3${4:+ ($4)}"
}
metric() {	# FS KEY VALUE
	printf '%s\t%s\t%s\t%s\n' "$K_NAME" "$1" "$2" "$3" >> "$K_OUT/metrics.tsv"
}
want() {	# STAGE: asked for?
	[ -z "${K_STAGES:-}" ] || case " $K_STAGES " in *" $1 "*) ;; *) return 1 ;; esac
}
kconfig() {	# OPTION -> y, m or n (unknown without K_CONFIG: ?)
	if [ -z "${K_CONFIG:-}" ] || [ ! -r "$K_CONFIG" ]; then echo '?'; return; fi
	sed -n "s/^CONFIG_$1=\(.\).*/\1/p" "$K_CONFIG" | grep . || echo n
}
has_fs() { grep -qw "$1" /proc/filesystems; }

# ---------------------------------------------------------------- cgroups
# One memory cgroup per filesystem run: the daemon, the stream writer and
# reader and the hot-set reader all in it (v2 in the guests, v1 on a host
# that has only that).
CG_ROOT=
cg_init() {
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		CG_V=2 CG_ROOT=/sys/fs/cgroup
		grep -qw memory "$CG_ROOT/cgroup.subtree_control" ||
			echo +memory > "$CG_ROOT/cgroup.subtree_control" 2>/dev/null || true
	elif [ -d /sys/fs/cgroup/memory ]; then
		CG_V=1 CG_ROOT=/sys/fs/cgroup/memory
	fi
}
cg_new() {	# NAME -> path
	[ -n "$CG_ROOT" ] || return 1
	local cg=$CG_ROOT/k41-$1-$$
	rmdir "$cg" 2>/dev/null || true
	mkdir "$cg" && echo "$cg"
}
cg_limit() {	# CG MiB|max
	if [ "$CG_V" = 2 ]; then
		echo "$([ "$2" = max ] && echo max || echo $(($2 << 20)))" > "$1/memory.max"
	else
		echo "$([ "$2" = max ] && echo -1 || echo $(($2 << 20)))" > "$1/memory.limit_in_bytes"
	fi
}
cg_peak_mib() {	# CG -> peak usage in MiB (v2 before 6.x may lack memory.peak)
	local f=$1/memory.peak
	[ "$CG_V" = 2 ] || f=$1/memory.max_usage_in_bytes
	[ -r "$f" ] && echo $(($(cat "$f") >> 20)) || echo -
}
cg_del() {	# CG: move leftovers out, remove
	[ -n "${1:-}" ] && [ -d "$1" ] || return 0
	local p
	for p in $(cat "$1/cgroup.procs" 2>/dev/null); do
		echo "$p" > "$CG_ROOT/cgroup.procs" 2>/dev/null || true
	done
	rmdir "$1" 2>/dev/null || true
}
incg() {	# CG CMD...: run CMD in the cgroup (no cgroup: as is)
	local cg=$1
	shift
	if [ -n "$cg" ]; then
		sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"
	else
		"$@"
	fi
}

# ---------------------------------------------------------------- dcfs
DPID='' DAEMON='' DLOG='' DMNT=''
dcfs_conf() {	# -> path of the matrix's dcfs.conf: .mkv streams, the rest cached
	local c=$K_WORK/dcfs.conf
	[ -f "$c" ] || printf '%s\n' '[global]' 'default = cache' '[class video]' \
		'extensions = mkv' 'policy = dontcache' ${K_DCFS_CONF_EXTRA:+"$K_DCFS_CONF_EXTRA"} > "$c"
	echo "$c"
}
# dcfs_start FS BACKING MNT CG [OPTIONS]: foreground daemon, log in K_OUT
dcfs_start() {
	local fs=$1 back=$2 mnt=$3 cg=$4 opts=${5:-}
	DLOG=$K_OUT/$fs.dcfs.log DMNT=$mnt
	mkdir -p "$mnt"
	incg "$cg" "$DCFS" -f -o "allow_other,config=$(dcfs_conf)${opts:+,$opts}" \
		"$back" "$mnt" >> "$DLOG" 2>&1 &
	DPID=$!
	for _ in $(seq 1 600); do
		if grep -q " $mnt fuse" /proc/mounts && stat "$mnt/." >/dev/null 2>&1; then
			# the daemon itself: $! is the shell that runs it
			DAEMON=$(pgrep -P "$DPID" | head -1)
			DAEMON=${DAEMON:-$DPID}
			return 0
		fi
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}
# running PID: alive and not a zombie (kill -0 also finds zombies)
running() { local s; s=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ]; }
# dcfs_stop: unmount and wait, at most 2 minutes (then SIGKILL: a daemon
# that does not finish is a failure, not a guest that hangs); the
# daemon's exit status
dcfs_stop() {
	local rc=0
	[ -n "$DPID" ] || return 0
	umount "$DMNT" 2>/dev/null || umount -l "$DMNT" 2>/dev/null || true
	for _ in $(seq 1200); do running "$DPID" || break; sleep 0.1; done
	if running "$DPID"; then
		echo "[$K_NAME] dcfs ($DPID) still running 2 minutes after the unmount of $DMNT: killed"
		kill -KILL "$DPID" "$DAEMON" 2>/dev/null
	fi
	wait "$DPID" || rc=$?
	DPID=''
	return $rc
}
dcfs_ticks() {	# utime + stime of the daemon, in clock ticks
	awk '{ print $14 + $15 }' "/proc/$DAEMON/stat" 2>/dev/null || echo 0
}
dcfs_class_sum() {	# COUNTER -> its sum over the classes so far
	"$DCFS" stat --json "$DMNT" 2>/dev/null | grep -o "\"$1\":[0-9]*" |
		awk -F: '{ s += $2 } END { print s + 0 }'
}
dcfs_requests() {	# OPCODE -> count so far
	"$DCFS" stat --json "$DMNT" 2>/dev/null | grep -o "\"requests\":{[^}]*}" |
		grep -o "\"$1\":[0-9]*" | cut -d: -f2 | grep . || echo 0
}

# Resident pages of a file (cachestat, or mincore where the kernel lacks it)
resident() { "$IO" resident "$1" 2>/dev/null | awk '{ print $1 }' | grep . || echo -; }
# Resident pages right after a close, once the release has run (FUSE sends
# RELEASE after close returns): the lowest of a few looks over 2 s.
resident_settled() {
	local n best=-
	for _ in 1 2 3 4 5 6 7 8; do
		n=$(resident "$1")
		[ "$best" = - ] || [ "$n" = - ] || [ "$n" -lt "$best" ] && best=$n
		[ "$best" = 0 ] && break
		sleep 0.25
	done
	echo "$best"
}
# A sampler of FILE's resident pages every 100 ms (dcfs-io trail), in the
# background until trail_stop, which sets PEAK
TRAIL='' PEAK=''
trail_start() {	# FILE
	rm -f "$K_WORK/trail.ready"
	"$IO" trail "$1" 100 "$K_WORK/trail.ready" > "$K_WORK/trail" 2>&1 &
	TRAIL=$!
	# a program started over 9p under TCG may take seconds
	for _ in $(seq 300); do [ -e "$K_WORK/trail.ready" ] && break; sleep 0.1; done
}
# PEAK: the peak, or - when the sampler gave nothing (the stage then fails:
# a residency that was not measured must not pass).  Not a function to
# call in $(...): a subshell cannot wait for the sampler, and read its
# output before the sampler wrote it (the f2fs read stream of the 6.1
# guest once passed with no figure at all).
trail_stop() {
	kill "$TRAIL" 2>/dev/null
	wait "$TRAIL" 2>/dev/null
	PEAK=$(awk '{ print $1 }' "$K_WORK/trail" | grep . || echo -)
}

# The clean pages of these files out of the page cache (never the whole
# cache: on the host the machine is shared)
drop_files() {
	python3 - "$@" <<'EOF'
import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
EOF
}

# Times another process dropped the page cache (echo N > drop_caches)
drops() { awk '$1 == "drop_pagecache" { print $2 }' /proc/vmstat; }

# undisturbed FS "STAGES" CMD...: runs a measuring stage; if someone else
# dropped the page cache meanwhile (on a shared host, other test suites
# do), its figures mean nothing: it runs again, up to three times, then
# its stages say SKIP.  The last result of a stage is the one that counts
# (report.py).
undisturbed() {
	local fs=$1 stages=$2 try d0 s
	shift 2
	for try in 1 2 3; do
		d0=$(drops)
		"$@"
		[ "$(drops)" != "$d0" ] || return 0
		echo "[$K_NAME] $fs $stages: the page cache was dropped by another process during the measurement (try $try)"
	done
	for s in $stages; do
		result "$fs" "$s" SKIP "another process dropped the page cache during each of 3 tries (drop_caches)"
	done
}

# ---------------------------------------------------------------- stages
# caps: what the mount log and dcfs stat say this kernel and filesystem
# give, against what a direct probe of the backing filesystem finds.
stage_caps() {	# FS BACKING
	local fs=$1 b=$2 log=$DLOG dc pt ur js line want_pt want_ur
	line=$(grep -m1 "backing .* RWF_DONTCACHE read" "$log" || true)
	js=$("$DCFS" stat --json "$DMNT" 2>/dev/null || true)
	pt=$(grep -o '"passthrough":{"state":"[a-z]*"' <<<"$js" | sed 's/.*:"//; s/"//')
	ur=$(grep -o '"uring":{"state":"[a-z]*"' <<<"$js" | sed 's/.*:"//; s/"//')
	dc=$(python3 - "$b" <<'EOF'
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o600)
except OSError:
    name = os.path.join(sys.argv[1], ".k41-probe")
    fd = os.open(name, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
    os.unlink(name)
def probe(op):
    try:
        op()
        return "yes"
    except OSError as e:
        return "no" if e.errno == 95 else "error-%d" % e.errno
buf = bytearray(4096)
w = probe(lambda: os.pwritev(fd, [buf], 0, 0x80))
if w != "yes":
    os.pwrite(fd, bytes(buf), 0)
r = probe(lambda: os.preadv(fd, [buf], 0, 0x80))
print(r, w)
EOF
	) || dc="unknown unknown"
	metric "$fs" native_dontcache "$dc"
	metric "$fs" passthrough "${pt:-?}"
	metric "$fs" uring "${ur:-?}"
	metric "$fs" mountlog "${line#*: }"
	# The kernel's own answer must be what dcfs states: in the mount log
	# (a filesystem without O_TMPFILE, such as exFAT and NFS, cannot be
	# probed at startup: unknown there, "the first stream decides") and in
	# dcfs stat once the streams have run (this stage runs after them)
	local sr sw jr jw later=''
	sr=$(sed -n 's/.*RWF_DONTCACHE read \([a-z]*\), write \([a-z]*\)[ ;].*/\1/p' <<<"$line")
	sw=$(sed -n 's/.*RWF_DONTCACHE read \([a-z]*\), write \([a-z]*\)[ ;].*/\2/p' <<<"$line")
	read -r jr jw <<<"$(python3 -c '
import json, sys
for p in json.load(sys.stdin).get("probes", []):
    print(p["read"], p["write"])
    break' <<<"$js" 2>/dev/null)"
	metric "$fs" probe_after_streams "${jr:-?} ${jw:-?}"
	if [ "$sr $sw" = "unknown unknown" ] && grep -q "the first stream decides" <<<"$line"; then
		sr=$jr sw=$jw later=", unknown at mount (no O_TMPFILE), decided at the first stream"
	fi
	want_pt=$(kconfig FUSE_PASSTHROUGH)
	want_ur=$(kconfig FUSE_IO_URING)
	local why=
	if [ -z "$pt" ] || [ -z "$ur" ]; then
		why="dcfs stat --json has no passthrough/uring state"
	elif [ -z "$line" ] && ! grep -q "not probed at startup" "$log"; then
		why="the mount log states nothing about the backing filesystem"
	elif [ -n "$line" ] && [ "$sr $sw" != "$dc" ] && [ "$dc" != "unknown unknown" ]; then
		why="dcfs says RWF_DONTCACHE read $sr, write $sw; the kernel answers $dc"
	elif [ -n "$jr" ] && [ "$jr $jw" != "$dc" ] && [ "$dc" != "unknown unknown" ]; then
		why="dcfs stat says RWF_DONTCACHE read $jr, write $jw after the streams; the kernel answers $dc"
	elif [ "$want_pt" = n ] && [ "$pt" = on ]; then
		why="passthrough on, but the kernel has no CONFIG_FUSE_PASSTHROUGH"
	elif [ "$want_ur" = n ] && [ "$ur" = on ]; then
		why="io_uring on, but the kernel has no CONFIG_FUSE_IO_URING"
	fi
	if [ -n "$why" ]; then
		result "$fs" caps FAIL "$why"
	else
		result "$fs" caps PASS "dontcache r/w ${sr:-?}/${sw:-?} (native $dc), passthrough $pt, uring $ur$later"
	fi
}

# files, perms: the transcripts of ops-*.sh natively and through dcfs
stage_dual() {	# FS STAGE SCRIPT NATIVE_DIR MNT_DIR
	local fs=$1 st=$2 d
	mkdir -p "$4" "$5"
	"$KT/$3" "$4" > "$K_OUT/$fs.$st.native" 2>&1
	"$KT/$3" "$5" > "$K_OUT/$fs.$st.dcfs" 2>&1
	if d=$(diff "$K_OUT/$fs.$st.native" "$K_OUT/$fs.$st.dcfs"); then
		result "$fs" "$st" PASS "$(grep -c ' -> ' "$K_OUT/$fs.$st.native") operations as native"
	else
		printf '%s\n' "$d" > "$K_OUT/$fs.$st.diff"
		result "$fs" "$st" FAIL "$(grep -c '^<' <<<"$d") lines differ from native, e.g. $(grep -m1 '^[<>]' <<<"$d" | cut -c1-100) ($fs.$st.diff)"
	fi
}

stage_coherence() {	# FS MNT_DIR BACKING_DIR
	local fs=$1 out=$K_OUT/$1.coherence
	mkdir -p "$2"
	local nommap=0 note=
	if grep -q "direct-I/O shared mmap not offered" "$DLOG"; then
		nommap=1 note=", MAP_SHARED of streamed files ENODEV (no FUSE_DIRECT_IO_ALLOW_MMAP)"
	fi
	if K_NO_DIO_MMAP=$nommap "$KT/ops-coherence.sh" "$2" "$3" > "$out" 2>&1; then
		result "$fs" coherence PASS "$(grep -c '^ok' "$out") checks$note"
	else
		result "$fs" coherence FAIL "$(grep -m1 FAIL "$out" | cut -c1-120)"
	fi
}

# The figures of one direction of the stream: its pages at the peak and
# after close, the daemon's requests of that opcode and its CPU ticks
stream_metrics() {	# FS read|write PEAK AFTER REQUESTS0 TICKS0
	metric "$1" "stream_$2_peak_pages" "$3"
	metric "$1" "stream_$2_after_pages" "$4"
	metric "$1" "stream_$2_requests" $(($(dcfs_requests "$2") - $5))
	metric "$1" "stream_$2_daemon_ticks" $(($(dcfs_ticks) - $6))
}

# NATIVE_PEAK: the peak resident pages of FILE written natively with
# RWF_DONTCACHE (STREAM_MIB in 1 MiB writes) in memory cgroup CG (as the
# stream it is held against), - if not measured
NATIVE_PEAK=-
native_dontcache_peak() {	# FILE CG
	NATIVE_PEAK=-
	: > "$1"
	trail_start "$1"
	if incg "$2" "$IO" write "$1" "${STREAM_MIB}M" 1M dontcache > /dev/null 2>&1; then
		trail_stop
		NATIVE_PEAK=$PEAK
	else
		trail_stop
	fi
	rm -f "$1"
}

# stream-write's verdict: the peak's bound follows who wrote (KIND: dcfs,
# behind = the kernel with dcfs's write-behind, uncached = the patched
# kernel's uncached passthrough).  Uncached, the kernel's own writeback
# sets the peak, and it lags the writer under TCG: held against a native
# RWF_DONTCACHE writer of the same size on the same filesystem in the same
# cgroup, measured here, after the hot set (it would press on it).  One
# sample of each varies (native 98-369 MiB, dcfs 112-179 on xfs and
# F2FS): 1.5 times native and 16 MiB are allowed.  A stream that cached
# would still fail the pages after close and the hot set.
write_verdict() {	# FS KIND SIZE PEAK AFTER BACKING_EXPORT CG
	local fs=$1 peak=$4 after=$5 wbound=$PEAK_BOUND_MIB whow="by dcfs (RWF_DONTCACHE or fallback)"
	[ "$3" = $((STREAM_MIB << 20)) ] && [ "$peak" != - ] || return 0
	case $2 in
	behind) wbound=$PEAK_BOUND_KW_MIB whow="by the kernel, written behind" ;;
	uncached)
		native_dontcache_peak "$6/native-dc.mkv" "$7"
		wbound=$PEAK_BOUND_PT_MIB
		[ "$NATIVE_PEAK" = - ] || [ $((NATIVE_PEAK * 3 / 512 + 16)) -le "$wbound" ] ||
			wbound=$((NATIVE_PEAK * 3 / 512 + 16))
		whow="by the kernel, uncached passthrough (a native RWF_DONTCACHE writer: peak $([ "$NATIVE_PEAK" = - ] && echo '?' || echo $((NATIVE_PEAK / 256))) MiB)"
		metric "$fs" stream_write_native_dc_peak_pages "$NATIVE_PEAK"
		;;
	esac
	if [ "$after" = - ] || [ "$after" -gt "$AFTER_BOUND_PAGES" ] ||
	   [ "$peak" -gt $((wbound * 256)) ]; then
		result "$fs" stream-write FAIL "${STREAM_MIB} MiB $whow: peak $((peak / 256)) MiB resident (bound $wbound), $after pages after close (bound $AFTER_BOUND_PAGES)"
	else
		result "$fs" stream-write PASS "${STREAM_MIB} MiB $whow: peak $((peak / 256)) MiB resident, $after pages after close"
	fi
}

# stream-write, stream-read, hotset: a hot file of the cache class read
# through the mount, then a STREAM_MIB .mkv written and read back through
# it, all in a memory cgroup of CG_LIMIT_MIB with the daemon: the stream's
# pages on the backing file at their peak (sampled) and after close, the
# hot file's pages that survived, the daemon's requests and CPU.
stage_stream() {	# FS MNT BACKING_EXPORT CG
	local fs=$1 m=$2 b=$3 cg=$4 hot=$2/hot.dat bhot=$3/hot.dat s=$2/s.mkv bs=$3/s.mkv
	local t0 w0 r0 out peak after sv
	local hb=$K_WORK/hot.before
	# the hot file, written natively, read through the mount into the cache
	"$IO" write "$bhot" "${HOT_MIB}M" 1M fsync > /dev/null
	drop_files "$bhot"
	w0=$(dcfs_requests read)
	incg "$cg" "$IO" read "$hot" 1M > /dev/null
	metric "$fs" cache_read_requests $(($(dcfs_requests read) - w0))
	incg "$cg" "$IO" read "$hot" 1M > /dev/null
	# which copy is resident: the backing file's (passthrough) or the
	# mount's own page cache (forwarded), or both
	"$IO" pages "$bhot" "$hb.back" > "$K_WORK/hb" || true
	"$IO" pages "$hot" "$hb.mnt" > "$K_WORK/hm" || true
	metric "$fs" hot_pages_backing "$(awk '{ print $2 }' "$K_WORK/hb")"
	metric "$fs" hot_pages_mount "$(awk '{ print $2 }' "$K_WORK/hm")"
	[ -n "$cg" ] && cg_limit "$cg" "$CG_LIMIT_MIB"

	# the stream, written
	t0=$(dcfs_ticks) w0=$(dcfs_requests write)
	local wb0
	wb0=$(dcfs_class_sum opened_write_behind)
	trail_start "$bs"
	if ! out=$(incg "$cg" "$IO" write "$s" "${STREAM_MIB}M" 1M 2>&1); then
		trail_stop
		result "$fs" stream-write FAIL "dcfs-io write: $out"
		return
	fi
	after=$(resident_settled "$bs")
	trail_stop
	peak=$PEAK
	stream_metrics "$fs" write "$peak" "$after" "$w0" "$t0"
	sv=$("$IO" survival "$bhot" "$hb.back" 2>/dev/null | awk '{ print $3 }')
	metric "$fs" hot_survival_write "${sv:--}"
	if [ "$(stat -c %s "$bs")" != $((STREAM_MIB << 20)) ]; then
		result "$fs" stream-write FAIL "backing file has $(stat -c %s "$bs") bytes, not $((STREAM_MIB << 20))"
	elif [ "$peak" = - ]; then
		result "$fs" stream-write FAIL "no residency samples (dcfs-io trail: $(head -c 200 "$K_WORK/trail"))"
	fi
	# no WRITE request: the kernel wrote it, either with write-behind by
	# the daemon (passthrough_writes on a stock kernel, dcfs.conf(5)
	# "Writes by the kernel") or uncached (the patched kernel's uncached
	# passthrough); its verdict comes after the hot set (write_verdict)
	local wkind=dcfs
	if [ "$(($(dcfs_requests write) - w0))" = 0 ]; then
		wkind=uncached
		[ "$(($(dcfs_class_sum opened_write_behind) - wb0))" = 0 ] || wkind=behind
	fi
	metric "$fs" stream_write_kind "$wkind"
	local wsize wpeak=$peak wafter=$after
	wsize=$(stat -c %s "$bs")

	# the stream, read back
	t0=$(dcfs_ticks) r0=$(dcfs_requests read)
	trail_start "$bs"
	out=$(incg "$cg" "$IO" read "$s" 1M 2>&1) || true
	after=$(resident_settled "$bs")
	trail_stop
	peak=$PEAK
	stream_metrics "$fs" read "$peak" "$after" "$r0" "$t0"
	local bound=$PEAK_BOUND_MIB how="fallback or RWF_DONTCACHE by dcfs"
	if [ "$(($(dcfs_requests read) - r0))" = 0 ]; then
		bound=$PEAK_BOUND_PT_MIB how="read by the kernel, dropped behind"
	fi
	if [ "$(awk '{ print $1 }' <<<"$out")" != $((STREAM_MIB << 20)) ]; then
		result "$fs" stream-read FAIL "read $out"
	elif [ "$peak" = - ]; then
		result "$fs" stream-read FAIL "no residency samples (dcfs-io trail: $(head -c 200 "$K_WORK/trail"))"
	elif [ "$after" = - ] || [ "$after" -gt "$AFTER_BOUND_PAGES" ] ||
	     [ "$peak" -gt $((bound * 256)) ]; then
		result "$fs" stream-read FAIL "$how: peak $((peak / 256)) MiB resident (bound $bound), $after pages after close (bound $AFTER_BOUND_PAGES)"
	else
		result "$fs" stream-read PASS "$how: peak $((peak / 256)) MiB resident, $after pages after close"
	fi

	# the hot set after both
	sv=$("$IO" survival "$bhot" "$hb.back" 2>/dev/null | awk '{ print $3 }')
	local svm
	svm=$("$IO" survival "$hot" "$hb.mnt" 2>/dev/null | awk '{ print $3 }')
	metric "$fs" hot_survival "${sv:--}"
	metric "$fs" hot_survival_mount "${svm:--}"
	[ -n "$cg" ] && metric "$fs" cg_peak_mib "$(cg_peak_mib "$cg")"
	# the copy that was resident counts (backing for passthrough,
	# the mount's for a forwarded file: the larger one)
	local had
	had=$(awk '{ print $2 }' "$K_WORK/hb")
	[ "$(awk '{ print $2 }' "$K_WORK/hm")" -gt "$had" ] && sv=$svm
	if [ -z "$cg" ]; then
		result "$fs" hotset SKIP "no memory cgroup controller"
	elif awk -v s="${sv:-0}" -v m="$HOT_SURVIVAL_MIN" 'BEGIN { exit !(s >= m) }'; then
		result "$fs" hotset PASS "${HOT_MIB} MiB hot set, ${STREAM_MIB} MiB stream written and read in ${CG_LIMIT_MIB} MiB: $sv resident"
	else
		result "$fs" hotset FAIL "${HOT_MIB} MiB hot set, ${STREAM_MIB} MiB stream in ${CG_LIMIT_MIB} MiB: only $sv resident (min $HOT_SURVIVAL_MIN)"
	fi
	write_verdict "$fs" "$wkind" "$wsize" "$wpeak" "$wafter" "$b" "$cg"
	[ -n "$cg" ] && cg_limit "$cg" max
	rm -f "$s" "$hot"
}

# shared-pages: a film another program has in the page cache, streamed
# through dcfs: the other program's pages stay (dcfs drops only what it
# brought in; dcfs(8) FALLBACK).  On kernels without cachestat(2) dcfs has
# to find them with mincore(2).
stage_shared() {	# FS MNT BACKING_EXPORT
	local fs=$1 f=$2/shared.mkv bf=$3/shared.mkv before after
	"$IO" write "$bf" 64M 1M fsync > /dev/null
	drop_files "$bf"
	"$IO" read "$bf" 1M > /dev/null
	before=$(resident "$bf")
	"$IO" read "$f" 1M > /dev/null
	after=$(resident_settled "$bf")
	metric "$fs" shared_before "$before"
	metric "$fs" shared_after "$after"
	rm -f "$f"
	if [ "$before" = - ] || [ "$before" -lt 16000 ]; then
		result "$fs" shared-pages SKIP "the native read left only $before pages resident"
	elif [ "$after" -ge $((before * 95 / 100)) ]; then
		result "$fs" shared-pages PASS "$after of $before pages of another reader kept"
	else
		result "$fs" shared-pages FAIL "a stream through dcfs dropped another reader's pages: $after of $before left"
	fi
}

# daemon: exit status 0 after the unmount, nothing alarming logged
stage_daemon() {	# FS RC
	local bad
	# (BUG as a word and case-sensitive: "debug level" is not one)
	bad=$( { grep -iE 'error|assert|abort|sanitizer|segfault' "$DLOG"; grep -wE 'BUG' "$DLOG"; } |
		grep -v "RWF_DONTCACHE" | head -3 || true)
	if [ "$2" != 0 ]; then
		result "$1" daemon FAIL "dcfs exited $2 (log $1.dcfs.log)"
	elif [ -n "$bad" ]; then
		result "$1" daemon FAIL "$(head -1 <<<"$bad" | cut -c1-120)"
	else
		result "$1" daemon PASS "exit 0, $(wc -l < "$DLOG") log lines"
	fi
}

# ---------------------------------------------------------------- one fs
skip_all() {	# FS REASON [STAGE_NOT_TO_REPORT]
	local s
	for s in caps files perms coherence stream-write stream-read hotset shared-pages daemon; do
		[ "$s" != "${3:-}" ] || continue
		want "$s" && result "$1" "$s" SKIP "$2"
	done
	return 0
}

# The stages of one backing filesystem, mounted at BACKING: dcfs over
# BACKING/export, the natives in BACKING/native.
run_stages() {	# FS BACKING
	local fs=$1 b=$2 m=$K_WORK/$1.mnt cg rc=0
	mkdir -p "$b/export" "$b/native"
	chmod 755 "$b" "$b/export" "$b/native"
	cg=$(cg_new "$fs" || true)
	if ! dcfs_start "$fs" "$b/export" "$m" "$cg"; then
		result "$fs" caps FAIL "dcfs did not mount: $(tail -1 "$DLOG" | cut -c1-120)"
		skip_all "$fs" "dcfs did not mount (caps)" caps
		dcfs_stop || true
		cg_del "$cg"
		return
	fi
	want files && stage_dual "$fs" files ops-files.sh "$b/native/files" "$m/files"
	want perms && stage_dual "$fs" perms ops-perms.sh "$b/native/perms" "$m/perms"
	want coherence && stage_coherence "$fs" "$m/coh" "$b/export/coh"
	if want stream-write || want stream-read || want hotset; then
		undisturbed "$fs" "stream-write stream-read hotset" stage_stream "$fs" "$m" "$b/export" "$cg"
	fi
	want shared-pages && undisturbed "$fs" shared-pages stage_shared "$fs" "$m" "$b/export"
	want caps && stage_caps "$fs" "$b/export"
	"$DCFS" stat "$m" > "$K_OUT/$fs.dcfs-stat" 2>&1 || true
	dcfs_stop || rc=$?
	want daemon && stage_daemon "$fs" "$rc"
	cg_del "$cg"
}

# mount_backing FS DEV DIR: the filesystem on DEV at DIR, or a SKIP reason
mount_backing() {
	local fs=$1 dev=$2 dir=$3 opts=
	has_fs "$fs" || { echo "the kernel has no $fs (not in /proc/filesystems, no module)"; return 1; }
	[ -b "$dev" ] || { echo "no device for $fs ($dev)"; return 1; }
	mkdir -p "$dir"
	mount -t "$fs" ${opts:+-o "$opts"} "$dev" "$dir" 2>&1 || return 1
}

run_fs() {	# FS DEV
	local fs=$1 dev=$2 b=$K_WORK/$1.back why
	case $fs in
	nfs) run_nfs "$dev"; return ;;
	nfs-export) run_nfs_export "$dev"; return ;;
	esac
	if ! why=$(mount_backing "$fs" "$dev" "$b"); then
		skip_all "$fs" "$why"
		return
	fi
	run_stages "$fs" "$b"
	umount "$b" || umount -l "$b"
}

run_matrix() {
	local e
	cg_init
	mkdir -p "$K_WORK"
	for e in $K_DISKS; do
		run_fs "${e%%=*}" "${e#*=}"
	done
}
