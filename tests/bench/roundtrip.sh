#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# What one FUSE round trip costs on this machine, and how much of it is
# CPU placement: stat(2) of one file through a dcfs mount that caches
# nothing (-o cache=never: every stat is a LOOKUP and GETATTRs), against
# the same stat natively.  Rows: the scheduler's own placement, the
# application and every daemon thread pinned to the same CPU, and pinned
# to different CPUs.  Medians of --runs runs; the request counter of the
# mount gives the round trips per stat.
#
#   tests/bench/roundtrip.sh [--runs N] [--stats N]     (as root)
#
# This bounds every metadata ratio of `make bench-meta`: an operation
# that needs k round trips cannot run faster than k times the latency
# printed here, whatever the daemon does.
#
#   tests/bench/roundtrip.sh --ops [--runs N] [--files N] [-o OPTS]
#
# counts instead of timing: FUSE requests per file, by opcode, of each
# metadata phase through a mount with the given options (default: none,
# i.e. cache=auto): create + 1 KiB write + close, stat, unlink (N files in
# one directory), the same create (O_TRUNC, not O_EXCL) after a stat(2)
# that finds the name missing (as make, cp or an installer do), and find -printf '%s' over N files in directories of
# 1000, cold (a fresh mount: the kernel knows no entry) and warm (again).
# Each phase starts 2 s after the one before, past the default timeouts,
# so a stat phase measures stat of a name whose entry expired, as in a
# run of 100 000 files; counts are medians of --runs fresh mounts.
#
#   tests/bench/roundtrip.sh --ops --syscalls [--runs N] [--files N] [-o OPTS]
#
# also counts the daemon's own system calls per file and phase (strace -f
# -c attached to it for the phase; futex left out): where a request's
# time goes where calls are dear (UML: kernel-patches/README.md, "Where
# the time goes in UML").  strace slows the daemon, so a phase may then
# outlast the 1 s timeouts and show a LOOKUP more than without it.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
DCFS_BIN=${DCFS_BIN:-$REPO/build/dcfs}
IO=${DCFS_IO_BIN:-$REPO/build/dcfs-io}
RUNS=5
STATS=20000
OPS=0
SYSCALLS=0
FILES=2000
MOPTS=""

while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift 2 ;;
	--stats) STATS=$2; shift 2 ;;
	--ops) OPS=1; shift ;;
	--syscalls) SYSCALLS=1; shift ;;
	--files) FILES=$2; shift 2 ;;
	-o) MOPTS=$2; shift 2 ;;
	*) echo "usage: $0 [--runs N] [--stats N] | --ops [--syscalls] [--runs N] [--files N] [-o OPTS]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" = 0 ] || { echo "$0: must run as root (mount)" >&2; exit 1; }
NCPU=$(nproc)
[ "$NCPU" -ge 2 ] || { echo "$0: needs two CPUs" >&2; exit 1; }

W=$(mktemp -d /var/tmp/dcfs-roundtrip.XXXXXX)
MNT=$W/mnt
cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/back" "$MNT"
echo x > "$W/back/f"

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

requests() {
	"$DCFS_BIN" stat --prometheus "$MNT" |
		awk '/^dcfs_requests_total\{/ && !/forget/ { n += $2 } END { print n + 0 }'
}

# mount_dcfs CPUS: a fresh daemon, all threads on CPUS ("" = anywhere)
mount_dcfs() {
	if [ -n "$1" ]; then
		taskset -c "$1" "$DCFS_BIN" "$W/back" "$MNT" -o cache=never
	else
		"$DCFS_BIN" "$W/back" "$MNT" -o cache=never
	fi
	for _ in $(seq 50); do mountpoint -q "$MNT" && return 0; sleep 0.1; done
	echo "$0: mount failed" >&2
	exit 1
}

# row LABEL DAEMON_CPUS APP_CPUS
row() {
	local label=$1 dcpu=$2 acpu=$3 us r0 r1 per
	mount_dcfs "$dcpu"
	r0=$(requests)
	us=$(for _ in $(seq "$RUNS"); do
		if [ -n "$acpu" ]; then taskset -c "$acpu" "$IO" statloop "$MNT/f" "$STATS"
		else "$IO" statloop "$MNT/f" "$STATS"; fi
	done | median)
	r1=$(requests)
	per=$(awk -v a="$r0" -v b="$r1" -v n="$((RUNS * STATS))" 'BEGIN { printf "%.2f", (b - a) / n }')
	fusermount3 -u "$MNT"
	awk -v l="$label" -v us="$us" -v per="$per" -v nat="$NATIVE" 'BEGIN {
		printf "| %s | %.2f | %s | %.2f | %.0f× |\n", l, us, per, us / per, us / nat }'
}

# Per-opcode request counters of the mount: "opcode count" lines.
op_counts() {
	"$DCFS_BIN" stat --json "$MNT" | grep -o '"requests":{[^}]*}' |
		sed 's/"requests":{//; s/}//' | tr ',' '\n' | tr -d '"' | tr ':' ' '
}

slab_drops() { awk '$1 == "drop_slab" { print $2 }' /proc/vmstat; }

