#!/bin/bash
# NFS in the kernel matrix, sourced after stages.sh: a kernel nfsd in the
# guest exports a local filesystem (ext4 on the disk given) over loopback.
#   nfs         dcfs runs over the NFS client mount (NFSv4.2, hard): the
#               usual stages, then nfs-cto (close-to-open against a second
#               client), nfs-errors (ESTALE and EIO reach the caller, over
#               an NFSv3 soft mount) and nfs-restart (nfsd restarted under
#               a stream written through dcfs: nothing lost)
#   nfs-export  a dcfs mount is what nfsd exports, to NFS clients in the
#               same guest: export-rw (the file transcript through the
#               client, against the same filesystem exported natively) and
#               export-restart (dcfs restarted under active v3 and v4
#               clients: open and known files stay valid, no ESTALE)

NFS_SRV='' NFS_EXPORTS=''
NFS_GRACE=10
# The NFSv4 pseudo root: a tmpfs of its own (fsid=0), since the guest's "/"
# is the host's over 9p, which cannot be exported; everything exported
# lies below it.  NFSv4 clients name a path relative to it, v3 clients the
# whole path (nfs_mount).
V4ROOT=$K_WORK/v4

# nfs_start DEV DIR: the ext4 of DEV at DIR, nfsd running, the v4 root
# exported; else NFS_WHY says why (not a subshell: it sets NFS_SRV and
# NFS_EXPORTS for nfs_stop)
NFS_WHY=''
nfs_start() {
	local dev=$1 dir=$2 d
	for d in nfsd nfs nfs4 ext4; do
		has_fs "$d" || { NFS_WHY="the kernel has no $d"; return 1; }
	done
	for d in exportfs rpc.nfsd rpc.mountd rpcbind; do
		command -v "$d" >/dev/null ||
			{ NFS_WHY="$d is not installed (nfs-kernel-server, rpcbind)"; return 1; }
	done
	mkdir -p "$V4ROOT" /run/rpcbind /var/lib/nfs/v4recovery /var/lib/nfs/rpc_pipefs
	touch /var/lib/nfs/etab /var/lib/nfs/rmtab
	grep -q " $V4ROOT " /proc/mounts || mount -t tmpfs v4root "$V4ROOT"
	mkdir -p "$dir"
	NFS_WHY=$(mount -t ext4 "$dev" "$dir" 2>&1) || return 1
	NFS_SRV=$dir
	chmod 755 "$dir"
	grep -q " /proc/fs/nfsd " /proc/mounts || mount -t nfsd nfsd /proc/fs/nfsd
	grep -q " /var/lib/nfs/rpc_pipefs " /proc/mounts ||
		mount -t rpc_pipefs sunrpc /var/lib/nfs/rpc_pipefs 2>/dev/null
	pgrep -x rpcbind >/dev/null || rpcbind -w || { NFS_WHY="rpcbind does not start"; return 1; }
	# the shortest grace period and lease the kernel takes (10 s): a
	# restarted server refuses new opens for that long
	if ! pgrep -x nfsd >/dev/null; then
		echo "$NFS_GRACE" > /proc/fs/nfsd/nfsv4leasetime 2>/dev/null
		echo "$NFS_GRACE" > /proc/fs/nfsd/nfsv4gracetime 2>/dev/null
	fi
	pgrep -x rpc.mountd >/dev/null || rpc.mountd || { NFS_WHY="rpc.mountd does not start"; return 1; }
	rpc.nfsd 4 || { NFS_WHY="rpc.nfsd does not start"; return 1; }
	NFS_WHY=$(exportfs -i -o "ro,fsid=0,no_subtree_check" "127.0.0.1:$V4ROOT" 2>&1) ||
		return 1
	NFS_EXPORTS+=" 127.0.0.1:$V4ROOT"
	return 0
}

nfs_export() {	# DIR FSID
	exportfs -i -o "rw,no_root_squash,no_subtree_check,sync,fsid=$2" "127.0.0.1:$1" 2>&1 &&
		NFS_EXPORTS+=" 127.0.0.1:$1"
}

nfs_mount() {	# DIR MNT OPTIONS
	local path=$1
	case $3 in vers=4*) path=${1#"$V4ROOT"} ;; esac
	mkdir -p "$2"
	timeout 120 mount -t nfs -o "$3" "127.0.0.1:$path" "$2" 2>&1
}

