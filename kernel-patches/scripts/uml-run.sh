#!/bin/bash
# Boot a UML kernel with root on hostfs and an F2FS image on ubd0, running
# test/guest-init.sh as PID 1.  Sourced by test.sh and bench.sh.

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
		< /dev/null > "$run/$name.console" 2>&1 || rc=$?
	[ $rc -eq 124 ] && log "$name: TIMEOUT after ${tmo}s"
	return 0
}

# Kernel problems that fail the run, whatever the test program says.
BAD_PATTERNS='WARNING:|\<BUG\>|lockdep|possible recursive locking|sleeping function called from invalid context|circular locking|inconsistent lock state|Kernel panic|Oops|general protection|INFO: task .* blocked|UBSAN|kernel BUG|bad page|list_add corruption|list_del corruption'

kernel_log_clean() {	# $1 = run dir, $2 = name
	local f bad=0
	for f in "$1/$2.console" "$1/$2.dmesg"; do
		[ -f "$f" ] || continue
		if grep -E -n "$BAD_PATTERNS" "$f" >&2; then
			log "$2: kernel problems in $(basename "$f")"
			bad=1
		fi
	done
	return $bad
}
