#!/bin/bash
# make x86 / make deb: build BASE plus the series for x86-64 as Debian
# packages (make bindeb-pkg), cached by content hash like the UML kernels.
#
#   x86.sh [CONFIG]   CONFIG = test (default: x86_64_defconfig +
#                     kvm_guest.config + x86.config, everything the QEMU
#                     guest needs built in), debian (Debian's own
#                     linux-config-6.12 amd64 config), localmod (Debian's
#                     config reduced to the modules loaded here:
#                     localmodconfig; LSMOD=FILE takes a saved lsmod
#                     output instead)
#
# X86_CONFIG_ONLY=1 stops after making and checking the configuration.
#
# The packages (linux-image-<release>, linux-headers-<release>, and a
# linux-libc-dev nobody needs to install) land in $CACHE/build/<variant>/
# (variant x86, deb-debian or deb-localmod), release 6.12.N-dcfs.  The test
# config's image is the one test-x86 boots: one build serves both.  The
# options the series needs are forced on (deb.config for Debian's configs)
# and checked after olddefconfig.
source "$(dirname "$0")/common.sh"

BUILD_RECIPE=1
cfg=${1:-test}
case $cfg in
test) v=x86 ;;
debian|localmod) v=deb-$cfg ;;
*) die "unknown x86 config $cfg (test, debian or localmod)" ;;
esac
DEBIAN_CONFIG=${DEBIAN_CONFIG:-/usr/src/linux-config-6.12/config.amd64_none_amd64.xz}

ensure_deps
for p in debhelper dpkg-dev rsync; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q 'install ok installed' || install_missing "$p"
done
if [ "$cfg" != test ] && [ ! -f "$DEBIAN_CONFIG" ]; then
	install_missing linux-config-6.12
fi
mkdir -p "$CACHE/src" "$CACHE/build"
ensure_base_repo

# What the series and its tests need, =y in the test config; Debian's
# configs may have the file systems as modules (=m).
NEED_BUILTIN="FUSE_PASSTHROUGH TRANSPARENT_HUGEPAGE MEMCG CACHESTAT_SYSCALL"
NEED_ANY="F2FS_FS FUSE_FS EXT4_FS XFS_FS"
NEED_TEST="F2FS_FS F2FS_FS_COMPRESSION F2FS_CHECK_FS FUSE_FS EXT2_FS EXT4_FS
EXFAT_FS XFS_FS VIRTIO_PCI VIRTIO_BLK NET_9P_VIRTIO 9P_FS BLK_DEV_NULL_BLK
DEVTMPFS MAGIC_SYSRQ AIO IO_URING COMPACTION MIGRATION PROVE_LOCKING
DEBUG_VM DEBUG_ATOMIC_SLEEP PREEMPT_COUNT SMP"

# The configuration's inputs, one stream: what the config is made from.
config_inputs() {
	echo "config $cfg"
	case $cfg in
	test) cat "$KP_DIR/x86.config" ;;
	debian) xzcat "$DEBIAN_CONFIG"; cat "$KP_DIR/deb.config" ;;
	localmod) xzcat "$DEBIAN_CONFIG"; cat "$KP_DIR/deb.config"; lsmod_output ;;
	esac
}

lsmod_output() {
	if [ -n "${LSMOD:-}" ]; then
		cat "$LSMOD"
	else
		lsmod 2>/dev/null ||
			die "lsmod fails here (no /proc/modules?): localmodconfig needs the loaded modules; give a saved list with LSMOD=FILE"
	fi
}

config_hash() { { tarball_id; echo "recipe $BUILD_RECIPE"; config_inputs; } | sha256sum | cut -c1-16; }

input_hash() {
	{
		config_hash
		series_patches | while read -r p; do cat "$p"; done
	} | sha256sum | cut -c1-16
}

configure() {	# $1 = source tree, $2 = output directory
	local src=$1 out=$2
	case $cfg in
	test)
		make -s -C "$src" O="$out" x86_64_defconfig
		"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" \
			"$src/kernel/configs/kvm_guest.config" \
			"$KP_DIR/x86.config" >/dev/null
		;;
	*)
		xzcat "$DEBIAN_CONFIG" > "$out/.config"
		"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" \
			"$KP_DIR/deb.config" >/dev/null
		if [ "$cfg" = localmod ]; then
			lsmod_output > "$out/lsmod.txt"
			make -s -C "$src" O="$out" olddefconfig
			yes '' | make -s -C "$src" O="$out" LSMOD="$out/lsmod.txt" \
				localmodconfig >/dev/null
		fi
		;;
	esac
	make -s -C "$src" O="$out" olddefconfig
}

