#!/usr/bin/env bash
# The Spark job and `neardup dedup` on a large corpus from real text, on the
# same two cores (issue 42). Run by hand; results in bench/results/spark.md.
#
#   bash bench/spark-scale.sh N [WORK_DIR]
#   STANDALONE=1 bash bench/spark-scale.sh N [WORK_DIR]
#
# Builds (once) N documents with bench/corpus/large.py as one Parquet file
# (`id`, `text`), runs `neardup dedup` (target/release/neardup, 2 threads)
# and `python -m neardup.spark` on local[2] with the same settings, each
# under bench/rss_tree.py for wall time and peak memory, sums Spark's event
# log (shuffle bytes, task memory), and compares the outputs
# (bench/spark_cmp.py). Needs `pip install ./python` (release) and Java.
# STANDALONE=1 runs the job on a Spark standalone cluster on loopback
# instead: a master and two workers of one core and 2 GiB each (pyspark's
# own jars), with executors of 1 GiB; the CLI run is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:?documents}"
W="${2:-/tmp/spark-scale}"
BIN="${NEARDUP_BIN:-$PWD/target/release/neardup}"
mkdir -p "$W"
export SPARK_LOCAL_IP=127.0.0.1
[ -s "$W/real.jsonl" ] || python3 bench/corpus/real.py "$W/real.jsonl"
IN="$W/large-$N.parquet"
if [ ! -s "$IN" ]; then
    python3 bench/corpus/large.py "$W/real.jsonl" "$N" | python3 -c '
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
schema = pa.schema([("id", pa.string()), ("text", pa.string())])
with pq.ParquetWriter(sys.argv[1], schema) as w:
    ids, texts = [], []
    for line in sys.stdin:
        r = json.loads(line)
        ids.append(r["id"]); texts.append(r["text"])
        if len(ids) == 50_000:
            w.write_table(pa.table([ids, texts], schema=schema)); ids, texts = [], []
    if ids:
        w.write_table(pa.table([ids, texts], schema=schema))
' "$IN"
fi
ls -l "$IN"
echo "== machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/Mem:/ {print $2}') GiB"
echo "== commit $(git rev-parse --short HEAD); $("$BIN" --version)"
MASTER='local[2]'
if [ -n "${STANDALONE:-}" ]; then
    SPARK_HOME=$(python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
    export SPARK_HOME PYSPARK_PYTHON=python3 SPARK_LOG_DIR="$W/standalone-logs" SPARK_WORKER_DIR="$W/standalone-work"
    MASTER=spark://127.0.0.1:7177
    pids=()
    trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
    "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master --host 127.0.0.1 --port 7177 \
        --webui-port 8180 > "$W/standalone.log" 2>&1 &
    pids+=($!)
    for port in 8181 8182; do
        "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker "$MASTER" --host 127.0.0.1 \
            --cores 1 --memory 2g --webui-port $port >> "$W/standalone.log" 2>&1 &
        pids+=($!)
    done
    until [ "$(grep -c 'Registering worker' "$W/standalone.log")" -ge 2 ]; do sleep 1; done
    SPARK_ARGS="--conf spark.executor.memory=1g ${SPARK_ARGS:-}"
else
    echo "== neardup dedup --threads 2"
    python3 bench/rss_tree.py "$BIN" dedup "$IN" --threads 2 --json -q -o /dev/null
fi
rm -rf "$W/out-$N" "$W/events-$N"; mkdir -p "$W/events-$N"
echo "== python -m neardup.spark --master $MASTER"
python3 bench/rss_tree.py python3 -m neardup.spark --input "$IN" --output "$W/out-$N" --master "$MASTER" \
    --conf spark.eventLog.enabled=true --conf "spark.eventLog.dir=file://$W/events-$N" \
    --conf spark.eventLog.logStageExecutorMetrics=true --conf spark.eventLog.compress=false ${SPARK_ARGS:-}
python3 bench/spark_eventlog.py "$W/events-$N"/*
echo "== equal to the command line's outputs?"
(cd "$W" && NEARDUP_BIN="$BIN" python3 "$OLDPWD/bench/spark_cmp.py" "$IN" "out-$N")
