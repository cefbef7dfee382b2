#!/usr/bin/env bash
# A/B throughput of two `neardup` binaries on the same corpus, in one run:
# runs alternate (A, B, then B, A, ...) so that machine load hits both alike.
# Prints the best and the median of N runs of each, the B/A ratios, and in
# how many rounds B was the faster. A ratio measured this way holds on a
# shared machine where absolute times do not. Throughput is the `--json`
# summary's `mb_per_s` (timed inside the process: no start-up, no exit),
# read after the run ends: a reader started beside it (a pipe into python3)
# takes CPU from a run that uses every core.
#
# Usage: bench/ab-dedup.sh A_BIN B_BIN CORPUS.jsonl [THREADS] [RUNS] [EXTRA DEDUP FLAGS...]
set -euo pipefail
a=$1 b=$2 corpus=$3 threads=${4:-1} runs=${5:-5}
shift $(( $# < 5 ? $# : 5 ))
rate() {
    local bin=$1 out
    shift
    out=$("$bin" dedup "$corpus" --threads "$threads" --json -q "$@")
    python3 -c 'import json,sys; print(json.load(sys.stdin)["mb_per_s"])' <<<"$out"
}
ra=() rb=()
for i in $(seq "$runs"); do
    if (( i % 2 )); then
        ra+=("$(rate "$a" "$@")"); rb+=("$(rate "$b" "$@")")
    else
        rb+=("$(rate "$b" "$@")"); ra+=("$(rate "$a" "$@")")
    fi
    echo "  run: A ${ra[-1]} MB/s, B ${rb[-1]} MB/s" >&2
done
python3 - "$corpus" "$threads" "${ra[*]}" "${rb[*]}" <<'PY'
import os, statistics, sys
corpus, threads = sys.argv[1], sys.argv[2]
a, b = (list(map(float, x.split())) for x in sys.argv[3:5])
wins = sum(y > x for x, y in zip(a, b))
print(f"| {os.path.basename(corpus)} | {threads} | A best {max(a):.1f}, median {statistics.median(a):.1f} "
      f"| B best {max(b):.1f}, median {statistics.median(b):.1f} "
      f"| B/A {max(b)/max(a):.3f} best, {statistics.median(b)/statistics.median(a):.3f} median | B faster in {wins} of {len(a)} |")
PY
