#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Seed 000's published numbers beside two runs of make bench (the
bench-guest.sh output of a "before" and an "after" kernel):

    bench-seed000-compare.py BEFORE.out[,BEFORE2.out...] AFTER.out[,...]

Several runs of one kernel (comma-separated) are pooled: the write table
then averages all their rounds, the memcg table takes the median of all
their runs.

Prints the write table in the seed's phone-table shape (normal vs
dontcache throughput, kswapd, Cached; 9 request sizes) and the memcg table
in the shape of the seed's QEMU supplement (memory.max 255852544, 1 GiB at
8 KiB and 1 MiB, medians of 3, memory.current, scan/steal)."""
import statistics
import sys
from collections import defaultdict

import bench_lines

# Seed 000 (f2fs: enable buffered RWF_DONTCACHE, v5), phone, Linux 6.12.69,
# F2FS, 64 GiB per run, means of two counterbalanced rounds: request ->
# (normal MiB/s, dontcache MiB/s, kswapd0 CPU % normal, dontcache,
#  Cached MiB normal, dontcache)
SEED_PHONE = {
    4096: (941.01, 300.33, 18.45, 0, 4830.15, 686.56),
    8192: (1091.45, 478.79, 21.60, 0, 4862.35, 591.48),
    16384: (1122.67, 647.73, 22.75, 0, 4905.47, 625.07),
    32768: (1093.48, 756.84, 22.05, 0, 4945.82, 561.59),
    65536: (1154.31, 851.65, 23.46, 0, 4920.77, 639.78),
    131072: (1164.57, 866.26, 23.16, 0, 4971.37, 693.26),
    262144: (1163.19, 890.43, 23.68, 0, 4956.93, 668.60),
    524288: (1185.48, 903.05, 24.25, 0, 4972.22, 663.92),
    1048576: (1140.41, 872.67, 22.01, 0, 5001.09, 705.30),
}
# Seed 000's QEMU memcg supplement (x86-64, F2FS on host NVMe, 1 GiB,
# memory.max 255852544, swap off, medians of 3): request -> mode ->
# (MiB/s, average memory.current MiB, scan, steal)
SEED_MEMCG = {
    8192: {"normal": (236.259, 160.867, 270821, 201227),
           "dontcache": (227.634, 2.075, 0, 0)},
    1048576: {"normal": (222.232, 155.178, 344267, 201013),
              "dontcache": (859.805, 9.098, 0, 0)},
}


def size(req):
    return f"{req // 1048576} MiB" if req >= 1048576 else f"{req // 1024} KiB"


def load(paths):
    rows = []
    for path in paths.split(","):
        with open(path) as fh:
            rows += bench_lines.parse(fh, ("W", "M"))
    return rows


def boots(paths):
    return len(paths.split(","))


def by(rows, table):
    d = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["table"] == table:
            d[int(r["req"])][r["mode"]].append(r)
    return d


def mean(rs, k):
    return sum(float(r[k]) for r in rs) / len(rs) if rs else float("nan")


def median(rs, k):
    return (statistics.median(float(r[k]) for r in rs) if rs
            else float("nan"))


def main():
    before, after = load(sys.argv[1]), load(sys.argv[2])
    wb, wa = by(before, "W"), by(after, "W")
    nb = boots(sys.argv[1])
    na = boots(sys.argv[2])
    print("Write table, seed 000's phone shape (MB/s; seed: MiB/s, mean of "
          "2 rounds; UML: mean of 2 counterbalanced rounds per boot, "
          f"{nb} boot(s) before, {na} after, 256 MiB files, fsync "
          "included):\n")
    print("| req | seed normal | seed dontcache | seed dc/n | UML before "
          "normal | UML before dontcache | before dc/n | UML after normal "
          "| UML after dontcache | after dc/n | seed kswapd0 CPU n / dc "
          "| UML after kswapd CPU s n / dc | seed Cached MiB n / dc | UML "
          "after Cached MiB n / dc | UML after resident dc |")
    print("|" + "---:|" * 15)
    for req in sorted(SEED_PHONE):
        sn, sd, kn, kd, cn, cd = SEED_PHONE[req]
        bn, bd = mean(wb[req]["normal"], "mbps"), mean(wb[req]["dontcache"],
                                                       "mbps")
        an, ad = mean(wa[req]["normal"], "mbps"), mean(wa[req]["dontcache"],
                                                       "mbps")
        print(f"| {size(req)} | {sn:.0f} | {sd:.0f} | {sd / sn:.2f} | "
              f"{bn:.1f} | {bd:.1f} | {bd / bn:.2f} | {an:.1f} | {ad:.1f} | "
              f"{ad / an:.2f} | {kn:.1f} % / {kd:.0f} % | "
              f"{mean(wa[req]['normal'], 'kswapd_cpu'):.2f} / "
              f"{mean(wa[req]['dontcache'], 'kswapd_cpu'):.2f} | "
              f"{cn:.0f} / {cd:.0f} | "
              f"{mean(wa[req]['normal'], 'cached'):.1f} / "
              f"{mean(wa[req]['dontcache'], 'cached'):.1f} | "
              f"{max((int(r['resident']) for r in wa[req]['dontcache']), default=-1)} |")
    mb, ma = by(before, "M"), by(after, "M")
    print("\nmemcg table, seed 000's QEMU shape (memory.max 255852544, swap "
          "off, 1 GiB; seed: medians of 3; UML: medians of the runs of "
          f"{nb} boot(s) before, {na} after; seed MiB/s, UML MB/s):\n")
    print("| req | mode | seed MiB/s | seed memory.current MiB | seed scan "
          "| seed steal | UML before MB/s | before memory.current MiB | "
          "before scan | before steal | UML after MB/s | after "
          "memory.current MiB | after scan | after steal |")
    print("|---:|---|" + "---:|" * 12)
    for req in sorted(SEED_MEMCG):
        for mode in ("normal", "dontcache"):
            s = SEED_MEMCG[req][mode]
            b, a = mb[req][mode], ma[req][mode]
            print(f"| {size(req)} | {mode} | {s[0]:.1f} | {s[1]:.1f} | "
                  f"{s[2]} | {s[3]} | {median(b, 'mbps'):.1f} | "
                  f"{median(b, 'memcg_current'):.1f} | "
                  f"{median(b, 'memcg_scan'):.0f} | "
                  f"{median(b, 'memcg_steal'):.0f} | "
                  f"{median(a, 'mbps'):.1f} | "
                  f"{median(a, 'memcg_current'):.1f} | "
                  f"{median(a, 'memcg_scan'):.0f} | "
                  f"{median(a, 'memcg_steal'):.0f} |")


main()
