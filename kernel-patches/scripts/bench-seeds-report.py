#!/usr/bin/env python3
"""Tables for the seed-shaped benchmarks (bench-seeds-guest.sh output on
stdin, fio JSON files in the run directory argv[1])."""
import json
import os
import statistics
import sys
from collections import defaultdict

import bench_lines


def parse(lines):
    return bench_lines.parse(lines, ("S3R", "S3W", "F4", "F1", "FSW"))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def fio_write(run, name):
    with open(os.path.join(run, name)) as f:
        j = json.load(f)
    w = j["jobs"][0]["write"]
    return w["bw"] / 1024.0, w["iops"]     # MiB/s, IOPS


def seed003(rows):
    r = [d for d in rows if d["table"] == "S3R"]
    w = [d for d in rows if d["table"] == "S3W"]
    if not r and not w:
        return
    kernels = [k for k in ("before", "after")
               if any(d["kernel"] == k for d in r + w)]
    print("Seed 003, raw block device (ubd), 1 MiB requests, medians of "
          f"{len(r) // 2 // len(kernels) or len(w) // 2 // len(kernels)} "
          "rounds:\n")
    print("| test | kernel | mode | MB/s (runs) | MB/s median | resident pages "
          "at end | Cached MiB (avg) | kswapd scan | direct scan | memcg "
          "memory.current MiB (avg) | memcg pgscan | memcg pgsteal |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, rs in (("read, device 2x RAM", r), ("write, memcg 244 MiB", w)):
        for k in kernels:
            for mode in ("normal", "dontcache"):
                c = [d for d in rs if d["mode"] == mode and d["kernel"] == k]
                if not c:
                    continue

                def m(key):
                    return med([float(d[key]) for d in c if key in d])
                mc = (f"{m('memcg_current'):.1f}" if "memcg_current" in c[0]
                      else "—")
                sc = (f"{m('memcg_scan'):.0f}" if "memcg_scan" in c[0]
                      else "—")
                st = (f"{m('memcg_steal'):.0f}" if "memcg_steal" in c[0]
                      else "—")
                runs = ", ".join(d["mbps"] for d in c)
                print(f"| {name} | {k} | {mode} | {runs} | {m('mbps'):.1f} | "
                      f"{m('resident'):.0f} | {m('cached'):.1f} | "
                      f"{m('kswapd_scan'):.0f} | {m('direct_scan'):.0f} | "
                      f"{mc} | {sc} | {st} |")
    print()


def seed004(rows, run):
    f = [d for d in rows if d["table"] == "F4"]
    if not f:
        return
    cell = defaultdict(list)
    for d in f:
        cell[(d["kernel"], int(d["qd"]))].append(fio_write(run, d["json"]))
    print("Seed 004, fio io_uring 4 KiB buffered randwrite on F2FS "
          "(null_blk), IOPS, median of rounds (all rounds in brackets):\n")
    print("| iodepth | before IOPS | after IOPS | after/before | before MiB/s "
          "| after MiB/s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for qd in (1, 2, 4, 8, 16):
        b = cell.get(("before", qd), [])
        a = cell.get(("after", qd), [])
        bi = med([x[1] for x in b])
        ai = med([x[1] for x in a])
        print(f"| {qd} | {bi:.0f} [{', '.join(f'{x[1]:.0f}' for x in b)}] | "
              f"{ai:.0f} [{', '.join(f'{x[1]:.0f}' for x in a)}] | "
              f"{ai / bi:.2f} | {med([x[0] for x in b]):.1f} | "
              f"{med([x[0] for x in a]):.1f} |")
    print()


def seed001(rows, run):
    f = [d for d in rows if d["table"] == "F1"]
    if not f:
        return
    cell = defaultdict(list)
    for d in f:
        cell[(d["kernel"], int(d["segs_per_sec"]))].append(
            fio_write(run, d["json"])[0])
    print("Seed 001, fio bs=512k size=1536M rw=write io_uring iodepth=64 "
          "end_fsync=1 on F2FS on null_blk, MiB/s, median of rounds (all "
          "rounds in brackets):\n")
    print("| SEGS_PER_SEC | before MiB/s | after MiB/s | after/before |")
    print("|---:|---:|---:|---:|")
    for s in sorted({k[1] for k in cell}):
        b = cell.get(("before", s), [])
        a = cell.get(("after", s), [])
        print(f"| {s} | {med(b):.0f} [{', '.join(f'{x:.0f}' for x in b)}] | "
              f"{med(a):.0f} [{', '.join(f'{x:.0f}' for x in a)}] | "
              f"{med(a) / med(b):.2f} |")
    print()


def fswrite(rows):
    f = [d for d in rows if d["table"] == "FSW"]
    if not f:
        return
    cell = defaultdict(list)
    for d in f:
        cell[(d["fs"], int(d["req"]), d["kernel"], d["mode"])].append(d)
    nr = len({d["round"] for d in f})
    print("Uncached (dontcache) vs buffered (normal) sequential writes, "
          f"bench write (fsync included), null_blk; MB/s medians of {nr} "
          "rounds (all rounds in brackets), dc/n = ratio of the medians, "
          "paired dc/n = median over rounds of the ratio within one boot "
          "(both modes ran back to back), resident = the file's pages "
          "cached after close (max over rounds):\n")
    print("| fs | req | before normal | before dontcache | before dc/n "
          "| after normal | after dontcache | after dc/n | dontcache "
          "after/before | paired dc/n before / after | resident dc "
          "before / after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def paired(n, d):
        """median over rounds of dontcache/normal within one boot"""
        nb = {x["round"]: float(x["mbps"]) for x in n}
        r = [float(x["mbps"]) / nb[x["round"]] for x in d if x["round"] in nb]
        return f"{med(r):.2f}" if r else "—"

    def fmt(ds):
        v = [float(d["mbps"]) for d in ds]
        return med(v), (f"{med(v):.1f} [" + ", ".join(f"{x:.0f}" for x in v)
                        + "]" if v else "—")

    for fs in ("f2fs", "ext4", "xfs"):
        for req in sorted({k[1] for k in cell if k[0] == fs}):
            c = {(k, m): cell.get((fs, req, k, m), [])
                 for k in ("before", "after") for m in ("normal", "dontcache")}
            bn, bns = fmt(c[("before", "normal")])
            bd, bds = fmt(c[("before", "dontcache")])
            an, ans = fmt(c[("after", "normal")])
            ad, ads = fmt(c[("after", "dontcache")])

            def res(ds):
                return (str(max(int(d["resident"]) for d in ds)) if ds
                        else "—")
            lab = (f"{req // 1024} KiB" if req < 1048576
                   else f"{req // 1048576} MiB")
            print(f"| {fs} | {lab} | {bns} | {bds} | {bd / bn:.2f} | {ans} "
                  f"| {ads} | {ad / an:.2f} | {ad / bd:.2f} | "
                  f"{paired(c[('before', 'normal')], c[('before', 'dontcache')])}"
                  f" / "
                  f"{paired(c[('after', 'normal')], c[('after', 'dontcache')])}"
                  " | "
                  f"{res(c[('before', 'dontcache')])} / "
                  f"{res(c[('after', 'dontcache')])} |")
    print()


def main():
    run = sys.argv[1]
    rows = parse(sys.stdin)
    seed003(rows)
    seed004(rows, run)
    seed001(rows, run)
    fswrite(rows)


main()
