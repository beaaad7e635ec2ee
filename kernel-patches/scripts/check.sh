#!/bin/bash
# make check: apply the series to a pristine tree, checkpatch every patch and
# compile, after each patch on its own, the objects the series touches
# (ARCH=um, the test config, -Werror).  No full link: that is make uml.
# KP_CHECK_COMPILE=0 skips the compile step; KP_CHECK_FROM=N compiles only
# after patches N and later (the earlier ones are applied, not compiled).
source "$(dirname "$0")/common.sh"

# Every C file the series touches plus the main users of the headers it
# changes.  Checked after every patch; a C file a patch touches that is not
# in this list is compiled too.
CHECK_OBJS="mm/filemap.o mm/readahead.o mm/truncate.o mm/migrate.o
mm/vmstat.o mm/page-writeback.o fs/read_write.o fs/buffer.o fs/iomap/buffered-io.o
block/bio.o block/blk-mq.o io_uring/rw.o fs/f2fs/data.o fs/f2fs/file.o
fs/f2fs/inline.o fs/f2fs/super.o fs/f2fs/verity.o fs/f2fs/gc.o
mm/backing-dev.o"

ensure_deps
mkdir -p "$CACHE/src"
ensure_base_repo

# every patch file must be in the series and vice versa
listed=$(series_patches | xargs -n1 basename | sort)
present=$(cd "$KP_DIR" && ls -1 -- *.patch | sort)
[ "$listed" = "$present" ] ||
	die "series file and *.patch files differ:
$(diff <(echo "$listed") <(echo "$present"))"

wt=$CACHE/src/check
reset_worktree "$wt"
apply_series "$wt"
log "series applies: $(series_patches | wc -l) patches on $(git -C "$wt" log -1 --format=%s base)"

fail=0
while read -r p; do
	# The cache's git tree holds the tarball only, not upstream history:
	# checkpatch cannot look up the upstream commits that the messages
	# cite ("Based on upstream commit ...").
	out=$(cd "$wt" && perl scripts/checkpatch.pl --strict --color=never \
		--ignore UNKNOWN_COMMIT_ID "$p" 2>&1) || true
	if ! grep -q '^total: 0 errors, 0 warnings, 0 checks' <<<"$out"; then
		printf '%s\n' "$out" >&2
		log "checkpatch FAILED: $(basename "$p")"
		fail=1
	else
		log "checkpatch clean: $(basename "$p")"
	fi
done < <(series_patches; uml_host_patches)
[ $fail -eq 0 ] || die "checkpatch reported problems"

# Does the UML test config build object $1 ($2 = .config)?  Judged from
# the directory's Makefile line "obj-$(CONFIG_X) += ... name.o": a file
# under an option UML cannot have (mm/huge_memory.c: no THP on UML) is not
# compiled here; the x86-64 build compiles it.
built_here() {
	local dir base opt
	dir=$(dirname "$1") base=$(basename "$1")
	opt=$(grep -E "^obj-\\$\((CONFIG_[A-Z0-9_]+)\)[[:space:]]*[+:]?=.*[[:space:]]$base([[:space:]]|\$)" \
		"$wt/$dir/Makefile" 2>/dev/null | head -1 | sed -E 's/^obj-\$\((CONFIG_[A-Z0-9_]+)\).*/\1/')
	[ -z "$opt" ] || grep -q "^$opt=y" "$2"
}

