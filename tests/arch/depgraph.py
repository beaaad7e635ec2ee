#!/usr/bin/env python3
"""File-level dependency graph of the daemon, read from its object files.

A file A depends on a file B when A's object refers to a symbol B's object
defines (nm: undefined in A, defined in B).  That is exactly the set of
calls and data references the linker resolves, so no call hidden behind a
macro or a header escapes it.  Calls through function pointers registered at
start-up are not edges: that is how a lower layer notifies a higher one.

Usage: depgraph.py [--dot] [--layers A,B,C...] OBJ...
Exit 1 and print each cycle (strongly connected component of more than one
file, or of more than one folder) when there is one.  With --layers (the
folders from the top down), also exit 1 on every edge from a folder to one
above it: dependencies point down only.
"""
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", "--defined-only", "-g", obj], check=True,
                         capture_output=True, text=True).stdout
    defined = {line.split()[-1] for line in out.splitlines() if line.strip()}
    out = subprocess.run(["nm", "-u", obj], check=True,
                         capture_output=True, text=True).stdout
    undefined = {line.split()[-1] for line in out.splitlines() if line.strip()}
    return defined, undefined


def name_of(obj):
    """build/obj/io/stream.o -> io/stream"""
    parts = os.path.normpath(obj).split(os.sep)
    if "obj" in parts:
        parts = parts[parts.index("obj") + 1:]
    return os.path.splitext(os.sep.join(parts))[0]


def graph(objs):
    owner = {}
    uses = {}
    for obj in objs:
        n = name_of(obj)
        d, u = symbols(obj)
        for s in d:
            owner[s] = n
        uses[n] = u
    edges = {n: set() for n in uses}
    for n, u in uses.items():
        for s in u:
            m = owner.get(s)
            if m and m != n:
                edges[n].add(m)
    return edges


def strongly_connected(edges):
    """Tarjan's algorithm, iterative (no recursion limit)."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps


def folder(n):
    return n.split(os.sep)[0] if os.sep in n else "."


def main(argv):
    dot = "--dot" in argv
    layers = []
    if "--layers" in argv:
        i = argv.index("--layers")
        layers = argv[i + 1].split(",")
        argv = argv[:i] + argv[i + 2:]
    objs = [a for a in argv if a != "--dot"]
    if not objs:
        print(__doc__, file=sys.stderr)
        return 2
    edges = graph(objs)
    if dot:
        print("digraph dcfs {")
        for n in sorted(edges):
            for m in sorted(edges[n]):
                print(f'  "{n}" -> "{m}";')
        print("}")
        return 0
    status = 0
    cycles = [c for c in strongly_connected(edges) if len(c) > 1]
    for c in cycles:
        inner = [f"{a} -> {b}" for a in c for b in sorted(edges[a]) if b in c]
        print(f"file cycle ({len(c)} files): " + ", ".join(c))
        print("  edges inside it: " + "; ".join(inner))
        status = 1
    fedges = {}
    for n, ms in edges.items():
        for m in ms:
            if folder(n) != folder(m):
                fedges.setdefault(folder(n), set()).add(folder(m))
                fedges.setdefault(folder(m), set())
    fcycles = [c for c in strongly_connected(fedges) if len(c) > 1]
    for c in fcycles:
        inner = sorted({f"{folder(a)}/{a.split(os.sep)[-1]} -> {b}"
                        for a in edges for b in edges[a]
                        if folder(a) in c and folder(b) in c
                        and folder(a) != folder(b)})
        print(f"folder cycle: {' '.join(c)}")
        print("  edges inside it: " + "; ".join(inner))
        status = 1
    for n in sorted(edges):
        for m in sorted(edges[n]):
            a, b = folder(n), folder(m)
            if not layers or a == b:
                continue
            if a not in layers or b not in layers:
                print(f"folder not in --layers: {a if a not in layers else b}")
                status = 1
            elif layers.index(a) > layers.index(b):
                print(f"upward dependency: {n} -> {m}"
                      f" ({a} is below {b})")
                status = 1
    if status == 0:
        print(f"no dependency cycle among {len(edges)} files"
              f" in {len(fedges) or 1} folders"
              + (f"; layers {' > '.join(layers)} respected" if layers else ""))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
