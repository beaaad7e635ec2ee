#!/usr/bin/env python3
"""The tables of make check-kernels, from the run directories of
tests/kernels/kernels.sh (results.tsv, metrics.tsv, kernel.txt, seconds):

  report.py [--seconds N] [--markdown] RUNDIR...

One table per kernel (a row per stage, a column per filesystem, every cell
PASS, FAIL or SKIP), the reasons of every FAIL and SKIP, and one table of
figures per kernel x filesystem (counts from the guests; the host kernel's
are its own).  --markdown prints the README's "what you get on your
kernel" table instead.  Exit status 1 when a stage failed.
"""
import os
import sys

STAGES = ["boot", "all", "caps", "files", "perms", "coherence", "stream-write",
          "stream-read", "hotset", "shared-pages", "nfs-cto", "nfs-errors",
          "nfs-restart", "export-rw-v3", "export-rw-v4.2", "export-restart-v3",
          "export-restart-v4.2", "daemon"]


def read_tsv(path, width):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= width:
                rows.append(parts[:width - 1] + ["\t".join(parts[width - 1:])])
    return rows


def kv(path):
    out = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                k, _, v = line.strip().partition(" ")
                out[k] = v
    return out


def load(rundir):
    run = {
        "dir": rundir,
        "results": read_tsv(os.path.join(rundir, "results.tsv"), 5),
        "metrics": {},
        "kernel": kv(os.path.join(rundir, "kernel.txt")),
        "seconds": None,
    }
    for name, fs, key, value in read_tsv(os.path.join(rundir, "metrics.tsv"), 4):
        run["metrics"].setdefault(fs, {})[key] = value
    try:
        with open(os.path.join(rundir, "seconds"), encoding="utf-8") as f:
            run["seconds"] = int(f.read().strip())
    except (OSError, ValueError):
        pass
    run["name"] = run["results"][0][0] if run["results"] else os.path.basename(rundir)
    # runs from before the stream_write_kind metric: the stage's words
    for _, fs, stage, _, detail in run["results"]:
        m = run["metrics"].get(fs)
        if stage != "stream-write" or m is None or "stream_write_kind" in m:
            continue
        if "written behind" in detail:
            m["stream_write_kind"] = "behind"
        elif "uncached passthrough" in detail:
            m["stream_write_kind"] = "uncached"
    return run


def table(headers, rows):
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line.rstrip(), "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    return "\n".join(out)


def mib(pages):
    try:
        return "%.1f" % (int(pages) * 4096 / 1048576)
    except (TypeError, ValueError):
        return "-"


def pct(frac):
    try:
        return "%.0f%%" % (float(frac) * 100)
    except (TypeError, ValueError):
        return "-"


def stage_tables(runs):
    failed = False
    for run in runs:
        res = run["results"]
        fss = []
        cells = {}
        # the last result of a stage counts (a disturbed measurement is
        # repeated: stages.sh undisturbed())
        for _, fs, stage, status, detail in res:
            if fs not in fss:
                fss.append(fs)
            cells[(stage, fs)] = (status, detail)
        failed |= any(st == "FAIL" for st, _ in cells.values())
        k = run["kernel"]
        title = "kernel %s" % run["name"]
        if k.get("kernel"):
            title += " (%s, %s CPUs, cachestat %s)" % (k["kernel"], k.get("cpus", "?"),
                                                      k.get("cachestat", "?"))
        if run["seconds"] is not None:
            title += ", %d s" % run["seconds"]
        print("\n== " + title)
        if not res:
            print("no results in %s" % run["dir"])
            failed = True
            continue
        stages = [s for s in STAGES if any((s, fs) in cells for fs in fss)]
        stages += sorted({s for s, _ in cells} - set(stages))
        rows = [[s] + [cells.get((s, fs), ("", ""))[0] for fs in fss] for s in stages]
        print(table(["stage"] + fss, rows))
        # one line per reason: the filesystems all of whose stages it
        # covers, else fs:stage pairs
        notes = {}
        for (stage, fs), (status, detail) in cells.items():
            if status in ("FAIL", "SKIP"):
                notes.setdefault((status, detail), []).append((fs, stage))
        for (status, detail), where in sorted(notes.items()):
            names = []
            for fs in fss:
                mine = [st for f, st in where if f == fs]
                if not mine:
                    continue
                if len(mine) == sum(1 for (_, f) in cells if f == fs):
                    names.append("%s (all %d)" % (fs, len(mine)))
                else:
                    names += ["%s:%s" % (fs, st) for st in mine]
            print("  %s [%s]: %s" % (status, " ".join(names), detail))
    return failed