compile_each_patch() {
	local out=$CACHE/build/check-out c n=0 objs o t0 subj
	local want
	want=$( { tarball_id; cat "$KP_DIR/uml.config"; } | sha256sum | cut -c1-16)
	mkdir -p "$out"
	if [ "$(cat "$out/config.id" 2>/dev/null)" != "$want" ] ||
	   [ ! -f "$out/.config" ]; then
		(
			cd "$wt"
			make -s ARCH=um O="$out" defconfig
			scripts/kconfig/merge_config.sh -m -O "$out" \
				"$out/.config" "$KP_DIR/uml.config" >/dev/null
			make -s ARCH=um O="$out" olddefconfig
		) || die "per-patch compile: configuring $out failed"
		echo "$want" > "$out/config.id"
	fi
	for c in $(git -C "$wt" rev-list --reverse base..HEAD); do
		n=$((n + 1))
		[ "$n" -ge "${KP_CHECK_FROM:-1}" ] || continue
		subj=$(git -C "$wt" log -1 --format=%s "$c")
		git -C "$wt" checkout -q --detach "$c"
		objs=$CHECK_OBJS
		for o in $(git -C "$wt" diff --name-only "$c^" "$c" -- '*.c'); do
			o=${o%.c}.o
			built_here "$o" "$out/.config" || continue
			grep -qw -- "$o" <<<"$objs" || objs="$objs $o"
		done
		t0=$(date +%s)
		# shellcheck disable=SC2086
		if ! make -C "$wt" -s ARCH=um O="$out" -j"$JOBS" KCFLAGS=-Werror \
			$objs > "$out/patch-$n.log" 2>&1; then
			tail -40 "$out/patch-$n.log" >&2
			git -C "$wt" checkout -q --detach "$tip"
			die "patch $n ($subj) does not compile on its own (log: $out/patch-$n.log)"
		fi
		log "compiles after patch $n ($(( $(date +%s) - t0 ))s): $subj"
	done
	git -C "$wt" checkout -q --detach "$tip"
}

# The FUSE objects of the whole series with CONFIG_FUSE_PASSTHROUGH=n: every
# fuse_* function an object calls must be defined by one of them (a
# declaration without a stub for that config links only while the
# compiler happens to drop the call).
fuse_without_passthrough() {
	local out=$CACHE/build/check-nopt und def missing
	mkdir -p "$out"
	(
		cd "$wt"
		make -s ARCH=um O="$out" defconfig
		printf '# CONFIG_FUSE_PASSTHROUGH is not set\n' > "$out/nopt.config"
		scripts/kconfig/merge_config.sh -m -O "$out" "$out/.config" \
			"$KP_DIR/uml.config" "$out/nopt.config" >/dev/null
		make -s ARCH=um O="$out" olddefconfig
	) || die "configuring $out failed"
	! grep -q '^CONFIG_FUSE_PASSTHROUGH=y' "$out/.config" ||
		die "CONFIG_FUSE_PASSTHROUGH still on in $out"
	make -C "$wt" -s ARCH=um O="$out" -j"$JOBS" KCFLAGS=-Werror fs/fuse/ \
		> "$out/fuse.log" 2>&1 || {
		tail -30 "$out/fuse.log" >&2
		die "fs/fuse does not compile with CONFIG_FUSE_PASSTHROUGH=n (log: $out/fuse.log)"
	}
	und=$(nm -u "$out"/fs/fuse/*.o | awk '/ U fuse_/ { print $2 }' | sort -u)
	def=$(nm --defined-only "$out"/fs/fuse/*.o | awk '$2 ~ /[TtDdBbRr]/ { print $3 }' | sort -u)
	missing=$(comm -23 <(echo "$und") <(echo "$def") | grep . || true)
	[ -z "$missing" ] ||
		die "with CONFIG_FUSE_PASSTHROUGH=n fs/fuse calls undefined: $missing"
	log "fs/fuse compiles with CONFIG_FUSE_PASSTHROUGH=n, no undefined fuse_* calls"
}

tip=$(git -C "$wt" rev-parse HEAD)
[ "${KP_CHECK_NOPT:-1}" = 0 ] || fuse_without_passthrough
if [ "${KP_CHECK_COMPILE:-1}" = 1 ]; then
	t_compile=$(date +%s)
	compile_each_patch
	log "per-patch compile: patches ${KP_CHECK_FROM:-1}-$(series_patches | wc -l), $(wc -w <<<"$CHECK_OBJS")+ objects each, -Werror, $(( $(date +%s) - t_compile ))s"
fi
log "check: OK"
