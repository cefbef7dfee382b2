#!/usr/bin/env python3
"""Runs a command and samples, every 0.5 s, the RSS of its process tree from
/proc; prints to stderr its exit status, wall time and the peak RSS of the
JVM(s), of the command itself (a Python driver) and of its Python workers
together.

Usage: python3 bench/rss_tree.py COMMAND [ARGS...]
"""
import os, subprocess, sys, time

def tree(root):
    kids = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            kids.setdefault(int(parts[1]), []).append(int(p))
        except OSError:
            pass
    out, todo = [], [root]
    while todo:
        x = todo.pop()
        out.append(x)
        todo.extend(kids.get(x, []))
    return out

def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for l in f:
                if l.startswith("VmRSS:"):
                    return int(l.split()[1]) * 1024
    except OSError:
        pass
    return 0

def name(pid):
    try:
        return open(f"/proc/{pid}/comm").read().strip()
    except OSError:
        return ""

t0 = time.time()
p = subprocess.Popen(sys.argv[1:])
peak = {"java": 0, "driver": 0, "workers": 0}
while p.poll() is None:
    pids = tree(p.pid)
    java = sum(rss(x) for x in pids if name(x) == "java")
    workers = sum(rss(x) for x in pids if x != p.pid and name(x).startswith("python"))
    peak["java"] = max(peak["java"], java)
    peak["driver"] = max(peak["driver"], rss(p.pid))
    peak["workers"] = max(peak["workers"], workers)
    time.sleep(0.5)
print(f"exit {p.returncode}, wall {time.time() - t0:.1f} s, peak RSS: JVM {peak['java'] / 2**20:.0f} MiB, "
      f"Python driver {peak['driver'] / 2**20:.0f} MiB, Python workers {peak['workers'] / 2**20:.0f} MiB",
      file=sys.stderr)
