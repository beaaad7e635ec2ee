#!/usr/bin/env python3
"""Turn bench-guest.sh output (stdin) into the README's markdown tables."""
import statistics
import sys
from collections import defaultdict

import bench_lines


def size(req):
    req = int(req)
    return f"{req // 1048576} MiB" if req >= 1048576 else f"{req // 1024} KiB"



def parse(lines):
    return bench_lines.parse(lines, ("W", "N", "R", "M"))


def f(d, k):
    return float(d[k])


def pair(a, b, fmt="{:.1f}"):
    return f"{fmt.format(a)} / {fmt.format(b)}"


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def write_table(rows):
    by = defaultdict(lambda: defaultdict(list))   # req -> mode -> [rows]
    for d in rows:
        if d["table"] == "W":
            by[int(d["req"])][d["mode"]].append(d)
    print("| req | normal MB/s (r1, r2) | dontcache MB/s (r1, r2) | "
          "dontcache/normal | resident pages n / dc | Cached MiB n / dc | "
          "Dirty MiB n / dc | Writeback MiB n / dc | Active(file) MiB n / dc | "
          "Inactive(file) MiB n / dc | kswapd CPU s n / dc | "
          "kswapd scan n / dc | kswapd steal n / dc | direct scan n / dc |")
    print("|" + "---:|" * 14)
    for req in sorted(by):
        n = sorted(by[req]["normal"], key=lambda d: d["round"])
        c = sorted(by[req]["dontcache"], key=lambda d: d["round"])
        ratios = [f(cd, "mbps") / f(nd, "mbps") for nd, cd in zip(n, c)]

        def m(k, rs):
            return mean([f(d, k) for d in rs])
        print(f"| {size(req)} | "
              + ", ".join(f"{f(d, 'mbps'):.1f}" for d in n) + " | "
              + ", ".join(f"{f(d, 'mbps'):.1f}" for d in c) + " | "
              + ", ".join(f"{r:.2f}" for r in ratios) + " | "
              + pair(m("resident", n), m("resident", c), "{:.0f}") + " | "
              + pair(m("cached", n), m("cached", c)) + " | "
              + pair(m("dirty", n), m("dirty", c)) + " | "
              + pair(m("writeback", n), m("writeback", c)) + " | "
              + pair(m("active_file", n), m("active_file", c)) + " | "
              + pair(m("inactive_file", n), m("inactive_file", c)) + " | "
              + pair(m("kswapd_cpu", n), m("kswapd_cpu", c), "{:.2f}") + " | "
              + pair(m("kswapd_scan", n), m("kswapd_scan", c), "{:.0f}") + " | "
              + pair(m("kswapd_steal", n), m("kswapd_steal", c), "{:.0f}")
              + " | "
              + pair(m("direct_scan", n), m("direct_scan", c), "{:.0f}")
              + " |")
    noise = defaultdict(list)
    for d in rows:
        if d["table"] == "N":
            noise[d["round"]].append(f(d, "mbps"))
    if noise:
        cells = []
        for r in sorted(noise):
            a, b = noise[r][:2]
            cells.append(f"round {r}: {a:.1f} vs {b:.1f} MB/s "
                         f"(ratio {b / a:.2f})")
        print()
        print("Noise row (64 KiB, normal vs normal, back to back): "
              + "; ".join(cells) + ".")


def read_table(rows):
    by = defaultdict(dict)
    for d in rows:
        if d["table"] == "R":
            by[int(d["req"])][d["mode"]] = d
    print("| req | normal MB/s | dontcache MB/s | dontcache/normal | "
          "source pages resident n / dc | Cached MiB n / dc |")
    print("|" + "---:|" * 6)
    for req in sorted(by):
        n, c = by[req]["normal"], by[req]["dontcache"]
        print(f"| {size(req)} | {f(n, 'mbps'):.1f} | {f(c, 'mbps'):.1f} | "
              f"{f(c, 'mbps') / f(n, 'mbps'):.2f} | "
              f"{int(n['resident'])} / {int(c['resident'])} | "
              + pair(f(n, "cached"), f(c, "cached")) + " |")


def memcg_table(rows):
    by = defaultdict(lambda: defaultdict(list))
    for d in rows:
        if d["table"] == "M":
            by[int(d["req"])][d["mode"]].append(d)
    print("| req | mode | runs | MB/s (median) | memory.current MiB "
          "(median of run averages) | memcg pgscan (median) | "
          "memcg pgsteal (median) | resident pages (median) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for req in sorted(by):
        for mode in ("normal", "dontcache"):
            rs = by[req][mode]

            def med(k):
                return statistics.median(f(d, k) for d in rs)
            print(f"| {size(req)} | {mode} | {len(rs)} | {med('mbps'):.1f} | "
                  f"{med('memcg_current'):.1f} | {med('memcg_scan'):.0f} | "
                  f"{med('memcg_steal'):.0f} | {med('resident'):.0f} |")


def main():
    rows = parse(sys.stdin)
    print("Write table:\n")
    write_table(rows)
    print("\nRead table:\n")
    read_table(rows)
    print("\nmemcg table:\n")
    memcg_table(rows)


if __name__ == "__main__":
    main()
