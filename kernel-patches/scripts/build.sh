#!/bin/bash
# make uml: build the patched and the unpatched (control) ARCH=um kernels.
# Each build is cached under $CACHE/build/<variant>-<hash>, where the hash
# covers the tarball, the config fragment and (for the patched kernel) the
# patches in series order, so an unchanged input is not rebuilt.  Bump
# BUILD_RECIPE when the way the kernel is built changes.
source "$(dirname "$0")/common.sh"

BUILD_RECIPE=1

ensure_deps
mkdir -p "$CACHE/src" "$CACHE/build"
ensure_base_repo

REQUIRED="F2FS_FS F2FS_CHECK_FS F2FS_FS_COMPRESSION FUSE_FS BLK_DEV_UBD HOSTFS
DEVTMPFS MEMCG MEMCG_V1 CACHESTAT_SYSCALL DEBUG_ATOMIC_SLEEP PROVE_LOCKING
DEBUG_VM MAGIC_SYSRQ FS_VERITY QUOTA TMPFS"

input_hash() {	# $1 = variant
	{
		tarball_id
		echo "recipe $BUILD_RECIPE"
		cat "$KP_DIR/uml.config"
		if [ "$1" = patched ]; then
			series_patches | while read -r p; do cat "$p"; done
		fi
	} | sha256sum | cut -c1-16
}

build_variant() {	# $1 = variant
	local v=$1 h dir src out start
	h=$(input_hash "$v")
	dir=$CACHE/build/$v-$h
	src=$dir/src
	out=$dir/out
	if [ -f "$dir/done" ] && [ -x "$out/linux" ]; then
		log "$v kernel up to date ($dir)"
	else
		start=$(date +%s)
		log "building $v kernel in $dir"
		mkdir -p "$dir"
		if [ ! -f "$dir/src.done" ]; then
			fresh_worktree "$src"
			[ "$v" = patched ] && apply_series "$src"
			touch "$dir/src.done"
		fi
		mkdir -p "$out"
		(
			cd "$src"
			make -s ARCH=um O="$out" defconfig
			scripts/kconfig/merge_config.sh -m -O "$out" \
				"$out/.config" "$KP_DIR/uml.config" >/dev/null
			make -s ARCH=um O="$out" olddefconfig
		)
		local o
		for o in $REQUIRED; do
			grep -q "^CONFIG_$o=y" "$out/.config" ||
				die "CONFIG_$o not enabled in $v config"
		done
		make -C "$src" ARCH=um O="$out" -j"$JOBS" linux \
			> "$dir/build.log" 2>&1 || {
			tail -40 "$dir/build.log" >&2
			die "$v kernel build failed (log: $dir/build.log)"
		}
		touch "$dir/done"
		log "$v kernel built in $(( $(date +%s) - start ))s"
	fi
	ln -sfn "$dir" "$CACHE/build/$v"
	# drop stale builds of this variant
	local d
	for d in "$CACHE/build/$v"-*; do
		[ "$d" = "$dir" ] && continue
		[ -d "$d" ] || continue
		log "removing stale build $d"
		git -C "$BASE_REPO" worktree remove --force "$d/src" 2>/dev/null || true
		rm -rf "$d"
	done
	git -C "$BASE_REPO" worktree prune
}

build_variant patched
build_variant control
log "uml: patched=$(readlink "$CACHE/build/patched")/out/linux"
log "uml: control=$(readlink "$CACHE/build/control")/out/linux"
