#!/bin/bash
# Coherence between a dcfs mount and its backing directory, as dcfs(8)
# promises it (DATA COHERENCE): what is written through the mount is in the
# backing file once the writer closed it, and a change made in the backing
# tree is seen at the next open through the mount (close-to-open), for a
# cached file and for a streamed one (.mkv), with read/write, O_APPEND,
# truncate and a shared mapping.
#   ops-coherence.sh MNT_DIR BACKING_DIR   (the same directory, both ways)
# K_NO_DIO_MMAP=1: the kernel refuses shared mappings of direct-I/O FUSE
# handles (before 6.6, no FUSE_DIRECT_IO_ALLOW_MMAP; the mount log says
# so): a streamed file's MAP_SHARED must then fail with ENODEV (dcfs(8)).
# Prints "ok NAME" or "FAIL NAME: ..." per check; exit 1 on a failure.
m=$1 b=$2 rc=0
export LC_ALL=C

ok() { echo "ok $1"; }
bad() { echo "FAIL $1: $2"; rc=1; }
# what a file looks like: size and checksum
look() { echo "$(stat -c %s "$1") bytes, md5 $(md5sum < "$1" | cut -c1-8)"; }
# The data as a new open reads it, to its end (not cmp of the two files:
# cmp trusts st_size, which the mount may keep for the attribute timeout
# after a change made outside it; dcfs(8) DATA COHERENCE); the size is
# checked after that timeout.
same() {	# NAME FILE1 FILE2
	local a b
	if cat "$2" | cmp -s - "$3"; then
		sleep 1.1
		if [ "$(stat -c %s "$2")" = "$(stat -c %s "$3")" ]; then
			ok "$1"
		else
			bad "$1" "sizes $(stat -c %s "$2") and $(stat -c %s "$3") after the attribute timeout"
		fi
		return
	fi
	a=$(look "$2") b=$(look "$3")
	sleep 1.5
	bad "$1" "$2: $a; $3: $b; $(cat "$2" | cmp -s - "$3" && echo "equal 1.5 s later" || echo "still different 1.5 s later")"
}

for f in c.dat s.mkv; do
	# written through the mount, read natively after close
	seq 1 300000 > "$m/$f"
	same "$f: mount write, backing read" "$m/$f" "$b/$f"
	# rewritten natively with the same size, read through the mount
	seq 2 300001 | head -c "$(stat -c %s "$b/$f")" > "$b/$f.new"
	cat "$b/$f.new" > "$b/$f"
	same "$f: backing rewrite, mount read" "$b/$f" "$m/$f"
	# appended natively: size and data at the next open
	echo tail >> "$b/$f"
	same "$f: backing append, mount read" "$b/$f" "$m/$f"
	# appended through the mount
	echo tail2 >> "$m/$f"
	same "$f: mount append, backing read" "$m/$f" "$b/$f"
	# truncated natively
	truncate -s 1000 "$b/$f"
	same "$f: backing truncate, mount read" "$b/$f" "$m/$f"
	# a shared mapping written through the mount
	err=$(python3 - "$m/$f" 2>&1 <<'EOF'
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    mm = mmap.mmap(fd, 1000)
except OSError as e:
    print("errno %d" % e.errno)
    sys.exit(1)
mm[100:108] = b"MAPPED!!"
mm.flush()
mm.close()
os.close(fd)
EOF
	)
	if [ -n "$err" ]; then
		if [ "$f" = s.mkv ] && [ "${K_NO_DIO_MMAP:-0}" = 1 ] && [ "$err" = "errno 19" ]; then
			ok "$f: mount mmap MAP_SHARED refused with ENODEV (kernel without FUSE_DIRECT_IO_ALLOW_MMAP)"
		else
			bad "$f: mount mmap write" "$err"
		fi
	elif [ "$(dd if="$b/$f" bs=1 skip=100 count=8 status=none)" = 'MAPPED!!' ]; then
		ok "$f: mount mmap write, backing read"
	else
		bad "$f: mount mmap write, backing read" "backing has '$(dd if="$b/$f" bs=1 skip=100 count=8 status=none)'"
	fi
	# read through the mount while the backing file changes under an open fd
	# is not promised (close-to-open); a new open sees it
	exec 3< "$m/$f"
	head -c 10 <&3 >/dev/null
	printf 'CHANGED' | dd of="$b/$f" bs=1 seek=0 conv=notrunc status=none
	exec 3<&-
	if [ "$(head -c 7 "$m/$f")" = CHANGED ]; then
		ok "$f: backing change while open, next open"
	else
		bad "$f: backing change while open, next open" "mount shows '$(head -c 7 "$m/$f")'"
	fi
	rm -f "$m/$f" "$b/$f.new"
	[ ! -e "$b/$f" ] && ok "$f: unlink through the mount" || bad "$f: unlink" "still in the backing dir"
done
exit $rc
