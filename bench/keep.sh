#!/usr/bin/env bash
# What a keeper policy costs: neardup dedup on the dense real corpus
# (bench/corpus/real.py --dense) with --keep first and --keep longest, in
# memory and under --memory-limit, ROUNDS times, alternating, with the same
# binary. Under a policy every record is read before any is decided, and
# kept rows are written in a second read; a bounded run also reads the
# input once more to order it.
#
# Usage: NEARDUP_BIN=target/release/neardup ROUNDS=3 bash bench/keep.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${NEARDUP_BIN:-target/release/neardup}
ROUNDS=${ROUNDS:-3}
LIMIT=${LIMIT:-256M}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 bench/corpus/real.py "$work/real.jsonl" --dense 2>/dev/null
echo "date: $(date -u +%F); commit: $(git rev-parse --short HEAD); $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
echo "corpus: $(wc -l <"$work/real.jsonl") documents, $(du -b "$work/real.jsonl" | cut -f1) bytes; bounded runs: --memory-limit $LIMIT"
echo "| round | engine | --keep | seconds | peak RSS MB | kept |"
echo "|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
    for engine in memory bounded; do
        limit=none
        [ "$engine" = bounded ] && limit=$LIMIT
        for keep in first longest; do
            /usr/bin/time -f "%e %M" -o "$work/t" "$BIN" dedup "$work/real.jsonl" -q --json --keep "$keep" \
                --memory-limit "$limit" --work-dir "$work" -o "$work/kept.jsonl" >"$work/summary.json"
            read -r secs rss <"$work/t"
            kept=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['kept'])" "$work/summary.json")
            echo "| $round | $engine | $keep | $secs | $((rss / 1024)) | $kept |"
        done
    done
done
