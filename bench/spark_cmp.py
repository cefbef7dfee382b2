#!/usr/bin/env python3
"""Compares the Spark job's output with `neardup dedup` on the same input.

Usage: NEARDUP_BIN=target/debug/neardup python3 bench/spark_cmp.py INPUT SPARK_OUT [CLI SETTINGS...]

Runs `neardup dedup INPUT --pairs --clusters -o` with the given settings (the
ones the job ran with) in the current folder, then compares: the pairs as a
set, the kept ids in the written order (part files in name order), and each
clustered id's cluster (the id of its first member). Exits 1 on a difference.
"""
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq

corpus, out, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
BIN = os.environ.get("NEARDUP_BIN", "neardup")
r = subprocess.run([BIN, "dedup", corpus, "--pairs", "c.pairs.tsv", "-o", "c.kept.jsonl",
                    "--clusters", "c.clusters.jsonl", "--json", "-q", *extra], capture_output=True, text=True)
assert r.returncode == 0, r.stderr
summary = json.loads(r.stdout)
print({k: summary[k] for k in ("records", "kept", "verified_pairs", "clusters", "capped_queries")})
want = {tuple(l.split("\t")[:2]) + (float(l.split("\t")[2]),) for l in open("c.pairs.tsv").read().splitlines()}
want_kept = [json.loads(l)["id"] for l in open("c.kept.jsonl")]
want_clusters = {}
for line in open("c.clusters.jsonl"):
    members = json.loads(line)["members"]
    want_clusters.update((m, members[0]) for m in members)
pairs = pq.read_table(f"{out}/pairs")
got = set(zip(*[pairs.column(c).to_pylist() for c in ("left", "right", "score")]))
got_kept = pq.read_table(f"{out}/kept").column("id").to_pylist()
clusters = pq.read_table(f"{out}/clusters")
got_clusters = dict(zip(clusters.column("id").to_pylist(), clusters.column("cluster").to_pylist()))
same = (got == want, got_kept == want_kept, got_clusters == want_clusters)
print(f"pairs {len(got)} vs {len(want)}: {'equal' if same[0] else sorted(got ^ want)[:3]}")
print(f"kept {len(got_kept)} vs {len(want_kept)}: {'equal, in order' if same[1] else 'differ'}")
print(f"clustered rows {len(got_clusters)} vs {len(want_clusters)}: {'equal' if same[2] else 'differ'}")
sys.exit(0 if all(same) else 1)
