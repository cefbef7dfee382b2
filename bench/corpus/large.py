#!/usr/bin/env python3
"""Stream a large corpus made from real text, for memory and scale runs.

Usage: python3 bench/corpus/large.py REAL.jsonl N [--seed S] [--words W] | zstd -q -o OUT.jsonl.zst

REAL.jsonl is the real corpus of bench/corpus/real.py (Debian's licences,
copyright files, documentation and man pages). Its text is cut into
sentences; each new document is ~W words (default 230, ~2 KB) of sentences
drawn from the whole pool, with one word in ten replaced by another word of
the corpus, so two documents share a sentence only by chance, as unrelated
pages of one site do. On top of that, as a crawl has:

  * ~10 % near copies of a recent document, with 1 to 25 % of its words
    replaced, dropped or inserted (Jaccard from ~0.99 down to ~0.3 on
    5-word shingles: the threshold's neighbourhood is well covered);
  * ~3 % members of templated families: a few hundred pages sharing one
    frame of ~250 words around a ~40-word fill-in, dense enough that their
    queries hit the candidate cap (Jaccard between members ~0.6-0.8);
  * ~1 % exact copies.

Output is JSONL on stdout, `{"id": "d<N>", "text": ...}`, generated in one
pass with bounded memory (a window of recent documents for the copies).
Deterministic for a given REAL.jsonl, N and seed.
"""
import json
import random
import re
import sys

WINDOW = 20_000


def main() -> int:
    args = sys.argv[1:]
    if len(args) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    real, n = args[0], int(args[1])
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 1
    words_per_doc = int(args[args.index("--words") + 1]) if "--words" in args else 230
    rng = random.Random(seed)
    sentences = []
    vocab = set()
    with open(real, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            for s in re.split(r"(?<=[.!?])\s+|\n\s*\n", text):
                w = s.split()
                if 4 <= len(w) <= 60:
                    sentences.append(w)
                    vocab.update(w[:20])
    vocab = sorted(vocab)
    if not sentences:
        print(f"no sentences in {real}", file=sys.stderr)
        return 1

    def fresh(count):
        out = []
        while len(out) < count:
            out.extend(rng.choice(sentences))
        return [rng.choice(vocab) if rng.random() < 0.1 else w for w in out[:count]]

    def mutate(words, rate):
        out = []
        for w in words:
            r = rng.random()
            if r < rate / 3:
                continue
            if r < 2 * rate / 3:
                out.append(rng.choice(vocab))
                continue
            out.append(w)
            if r < rate:
                out.append(rng.choice(vocab))
        return out

    recent = []
    families = []
    out = sys.stdout
    for i in range(n):
        r = rng.random()
        if r < 0.10 and recent:
            words = mutate(rng.choice(recent), rng.uniform(0.01, 0.25))
        elif r < 0.11 and recent:
            words = list(rng.choice(recent))
        elif r < 0.14:
            if not families or rng.random() < 0.003:
                frame = fresh(250)
                families.append((frame, rng.randrange(len(frame))))
                families = families[-50:]
            frame, at = rng.choice(families)
            words = frame[:at] + fresh(40) + frame[at:]
        else:
            words = fresh(max(20, int(rng.gauss(words_per_doc, words_per_doc / 4))))
        if len(recent) < WINDOW:
            recent.append(words)
        else:
            recent[rng.randrange(WINDOW)] = words
        out.write(json.dumps({"id": f"d{i}", "text": " ".join(words)}, ensure_ascii=False))
        out.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
