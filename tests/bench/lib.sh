# SPDX-License-Identifier: GPL-2.0-or-later
# shellcheck shell=bash
#
# Shared by the benchmark scripts (sourced; they define DAEMONS and
# FUSEMNTS, the daemons and mounts their cleanup undoes).

# die MESSAGE: the script's name and the message on stderr, exit 1.
die() { echo "$(basename "$0" .sh): $*" >&2; exit 1; }
# log MESSAGE: the time and the seconds the script has run, on stderr.
log() { printf '[%s +%4ds] %s\n' "$(date -u +%H:%M:%S)" $((SECONDS)) "$*" >&2; }

# dcfs_started NAME PID MNT: a daemon started in the background for NAME
# is remembered for the cleanup, waited for until MNT is its mount (or the
# script dies saying why), and its pid kept as PID_<NAME>.
dcfs_started() {
	local name=$1 pid=$2 mnt=$3
	DAEMONS+=("$pid")
	FUSEMNTS+=("$mnt")
	for _ in $(seq 100); do
		findmnt -rn -M "$mnt" -t fuse.dcfs >/dev/null 2>&1 && break
		kill -0 "$pid" 2>/dev/null || die "dcfs $name died (logs/dcfs-$name.log)"
		sleep 0.1
	done
	findmnt -rn -M "$mnt" -t fuse.dcfs >/dev/null || die "dcfs $name did not mount"
	eval "PID_${name//-/_}=$pid"
}

# awk: med(s), the median of the numbers in the string s ("-" entries, runs
# that measured nothing, are left out): "-" if s had only those, "" if
# nothing.  Put in front of a program: awk "$median_awk"'...'.
# shellcheck disable=SC2034 # used by the scripts that source this
median_awk='
function med(s,   a, b, m, n, i, j, t) {
	m = split(s, b, " "); n = 0
	for (i = 1; i <= m; i++) if (b[i] != "-") a[++n] = b[i]
	if (n == 0 && m > 0) return "-"
	for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] + 0 > t + 0; j--) a[j + 1] = a[j]; a[j + 1] = t }
	if (n == 0) return ""
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}'
