#!/bin/bash
# make rebase [TO=version]: move the series from the Debian base named in
# BASE to another version of linux-source-6.12 (default: the archive's
# candidate) and regenerate the patch files.
#
# In one git repository ($CACHE/src/rebase-<old>-to-<new>) the old tarball
# is committed and tagged old-base, the series is applied on top of it as
# branch 'series' (git am), the new tarball is committed on top of old-base
# and tagged new-base, and the series is replayed onto it as branch
# 'rebased' with git am -3: both trees live in the same repository, so a
# hunk that no longer applies is merged three-way from the blobs of the old
# base instead of failing.  If a patch still conflicts, the script stops and
# says where; resolve it there (git add, git am --continue) and run make
# rebase again: it picks up the finished branch, writes the patches with
# git format-patch (same file names and order as the series file) and puts
# the new version into BASE.  Then run make check uml test.
#
# Tarballs of versions that are not installed are taken from the .deb
# (apt-get download, no installation) and kept in $CACHE/tarballs.
source "$(dirname "$0")/common.sh"

OLD=$BASE_VERSION
NEW=${TO:-}

# Tarball of $SRC_PKG version $1, printed as a path ('' if unavailable).
tarball_of() {
	local v=$1 out tmp deb
	if [ "$(installed_version)" = "$v" ] && [ -f "/usr/src/$SRC_PKG.tar.xz" ]; then
		echo "/usr/src/$SRC_PKG.tar.xz"
		return 0
	fi
	out=$CACHE/tarballs/$SRC_PKG-$v.tar.xz
	if [ ! -f "$out" ]; then
		mkdir -p "$CACHE/tarballs"
		tmp=$(mktemp -d "$CACHE/tarballs/dl.XXXXXX")
		if ! (cd "$tmp" && apt-get download -q "$SRC_PKG=$v") >&2; then
			rm -rf "$tmp"
			return 0
		fi
		deb=$(ls "$tmp"/*.deb)
		dpkg-deb --fsys-tarfile "$deb" |
			tar -xO "./usr/src/$SRC_PKG.tar.xz" > "$out.tmp" ||
			die "no $SRC_PKG.tar.xz in $deb"
		mv "$out.tmp" "$out"
		rm -rf "$tmp"
	fi
	echo "$out"
}

# Replace the work tree of repository $1 by the contents of tarball $2 and
# commit it with message $3.
commit_tarball() {
	local r=$1 tb=$2 msg=$3
	git -C "$r" rm -r -q --cached --ignore-unmatch . >/dev/null
	find "$r" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
	tar -xJf "$tb" -C "$r" --strip-components=1
	git -C "$r" add -f -A
	git -C "$r" -c user.name=base -c user.email=base@localhost \
		commit -q --allow-empty -m "$msg"
}

finish() {	# $1 = repository
	local r=$1 n want tmp i f names
	n=$(git -C "$r" rev-list --count new-base..rebased)
	want=$(series_patches | wc -l)
	[ "$n" = "$want" ] ||
		die "branch 'rebased' in $r has $n patches, the series $want"
	tmp=$(mktemp -d)
	git -C "$r" format-patch -q --zero-commit --no-signature -o "$tmp" \
		new-base..rebased
	mapfile -t names < <(series_patches | xargs -n1 basename)
	i=0
	for f in "$tmp"/*.patch; do
		mv "$f" "$KP_DIR/${names[$i]}"
		i=$((i + 1))
	done
	rmdir "$tmp"
	printf '%s\n' "$NEW" > "$KP_DIR/BASE"
	log "rebased $want patches from $SRC_PKG $OLD to $NEW; BASE says $NEW"
	log "changed patch files: $(cd "$KP_DIR" && git status --porcelain -- '*.patch' | wc -l) (git diff in $KP_DIR)"
	log "now: apt-get install $SRC_PKG=$NEW && make -C $KP_DIR check uml test"
}

command -v apt-get >/dev/null || die "apt-get needed"
if [ -z "$NEW" ]; then
	NEW=$(candidate_version)
	[ -n "$NEW" ] && [ "$NEW" != "(none)" ] ||
		die "no candidate version of $SRC_PKG in the archive (apt-get update?); give one: make rebase TO=version"
fi
[ "$NEW" != "$OLD" ] || { log "the series is already based on $SRC_PKG $OLD"; exit 0; }

R=$CACHE/src/rebase-$OLD-to-$NEW
if [ -d "$R/.git" ] && git -C "$R" rev-parse -q --verify refs/tags/new-base >/dev/null; then
	if [ -d "$R/.git/rebase-apply" ]; then
		die "git am is still in progress in $R: resolve the conflict there (git add, git am --continue), then run make -C $KP_DIR rebase again"
	fi
	finish "$R"
	exit 0
fi

log "rebasing the series from $SRC_PKG $OLD to $NEW in $R"
old_tb=$(tarball_of "$OLD")
new_tb=$(tarball_of "$NEW")
[ -n "$new_tb" ] || die "cannot get $SRC_PKG $NEW (apt-get download failed)"
rm -rf "$R"
mkdir -p "$R"
git -C "$R" init -q
git -C "$R" config gc.auto 0
am=(git -C "$R" -c user.name=rebase -c user.email=rebase@localhost am -q)
if [ -n "$old_tb" ]; then
	commit_tarball "$R" "$old_tb" "pristine $SRC_PKG $OLD"
	git -C "$R" tag old-base
	git -C "$R" checkout -q -b series
	series_patches | xargs "${am[@]}" ||
		die "the series does not apply to its own base $OLD (see $R)"
	git -C "$R" checkout -q --detach old-base
	log "series applied to $OLD (branch 'series'); now the new base"
else
	log "$SRC_PKG $OLD is not in the archive any more: no three-way merge (plain git am)"
fi
commit_tarball "$R" "$new_tb" "pristine $SRC_PKG $NEW"
git -C "$R" tag new-base
git -C "$R" checkout -q -b rebased
three=-3
[ -n "$old_tb" ] || three=
# shellcheck disable=SC2086
if ! series_patches | xargs "${am[@]}" $three; then
	die "a patch needs a hand: resolve it in $R (git status; edit; git add; git am --continue), then run make -C $KP_DIR rebase again"
fi
finish "$R"