def figures(runs):
    print("\n== figures per kernel x filesystem (pages of the stream on the backing "
          "file; hot set: share of its pages resident after the stream)")
    headers = ["kernel", "fs", "dontcache r/w", "pt", "uring", "wr peak MiB",
               "wr after pg", "rd peak MiB", "rd after pg", "hot kept",
               "cache rd reqs", "stream wr reqs", "rd reqs", "daemon ticks w/r"]
    rows = []
    for run in runs:
        for fs, m in run["metrics"].items():
            if "stream_write_peak_pages" not in m and "native_dontcache" not in m:
                continue
            rows.append([run["name"], fs,
                         m.get("native_dontcache", "-").replace(" ", "/"),
                         m.get("passthrough", "-"), m.get("uring", "-"),
                         mib(m.get("stream_write_peak_pages")),
                         m.get("stream_write_after_pages", "-"),
                         mib(m.get("stream_read_peak_pages")),
                         m.get("stream_read_after_pages", "-"),
                         pct(m.get("hot_survival")),
                         m.get("cache_read_requests", "-"),
                         m.get("stream_write_requests", "-"),
                         m.get("stream_read_requests", "-"),
                         "%s/%s" % (m.get("stream_write_daemon_ticks", "-"),
                                    m.get("stream_read_daemon_ticks", "-"))])
    print(table(headers, rows) if rows else "(none)")


def markdown(runs):
    """One row per kernel x filesystem: how cached files and streams are
    served, the stream's pages on the backing file (peak while it runs /
    left after close), the hot set kept, the daemon's CPU on the stream."""
    print("| kernel | fs | cached files | stream writes | stream reads | "
          "write: peak MiB / pages after | read: peak MiB / pages after | "
          "hot set kept | daemon CPU ticks w / r | cached file in page cache |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        for fs, m in run["metrics"].items():
            if "stream_write_peak_pages" not in m:
                continue
            dc = m.get("probe_after_streams", m.get("native_dontcache", "- -")).split(" ")
            dc += ["-"] * (2 - len(dc))
            cached = "passthrough" if m.get("passthrough") == "on" else "forwarded"
            wr = int(m.get("stream_write_requests", "0") or 0)
            rd = int(m.get("stream_read_requests", "0") or 0)
            kinds = {"behind": "kernel, written behind", "uncached": "kernel, uncached"}
            writes = ("RWF_DONTCACHE" if dc[1] == "yes" else "fallback") if wr else \
                kinds.get(m.get("stream_write_kind"), "kernel")
            if rd:
                reads = "RWF_DONTCACHE" if dc[0] == "yes" else "fallback"
            else:
                reads = "kernel, dropped behind"
            hb = int(m.get("hot_pages_backing", "0") or 0)
            hm = int(m.get("hot_pages_mount", "0") or 0)
            # a passthrough file's mapping is the backing file's (the
            # mount's pages counted are those): one copy
            copies = "twice (mount + backing)" if cached == "forwarded" and hb and hm else "once"
            print("| %s | %s | %s | %s | %s | %s / %s | %s / %s | %s | %s / %s | %s |" % (
                run["name"], fs, cached, writes, reads,
                mib(m.get("stream_write_peak_pages")), m.get("stream_write_after_pages", "-"),
                mib(m.get("stream_read_peak_pages")), m.get("stream_read_after_pages", "-"),
                pct(m.get("hot_survival")),
                m.get("stream_write_daemon_ticks", "-"), m.get("stream_read_daemon_ticks", "-"),
                copies))


def main(argv):
    seconds = None
    md = False
    dirs = []
    i = 0
    while i < len(argv):
        if argv[i] == "--seconds":
            seconds = int(argv[i + 1])
            i += 2
            continue
        if argv[i] == "--markdown":
            md = True
        else:
            dirs.append(argv[i])
        i += 1
    runs = [load(d) for d in dirs]
    if md:
        markdown(runs)
        return 0
    failed = stage_tables(runs)
    figures(runs)
    if seconds is not None:
        print("\nmatrix: %d s (%s)" % (seconds, ", ".join(
            "%s %s s" % (r["name"], r["seconds"] if r["seconds"] is not None else "-")
            for r in runs)))
    print("check-kernels: %s" % ("FAILED" if failed else "passed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
