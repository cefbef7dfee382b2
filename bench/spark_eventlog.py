#!/usr/bin/env python3
"""Sums a Spark event log: stages, tasks, input read, shuffle written and
read, the largest task's peak execution memory, the executors' largest
JVM heap, and the longest stages (wall time, by the call that made them).

Usage: python3 bench/spark_eventlog.py EVENT_LOG

EVENT_LOG is the file, or the folder (`eventlog_v2_*`, Spark 4's rolling
log: its `events_*` files in order), that Spark writes under the log folder.

Run the job with `--conf spark.eventLog.enabled=true --conf
spark.eventLog.dir=file:///DIR --conf spark.eventLog.logStageExecutorMetrics=true --conf
spark.eventLog.compress=false`;
the log is the one entry Spark writes under DIR.
"""
import json
import os
import sys

MiB = 1 << 20
TOP = 8
stages = set()
tasks = 0
read = written = shuffle_read = 0
peak_task = heap = 0
stage_ms = {}  # (id, attempt) -> (name, milliseconds)
per_stage = {}  # (id, attempt) -> [tasks, input, shuffle written, shuffle read]
path = sys.argv[1]
files = [path]
if os.path.isdir(path):
    # events_<index>_<app>: in the order of the index.
    names = [n for n in os.listdir(path) if n.startswith("events_")]
    files = [os.path.join(path, n) for n in sorted(names, key=lambda n: int(n.split("_")[1]))]


def lines():
    for name in files:
        with open(name, encoding="utf-8") as f:
            yield from f


for line in lines():
    e = json.loads(line)
    kind = e.get("Event")
    if kind == "SparkListenerTaskEnd":
        tasks += 1
        stages.add((e["Stage ID"], e["Stage Attempt ID"]))
        m = e.get("Task Metrics") or {}
        read += m.get("Input Metrics", {}).get("Bytes Read", 0)
        sw = m.get("Shuffle Write Metrics", {})
        written += sw.get("Shuffle Bytes Written", 0)
        sr = m.get("Shuffle Read Metrics", {})
        shuffle_read += sr.get("Local Bytes Read", 0) + sr.get("Remote Bytes Read", 0)
        peak_task = max(peak_task, m.get("Peak Execution Memory", 0))
        t = per_stage.setdefault((e["Stage ID"], e["Stage Attempt ID"]), [0, 0, 0, 0])
        t[0] += 1
        t[1] += m.get("Input Metrics", {}).get("Bytes Read", 0)
        t[2] += sw.get("Shuffle Bytes Written", 0)
        t[3] += sr.get("Local Bytes Read", 0) + sr.get("Remote Bytes Read", 0)
    elif kind == "SparkListenerStageCompleted":
        info = e["Stage Info"]
        if "Submission Time" in info and "Completion Time" in info:
            name = info.get("Stage Name", "?").split(" at ")[0]
            stage_ms[(info["Stage ID"], info["Stage Attempt ID"])] = (name, info["Completion Time"] - info["Submission Time"])
    elif kind == "SparkListenerStageExecutorMetrics":
        heap = max(heap, e.get("Executor Metrics", {}).get("JVMHeapMemory", 0))
    elif kind == "SparkListenerExecutorMetricsUpdate":
        for u in e.get("Executor Metrics Updated", []):
            heap = max(heap, u.get("Executor Metrics", {}).get("JVMHeapMemory", 0))
print(f"stages {len(stages)}, tasks {tasks}; input read {read / MiB:.1f} MiB; "
      f"shuffle written {written / MiB:.1f} MiB, read {shuffle_read / MiB:.1f} MiB; "
      f"largest task execution memory {peak_task / MiB:.1f} MiB; JVM heap used at most {heap / MiB:.0f} MiB")
longest = sorted(stage_ms.items(), key=lambda kv: -kv[1][1])[:TOP]
print(f"stages' wall time {sum(ms for _, ms in stage_ms.values()) / 1000:.1f} s in all; the longest:")
for key, (name, ms) in longest:
    n, inp, sw, sr = per_stage.get(key, [0, 0, 0, 0])
    print(f"  stage {key[0]:>4} {ms / 1000:7.1f} s, {n:>3} tasks, input {inp / MiB:7.1f} MiB, "
          f"shuffle read {sr / MiB:7.1f} MiB, written {sw / MiB:7.1f} MiB  ({name})")
