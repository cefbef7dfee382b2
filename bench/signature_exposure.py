#!/usr/bin/env python3
"""Could a signature reveal its text? A dictionary attack on signatures.

Usage: python3 bench/signature_exposure.py [--bases N] [--seed S]
Needs: pip install ./python (the neardup package, with NumPy) and a built
`neardup` binary (NEARDUP_BIN, else target/release/neardup, else
target/debug/neardup) for `neardup gen`.

The attacker holds one text's signature (the `uint32` values of
`Fingerprint.signature`), knows the configuration it was made under (the
fingerprint version names it, the default seed is public) and holds a
dictionary of candidate shingles: here, every distinct shingle of a
synthetic corpus (`neardup gen`, N base documents), so every shingle of the
target is in the dictionary (the generator's ASCII words only: see
`attack`). That is the attacker's best case; a real one
must guess the shingles, a vocabulary of V words giving V**w candidates for
word w-shingles.

The attack: fingerprint each dictionary shingle alone. A text of one
shingle has a signature made of that shingle's hash alone: under
one-permutation hashing (`oph`, the default) every bin holds its one
value; under classic MinHash (`minhash`) position i holds its i-th hash.
Wherever the target's signature holds the same value at the same
position, that shingle is the minimum there, so it is in the target. A
shingle that is never a minimum leaves no trace in the signature.

Reported, for short texts cut from the corpus documents (the first n
words): the fraction of each text's distinct shingles (its canonical
features) recovered from the signature, and the dictionary shingles
claimed that are not in the text (false claims). The canonical feature
set itself (`Fingerprint.features`, kept by the service for tenants that
keep no text, and in the saved index of `dedup --index`) is one seeded
hash per shingle: every shingle in the dictionary is recovered from it,
which the last column checks.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import neardup

ROOT = Path(__file__).resolve().parent.parent
LENGTHS = [10, 25, 50, 100, 200]


def binary() -> str:
    env = os.environ.get("NEARDUP_BIN")
    if env:
        return env
    for p in (ROOT / "target/release/neardup", ROOT / "target/debug/neardup"):
        if p.exists():
            return str(p)
    sys.exit("no neardup binary: cargo build --release -p neardup, or set NEARDUP_BIN")


def corpus(bases: int, seed: int) -> list[str]:
    with tempfile.TemporaryDirectory() as d:
        out, truth = Path(d) / "c.jsonl", Path(d) / "t.jsonl"
        subprocess.run(
            [binary(), "gen", "--out", str(out), "--truth", str(truth), "--bases", str(bases),
             "--variants", "0", "--words", str(max(LENGTHS) + 50), "--seed", str(seed)],
            check=True, capture_output=True)
        return [json.loads(line)["text"] for line in out.read_text().splitlines()]


def shingles(words: list[str], width: int) -> list[str]:
    if len(words) < width:
        return [" ".join(words)] if words else []
    return [" ".join(words[i:i + width]) for i in range(len(words) - width + 1)]


def attack(texts: list[str], width: int, scheme: str) -> list[tuple]:
    fp = neardup.Fingerprinter(shingle_width=width, signature=scheme)
    # The dictionary: every shingle of every text. Words are split on
    # anything but letters and digits and only ASCII words are kept, so that
    # they are the normalizer's tokens (it splits CJK text, which the
    # generator also writes, into characters).
    tokenized = [[t for t in "".join(c if c.isalnum() else " " for c in x.lower()).split() if t.isascii()]
                 for x in texts]
    dictionary = sorted({s for words in tokenized for s in shingles(words, width)})
    t0 = time.perf_counter()
    prints = fp.fingerprint_many(dictionary)
    sigs = np.stack([p.signature for p in prints]).astype(np.uint64)
    feats = np.array([p.features[0] if len(p.features) == 1 else 0 for p in prints], dtype=np.uint64)
    n_perm = sigs.shape[1]
    # (position, value) -> dictionary entry, sorted for lookups.
    keys = ((np.arange(n_perm, dtype=np.uint64) << np.uint64(32)) | sigs).ravel()
    owner = np.repeat(np.arange(len(dictionary)), n_perm)
    order = np.argsort(keys, kind="stable")
    keys, owner = keys[order], owner[order]
    setup = time.perf_counter() - t0
    rows = []
    for n in LENGTHS:
        recovered, false_claims, from_features, total = [], 0, [], 0
        for words in tokenized:
            target = fp.fingerprint(" ".join(words[:n]))
            truth = set(target.features.tolist())
            if not truth:
                continue
            tk = (np.arange(n_perm, dtype=np.uint64) << np.uint64(32)) | target.signature.astype(np.uint64)
            lo = np.searchsorted(keys, tk, side="left")
            hi = np.searchsorted(keys, tk, side="right")
            claimed = {int(owner[j]) for a, b in zip(lo, hi) for j in range(a, b)}
            hits = {int(feats[c]) for c in claimed if int(feats[c]) in truth}
            false_claims += sum(1 for c in claimed if int(feats[c]) not in truth)
            recovered.append(len(hits) / len(truth))
            from_features.append(len(truth & set(feats.tolist())) / len(truth))
            total += 1
        r = np.array(recovered)
        rows.append((scheme, width, n, total, len(dictionary), float(r.mean()), float(np.percentile(r, 10)),
                     float((r == 1.0).mean()), false_claims, float(np.mean(from_features)), setup))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    texts = corpus(args.bases, args.seed)
    print(f"neardup {neardup.Fingerprinter().fingerprint_version}; {len(texts)} texts from "
          f"`neardup gen --bases {args.bases} --seed {args.seed}`; dictionary = every shingle of the corpus")
    print()
    print("| signature | shingle | words | texts | dictionary | recovered (mean) | recovered (p10) "
          "| texts fully recovered | false claims | from features |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scheme in ("oph", "minhash"):
        for width in (1, 2, 5):
            for row in attack(texts, width, scheme):
                s, w, n, total, dsize, mean, p10, full, fc, ff, _ = row
                print(f"| {s} | word {w} | {n} | {total} | {dsize} | {mean:.1%} | {p10:.1%} | {full:.1%} "
                      f"| {fc} | {ff:.1%} |")


if __name__ == "__main__":
    main()
