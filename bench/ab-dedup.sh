#!/usr/bin/env bash
# A/B throughput of two `neardup` binaries on the same corpus, in one run:
# runs alternate (A, B, A, B, ...) so that machine load hits both alike, and
# the best of N runs of each is compared. A ratio measured this way holds on
# a shared machine where absolute times do not.
#
# Usage: bench/ab-dedup.sh A_BIN B_BIN CORPUS.jsonl [THREADS] [RUNS] [EXTRA DEDUP FLAGS...]
# Prints one Markdown table row per binary and the B/A ratio.
set -euo pipefail
a=$1 b=$2 corpus=$3 threads=${4:-1} runs=${5:-5}
shift $(( $# < 5 ? $# : 5 ))
best_a=0 best_b=0
# The summary is read after the run ends: a reader started beside it (a
# pipe into python3) takes CPU from a run that uses every core.
rate() {
    local bin=$1 out
    shift
    out=$("$bin" dedup "$corpus" --threads "$threads" --json -q "$@")
    python3 -c 'import json,sys; print(json.load(sys.stdin)["mb_per_s"])' <<<"$out"
}
for _ in $(seq "$runs"); do
    ra=$(rate "$a" "$@"); rb=$(rate "$b" "$@")
    best_a=$(python3 -c "print(max($best_a, $ra))"); best_b=$(python3 -c "print(max($best_b, $rb))")
    echo "  run: A $ra MB/s, B $rb MB/s" >&2
done
echo "| $(basename "$corpus") | $threads | A $best_a | B $best_b | B/A $(python3 -c "print(f'{$best_b/$best_a:.3f}')") |"
