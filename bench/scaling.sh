#!/usr/bin/env bash
# Thread scaling of one `neardup` binary on one corpus, in one run: dedup at
# T1 and at T2 threads alternating (T1, T2, T1, T2, ...) so that machine load
# hits both alike; the best of N runs of each, its median, and the speed-up
# T2 over T1 (best over best, and median over median). Throughput is the
# `--json` summary's `mb_per_s` (timed inside the process: no start-up, no
# exit).
#
# Usage: bench/scaling.sh BIN CORPUS.jsonl [RUNS] [T1] [T2] [EXTRA DEDUP FLAGS...]
# Defaults: 7 runs, 1 and 2 threads.
set -euo pipefail
bin=$1 corpus=$2 runs=${3:-7} t1=${4:-1} t2=${5:-2}
shift $(( $# < 5 ? $# : 5 ))
# The summary is read after the run ends: a reader started beside it (a
# pipe into python3) takes CPU from a run that uses every core.
rate() {
    local out
    out=$("$bin" dedup "$corpus" --threads "$1" --json -q "${@:2}")
    python3 -c 'import json,sys; print(json.load(sys.stdin)["mb_per_s"])' <<<"$out"
}
a=() b=()
for _ in $(seq "$runs"); do
    a+=("$(rate "$t1" "$@")"); b+=("$(rate "$t2" "$@")")
    echo "  run: ${t1} threads ${a[-1]} MB/s, ${t2} threads ${b[-1]} MB/s" >&2
done
python3 - "$corpus" "$t1" "$t2" "${a[*]}" "${b[*]}" <<'PY'
import statistics, sys, os
corpus, t1, t2, a, b = sys.argv[1], sys.argv[2], sys.argv[3], list(map(float, sys.argv[4].split())), list(map(float, sys.argv[5].split()))
print(f"| {os.path.basename(corpus)} | {len(a)} | {t1}: best {max(a):.1f}, median {statistics.median(a):.1f} MB/s "
      f"| {t2}: best {max(b):.1f}, median {statistics.median(b):.1f} MB/s "
      f"| {max(b)/max(a):.3f}x best, {statistics.median(b)/statistics.median(a):.3f}x median |")
PY
