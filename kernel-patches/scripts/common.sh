#!/bin/bash
# Shared settings for the kernel-patches harness.  Sourced, not run.
set -euo pipefail

KP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${DCFS_KCACHE:-/var/cache/dcfs/kernel}
TARBALL=${KERNEL_TARBALL:-/usr/src/linux-source-6.12.tar.xz}
JOBS=${JOBS:-2}
BASE_REPO=$CACHE/src/base

log() { printf '[kernel-patches] %s\n' "$*" >&2; }
die() { printf '[kernel-patches] ERROR: %s\n' "$*" >&2; exit 1; }

# Install what the harness needs when it is missing (root only).
ensure_deps() {
	local pkgs=(linux-source-6.12 f2fs-tools flex bison bc libelf-dev
		    libssl-dev build-essential git perl python3 xz-utils
		    kmod cpio e2fsprogs exfatprogs xfsprogs)
	local missing=() p
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
			grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] ||
		die "missing packages (need root to install): ${missing[*]}"
	log "installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq "${missing[@]}" >&2 ||
		die "apt-get install failed"
}

series_patches() {
	local p
	grep -v '^[[:space:]]*\(#\|$\)' "$KP_DIR/series" | while read -r p; do
		echo "$KP_DIR/$p"
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
		commit -q -m "pristine $(basename "$TARBALL") ($id)"
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

# Apply the series to worktree $1 with git apply --check / git am.
apply_series() {
	local wt=$1 p
	while read -r p; do
		[ -f "$p" ] || die "series lists missing patch $p"
		git -C "$wt" apply --check "$p" ||
			die "patch does not apply: $(basename "$p")"
		git -C "$wt" -c user.name=harness -c user.email=harness@localhost \
			am -q "$p" || die "git am failed: $(basename "$p")"
	done < <(series_patches)
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
