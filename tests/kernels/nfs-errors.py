#!/usr/bin/env python3
"""Errors of an NFS backing filesystem must reach the caller through dcfs
as they reach it natively (the kernel matrix's nfs-errors stage).

  nfs-errors.py SERVER_DIR CLIENT_DIR DCFS_MNT

SERVER_DIR is the exported directory on the server's local filesystem,
CLIENT_DIR the same directory through an NFSv3 soft mount (timeo=10,
retrans=1), DCFS_MNT a dcfs mount of CLIENT_DIR.  For a cached file (.dat)
and a streamed one (.mkv), natively and through dcfs:
  ESTALE  a file deleted on the server under an open descriptor, read past
          what the client cached;
  EIO     with nfsd stopped (rpc.nfsd 0): a read of uncached data, a write
          and fsync, a write and close (the error of the deferred write).
Every operation runs under a 120 s alarm: a hang fails.  Prints "ok ..." or
"FAIL ..." per check, exit status 1 on a failure.  nfsd stays stopped: the
caller starts it again.
"""
import errno
import os
import signal
import subprocess
import sys
import time

SERVER, CLIENT, MNT = sys.argv[1:4]
MiB = 1 << 20
failed = False


def say(ok, what):
    global failed
    print(("ok " if ok else "FAIL ") + what, flush=True)
    failed |= not ok


def errname(e):
    return errno.errorcode.get(e, str(e)) if e else "success"


class Hang(Exception):
    pass


def on_alarm(sig, frame):
    raise Hang()


signal.signal(signal.SIGALRM, on_alarm)


def attempt(fn):
    """errno of fn() (0: it worked), or 'hang' after 120 s."""
    signal.alarm(120)
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno
    except Hang:
        return "hang"
    finally:
        signal.alarm(0)


def close_quietly(fd):
    """Close fd; its error (a deferred one, here) is not what is tested."""
    try:
        os.close(fd)
    except OSError:
        pass


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def make(name, size):
    with open(os.path.join(SERVER, name), "wb") as f:
        f.write(bytes((i * 7 + 1) & 0xFF for i in range(256)) * (size // 256))
        f.flush()
        os.fsync(f.fileno())


def estale(where, name):
    """Open, read a little, delete on the server, read far past it."""
    make(name, 16 * MiB)
    path = os.path.join(where, name)
    fd = os.open(path, os.O_RDONLY)
    os.pread(fd, 4096, 0)
    os.unlink(os.path.join(SERVER, name))
    # nfsd closes the files of its cache after about 2 s of disuse
    time.sleep(4)
    drop_caches()
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass
    e = attempt(lambda: os.pread(fd, MiB, 12 * MiB))
    close_quietly(fd)
    return e


def nfsd(threads):
    subprocess.run(["rpc.nfsd", str(threads)], check=False)


def eio_read(where, name):
    """errno of an open and a read of uncached data (the open may fail)."""
    path = os.path.join(where, name)
    out = {}

    def run():
        out["fd"] = os.open(path, os.O_RDONLY)
        os.pread(out["fd"], MiB, 8 * MiB)

    e = attempt(run)
    if "fd" in out:
        close_quietly(out["fd"])
    return e


def eio_write(where, name, sync):
    """errno of the first failing step of open, write, fsync/close."""
    path = os.path.join(where, name)
    out = {}

    def run():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"x" * MiB)
            if sync:
                os.fsync(fd)
        finally:
            out["fd"] = fd
        os.close(fd)
        out.pop("fd")

    e = attempt(run)
    if "fd" in out:
        close_quietly(out["fd"])
    return e


def main():
    # ESTALE natively and through dcfs, cached and streamed
    for ext in ("dat", "mkv"):
        native = estale(CLIENT, "stale-n." + ext)
        dcfs = estale(MNT, "stale-d." + ext)
        say(dcfs == native and native != 0,
            "ESTALE .%s: native %s, dcfs %s" % (ext, errname(native), errname(dcfs)))
    # EIO with the server stopped
    for ext in ("dat", "mkv"):
        make("eio." + ext, 16 * MiB)
    drop_caches()
    nfsd(0)
    try:
        for ext in ("dat", "mkv"):
            native = eio_read(CLIENT, "eio." + ext)
            dcfs = eio_read(MNT, "eio." + ext)
            say(native != 0 and native != "hang" and dcfs not in (0, "hang"),
                "read, server down, .%s: native %s, dcfs %s" % (ext, errname(native), errname(dcfs)))
            for sync in (True, False):
                how = "fsync" if sync else "close"
                native = eio_write(CLIENT, "w-n%s.%s" % (how, ext), sync)
                dcfs = eio_write(MNT, "w-d%s.%s" % (how, ext), sync)
                # natively an NFS close reports the write it could not
                # make; dcfs must not answer success where that failed
                say(dcfs != "hang" and (native == 0 or dcfs != 0),
                    "write+%s, server down, .%s: native %s, dcfs %s" % (
                        how, ext, errname(native), errname(dcfs)))
    finally:
        pass
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