nfs_stop() {
	local e
	for e in $NFS_EXPORTS; do exportfs -u "$e" 2>/dev/null; done
	NFS_EXPORTS=
	rpc.nfsd 0 2>/dev/null
	exportfs -f 2>/dev/null
	[ -z "$NFS_SRV" ] || umount "$NFS_SRV" 2>/dev/null || umount -l "$NFS_SRV"
	NFS_SRV=
}

nfs_skip() {	# REASON STAGES...
	local why=$1 s
	shift
	for s in "$@"; do want "$s" && result nfs "$s" SKIP "$why"; done
	return 0
}

# ---------------------------------------------------------------- nfs
run_nfs() {	# DEV
	local srv=$K_WORK/v4/nfs b=$K_WORK/nfs.back why
	if ! nfs_start "$1" "$srv"; then
		why=$NFS_WHY
		skip_all nfs "$why"
		nfs_skip "$why" nfs-cto nfs-errors nfs-restart
		nfs_stop
		return
	fi
	# the filesystem's root is exported: an NFSv4 client stays in the
	# export of the mount it entered
	nfs_export "$srv" 41 >/dev/null
	if ! why=$(nfs_mount "$srv" "$b" vers=4.2,hard,timeo=50); then
		skip_all nfs "NFS mount failed: $why"
		nfs_skip "NFS mount failed" nfs-cto nfs-errors nfs-restart
		nfs_stop
		return
	fi
	metric nfs mount "$(grep " $b " /proc/mounts | awk '{ print $4 }' | cut -c1-80)"
	run_stages nfs "$b"
	# the NFS stages with a daemon of their own over the same mount
	local cg m=$K_WORK/nfs.mnt rc=0
	cg=$(cg_new nfs2 || true)
	if dcfs_start nfs "$b/export" "$m" "$cg"; then
		want nfs-cto && stage_nfs_cto "$m" "$b/export" "$srv/export"
		want nfs-restart && stage_nfs_restart "$m" "$b/export" "$srv/export"
		dcfs_stop || rc=$?
		[ "$rc" = 0 ] || result nfs nfs-daemon FAIL "the second dcfs exited $rc"
	else
		nfs_skip "dcfs did not mount" nfs-cto nfs-restart
	fi
	cg_del "$cg"
	umount "$b" || umount -l "$b"
	want nfs-errors && stage_nfs_errors "$srv"
	nfs_stop
}

# nfs-cto: close-to-open against another client.  The other client is an
# NFSv3 mount: in one guest a second NFSv4 mount is the same NFSv4 client
# to the server, which then keeps that client's read delegation and no
# side revalidates (a native NFSv4 client of the same kernel would read
# stale data too).  Each check runs twice: through dcfs over the first
# client, and natively on the first client (the control).
cto_checks() {	# DIR_ON_CLIENT_1 DIR_ON_CLIENT_2 -> "fails checks detail"
	local a=$1 c=$2 f fails=0 n=0 why=''
	for f in cto.dat cto.mkv; do
		seq 1 100000 > "$a/$f"
		n=$((n + 1))
		cmp -s "$a/$f" "$c/$f" || { fails=$((fails + 1)); why+=" $f: write, other client read;"; }
		seq 7 100006 | head -c "$(stat -c %s "$c/$f")" > "$c/$f"
		n=$((n + 1))
		cat "$a/$f" | cmp -s - "$c/$f" || { fails=$((fails + 1)); why+=" $f: other client rewrite, read;"; }
		echo more >> "$c/$f"
		n=$((n + 1))
		cat "$a/$f" | cmp -s - "$c/$f" || { fails=$((fails + 1)); why+=" $f: other client append, read;"; }
		echo more2 >> "$a/$f"
		n=$((n + 1))
		cat "$c/$f" | cmp -s - "$a/$f" || { fails=$((fails + 1)); why+=" $f: append, other client read;"; }
		rm -f "$a/$f"
	done
	echo "$fails $n$why"
}

