#!/usr/bin/env python3
"""neardup from Python against datasketch and rensa (issue 14).

Usage: python3 bench/python_bench.py [OUT.md] [--limit N]
Needs: pip install ./python datasketch rensa

Every tool gets the same input: the canonical shingle set of each document
(neardup's normalization and word 5-grams, `Fingerprinter.fingerprint`),
so the tools differ only in how they find and judge pairs. The truth is the
exact all-pairs oracle over those sets (`neardup.exact_pairs`). For each
threshold and tool: wall time of indexing and querying every document
against the earlier ones (shingling excluded, the same for all), the pairs
reported, recall and precision against the truth.

- neardup: `Index(threshold=t).add_many(...)` — LSH candidates, each
  verified with exact Jaccard; reported = verified pairs. With the default
  cap of 100 candidates per item, and with `max_candidates=10000`.
- datasketch: `MinHash(num_perm=128).update_batch` + `MinHashLSH(threshold=t)`,
  query before insert; reported = LSH candidates (what `query` returns),
  and, as a second row, those whose MinHash estimate is >= t.
- rensa: `RMinHash(num_perm=128)` + `RMinHashLSH(threshold=t, num_bands=16)`,
  the same two rows.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import neardup

ROOT = Path(__file__).resolve().parents[1]


def corpus(limit):
    path = ROOT / "bench" / "work" / "python" / "real.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "corpus" / "real.py"), str(path)], check=True,
                       stdout=subprocess.DEVNULL)
    docs = [json.loads(l) for l in path.read_text().splitlines()[:limit]]
    return docs


def score(reported, truth):
    hit = len(reported & truth)
    recall = hit / len(truth) if truth else 1.0
    precision = hit / len(reported) if reported else 1.0
    return recall, precision


def run_neardup(docs, t, max_candidates=100):
    idx = neardup.Index(threshold=t, max_candidates=max_candidates)
    start = time.perf_counter()
    results = idx.add_many([(str(i), d["text"]) for i, d in enumerate(docs)])
    secs = time.perf_counter() - start
    pairs = {(int(j), i) for i, ms in enumerate(results) for j, _ in ms}
    return secs, {f"verified, max_candidates {max_candidates}": pairs}


def run_neardup_uncapped(docs, t):
    return run_neardup(docs, t, max_candidates=10000)


def _run_lsh(lsh, minhash, sets, t):
    """Queries each set's MinHash against the earlier ones, then inserts it:
    the LSH candidates, and those whose MinHash estimate is >= t."""
    start = time.perf_counter()
    hashes = []
    cand, est = set(), set()
    for i, s in enumerate(sets):
        m = minhash(s)
        for j in lsh.query(m):
            cand.add((j, i))
            if hashes[j].jaccard(m) >= t:
                est.add((j, i))
        lsh.insert(i, m)
        hashes.append(m)
    return time.perf_counter() - start, {"LSH candidates": cand, "estimate >= t": est}


def run_datasketch(sets, t):
    from datasketch import MinHash, MinHashLSH

    def minhash(s):
        m = MinHash(num_perm=128)
        m.update_batch([x.to_bytes(8, "little") for x in s])
        return m

    return _run_lsh(MinHashLSH(threshold=t, num_perm=128), minhash, sets, t)


def run_rensa(sets, t):
    from rensa import RMinHash, RMinHashLSH

    def minhash(s):
        m = RMinHash(num_perm=128, seed=42)
        m.update([str(x) for x in s])
        return m

    return _run_lsh(RMinHashLSH(threshold=t, num_perm=128, num_bands=16), minhash, sets, t)


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else ROOT / "bench/results/python.md"
    limit = int(sys.argv[sys.argv.index("--limit") + 1]) if "--limit" in sys.argv else 7100
    docs = corpus(limit)
    f = neardup.Fingerprinter()
    t0 = time.perf_counter()
    sets = [fp.features.tolist() for fp in f.fingerprint_many([d["text"] for d in docs])]
    shingle_s = time.perf_counter() - t0
    import datasketch
    import importlib.metadata as md

    lines = [
        "# neardup from Python vs datasketch and rensa (issue 14)",
        "",
        f"- date: {time.strftime('%Y-%m-%dT%H:%MZ', time.gmtime())}, commit "
        + subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip(),
        f"- machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; datasketch {md.version('datasketch')}, "
        f"rensa {md.version('rensa')}, neardup (this checkout, `pip install ./python`, release)",
        "- command: `python3 bench/python_bench.py`",
        f"- corpus: the real corpus (`bench/corpus/real.py`), {len(docs)} documents; canonical word 5-gram sets "
        f"made once by neardup ({shingle_s:.2f} s) and given to every tool",
        "",
        "Seconds are indexing + querying every document against the earlier ones. neardup takes the texts",
        "(its seconds include normalizing, shingling and signing them); datasketch and rensa take the ready",
        "shingle sets (their seconds exclude that work).",
        "Truth: every pair with exact Jaccard >= t over the same sets (`neardup.exact_pairs`, the all-pairs oracle).",
        "",
        "| t | tool | reported pairs | seconds | truth pairs | recall | precision |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in (0.5, 0.8, 0.9):
        truth = {(i, j) for i, j, _ in neardup.exact_pairs(sets, t)}
        for name, fn, arg in (("neardup", run_neardup, docs), ("neardup", run_neardup_uncapped, docs),
                              ("datasketch", run_datasketch, sets),
                              ("rensa", run_rensa, sets)):
            secs, outs = fn(arg, t)
            for label, pairs in outs.items():
                r, p = score(pairs, truth)
                lines.append(f"| {t} | {name} ({label}) | {len(pairs)} | {secs:.2f} | {len(truth)} | {r:.4f} | {p:.4f} |")
                print(lines[-1], flush=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
