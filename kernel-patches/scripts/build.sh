#!/bin/bash
# make uml: build the patched ARCH=um kernel; build.sh control (make
# uml-control) builds the unpatched control kernel, build.sh kasan (make
# uml-kasan) the patched one with KASAN, build.sh bench bench-before (make
# uml-bench) the two benchmark kernels: without the test build's debugging
# (uml-bench.config), the whole series and the series up to
# BENCH_BEFORE_LAST (0024: without the writeback rework).
#
# Each variant has one build directory ($CACHE/build/<variant> is a symlink
# to it) holding a git worktree (src) and the O= output (out).  The input
# hash covers the tarball, the config fragment and (for the patched kernel)
# the patches in series order, and the uml-host/ fixes every variant gets;
# it is stored next to the build, and an
# unchanged input is not rebuilt.  When the series changes, the worktree is
# moved to the new tree with git checkout, which only rewrites the files
# that differ, so the rebuild is incremental.  Bump BUILD_RECIPE when the
# way the kernel is built changes (forces a clean build).
source "$(dirname "$0")/common.sh"

BUILD_RECIPE=1

ensure_deps
mkdir -p "$CACHE/src" "$CACHE/build"
ensure_base_repo

REQUIRED="F2FS_FS F2FS_FS_COMPRESSION FUSE_FS FUSE_PASSTHROUGH AIO BLK_DEV_UBD HOSTFS
DEVTMPFS MEMCG MEMCG_V1 CACHESTAT_SYSCALL MAGIC_SYSRQ FS_VERITY QUOTA TMPFS
COMPACTION MIGRATION BLK_DEV_NULL_BLK EXT2_FS EXT4_FS EXT4_FS_SECURITY
EXFAT_FS XFS_FS"
# the test kernels' debugging, which the benchmark kernels must not have
DEBUG_OPTS="F2FS_CHECK_FS DEBUG_ATOMIC_SLEEP PROVE_LOCKING LOCKDEP DEBUG_VM
DEBUG_STACK_USAGE"
BENCH_BEFORE_LAST=${BENCH_BEFORE_LAST:-0024}

is_bench() { [ "$1" = bench ] || [ "$1" = bench-before ]; }

# Kconfig fragments of variant $1, merged in this order on top of defconfig.
fragments() {
	echo "$KP_DIR/uml.config"
	[ "$1" != kasan ] || echo "$KP_DIR/uml-kasan.config"
	! is_bench "$1" || echo "$KP_DIR/uml-bench.config"
}

input_hash() {	# $1 = variant
	{
		tarball_id
		echo "recipe $BUILD_RECIPE"
		fragments "$1" | xargs cat
		if [ "$1" != control ]; then
			series_patches | while read -r p; do cat "$p"; done
		fi
		uml_host_patches | while read -r p; do cat "$p"; done
	} | sha256sum | cut -c1-16
}

config_hash() {	# $1 = variant
	{ tarball_id; echo "recipe $BUILD_RECIPE"; fragments "$1" | xargs cat; } |
		sha256sum | cut -c1-16
}

# commit holding the tree to build for variant $1
tree_commit() {
	local wt=$CACHE/src/apply
	reset_worktree "$wt" >&2
	[ "$1" = control ] || apply_series "$wt" >&2
	apply_uml_host "$wt" >&2
	git -C "$wt" rev-parse HEAD
}

build_variant() {	# $1 = variant
	local v=$1 h dir src out start commit
	SERIES_LAST=
	# shellcheck disable=SC2034 # read by common.sh's series list
	[ "$v" != bench-before ] || SERIES_LAST=$BENCH_BEFORE_LAST
	h=$(input_hash "$v")
	dir=$(variant_dir "$v" "$h" "$BUILD_RECIPE")
	src=$dir/src
	out=$dir/out
	if [ "$(cat "$dir/hash" 2>/dev/null)" = "$h" ] && [ -x "$out/linux" ]; then
		log "$v kernel up to date ($dir, input $h)"
		return 0
	fi
	start=$(date +%s)
	log "building $v kernel (input $h) in $dir"
	rm -f "$dir/hash"
	commit=$(tree_commit "$v")
	checkout_tree "$src" "$commit"
	mkdir -p "$out"
	if [ "$(cat "$dir/config" 2>/dev/null)" != "$(config_hash "$v")" ] ||
	   [ ! -f "$out/.config" ]; then
		(
			cd "$src" || exit 1
			make -s ARCH=um O="$out" defconfig
			# shellcheck disable=SC2046
			scripts/kconfig/merge_config.sh -m -O "$out" \
				"$out/.config" $(fragments "$v") >/dev/null
			make -s ARCH=um O="$out" olddefconfig
		)
		config_hash "$v" > "$dir/config"
	fi
	local o req=$REQUIRED
	[ "$v" != kasan ] || req="$req KASAN"
	is_bench "$v" || req="$req $DEBUG_OPTS"
	for o in $req; do
		grep -q "^CONFIG_$o=y" "$out/.config" ||
			die "CONFIG_$o not enabled in $v config"
	done
	if is_bench "$v"; then
		for o in $DEBUG_OPTS KASAN; do
			! grep -q "^CONFIG_$o=y" "$out/.config" ||
				die "CONFIG_$o enabled in the $v config"
		done
	fi
	[ "$v" != kasan ] || grep -q '^CONFIG_KERNEL_STACK_ORDER=3$' "$out/.config" ||
		die "CONFIG_KERNEL_STACK_ORDER is not 3 in the kasan config"
	make -C "$src" ARCH=um O="$out" -j"$JOBS" linux \
		> "$dir/build.log" 2>&1 || {
		tail -40 "$dir/build.log" >&2
		die "$v kernel build failed (log: $dir/build.log)"
	}
	echo "$h" > "$dir/hash"
	log "$v kernel built in $(( $(date +%s) - start ))s"
}

# variants to build: patched (default), control, kasan, bench, bench-before
# (see the Makefile)
for v in "${@:-patched}"; do
	build_variant "$v"
	log "uml: $v=$(readlink -f "$CACHE/build/$v")/out/linux"
done
