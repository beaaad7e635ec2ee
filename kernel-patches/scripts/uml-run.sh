#!/bin/bash
# Boot a UML kernel with root on hostfs and an F2FS image on ubd0, running
# test/guest-init.sh as PID 1; the stage bookkeeping of the test harnesses
# (want, stage, stages_done).  Sourced by test.sh, test-x86.sh, bench.sh.

# KP_STAGES="NAME ..." runs only the stages named (the names of the stage
# lines, e.g. "meta" or "fuse-pt dcfs")
want() { [ -z "${KP_STAGES:-}" ] || [[ " $(echo $KP_STAGES) " == *" $1 "* ]]; }

# lines of file $2 matching $1 (0 when none or no file; never fails)
count_lines() { grep -c -- "$1" "$2" 2>/dev/null || true; }

# stage NAME: judge a guest run from $RUN/NAME.{rc,out,console,dmesg};
# counts into pass/fail
stage() {
	local name=$1 ok=1 rc
	rc=$(cat "$RUN/$name.rc" 2>/dev/null || echo none)
	echo "---- $name: guest output ----"
	cat "$RUN/$name.out" 2>/dev/null || echo "(no output; console below)"
	[ -f "$RUN/$name.out" ] || tail -50 "$RUN/$name.console"
	[ "$rc" = 0 ] || { log "$name: test program exit status $rc"; ok=0; }
	kernel_log_clean "$RUN" "$name" || ok=0
	if [ $ok = 1 ]; then
		log "stage $name: PASS"
		pass=$((pass + 1))
	else
		log "stage $name: FAIL (logs in $RUN)"
		fail=$((fail + 1))
	fi
	stage_table+=("$name	$([ $ok = 1 ] && echo PASS || echo FAIL)	$(count_lines '^PASS' "$RUN/$name.out") PASS lines, $(count_lines '^FAIL' "$RUN/$name.out") FAIL lines")
}
stage_table=()

# stage_skipped NAME REASON: a stage that could not run.  Fatal (counted as
# failed) unless KP_ALLOW_SKIP=1 asks for skips to be accepted.
stage_skipped() {
	if [ "${KP_ALLOW_SKIP:-0}" = 1 ]; then
		log "stage $1: SKIPPED: $2 (KP_ALLOW_SKIP=1)"
		skip=$((skip + 1))
		stage_table+=("$1	SKIP	$2")
	else
		log "stage $1: FAIL: skipped: $2 (KP_ALLOW_SKIP=1 accepts this)"
		fail=$((fail + 1))
		stage_table+=("$1	FAIL	skipped: $2")
	fi
}

# stages_done LABEL: the closing lines; fails when no stage ran at all
stages_done() {
	local t
	echo "==== stages ($1) ===="
	for t in "${stage_table[@]}"; do echo "$t"; done
	# shellcheck disable=SC2154 # t_start: set by the harness
	echo "kernel-tests ($1): $pass passed, $fail failed, $skip skipped ($(( $(date +%s) - t_start ))s)"
	if [ $((pass + fail)) -eq 0 ]; then
		log "no stage ran (KP_STAGES=${KP_STAGES:-}): that is a failure"
		return 1
	fi
	[ $fail -eq 0 ]
}

# f2fs image with compression support (used by the compressed-file check)
make_f2fs_image() {	# $1 = path, $2 = size, $3... = more mkfs.f2fs options
	local img=$1 size=$2
	shift 2
	rm -f "$img"
	truncate -s "$size" "$img"
	mkfs.f2fs -q -f -O extra_attr,compression "$@" "$img" >/dev/null ||
		die "mkfs.f2fs $* failed"
}

# fsck.f2fs of image $1 (the guest has shut down); output in $2
f2fs_image_clean() {
	local rc=0
	fsck.f2fs -f --dry-run "$1" > "$2" 2>&1 || rc=$?
	if [ $rc -ne 0 ] || grep -q '\[Fail\]' "$2"; then
		grep -E 'Fail|rror' "$2" | head -20 >&2
		log "fsck.f2fs $1: NOT clean (exit status $rc, $2)"
		return 1
	fi
	log "fsck.f2fs $1: clean ($(grep -c '\[Ok\.\.\]' "$2") checks Ok, $(grep -m1 'Segments per section' "$2" | sed 's/^Info: //'))"
}

# ext2, exFAT and ext4 images for the blockfs stage, in directory $1
make_blockfs_images() {
	local d=$1 fs
	for fs in ext2 exfat ext4 xfs; do
		rm -f "$d/$fs.img"
		truncate -s 512M "$d/$fs.img"
	done
	mkfs.ext2 -q -F "$d/ext2.img" >/dev/null || die "mkfs.ext2 failed"
	mkfs.exfat "$d/exfat.img" >/dev/null || die "mkfs.exfat failed"
	mkfs.ext4 -q -F "$d/ext4.img" >/dev/null || die "mkfs.ext4 failed"
	mkfs.xfs -q -f "$d/xfs.img" >/dev/null || die "mkfs.xfs failed"
}

# uml_boot KERNEL NAME MODE RUN IMAGE TIMEOUT [MEM]
uml_boot() {
	local kernel=$1 name=$2 mode=$3 run=$4 img=$5 tmo=$6 mem=${7:-512M}
	local rc=0
	rm -f "$run/$name".{out,rc,dmesg,console}
	log "booting $name ($mode) with ${tmo}s timeout: $kernel"
	timeout -k 10 "$tmo" "$kernel" mem="$mem" umid="dcfs-$name-$$" \
		rootfstype=hostfs rootflags=/ rw \
		init="$KP_DIR/test/guest-init.sh" \
		ubd0="$img" con=null con0=null,fd:1 ssl=null \
		T_MODE="$mode" T_RUN="$run" T_NAME="$name" ${UML_EXTRA:-} \
		${UML_WB:+T_WB=$UML_WB} \
		< /dev/null > "$run/$name.console" 2>&1 || rc=$?
	[ $rc -eq 124 ] && log "$name: TIMEOUT after ${tmo}s"
	return 0
}

# null_blk of the nowait-block stage: completions after 20 ms, one at a time
# shellcheck disable=SC2034 # used by test.sh and test-x86.sh
NOWAIT_NULLBLK="null_blk.nr_devices=1 null_blk.memory_backed=1 null_blk.bs=4096
null_blk.gb=1 null_blk.irqmode=2 null_blk.completion_nsec=20000000
null_blk.hw_queue_depth=1"

# Kernel problems that fail the run, whatever the test program says.
BAD_PATTERNS='WARNING:|\<BUG\>|lockdep|possible recursive locking|sleeping function called from invalid context|circular locking|inconsistent lock state|Kernel panic|Oops|general protection|INFO: task .* blocked|UBSAN|kernel BUG|bad page|list_add corruption|list_del corruption'

# Lines that match BAD_PATTERNS but are not problems: the x86-64 boot
# banner of a lockdep kernel.
BENIGN='RCU lockdep checking is enabled'

kernel_log_clean() {	# $1 = run dir, $2 = name
	local f bad=0
	for f in "$1/$2.console" "$1/$2.dmesg"; do
		[ -f "$f" ] || continue
		if grep -E -n "$BAD_PATTERNS" "$f" | grep -v -E "$BENIGN" >&2; then
			log "$2: kernel problems in $(basename "$f")"
			bad=1
		fi
	done
	return $bad
}
