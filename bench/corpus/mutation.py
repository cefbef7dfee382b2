#!/usr/bin/env python3
"""Keep the records of a `neardup gen` corpus made by one mutation.

Usage: python3 bench/corpus/mutation.py CORPUS.jsonl TRUTH.jsonl KIND OUT.jsonl

KIND is a mutation named in the truth file (`template`, `boilerplate`,
`substitute`, ...). `template` gives the templated pages alone: every one is
the same 100-word frame around a 30-word fill-in, so each pair is a band
candidate but none is a near duplicate at 0.8 (Jaccard ~0.6) — the dense
neighbourhood where ranking and verification cost the most
(bench/results/dedup.md).
"""

import json
import sys


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    corpus, truth, kind, out = sys.argv[1:]
    with open(truth, encoding="utf-8") as f:
        ids = {d["id"] for d in map(json.loads, f) if d["mutation"] == kind}
    if not ids:
        print(f"no record of {truth} was made by mutation {kind!r}", file=sys.stderr)
        return 1
    kept = 0
    with open(corpus, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        for line in f:
            if json.loads(line)["id"] in ids:
                o.write(line)
                kept += 1
    print(f"wrote {kept} records made by {kind!r} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
