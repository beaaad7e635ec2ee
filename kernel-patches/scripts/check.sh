#!/bin/bash
# make check: apply the series to a pristine tree and checkpatch every patch.
source "$(dirname "$0")/common.sh"

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
	out=$(cd "$wt" && perl scripts/checkpatch.pl --strict --color=never "$p" 2>&1) || true
	if ! grep -q '^total: 0 errors, 0 warnings, 0 checks' <<<"$out"; then
		printf '%s\n' "$out" >&2
		log "checkpatch FAILED: $(basename "$p")"
		fail=1
	else
		log "checkpatch clean: $(basename "$p")"
	fi
done < <(series_patches)
[ $fail -eq 0 ] || die "checkpatch reported problems"
log "check: OK"
