#!/usr/bin/env bash
# Regenerates the committed seed corpora under fuzz/seeds/<target>/ from
# real files neardup writes (a command log, a snapshot, a key file, a saved
# index, a parse-cache entry) and the repository's document fixtures. Run
# by hand after a format changes: bash fuzz/make-seeds.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked -q -p neardup
BIN=$PWD/target/debug/neardup
SEEDS=$PWD/fuzz/seeds
WORK=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT
rm -rf "$SEEDS"
mkdir -p "$SEEDS"/{command_log,snapshot,keys_file,saved_index,config_file,jsonl_record,parse_document,normalize,parse_cache,replica_entry}

# A service: a tenant, items (one near duplicate, one tombstoned), then a
# snapshot download, and SIGKILL so the command log is left as written.
export NEARDUP_ADMIN_TOKEN=seed-operator-token-0123456789
"$BIN" serve --listen 127.0.0.1:0 --data-dir "$WORK/data" --log-format text --checkpoint-interval-secs 0 \
    >"$WORK/out" 2>"$WORK/log" &
SERVER=$!
for _ in $(seq 100); do grep -q "listening on" "$WORK/out" && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$WORK/out")
api() { curl -sf -X "$1" "http://$ADDR$2" -H "authorization: Bearer $NEARDUP_ADMIN_TOKEN" \
    -H 'content-type: application/json' ${3:+-d "$3"}; }
api POST /v1/tenants '{"tenant_id":"t1","config":{"normalizer":"seed","shingle_width":2,"threshold":0.75}}' >/dev/null
api PUT /v1/tenants/t1/items/A '{"content":"red fox runs very fast"}' >/dev/null
api PUT /v1/tenants/t1/items/B '{"content":"red fox runs very fast today","idempotency_key":"k1"}' >/dev/null
api PUT /v1/tenants/t1/items/C '{"content":"Der schnelle braune Fuchs springt über den faulen Hund"}' >/dev/null
api DELETE "/v1/tenants/t1/items/A?epoch=1" >/dev/null
api POST /v1/tenants/t1/labels '{"left":"B","right":"C","label":"distinct","rationale":"different text"}' >/dev/null || true
curl -sf "http://$ADDR/v1/tenants/t1/snapshot" -H "authorization: Bearer $NEARDUP_ADMIN_TOKEN" -o "$SEEDS/snapshot/t1.snap"
kill -9 $SERVER
wait $SERVER 2>/dev/null || true
cp "$WORK"/data/wal/*.log "$SEEDS/command_log/"
cp "$WORK/data/keys.json" "$SEEDS/keys_file/"

# A saved index of a small real-text dataset.
head -c 6000 tests/fixtures/docs/paper.txt | tr '\n' ' ' | fold -w 300 |
    python3 -c 'import json,sys; [print(json.dumps({"id": f"d{i}", "text": l.strip()})) for i, l in enumerate(sys.stdin)]' \
    >"$WORK/docs.jsonl"
"$BIN" dedup "$WORK/docs.jsonl" --index "$WORK/index" -o /dev/null >/dev/null 2>&1
cp "$WORK/index/index.ndx" "$SEEDS/saved_index/"
head -5 "$WORK/docs.jsonl" >"$SEEDS/jsonl_record/docs.jsonl"
printf '{"id":"x","text":"caf\\u00e9 \\ud83e\\udd8a"}\n{"text":null}\n{"id":1,"text":"a","text":"b"}\n' \
    >"$SEEDS/jsonl_record/edge.jsonl"

# A parse-cache entry written by a scan.
mkdir -p "$WORK/docs"
cp tests/fixtures/docs/unrelated-harbour.html tests/fixtures/docs/unrelated-orchestra.txt "$WORK/docs/"
(cd "$WORK" && "$BIN" scan docs >/dev/null 2>&1)
find "$WORK/.neardup/cache" -name '*.json' | head -2 | while read -r f; do cp "$f" "$SEEDS/parse_cache/"; done

cat >"$SEEDS/config_file/serve.toml" <<'EOF'
listen = "0.0.0.0:9000"
fsync = "everysec"
store = "fjall"
max_body_bytes = 1048576
rate_limit_rps = 100.0
checkpoint_interval_secs = 60
cluster = "nats://127.0.0.1:4222,nats://127.0.0.1:4223"
node_id = "node-1"
partitions = 4
serve_partitions = "0,2-3"
advertise_url = "http://10.0.0.5:9000"
EOF

# (scripts/fuzz-ci.sh adds tests/fixtures/docs' small files to these two.)
head -c 8192 tests/fixtures/docs/paper.pdf >"$SEEDS/parse_document/paper-head.pdf"
printf 'Ｆｕｌｌｗｉｄｔｈ ﬁ ligature, e\xcc\x81 combining, İstanbul, ΣΊΣΥΦΟΣ, 東京は日本の首都です。' \
    >"$SEEDS/normalize/unicode.txt"

# Replicated-log entries as the replica_entry target reads them: each the
# tenant its subject names (1-byte length, "t1"), a 2-byte length, then the
# entry (8-byte "after": the tenant's previous entry, then one command), the commands taken from the log above
# (docs/index-format.md: 24-byte segment header, records of length, CRC,
# LSN, payload).
python3 - "$SEEDS/command_log" "$SEEDS/replica_entry/entries" <<'EOF'
import pathlib, struct, sys
seg = next(pathlib.Path(sys.argv[1]).glob("*.log")).read_bytes()
at, after, out = 24, 0, b""
while at + 16 <= len(seg):
    n, _crc, lsn = struct.unpack_from("<IIQ", seg, at)
    payload = seg[at + 16:at + 16 + n]
    entry = struct.pack("<Q", after) + payload
    out += bytes([2]) + b"t1" + struct.pack("<H", len(entry)) + entry
    after, at = lsn, at + 16 + n
pathlib.Path(sys.argv[2]).write_bytes(out)
EOF
du -sh "$SEEDS"/*
