#!/usr/bin/env bash
# Issue 13 benchmark: `neardup dedup` on the same records as plain JSONL,
# JSONL.zst, JSONL.gz and Parquet (snappy, and zstd, written by pyarrow, the
# most common producer); and saving / loading a saved index of 1 M items.
#
# Usage: bench/datasets.sh [OUT.md]   (needs python3 with pyarrow; zstd, gzip)
# Work files go to bench/work/datasets (about 6 GB at the 1 M step).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results/datasets.md}
work=bench/work/datasets
mkdir -p "$work"
cargo build --release -q -p neardup
bin=target/release/neardup
python3 -c 'import pyarrow' 2>/dev/null || { echo "needs pyarrow: pip install pyarrow" >&2; exit 2; }

# The same records in every format.
[ -s "$work/real.jsonl" ] || python3 bench/corpus/real.py "$work/real.jsonl" >/dev/null
zstd -q -f -3 "$work/real.jsonl" -o "$work/real.jsonl.zst"
gzip -c -6 "$work/real.jsonl" > "$work/real.jsonl.gz"
python3 - "$work" <<'PY'
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
work = sys.argv[1]
ids, texts = [], []
with open(f"{work}/real.jsonl") as f:
    for line in f:
        r = json.loads(line)
        ids.append(r["id"]); texts.append(r["text"])
t = pa.table({"id": ids, "text": texts})
pq.write_table(t, f"{work}/real.snappy.parquet", compression="snappy")
pq.write_table(t, f"{work}/real.zstd.parquet", compression="zstd")
PY

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
{
  echo "# Dataset inputs and the saved index (issue 13)"
  echo
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)"
  echo "- machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB"
  echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- command: \`bench/datasets.sh\` (release build, default pipeline, 2 threads)"
  echo
  echo "## The same records in each format"
  echo
  echo "The real corpus (\`bench/corpus/real.py\`: $(wc -l < "$work/real.jsonl") documents, $(du -m "$work/real.jsonl" | cut -f1) MB of JSONL); the"
  echo "median of 5 runs each, alternating formats. MB/s is of the plain JSONL's bytes (the same"
  echo "records), so the columns compare; \`read s\` is the reader thread's time (decompression and"
  echo "Parquet decoding included), which overlaps fingerprinting."
  echo
  echo "| input | file MB | seconds | MB/s (JSONL bytes) | vs plain | read s | pairs |"
  echo "|---|---|---|---|---|---|---|"
} > "$out"
jsonl_mb=$(python3 -c "import os;print(os.path.getsize('$work/real.jsonl')/1e6)")
declare -A secs reads pairs
formats="real.jsonl real.jsonl.zst real.jsonl.gz real.snappy.parquet real.zstd.parquet"
for rep in 1 2 3 4 5; do
  for f in $formats; do
    s=$("$bin" dedup "$work/$f" -q --json --threads 2)
    secs[$f]+="$(echo "$s" | python3 -c 'import json,sys;print(json.load(sys.stdin)["seconds"])') "
    reads[$f]+="$(echo "$s" | python3 -c 'import json,sys;print(json.load(sys.stdin)["timings"]["read_s"])') "
    pairs[$f]=$(echo "$s" | python3 -c 'import json,sys;print(json.load(sys.stdin)["verified_pairs"])')
  done
done
plain=$(echo ${secs[real.jsonl]} | tr ' ' '\n' | median)
for f in $formats; do
  m=$(echo ${secs[$f]} | tr ' ' '\n' | median)
  r=$(echo ${reads[$f]} | tr ' ' '\n' | median)
  mb=$(python3 -c "import os;print(f'{os.path.getsize(\"$work/$f\")/1e6:.1f}')")
  python3 -c "print(f'| $f | $mb | {$m:.3f} | {$jsonl_mb/$m:.1f} | {$plain/$m:.2f} | {$r:.3f} | ${pairs[$f]} |')" >> "$out"
done

# 1 M items: build the index in one run, then load it (--reference) for a
# run over a small input.
n_bases=${N_BASES:-250000}
[ -s "$work/m.jsonl" ] || "$bin" gen --out "$work/m.jsonl" --truth "$work/m.truth" --bases "$n_bases" --words 150 >/dev/null
head -n 1000 "$work/real.jsonl" > "$work/small.jsonl"
rm -rf "$work/idx"
build=$( { /usr/bin/time -f '%M' "$bin" dedup "$work/m.jsonl" -q --json --index "$work/idx" > "$work/build.json"; } 2>&1 | tail -1)
load=$( { /usr/bin/time -f '%M' "$bin" dedup "$work/small.jsonl" -q --json --reference "$work/idx" > "$work/load.json"; } 2>&1 | tail -1)
python3 - "$work" "$build" "$load" >> "$out" <<'PY'
import json, sys, os
work, build_kb, load_kb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
b = json.load(open(f"{work}/build.json")); l = json.load(open(f"{work}/load.json"))
i = b["index"]; items = i["items_after"]
print()
print("## The saved index at 1 M items")
print()
print(f"`neardup gen --bases {items // 4} --words 150` ({items} records, {os.path.getsize(work + '/m.jsonl') / 1e6:.0f} MB), deduplicated")
print("with `--index DIR` (which saves every item), then loaded with `--reference DIR` for a run")
print("over 1,000 other documents. Peak RSS from `/usr/bin/time -f %M`.")
print()
print("| step | items | seconds | index file MB | bytes/item | peak RSS MiB |")
print("|---|---|---|---|---|---|")
print(f"| dedup run (building) | {items} | {b['seconds']:.2f} | | | {build_kb / 1024:.0f} |")
print(f"| save (in that run) | {items} | {i['save_s']:.2f} | {i['bytes'] / 1e6:.0f} | {i['bytes'] / items:.0f} | |")
print(f"| load (`--reference`) | {l['index']['items_before']} | {l['index']['load_s']:.2f} | | | {load_kb / 1024:.0f} |")
print()
print("Raw summaries:")
print()
print("```json")
for name, s in (("build", b), ("load", l)):
    s = {k: v for k, v in s.items() if k not in ("rejected", "degraded", "kept_unresolved")}
    print(f"// {name}")
    print(json.dumps(s))
print("```")
PY
echo "wrote $out" >&2
