#!/usr/bin/env bash
# Documents/s for the parse, fingerprint and compare phases of `neardup scan`.
#
# Usage: crates/docs/bench/scan.sh [BINARY=target/release/neardup] [COUNT=300]
#
# Builds a corpus of COUNT mixed-format files (make_corpus.py, fixed seed),
# then runs: a cold MinHash scan (every file parsed), a warm re-scan (all
# cache hits, nothing new), a config change (stale store rebuilt from the parse
# cache), and, if target/minilm holds the MiniLM weights, a combined-matcher
# scan of the first 40 files. Prints each run's --json summary lines.
set -euo pipefail
bin=${1:-target/release/neardup}
count=${2:-300}
bin=$(realpath "$bin")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/make_corpus.py" "$work/corpus" "$count" 7 >&2
cd "$work"
run() {
    local label=$1; shift
    local start end
    start=$(date +%s.%N)
    "$bin" scan "$@" --json -q > out.json || [ $? -eq 3 ]
    end=$(date +%s.%N)
    python3 - "$label" "$start" "$end" <<'PY'
import json, sys
s = json.load(open("out.json"))
t, r = s["timings"], s["docs_per_s"]
print(f"{sys.argv[1]}: wall {float(sys.argv[3]) - float(sys.argv[2]):.2f}s | files {s['discovered']} parsed {s['parsed']} "
      f"cache_hits {s['cache_hits']} new {s['new_documents']} | comparisons {s['comparisons']} ({s['comparison_rule']}) | "
      f"parse {t['parse_s']:.3f}s = {r['parse']} docs/s | fingerprint {t['fingerprint_s']:.3f}s = {r['fingerprint']} docs/s | "
      f"compare {t['compare_s']:.3f}s = {r['compare']} docs/s | save {t['save_s']:.3f}s | "
      f"verdicts {s['verdicts']} | skipped {len(s['skipped'])}")
PY
}
run "cold minhash" corpus --store state --matchers minhash
run "warm re-scan" corpus --store state --matchers minhash
run "rebuild (lsh 0.7)" corpus --store state --matchers minhash --minhash-lsh-threshold 0.7
minilm=${NEARDUP_TEST_MINILM_DIR:-$here/../../../target/minilm}
if [ -s "$minilm/model.safetensors" ]; then
    mkdir -p small
    files=(corpus/*)
    cp "${files[@]:0:40}" small/
    run "cold embedding,minhash (40 files, local MiniLM)" small --store state2 --model "local:$(realpath "$minilm")"
fi
