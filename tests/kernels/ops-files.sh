#!/bin/bash
# A transcript of file operations in directory $1 (which must be empty):
# what each operation printed or failed with, sizes, modes, link counts and
# checksums, never inode numbers or times.  The kernel matrix runs it once
# in a directory of the backing filesystem and once through dcfs on the
# same filesystem and compares the two transcripts (stages.sh: files): on
# any filesystem, dcfs must do what the filesystem does natively.
# Paths are relative, so the two transcripts are byte-comparable.
# shellcheck source=ops-lib.sh
. "$(dirname "$0")/ops-lib.sh"
cd "$1" || exit 2
export LC_ALL=C


# Type, size, mode and link count of each name, in name order.
list() {
	find . -mindepth 1 | sort | while read -r f; do
		stat -c '%n %F %s %a %h' "$f"
	done
}

t mkdir d d/sub
t mkdir d
t rmdir missing
# text, so that a cat prints something readable; the same bytes each run
for n in 0 1 4095 4096 4097 1048579; do
	seq 1 200000 | head -c "$n" > "f$n"
done
t md5sum f0 f1 f4095 f4096 f4097 f1048579
# append, overwrite in the middle, truncate up and down
t sh -c 'printf abc >> f4096'
t dd if=/dev/zero of=f4097 bs=1 seek=100 count=10 conv=notrunc status=none
t truncate -s 10000 f1
t truncate -s 3 f4095
t truncate -s 0 f0
t stat -c '%s' f1 f4095 f0 f4096 f4097
t cmp -n 100 f4097 f4097
t od -A d -t x1 -j 96 -N 20 f4097
# a sparse file written past a hole, and its holes found again
t dd if=/dev/zero of=sparse bs=4096 seek=256 count=1 status=none
t stat -c '%s' sparse
t python3 -c 'import os; fd = os.open("sparse", os.O_RDONLY); print(os.lseek(fd, 0, os.SEEK_DATA) >= 0, os.lseek(fd, 0, os.SEEK_END))'
# renames: plain, over an existing file, a directory, into a subdirectory
t mv f1 g1
t mv g1 f4095
t mv d/sub d/sub2
t mv f0 d/sub2/f0
t mv d d/sub2
t rmdir d
# links, symlinks
t ln f4096 hard
t stat -c '%h' f4096 hard
t ln -s f4096 sym
t readlink sym
t head -c 20 sym
t ln -s missing dangling
t cat dangling
# copy (copy_file_range or read/write), fallocate, punch
t cp f1048579 copy
t cmp f1048579 copy
t fallocate -l 65536 alloc
t stat -c '%s' alloc
t fallocate -p -o 0 -l 4096 f1048579
t od -A d -t x1 -N 16 f1048579
t md5sum f1048579 f4095 f4096 f4097 sparse alloc
# modes and times
t chmod 640 f4096
t chmod u+x f4097
t touch -d '2020-01-02 03:04:05' f4095
t stat -c '%Y' f4095
# extended attributes
t setfattr -n user.k41 -v v1 f4096
t getfattr -n user.k41 --only-values f4096
t setfattr -x user.k41 f4096
t getfattr -n user.k41 f4096
# special files, unlink of an open file
t mkfifo fifo
t sh -c 'exec 3< f4097; rm f4097; head -c 8 <&3 | od -A n -t x1 >/dev/null; echo read-after-unlink'
t rm copy missing
t mkdir -p a/b/c
t touch a/b/c/x a/b/y
t rm -r a
t ls
list
