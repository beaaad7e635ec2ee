#!/bin/bash
# Shared settings for the kernel-patches harness.  Sourced, not run.
set -euo pipefail

KP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${DCFS_KCACHE:-/var/cache/dcfs/kernel}
SRC_PKG=linux-source-6.12
# The same path for every Debian version of the package: the cache is keyed
# by the tarball's hash (tarball_id), never by this path.
TARBALL=${KERNEL_TARBALL:-/usr/src/$SRC_PKG.tar.xz}
# The Debian version of $SRC_PKG the series is tested on and applies to.
BASE_VERSION=$(sed -n '/^[[:space:]]*[^#[:space:]]/{s/[[:space:]]//g;p;q}' \
	"$KP_DIR/BASE")
# The version the harness works on (set by ensure_base_source).
TREE_VERSION=
JOBS=${JOBS:-2}
BASE_REPO=$CACHE/src/base

log() { printf '[kernel-patches] %s\n' "$*" >&2; }
die() { printf '[kernel-patches] ERROR: %s\n' "$*" >&2; exit 1; }

# Install what the harness needs when it is missing (root only).
ensure_deps() {
	local pkgs=(f2fs-tools flex bison bc libelf-dev
		    libssl-dev build-essential git perl python3 xz-utils
		    kmod cpio e2fsprogs exfatprogs xfsprogs)
	local missing=() p
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	if [ ${#missing[@]} -ne 0 ]; then
		install_missing "${missing[@]}"
	fi
	ensure_base_source
}

install_missing() {
	local missing=("$@")
	[ "$(id -u)" -eq 0 ] ||
		die "missing packages (need root to install): ${missing[*]}"
	log "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq "${missing[@]}" >&2 ||
		die "apt-get install failed"
}

# Version of the installed $SRC_PKG, empty if none.  dpkg-query fails for a
# package this machine never had (a fresh one): with pipefail that must not
# end the run.
installed_version() {
	{ dpkg-query -W -f='${Status} ${Version}' "$SRC_PKG" 2>/dev/null || true; } |
		sed -n 's/^install ok installed //p'
}

# Does the apt archive offer version $1 of $SRC_PKG?
archive_has() {
	apt-cache madison "$SRC_PKG" 2>/dev/null |
		awk -F'|' '{ gsub(/ /, "", $2); print $2 }' | grep -qxF -- "$1"
}

# The archive's candidate version of $SRC_PKG.
candidate_version() {
	apt-cache policy "$SRC_PKG" 2>/dev/null |
		sed -n 's/^[[:space:]]*Candidate:[[:space:]]*//p'
}

# Install $SRC_PKG at version $1 (root only); returns non-zero on failure.
install_source() {
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --allow-downgrades "$SRC_PKG=$1" >&2
}

# Make $TARBALL the series' base when possible and say which base this run
# uses: the version in BASE if the archive still has it, otherwise the one
# installed (or the archive's current one), on which apply_series names the
# first patch that fails and the command that rebases the series.
ensure_base_source() {
	local inst
	[ -n "$BASE_VERSION" ] || die "no base version in $KP_DIR/BASE"
	if [ -n "${KERNEL_TARBALL:-}" ]; then
		TREE_VERSION="custom tarball $TARBALL"
		log "base: $TARBALL (KERNEL_TARBALL; the series is based on $SRC_PKG $BASE_VERSION)"
		return 0
	fi
	inst=$(installed_version)
	if [ "$inst" != "$BASE_VERSION" ] && [ "$(id -u)" -eq 0 ]; then
		archive_has "$BASE_VERSION" || apt-get update -qq >&2 || true
		if archive_has "$BASE_VERSION"; then
			log "installing $SRC_PKG=$BASE_VERSION (kernel-patches/BASE; installed: ${inst:-none})"
			install_source "$BASE_VERSION" ||
				die "apt-get install $SRC_PKG=$BASE_VERSION failed"
		elif [ -z "$inst" ]; then
			log "$SRC_PKG $BASE_VERSION is not in the archive any more: installing its current version"
			install_source "$(candidate_version)" ||
				die "apt-get install $SRC_PKG failed"
		fi
		inst=$(installed_version)
	fi
	[ -n "$inst" ] ||
		die "$SRC_PKG is not installed (need root to install $SRC_PKG=$BASE_VERSION)"
	[ -f "$TARBALL" ] || die "kernel tarball $TARBALL not found"
	TREE_VERSION=$inst
	if [ "$inst" = "$BASE_VERSION" ]; then
		log "base: Debian $SRC_PKG $inst (kernel-patches/BASE)"
	else
		log "base: Debian $SRC_PKG $inst, NOT the series' base $BASE_VERSION (kernel-patches/BASE): applying to $inst"
	fi
}

# The series' patch files in order; with SERIES_LAST=NNNN (a patch number)
# only those up to and including that patch.
series_patches() {
	local p
	grep -v '^[[:space:]]*\(#\|$\)' "$KP_DIR/series" | while read -r p; do
		echo "$KP_DIR/$p"
		[ -z "${SERIES_LAST:-}" ] || [ "${p%%-*}" != "$SERIES_LAST" ] || break
	done
}

tarball_id() {
	[ -f "$TARBALL" ] || die "kernel tarball $TARBALL not found"
	sha256sum "$TARBALL" | cut -c1-16
}

# A git repository holding the pristine tarball contents, tagged 'base'.
ensure_base_repo() {
	local id stamp
	id=$(tarball_id)
	stamp=$CACHE/src/base.id
	if [ -d "$BASE_REPO/.git" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$id" ]; then
		return 0
	fi
	log "extracting $TARBALL into $BASE_REPO"
	rm -rf "$BASE_REPO" "$BASE_REPO.tmp" "$stamp"
	mkdir -p "$BASE_REPO.tmp"
	tar -xJf "$TARBALL" -C "$BASE_REPO.tmp" --strip-components=1
	git -C "$BASE_REPO.tmp" init -q
	# no background repacking of this big repository while we build
	git -C "$BASE_REPO.tmp" config gc.auto 0
	# Debian's top-level .gitignore ignores everything: add with -f
	git -C "$BASE_REPO.tmp" add -f -A
	git -C "$BASE_REPO.tmp" -c user.name=base -c user.email=base@localhost \
		commit -q -m "pristine $(basename "$TARBALL") $TREE_VERSION ($id)"
	git -C "$BASE_REPO.tmp" tag base
	mv "$BASE_REPO.tmp" "$BASE_REPO"
	echo "$id" > "$stamp"
}

# Create (or recreate) a detached worktree of the pristine tree at $1.
fresh_worktree() {
	local wt=$1
	if [ -e "$wt" ]; then
		git -C "$BASE_REPO" worktree remove --force "$wt" 2>/dev/null ||
			rm -rf "$wt"
	fi
	git -C "$BASE_REPO" worktree prune
	git -C "$BASE_REPO" worktree add -q --detach "$wt" base
}

# Commit patch $2 to worktree $1 with the harness's identity.
am_patch() {
	git -C "$1" -c user.name=harness -c user.email=harness@localhost \
		am -q "$2" || die "git am failed: ${3:-$(basename "$2")}"
}

# Apply the series to worktree $1 with git apply --check / git am.
apply_series() {
	local wt=$1 p
	while read -r p; do
		[ -f "$p" ] || die "series lists missing patch $p"
		if ! git -C "$wt" apply --check "$p" \
			> "$CACHE/src/apply-check.log" 2>&1; then
			if [ "$TREE_VERSION" = "$BASE_VERSION" ]; then
				die "$(basename "$p") does not apply to its own base $SRC_PKG $BASE_VERSION (git apply --check: $CACHE/src/apply-check.log)"
			fi
			die "$(basename "$p") does not apply to $SRC_PKG $TREE_VERSION (the series is based on $BASE_VERSION); rebase the series with: make -C $KP_DIR rebase"
		fi
		am_patch "$wt" "$p"
	done < <(series_patches)
}

# Fixes that let UML run on the host at all (uml-host/, not part of the
# series): every UML kernel the harness builds gets them, control too.
uml_host_patches() {
	ls "$KP_DIR"/uml-host/*.patch 2>/dev/null | sort
}

apply_uml_host() {	# $1 = worktree
	local p
	while read -r p; do
		am_patch "$1" "$p" "uml-host/$(basename "$p")"
	done < <(uml_host_patches)
}

# The build directory of variant $1 ($CACHE/build/$1, a symlink), made
# anew as $1-tree-$2 (input hash $2) if there is none or it was made by
# another build recipe ($3); printed.
variant_dir() {
	local v=$1 h=$2 recipe=$3 link=$CACHE/build/$1 dir
	dir=$(readlink -f "$link" 2>/dev/null || true)
	if [ -z "$dir" ] || [ ! -d "$dir" ] ||
	   [ "$(cat "$dir/recipe" 2>/dev/null)" != "$recipe" ]; then
		dir=$CACHE/build/$v-tree-$h
		rm -rf "$dir"
		mkdir -p "$dir"
		echo "$recipe" > "$dir/recipe"
	fi
	ln -sfn "$dir" "$link"
	echo "$dir"
}

# Worktree $1 of the base repository at commit $2: moved there with git
# checkout if it exists (only the files that differ are rewritten, so the
# build after it is incremental), else created.
checkout_tree() {
	local src=$1 commit=$2
	if [ -e "$src/.git" ] && git -C "$src" rev-parse -q --verify HEAD >/dev/null; then
		git -C "$src" checkout -q -f --detach "$commit"
	else
		rm -rf "$src"
		git -C "$BASE_REPO" worktree prune
		git -C "$BASE_REPO" worktree add -q --detach "$src" "$commit"
	fi
}

# Reuse worktree $1 if it exists (cheap: only files that differ from its
# current state are rewritten), otherwise create it; leave it at pristine base.
reset_worktree() {
	local wt=$1
	if [ -e "$wt/.git" ] && git -C "$wt" rev-parse -q --verify HEAD >/dev/null; then
		git -C "$wt" am --abort >/dev/null 2>&1 || true
		git -C "$wt" checkout -q -f --detach base
		git -C "$wt" clean -q -f -d
	else
		fresh_worktree "$wt"
	fi
}