stage_nfs_cto() {	# MNT BACKING_EXPORT SERVER_EXPORT_DIR
	local m=$1 b=$2 c2=$K_WORK/nfs.c2 why out native
	if ! why=$(nfs_mount "$3" "$c2" vers=3,hard,nolock); then
		result nfs nfs-cto SKIP "second client (NFSv3) mount failed: $why"
		return
	fi
	mkdir -p "$m/cto" "$b/cto-native"
	out=$(cto_checks "$m/cto" "$c2/cto")
	native=$(cto_checks "$b/cto-native" "$c2/cto-native")
	umount "$c2" || umount -l "$c2"
	metric nfs cto_native "$native"
	if [ "${out%% *}" = 0 ]; then
		result nfs nfs-cto PASS "$(cut -d' ' -f2 <<<"$out") checks against an NFSv3 client (natively: ${native%% *} failed)"
	else
		result nfs nfs-cto FAIL "$(cut -d' ' -f1 <<<"$out") of $(cut -d' ' -f2- <<<"$out") (natively: ${native%% *} failed)"
	fi
}

# nfs-restart: nfsd stopped and started again while a stream and a cached
# file are written through dcfs (hard mount: the writers wait); every byte
# is on the server afterwards
stage_nfs_restart() {	# MNT BACKING SERVER_DIR
	local m=$1 b=$2 s=$3 w1 w2 rc1=0 rc2=0 want_sum got1 got2
	"$IO" write "$K_WORK/ref.dat" 256M 1M > /dev/null
	want_sum=$(md5sum < "$K_WORK/ref.dat" | cut -c1-32)
	rm -f "$K_WORK/ref.dat"
	"$IO" write "$m/restart.mkv" 256M 1M fsync > "$K_WORK/w1.out" 2>&1 &
	w1=$!
	"$IO" write "$m/restart.dat" 256M 1M fsync > "$K_WORK/w2.out" 2>&1 &
	w2=$!
	sleep 3
	rpc.nfsd 0
	sleep 3
	rpc.nfsd 4
	wait "$w1" || rc1=$?
	wait "$w2" || rc2=$?
	sync
	got1=$(md5sum < "$s/restart.mkv" | cut -c1-32)
	got2=$(md5sum < "$s/restart.dat" | cut -c1-32)
	metric nfs restart_stream_resident "$(resident "$b/restart.mkv")"
	rm -f "$m/restart.mkv" "$m/restart.dat"
	if [ "$rc1" != 0 ] || [ "$rc2" != 0 ]; then
		result nfs nfs-restart FAIL "writer failed across the server restart: $(cat "$K_WORK/w1.out" "$K_WORK/w2.out" | tr '\n' ' ' | cut -c1-120)"
	elif [ "$got1" != "$want_sum" ] || [ "$got2" != "$want_sum" ]; then
		result nfs nfs-restart FAIL "data lost across the server restart: stream $got1, cached $got2, want $want_sum"
	else
		result nfs nfs-restart PASS "256 MiB stream + 256 MiB cached file written through an nfsd restart, checksums match"
	fi
}

# nfs-errors over an NFSv3 soft mount with a dcfs of its own: a file
# deleted on the server under an open descriptor gives ESTALE, natively
# and through dcfs; with nfsd stopped a read of uncached data and an
# fsync of written data fail with EIO (not a hang, not success), natively
# and through dcfs
stage_nfs_errors() {	# SERVER_DIR
	local sd=$1 c=$K_WORK/nfs.v3 m=$K_WORK/nfs.v3mnt why out cg rc=0
	mkdir -p "$sd/e/export"
	chmod 755 "$sd/e" "$sd/e/export"
	if ! why=$(nfs_mount "$sd" "$c" vers=3,soft,timeo=10,retrans=1,nolock); then
		result nfs nfs-errors SKIP "NFSv3 mount failed: $why"
		return
	fi
	cg=$(cg_new nfs3 || true)
	if ! dcfs_start nfs-v3 "$c/e/export" "$m" "$cg"; then
		result nfs nfs-errors FAIL "dcfs over NFSv3 did not mount"
		umount -l "$c"
		cg_del "$cg"
		return
	fi
	out=$(python3 "$KT/nfs-errors.py" "$sd/e/export" "$c/e/export" "$m" 2>&1) || rc=$?
	printf '%s\n' "$out" > "$K_OUT/nfs.errors"
	rpc.nfsd 4 2>/dev/null	# the script stops it for the EIO part
	dcfs_stop || true
	umount "$c" 2>/dev/null || umount -l "$c"
	cg_del "$cg"
	if [ "$rc" = 0 ]; then
		result nfs nfs-errors PASS "$(grep -c '^ok' <<<"$out") checks: $(grep '^ok' <<<"$out" | cut -c4- | tr '\n' ';' | cut -c1-150)"
	else
		result nfs nfs-errors FAIL "$(grep -m1 '^FAIL' <<<"$out" | cut -c1-150)"
	fi
}

