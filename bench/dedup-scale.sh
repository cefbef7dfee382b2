#!/usr/bin/env bash
# `neardup dedup` in memory and under --memory-limit on large corpora made
# from real text (bench/corpus/large.py): peak RSS, time per phase, disk
# used, and whether both engines give the same pairs, drops and kept rows.
#
# Usage: bash bench/dedup-scale.sh WORK_DIR N [LIMIT] [--no-memory|--memory-probe]
#   N: documents (e.g. 1000000); LIMIT: --memory-limit (default 1G);
#   --no-memory skips the in-memory run (when it would not fit);
#   --memory-probe runs it anyway, without outputs, sampling its resident
#   set and the compressed input it has read every 5 s until it ends (or
#   the kernel ends it), to say how far it gets.
# KEPT=PATH writes the bounded run's kept rows there instead of WORK_DIR
# (e.g. a symlink named *.jsonl.zst to /dev/null when the disk is short:
# the rows are still compressed and written, then thrown away).
# Needs a release build (cargo build --release -p neardup), python3, zstd
# and GNU time. Prints a markdown table row and the raw summaries.
set -euo pipefail
work=$1
n=$2
limit=${3:-1G}
skip_memory=${4:-}
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/target/release/neardup"
mkdir -p "$work"
[ -s "$work/real.jsonl" ] || python3 "$root/bench/corpus/real.py" "$work/real.jsonl" >/dev/null
corpus="$work/large-$n.jsonl.zst"
if [ ! -s "$corpus" ]; then
  python3 "$root/bench/corpus/large.py" "$work/real.jsonl" "$n" | zstd -q -T2 -o "$corpus.tmp"
  mv "$corpus.tmp" "$corpus"
fi
echo "corpus: $corpus ($(du -mL "$corpus" | cut -f1) MB zstd, $n documents)"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; commit $(git -C "$root" rev-parse --short HEAD); $(date -u +%F)"

run() { # tag, extra args...
  local tag=$1; shift
  local kept=${KEPT:-$work/$tag.kept.jsonl.zst}
  /usr/bin/time -f "%e %M" -o "$work/$tag.time" "$bin" dedup "$corpus" -q --json \
    --pairs "$work/$tag.pairs" --dropped "$work/$tag.dropped" -o "$kept" "$@" \
    > "$work/$tag.json"
  read -r secs kb < "$work/$tag.time"
  echo "$tag: ${secs} s, peak RSS $((kb / 1024)) MiB"
  python3 - "$work/$tag.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"  records {d['records']}, kept {d['kept']}, pairs {d['verified_pairs']}, capped {d['capped_queries']}, "
      f"clusters {d['clusters']}, {d['mb_per_s']:.1f} MB/s")
for p in (d.get("memory") or {}).get("phases", []):
    print(f"  phase {p['name']}: {p['seconds']:.1f} s, {p['disk_bytes'] / 1e9:.2f} GB written, "
          f"peak {p['peak_rss_bytes'] / 2**20:.0f} MiB")
EOF
}

run "bounded-$n" --memory-limit "$limit" --work-dir "$work"
if [ "$skip_memory" = "--memory-probe" ]; then
  size=$(stat -Lc %s "$corpus")
  "$bin" dedup "$corpus" -q --memory-limit none > /dev/null 2> "$work/probe-$n.err" &
  pid=$!
  start=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
    read_b=$(awk '/rchar/ {print $2}' "/proc/$pid/io" 2>/dev/null || true)
    [ -n "$rss" ] && [ -n "$read_b" ] && echo "probe: $((SECONDS - start)) s, RSS $((rss / 1024)) MiB, read $((read_b / 1048576)) MiB of $((size / 1048576)) MiB"
    sleep 5
  done
  rc=0; wait "$pid" || rc=$?
  echo "probe: in-memory run ended with status $rc after $((SECONDS - start)) s"
  tail -3 "$work/probe-$n.err"
elif [ "$skip_memory" != "--no-memory" ]; then
  run "memory-$n" --memory-limit none
  for f in pairs dropped; do
    cmp -s "$work/memory-$n.$f" "$work/bounded-$n.$f" && echo "--$f: same" || echo "--$f: DIFFERENT"
  done
  cmp -s <(zstd -dc "$work/memory-$n.kept.jsonl.zst") <(zstd -dc "$work/bounded-$n.kept.jsonl.zst") \
    && echo "kept rows: same" || echo "kept rows: DIFFERENT"
fi