# phase NAME CMD...: runs CMD, appends "run name opcode per-file" to $W/ops.
# Someone's drop_caches (a test suite, another bench) during the phase
# makes the kernel forget the mount's entries and look them up again: such
# a phase is noted in $W/disturbed and left out of the medians.
phase() {
	local name=$1 before d0 sp=""
	shift
	d0=$(slab_drops)
	before=$(op_counts)
	if [ "$SYSCALLS" = 1 ]; then
		strace -f -c -o "$W/strace.out" -p "$(daemon_pid)" 2> /dev/null &
		sp=$!
		sleep 1 # attached to every thread
	fi
	"$@" > /dev/null
	if [ -n "$sp" ]; then
		sleep 0.5 # the last RELEASE and FORGETs
		kill -INT "$sp"; wait "$sp" || true
		# "% time  seconds  usecs/call  calls  [errors]  syscall"
		awk -v r="$RUN" -v p="$name" -v n="$FILES" '
			$1 ~ /^[0-9.]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" && $NF != "futex" {
				printf "%s %s %s %.2f\n", r, p, $NF, $4 / n }' "$W/strace.out" >> "$W/sys"
	fi
	if [ "$(slab_drops)" != "$d0" ]; then
		echo "$RUN $name" >> "$W/disturbed"
		echo "$0: run $RUN, $name: disturbed by a drop_caches, not counted" >&2
		return 0
	fi
	join -a 2 -e 0 -o 0,1.2,2.2 <(echo "$before" | sort) <(op_counts | sort) |
		awk -v r="$RUN" -v p="$name" -v n="$FILES" '
			$1 != "init" && $1 != "statfs" && $3 - $2 > 0 { printf "%s %s %s %.2f\n", r, p, $1, ($3 - $2) / n }' >> "$W/ops"
}

daemon_pid() { pgrep -nf -- "$W/back $MNT"; }

mount_ops() {
	local o=${MOPTS:+-o $MOPTS}
	# shellcheck disable=SC2086
	"$DCFS_BIN" "$W/back" "$MNT" $o
	for _ in $(seq 50); do mountpoint -q "$MNT" && return 0; sleep 0.1; done
	echo "$0: mount failed" >&2
	exit 1
}

ops_main() {
	local phases="create+write+close stat unlink stat-missing+create find-cold find-warm"
	: > "$W/ops"; : > "$W/disturbed"; : > "$W/sys"
	mkdir -p "$W/back/meta" "$W/back/tree"
	"$IO" tree "$W/back/tree" "$FILES" 1K
	for RUN in $(seq "$RUNS"); do
		mount_ops
		sleep 2; phase create+write+close "$IO" meta "$MNT/meta" "$FILES" 1K create
		sleep 2; phase stat "$IO" meta "$MNT/meta" "$FILES" 1K stat
		sleep 2; phase unlink "$IO" meta "$MNT/meta" "$FILES" 1K unlink
		sleep 2; phase stat-missing+create "$IO" meta "$MNT/meta" "$FILES" 1K probe
		sleep 2; "$IO" meta "$MNT/meta" "$FILES" 1K unlink > /dev/null
		fusermount3 -u "$MNT"
		mount_ops
		phase find-cold find "$MNT/tree" -printf '%s\n'
		sleep 2; phase find-warm find "$MNT/tree" -printf '%s\n'
		fusermount3 -u "$MNT"
	done
	echo "FUSE requests per file by opcode, medians of $RUNS fresh mounts, $FILES files of 1 KiB ($(date -u +%F), $(uname -r), dcfs ${MOPTS:+-o $MOPTS}; backing $(stat -f -c %T "$W/back"))"
	echo
	echo "| phase | round trips per file | requests by opcode (forgets have no reply) |"
	echo "|---|---:|---|"
	per_phase_table "$W/ops" "$phases" forget
	if [ "$SYSCALLS" = 1 ]; then
		echo
		echo "The daemon's system calls per file (strace -c; futex left out; io_uring_enter or /dev/fuse read/writev are the transport):"
		echo
		echo "| phase | calls per file | by call |"
		echo "|---|---:|---|"
		per_phase_table "$W/sys" "$phases" ""
	fi
}

# per_phase_table FILE PHASES NOT_COUNTED: rows of "run phase key per-file"
# lines as medians over the undisturbed runs, keys matching NOT_COUNTED*
# listed but left out of the total
per_phase_table() {
	local file=$1 phases=$2 skip=$3 p
	for p in $phases; do
		local op line="" tot=0 m runs
		runs=$((RUNS - $(awk -v p="$p" '$2 == p' "$W/disturbed" | wc -l)))
		if [ "$runs" = 0 ]; then
			echo "| $p | - | every run disturbed by a drop_caches |"
			continue
		fi
		for op in $(awk -v p="$p" '$2 == p { print $3 }' "$file" | sort -u); do
			# a run without the key counts as 0
			m=$( { awk -v p="$p" -v o="$op" '$2 == p && $3 == o { print $4 }' "$file"
			       for _ in $(seq "$runs"); do echo 0.00; done; } | sort -g | tail -n "$runs" | median)
			[ "$m" = 0.00 ] && continue
			line+="${line:+, }$op $m"
			# a FORGET gets no reply: not a round trip
			[ -n "$skip" ] && case $op in *"$skip") continue ;; esac
			tot=$(awk -v a="$tot" -v b="$m" 'BEGIN { printf "%.2f", a + b }')
		done
		echo "| $p | $tot | ${line:-none}$([ "$runs" = "$RUNS" ] || echo " ($runs of $RUNS runs: the others disturbed by a drop_caches)") |"
	done
}

if [ "$OPS" = 1 ]; then
	ops_main
	exit 0
fi

NATIVE=$(for _ in $(seq "$RUNS"); do "$IO" statloop "$W/back/f" "$STATS"; done | median)
echo "stat(2) of one file, $STATS per run, medians of $RUNS runs ($(date -u +%F), $(uname -r), $NCPU CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
echo
echo "| placement | µs per stat | round trips per stat | µs per round trip | × native stat |"
echo "|---|---:|---:|---:|---:|"
printf "| native (no FUSE) | %.2f | 0 | — | 1× |\n" "$NATIVE"
row "dcfs -o cache=never, scheduler's placement" "" ""
row "dcfs, application and daemon on CPU 0" 0 0
row "dcfs, application on CPU 1, daemon on CPU 0" 0 1
