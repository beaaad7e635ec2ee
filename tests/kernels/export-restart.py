#!/usr/bin/env python3
"""An NFS client of a dcfs export across a restart of dcfs (the kernel
matrix's export-restart stage).

  export-restart.py DIR     (DIR: a new directory in the NFS client mount)

Phase 1 writes files and keeps descriptors: one open for reading (a.dat,
s.mkv, read to 1 MiB), one open for writing (w.dat, 1 MiB written), a
directory open (sub); b.dat is known by name only.  Then it prints "ready"
and waits for a line on stdin, while the caller restarts dcfs.  Phase 2
reads the rest of the open files, writes more through the open
descriptor, opens b.dat by name, lists and creates in the directory by
its descriptor.  Prints "ok ..." or "FAIL ...: ERRNO" per check (ESTALE is
what must not come), exit status 1 on a failure.  Every operation runs
under a 120 s alarm.
"""
import errno
import os
import signal
import sys

D = sys.argv[1]
MiB = 1 << 20
failed = False


def data(seed, size):
    block = bytes(((i * 13) + seed) & 0xFF for i in range(4096))
    return block * (size // 4096)


def say(ok, what):
    global failed
    print(("ok " if ok else "FAIL ") + what, flush=True)
    failed |= not ok


class Hang(Exception):
    pass


def on_alarm(sig, frame):
    raise Hang()


signal.signal(signal.SIGALRM, on_alarm)


def check(what, fn):
    signal.alarm(120)
    try:
        ok, detail = fn()
        say(ok, what + ("" if ok else ": " + detail))
    except OSError as e:
        say(False, "%s: %s" % (what, errno.errorcode.get(e.errno, e.errno)))
    except Hang:
        say(False, what + ": hung for 120 s")
    finally:
        signal.alarm(0)


def write_file(name, blob):
    with open(os.path.join(D, name), "wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())


def read_all(fd, off):
    out = []
    while True:
        b = os.pread(fd, MiB, off)
        if not b:
            return b"".join(out)
        out.append(b)
        off += len(b)


def main():
    os.makedirs(os.path.join(D, "sub"), exist_ok=True)
    a, s, b = data(1, 4 * MiB), data(2, 8 * MiB), data(3, MiB)
    write_file("a.dat", a)
    write_file("s.mkv", s)
    write_file("b.dat", b)
    fa = os.open(os.path.join(D, "a.dat"), os.O_RDONLY)
    fs = os.open(os.path.join(D, "s.mkv"), os.O_RDONLY)
    fw = os.open(os.path.join(D, "w.dat"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    dfd = os.open(os.path.join(D, "sub"), os.O_RDONLY | os.O_DIRECTORY)
    ok = os.pread(fa, MiB, 0) == a[:MiB] and os.pread(fs, MiB, 0) == s[:MiB]
    os.write(fw, data(4, MiB))
    os.fsync(fw)
    say(ok, "before the restart: reads and a write")
    print("ready", flush=True)
    sys.stdin.readline()

    def rest(fd, blob):
        got = read_all(fd, MiB)
        return got == blob[MiB:], "%d bytes read, %d expected" % (len(got), len(blob) - MiB)

    check("open cached file: read on", lambda: rest(fa, a))
    check("open streamed file: read on", lambda: rest(fs, s))

    def write_on():
        os.write(fw, data(5, MiB))
        os.fsync(fw)
        os.close(fw)
        with open(os.path.join(D, "w.dat"), "rb") as f:
            got = f.read()
        return got == data(4, MiB) + data(5, MiB), "%d bytes in w.dat" % len(got)

    check("open file: write on, fsync, close", write_on)

    def by_name():
        with open(os.path.join(D, "b.dat"), "rb") as f:
            return f.read() == b, "content differs"

    check("known file: open by name", by_name)

    def in_dir():
        fd = os.open("new", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd)
        os.write(fd, b"new")
        os.close(fd)
        names = sorted(os.listdir(dfd))
        return names == ["new"], "listing %s" % names

    check("open directory: create and list by its descriptor", in_dir)
    check("directory by name: list", lambda: (
        sorted(os.listdir(D)) == ["a.dat", "b.dat", "s.mkv", "sub", "w.dat"],
        "listing %s" % sorted(os.listdir(D))))
    for fd in (fa, fs, dfd):
        try:
            os.close(fd)
        except OSError:
            pass
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
