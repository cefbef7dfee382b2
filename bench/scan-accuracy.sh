#!/usr/bin/env bash
# Verdict accuracy of `neardup scan` on the labelled document benchmark
# (bench/corpus/scan_pairs.py: format copies, revisions, sibling pages,
# unrelated pairs, all built from this machine's files), per matcher, with
# the shipped calibrations and with the seed's raw scores; then embedding
# throughput of the same corpus, cold, for this build and (if given) another.
#
# Usage: bench/scan-accuracy.sh [BINARY=target/release/neardup] [MINILM_DIR] [BEFORE_BINARY]
# Writes the raw outputs under bench/work/scan-accuracy-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/release/neardup}")
minilm=$(realpath "${2:-${NEARDUP_TEST_MINILM_DIR:-target/minilm}}")
before=${3:-}
work=bench/work/scan-accuracy
out=bench/work/scan-accuracy-out
[ -s "$work/pairs.tsv" ] || python3 bench/corpus/scan_pairs.py "$work"
rm -rf "$out" && mkdir -p "$out"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git rev-parse --short HEAD); corpus: $(find "$work/docs" -type f | wc -l) files, $(grep -vc '^#' "$work/pairs.tsv") pairs"
run() { # name, args...: a cold scan (human summary), then the labelled verdicts as JSON from the store
    local name=$1; shift
    /usr/bin/time -f "$name: wall %e s, max RSS %M KiB" "$bin" scan "$work/docs" --store "$out/state-$name" "$@" \
        --labels "$work/pairs.tsv" > "$out/$name.txt" 2> "$out/$name.err" || [ $? -eq 3 ]
    "$bin" scan "$work/docs" --store "$out/state-$name" "$@" --labels "$work/pairs.tsv" --json -q > "$out/$name.json" \
        2>/dev/null || [ $? -eq 3 ]
    tail -1 "$out/$name.err"
    cat "$out/$name.txt"
    echo
}
run minhash-seed --matchers minhash --minhash-calibration none
run minhash --matchers minhash
run combined --model "local:$minilm"
run combined-seed --model "local:$minilm" --minhash-calibration none --embedding-calibration none \
    --minhash-lsh-threshold 0.8
if [ -n "$before" ]; then
    echo "== before: $before (cold, combined, MiniLM)"
    /usr/bin/time -f "before: wall %e s" "$(realpath "$before")" scan "$work/docs" --store "$out/state-before" \
        --model "local:$minilm" --json -q > "$out/before.json" 2> "$out/before.err" || [ $? -eq 3 ]
    tail -1 "$out/before.err"
    python3 - "$out/before.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"before: new {s['new_documents']} embedded {s['embedded']} fingerprint {s['timings']['fingerprint_s']:.1f} s "
      f"= {s['docs_per_s']['fingerprint']} docs/s")
PY
fi
