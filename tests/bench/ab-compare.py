#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Before/after of interleaved bench.sh runs (tests/bench/README.md).

    tests/bench/ab-compare.py BEFORE_OUT... -- AFTER_OUT...

Each OUT is a bench.sh --out directory of one run; give the runs of each
side in the order they ran (old, new, old, new, ...).  Prints, per row of
raw/stream.csv (system, request size, operation), the median MiB/s and
daemon CPU per GiB (bench.sh's CPU unit) of each side and their ratio, then
the geometric means over the dcfs rows and, as the yardstick of the noise,
over the native rows (the same code on both sides); the metadata seconds
(raw/meta.csv) likewise.  Runs that someone else's drop_caches disturbed
are left out.
"""
import csv
import math
import statistics
import sys


def stream_rows(outs):
    rows = {}
    for out in outs:
        with open(f"{out}/raw/stream.csv") as f:
            for r in csv.reader(f):
                rep, system, bs, op, nb, secs, mibs = r[:7]
                cpu, disturbed = r[12], r[13]
                if disturbed != "0":
                    continue
                gib = int(nb) / (1 << 30)
                rows.setdefault((system, bs, op), []).append(
                    (float(mibs), int(cpu) / gib if gib else 0.0))
    return rows


def meta_rows(outs):
    rows = {}
    for out in outs:
        try:
            f = open(f"{out}/raw/meta.csv")
        except FileNotFoundError:
            continue
        for r in csv.reader(f):
            if len(r) < 6 or r[3] == "FAIL":
                continue
            n, _, system = r[:3]
            for name, secs in zip(("create", "stat", "unlink"), r[3:6]):
                rows.setdefault((system, n, name), []).append(float(secs))
    return rows


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def main():
    args = sys.argv[1:]
    if "--" not in args:
        sys.exit(__doc__)
    cut = args.index("--")
    before, after = args[:cut], args[cut + 1:]
    sb, sa = stream_rows(before), stream_rows(after)
    speed, cpu, native = [], [], []
    print(f"{'row':34} {'MiB/s before':>12} {'after':>8} {'ratio':>6}   "
          f"{'CPU s/GiB before':>16} {'after':>7} {'ratio':>6}")
    for key in sorted(set(sb) & set(sa)):
        mb = statistics.median(x[0] for x in sb[key])
        ma = statistics.median(x[0] for x in sa[key])
        cb = statistics.median(x[1] for x in sb[key])
        ca = statistics.median(x[1] for x in sa[key])
        ratio = ma / mb if mb else 0
        if key[0].startswith("nat"):
            native.append(ratio)
        else:
            speed.append(ratio)
        if cb > 0 and ca > 0:
            cpu.append(ca / cb)
        print(f"{' '.join(key):34} {mb:12.1f} {ma:8.1f} {ratio:6.3f}   "
              f"{cb:16.0f} {ca:7.0f} {ca / cb if cb else float('nan'):6.3f}")
    print(f"\n{len(speed)} dcfs rows: MiB/s after/before geometric mean {geomean(speed):.3f}; "
          f"daemon CPU per GiB after/before {geomean(cpu):.3f} ({len(cpu)} rows with CPU)")
    print(f"{len(native)} native rows (same code both sides: the noise): "
          f"MiB/s after/before {geomean(native):.3f}")
    mb, ma = meta_rows(before), meta_rows(after)
    ratios = {"dcfs": [], "native": []}
    for key in sorted(set(mb) & set(ma)):
        b, a = statistics.median(mb[key]), statistics.median(ma[key])
        ratios["native" if key[0] == "native" else "dcfs"].append(a / b if b else 0)
        print(f"meta {' '.join(key):28} {b:8.3f} s {a:8.3f} s {a / b if b else 0:6.3f}")
    for kind, rs in ratios.items():
        if rs:
            print(f"metadata seconds after/before, {kind}: geometric mean {geomean(rs):.3f} "
                  f"({len(rs)} rows; lower is faster)")


if __name__ == "__main__":
    main()
