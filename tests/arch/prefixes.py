#!/usr/bin/env python3
"""One prefix per file: every function a daemon object exports starts with
its file's name (build/obj/io/stamp.o: stamp_*, or stamp itself), or with
the short form the Makefile's PREFIXES gives for that file (write_pipe=wpipe).
A reader who meets a call knows the file it lives in.

Usage: prefixes.py [--alias FILE=PREFIX]... OBJ...
Exit 1 and list every exported function without its file's prefix.
"""
import os
import subprocess
import sys


def exported_functions(obj):
    out = subprocess.run(["nm", "--defined-only", "-g", obj], check=True,
                         capture_output=True, text=True).stdout
    return [f[2] for f in (line.split() for line in out.splitlines())
            if len(f) == 3 and f[1] == "T"]


def main():
    args = sys.argv[1:]
    alias = {}
    while args and args[0] == "--alias":
        name, prefix = args[1].split("=", 1)
        alias[name] = prefix
        args = args[2:]
    bad, total = [], 0
    for obj in args:
        name = os.path.splitext(os.path.basename(obj))[0]
        prefix = alias.get(name, name)
        for sym in exported_functions(obj):
            total += 1
            if sym != prefix and not sym.startswith(prefix + "_"):
                bad.append(f"{obj}: {sym} (prefix {prefix}_)")
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} of {total} exported functions lack their file's prefix")
        return 1
    print(f"all {total} exported functions carry their file's prefix")
    return 0


if __name__ == "__main__":
    sys.exit(main())
