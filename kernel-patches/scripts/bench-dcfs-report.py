#!/usr/bin/env python3
"""Tables of test/dcfs-bench-guest.sh output (lines starting with "B ").

Per file system and operation: MiB/s of each system (median of the
rounds), its ratio to native RWF_DONTCACHE measured in the same run, the
daemon's CPU seconds per GiB (median), the application's, and the most
pages of the backing file found resident after close.
"""
import re
import statistics
import sys
from collections import defaultdict

SYSTEMS = ["native", "pt", "pt-db", "engine"]


def parse(lines):
    """The measurements by (fs, op, bs, system), and the file size in MiB."""
    runs = defaultdict(list)
    size_mib = 256
    for line in lines:
        m = re.search(r"(\d+) MiB files", line)
        if line.startswith("== dcfs bench:") and m:
            size_mib = int(m.group(1))
        if not line.startswith("B "):
            continue
        kv = dict(f.split("=", 1) for f in line.split()[1:])
        key = (kv["fs"], kv["op"], int(kv["bs"]), kv["sys"])
        runs[key].append(kv)
    return runs, size_mib


def size_name(bs):
    return f"{bs >> 20} MiB" if bs >= 1 << 20 else f"{bs >> 10} KiB"


def per_gib(cpu, mib):
    return cpu / (mib / 1024.0)


def main():
    runs, size_mib = parse(sys.stdin)
    for fs in sorted({k[0] for k in runs}, key=["f2fs", "ext4", "xfs"].index):
        for op in ("write", "read"):
            keys = [k for k in runs if k[0] == fs and k[1] == op]
            if not keys:
                continue
            systems = [s for s in SYSTEMS if any(k[3] == s for k in keys)]
            print(f"\n{fs}, {op}s (medians of {max(len(v) for v in runs.values())};"
                  " x native RWF_DONTCACHE; daemon / application CPU s/GiB;"
                  " most pages resident after close)\n")
            head = "| request | " + " | ".join(systems) + " |"
            print(head)
            print("|---" * (len(systems) + 1) + "|")
            for bs in sorted({k[2] for k in keys}):
                cells = []
                base = runs.get((fs, op, bs, "native"))
                base_mibs = statistics.median(float(r["mibs"]) for r in base) if base else None
                for s in systems:
                    rs = runs.get((fs, op, bs, s))
                    if not rs:
                        cells.append("-")
                        continue
                    m = statistics.median(float(r["mibs"]) for r in rs)
                    d = statistics.median(per_gib(float(r["dcpu"]), size_mib) for r in rs)
                    a = statistics.median(per_gib(float(r["cpu"]), size_mib) for r in rs)
                    res = max(int(r["res"]) for r in rs)
                    ratio = f" ({m / base_mibs:.2f}x)" if base_mibs and s != "native" else ""
                    dcpu = f"{d:.2f} / " if s != "native" else ""
                    cells.append(f"{m:.0f} MiB/s{ratio}, {dcpu}{a:.2f}, {res}")
                print(f"| {size_name(bs)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