check_config() {	# $1 = .config
	local o
	for o in $NEED_BUILTIN; do
		grep -q "^CONFIG_$o=y" "$1" || die "CONFIG_$o is not =y in the $cfg config ($1)"
	done
	for o in $NEED_ANY; do
		grep -q "^CONFIG_$o=[ym]" "$1" || die "CONFIG_$o is not enabled in the $cfg config ($1)"
	done
	if [ "$cfg" = test ]; then
		for o in $NEED_TEST; do
			grep -q "^CONFIG_$o=y" "$1" || die "CONFIG_$o is not =y in the test config ($1)"
		done
	fi
	grep -q '^CONFIG_LOCALVERSION="-dcfs"' "$1" || die "CONFIG_LOCALVERSION is not -dcfs ($1)"
}

build() {
	local h dir src out start commit rel pkgver
	h=$(input_hash)
	dir=$(variant_dir "$v" "$h" "$BUILD_RECIPE")
	src=$dir/src
	out=$dir/out
	if [ "$(cat "$dir/hash" 2>/dev/null)" = "$h" ] &&
	   ls "$dir"/linux-image-*.deb >/dev/null 2>&1; then
		log "$v kernel package up to date ($dir, input $h)"
		return 0
	fi
	start=$(date +%s)
	log "building $v kernel packages (input $h) in $dir"
	rm -f "$dir/hash"
	local wt=$CACHE/src/apply-$v
	reset_worktree "$wt"
	apply_series "$wt"
	commit=$(git -C "$wt" rev-parse HEAD)
	checkout_tree "$src" "$commit"
	mkdir -p "$out"
	if [ "$(cat "$dir/config" 2>/dev/null)" != "$(config_hash)" ] ||
	   [ ! -f "$out/.config" ]; then
		configure "$src" "$out"
		config_hash > "$dir/config"
	fi
	check_config "$out/.config"
	if [ "${X86_CONFIG_ONLY:-0}" = 1 ]; then
		log "$v config checked ($out/.config); X86_CONFIG_ONLY=1: not built"
		exit 0
	fi
	# a package version that changes with the input, so apt sees a
	# rebuilt kernel as an upgrade
	# (--no-print-directory: under make -C, MAKELEVEL would add
	# "Entering directory" lines to the output)
	pkgver="$(make -s --no-print-directory -C "$src" O="$out" kernelversion)-$(date +%Y%m%d%H%M)+dcfs.$h"
	rm -f "$dir"/*.deb "$dir"/*.buildinfo "$dir"/*.changes
	# LOCALVERSION= : no "+" for a tree that is not at a tag; the
	# release is 6.12.N-dcfs (CONFIG_LOCALVERSION)
	make -C "$src" O="$out" -j"$JOBS" LOCALVERSION= \
		KDEB_PKGVERSION="$pkgver" bindeb-pkg \
		> "$dir/build.log" 2>&1 || {
		tail -40 "$dir/build.log" >&2
		die "$v kernel package build failed (log: $dir/build.log)"
	}
	rel=$(cat "$out/include/config/kernel.release")
	ls "$dir"/linux-image-"$rel"_*.deb >/dev/null 2>&1 ||
		die "no linux-image-$rel package in $dir (log: $dir/build.log)"
	echo "$h" > "$dir/hash"
	echo "$rel" > "$dir/release"
	log "$v kernel packages built in $(( $(date +%s) - start ))s"
}

# (lsmod_output's die would only end build()'s command substitutions)
if [ "$cfg" = localmod ]; then
	lsmod_output > /dev/null || exit 1
fi
build
dir=$(readlink -f "$CACHE/build/$v")
log "x86-64 ($cfg config), release $(cat "$dir/release"):"
ls -1 "$dir"/*.deb | sed 's/^/[kernel-patches]   /' >&2
