#!/usr/bin/env bash
# A/B of two release `serve_load` bench binaries (crates/server/benches/
# serve_load.rs) in one run: runs alternate (A, B, A, B, ...) so machine
# load hits both alike. Prints each run's raw output and, per phase, the
# median rate of each binary and B/A.
#
# Build one with `cargo build --release -p neardup-server --bench serve_load`
# (the binary is target/release/deps/serve_load-*; copy it aside before
# building the other).
#
# Usage: bench/ab-serve.sh A_BIN B_BIN [RUNS] — NEARDUP_BENCH_CLIENTS (64)
# and NEARDUP_BENCH_SECS (8) pass through.
set -euo pipefail
a=$1 b=$2 runs=${3:-3}
export NEARDUP_BENCH_CLIENTS=${NEARDUP_BENCH_CLIENTS:-64} NEARDUP_BENCH_SECS=${NEARDUP_BENCH_SECS:-8}
out=$(mktemp)
for i in $(seq "$runs"); do
    for side in A B; do
        bin=$a; [ "$side" = B ] && bin=$b
        echo "== $side $i"
        "$bin" --bench 2>&1 | grep -E '^(upsert:|batch of|decide:)' | sed "s/^/$side /" | tee -a "$out"
    done
done
python3 - "$out" <<'PY'
import re, statistics, sys
rates = {}
for line in open(sys.argv[1]):
    side, phase = line.split()[0], line.split()[1].rstrip(':')
    m = re.search(r'= (\d+)', line)
    rates.setdefault((phase, side), []).append(float(m.group(1)))
for phase in ('upsert', 'batch', 'decide'):
    a, b = rates.get((phase, 'A')), rates.get((phase, 'B'))
    if a and b:
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {phase} | {ma:.0f}/s | {mb:.0f}/s | {mb / ma:.2f} |")
PY
rm -f "$out"