# ---------------------------------------------------------------- nfs-export
run_nfs_export() {	# DEV
	local srv=$K_WORK/v4/nx m=$K_WORK/v4/dcfs why cg rc=0 e s
	if ! nfs_start "$1" "$srv"; then
		why=$NFS_WHY
		for s in export-rw export-restart; do want "$s" && result nfs-export "$s" SKIP "$why"; done
		nfs_stop
		return
	fi
	mkdir -p "$srv/export" "$srv/native"
	chmod 755 "$srv/export" "$srv/native"
	cg=$(cg_new nx || true)
	if ! dcfs_start nfs-export "$srv/export" "$m" "$cg" stop_timeout=5; then
		for s in export-rw export-restart; do want "$s" && result nfs-export "$s" SKIP "dcfs did not mount"; done
		nfs_stop
		return
	fi
	nfs_export "$m" 42 >/dev/null
	nfs_export "$srv" 43 >/dev/null
	want export-rw && stage_export_rw "$m" "$srv/native"
	want export-restart && stage_export_restart "$m" "$srv/export" "$cg"
	# nfsd holds files of the dcfs mount: it lets go first, or the
	# daemon cannot finish after the unmount (the 6.12 guest waited)
	for e in $NFS_EXPORTS; do exportfs -u "$e" 2>/dev/null; done
	NFS_EXPORTS=''
	rpc.nfsd 0 2>/dev/null
	exportfs -f 2>/dev/null
	dcfs_stop || rc=$?
	want daemon && stage_daemon nfs-export "$rc"
	cg_del "$cg"
	nfs_stop
}

# A transcript without the user.k41 xattr operations and their output
xattr_free() {	# FILE
	awk '/^[^ ].* -> [0-9]+$/ { skip = /user\.k41/ } !skip' "$1"
}

# export-rw: ops-files.sh through an NFS client of the dcfs export and of
# a native export of the same filesystem: the same transcript
stage_export_rw() {	# DCFS_MNT NATIVE_DIR
	local cd=$K_WORK/nx.cdcfs cn=$K_WORK/nx.cnative why v d
	for v in 4.2 3; do
		if ! why=$(nfs_mount "$1" "$cd" "vers=$v,hard,nolock") ||
		   ! why=$(nfs_mount "$2" "$cn" "vers=$v,hard,nolock"); then
			result nfs-export "export-rw-v$v" FAIL "NFS mount failed: $why"
			umount "$cd" 2>/dev/null
			continue
		fi
		mkdir -p "$cd/rw$v" "$cn/rw$v"
		"$KT/ops-files.sh" "$cn/rw$v" > "$K_OUT/nfs-export.rw$v.native" 2>&1
		"$KT/ops-files.sh" "$cd/rw$v" > "$K_OUT/nfs-export.rw$v.dcfs" 2>&1
		# A FUSE filesystem gives nfsd no user.* xattr namespace (its one
		# xattr handler has the empty prefix; fs/xattr.c
		# xattr_supports_user_prefix): NFSv4.2 clients get EOPNOTSUPP for
		# user xattrs of any FUSE export, dcfs's included.  Those lines
		# are left out and the difference noted.
		local note=''
		if [ "$v" = 4.2 ] && grep -q '^getfattr -n user.k41 --only-values f4096 -> 1' "$K_OUT/nfs-export.rw$v.dcfs"; then
			note=" (user xattrs: EOPNOTSUPP through any FUSE export, natively supported)"
			metric nfs-export xattr_v42 "EOPNOTSUPP (FUSE has no user. handler for nfsd)"
		fi
		if d=$(diff <(xattr_free "$K_OUT/nfs-export.rw$v.native") <(xattr_free "$K_OUT/nfs-export.rw$v.dcfs")); then
			result nfs-export "export-rw-v$v" PASS "$(grep -c ' -> ' "$K_OUT/nfs-export.rw$v.native") operations through NFSv$v as through a native export$note"
		else
			printf '%s\n' "$d" > "$K_OUT/nfs-export.rw$v.diff"
			result nfs-export "export-rw-v$v" FAIL "$(grep -c '^<' <<<"$d") lines differ, e.g. $(grep -m1 '^[<>]' <<<"$d" | cut -c1-100)"
		fi
		umount "$cd" "$cn" 2>/dev/null || umount -l "$cd" "$cn"
	done
}

