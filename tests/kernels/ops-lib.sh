#!/bin/bash
# What ops-files.sh and ops-perms.sh share (sourced): t runs a command and
# prints it, its exit status and its output (stderr included), indented.
# Commands get no terminal on stdin: rm would ask before deleting a
# write-protected file and wait for ever.
t() {
	local out rc
	out=$("$@" 2>&1 < /dev/null)
	rc=$?
	printf '%s -> %s\n' "$*" "$rc"
	[ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/  /'
}
