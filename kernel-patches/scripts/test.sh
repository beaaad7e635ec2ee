#!/bin/bash
# make test: boot the patched and the control UML kernels on F2FS and run
# test/dontcache_test.c in them; then (if available) the dcfs stage.
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/uml-run.sh"

ensure_deps
PATCHED=$CACHE/build/patched/out/linux
CONTROL=$CACHE/build/control/out/linux
[ -x "$PATCHED" ] && [ -x "$CONTROL" ] || die "no UML kernels: run make uml"

RUN=$CACHE/run/test
rm -rf "$RUN"
mkdir -p "$RUN/bin" "$RUN/mnt" "$RUN/host"
gcc -O2 -Wall -Wextra -Werror -static -o "$RUN/bin/dontcache_test" \
	"$KP_DIR/test/dontcache_test.c" || die "building the test program failed"

pass=0 fail=0 skip=0 dcfs_note=
stage() {	# $1 = name, $2 = expected to pass (0/1)
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
}

# 1. the F2FS proof on the patched kernel
make_f2fs_image "$RUN/f2fs.img" 1G
uml_boot "$PATCHED" patched run "$RUN" "$RUN/f2fs.img" 900
stage patched

# 2. the control: unpatched kernel must refuse RWF_DONTCACHE
make_f2fs_image "$RUN/f2fs.img" 256M
uml_boot "$CONTROL" control control "$RUN" "$RUN/f2fs.img" 300
stage control

# 3. dcfs over F2FS inside the patched kernel (optional)
DCFS=$KP_DIR/../build/dcfs
if [ ! -x "$DCFS" ]; then
	log "stage dcfs: SKIPPED: $DCFS does not exist (build it with make -C $(cd "$KP_DIR/.." && pwd))"
	skip=$((skip + 1))
elif ! "$KP_DIR/test/dcfs-supported.sh" "$DCFS"; then
	log "stage dcfs: SKIPPED: $DCFS does not support the dontcache class yet"
	skip=$((skip + 1))
else
	cp "$KP_DIR/test/dcfs-guest.sh" "$RUN/dcfs-guest.sh"
	make_f2fs_image "$RUN/f2fs.img" 512M
	DCFS_BIN=$(cd "$(dirname "$DCFS")" && pwd)/dcfs
	echo "$DCFS_BIN" > "$RUN/dcfs-path"
	uml_boot "$PATCHED" dcfs dcfs "$RUN" "$RUN/f2fs.img" 600
	if [ "${DCFS_STAGE_STRICT:-0}" = 1 ]; then
		stage dcfs
	else
		# Known issue (README): streaming writes through dcfs can leave a
		# few backing pages cached.  Reported, not gating, unless
		# DCFS_STAGE_STRICT=1.
		f0=$fail
		stage dcfs
		if [ $fail -gt $f0 ]; then
			fail=$f0
			dcfs_note="dcfs stage FAILED (not gating, see README; DCFS_STAGE_STRICT=1 makes it fatal)"
			log "stage $dcfs_note"
		fi
	fi
fi

rm -f "$RUN/f2fs.img"
[ -z "$dcfs_note" ] || echo "kernel-patches: $dcfs_note"
echo "kernel-tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