# export-restart: NFSv3 and NFSv4 clients of the dcfs export hold open
# files, a directory descriptor and names (export-restart.py); dcfs is
# stopped (SIGTERM; stop_timeout 5 s, nfsd holds files open) and started
# again over the same directory, and nfsd's export cache flushed
# (exportfs -f).  NFSv3 has no open state: that is all it needs.  An
# NFSv4 open holds nfsd's struct file of the old mount, dead with the old
# daemon: I/O on it fails with EIO until nfsd is restarted too (its
# clients then reclaim their opens in the grace period, on the new
# mount).  So NFSv4 is run both ways: with the nfsd restart (the stage)
# and without (a figure, export_restart_v4_without_nfsd).
stage_export_restart() {	# DCFS_MNT BACKING CG
	local m=$1 b=$2 cg=$3 run v how c out rc why line
	for run in 3:flush 4.2:nfsd 4.2:flush; do
		v=${run%:*} how=${run#*:}
		c=$K_WORK/nx.c$v
		if ! why=$(nfs_mount "$m" "$c" "vers=$v,hard,nolock,timeo=50"); then
			result nfs-export "export-restart-v$v" FAIL "NFS mount failed: $why"
			continue
		fi
		rc=0 line=''
		# the flush-only NFSv4 run is killed after 3 minutes: an open on
		# the old mount, which nfsd still holds, may wait in the kernel
		# beyond the script's own alarms (6.1: nfsd got ENOTCONN)
		local limit=900
		[ "$run" != 4.2:flush ] || limit=180
		coproc PY { timeout -s KILL "$limit" python3 "$KT/export-restart.py" "$c/restart$v$how" 2>&1; }
		# shellcheck disable=SC2154
		local pypid=$PY_PID
		out=''
		while read -r -t 600 line <&"${PY[0]}"; do
			out+="$line"$'\n'
			[ "$line" != ready ] || break
		done
		if [ "$line" = ready ]; then
			kill -TERM "$DAEMON"
			wait "$DPID" || true
			DPID=''
			if ! dcfs_start nfs-export "$b" "$m" "$cg" stop_timeout=5; then
				out+="FAIL dcfs did not mount again"$'\n'
			fi
			exportfs -f
			if [ "$how" = nfsd ]; then
				rpc.nfsd 0
				rpc.nfsd 4
			fi
			echo go >&"${PY[1]}"
			out+=$(cat <&"${PY[0]}")
		fi
		wait "$pypid" || rc=$?
		printf '%s\n' "$out" > "$K_OUT/nfs-export.restart$v$how"
		if [ "$run" = 4.2:flush ]; then
			metric nfs-export export_restart_v4_without_nfsd \
				"$(grep -c '^ok' <<<"$out") ok; $(grep '^FAIL' <<<"$out" | cut -c6- | tr '\n' ';')$([ "$rc" = 137 ] && echo " killed after $limit s")"
		elif [ "$rc" = 0 ] && ! grep -q '^FAIL' <<<"$out"; then
			result nfs-export "export-restart-v$v" PASS "$(grep -c '^ok' <<<"$out") checks across a dcfs restart$([ "$how" = nfsd ] && echo ' (exportfs -f, nfsd restarted: NFSv4 opens reclaimed)' || echo ' (exportfs -f)')"
		else
			result nfs-export "export-restart-v$v" FAIL "$(grep -m1 '^FAIL' <<<"$out" | cut -c1-150)"
		fi
		umount "$c" 2>/dev/null || umount -f "$c" 2>/dev/null || umount -l "$c"
	done
}
