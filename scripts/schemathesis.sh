#!/usr/bin/env bash
# Fuzz the running service against its own /openapi.json with schemathesis.
#
# Starts `neardup serve` on a free loopback port with a throw-away data dir,
# creates tenant t1, runs schemathesis with the tenant's key (the `tenant`
# path parameter pinned to t1 so requests reach real state), then stops
# the server with SIGTERM. Bounded: MAX_EXAMPLES per operation (default 25).
#
#   pip install schemathesis          # tested with 4.32
#   cargo build --release -p neardup
#   scripts/schemathesis.sh           # MAX_EXAMPLES=100 scripts/schemathesis.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${NEARDUP_BIN:-target/release/neardup}
MAX_EXAMPLES=${MAX_EXAMPLES:-25}
CHECKS=${CHECKS:-not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance,ignored_auth}
# The console script of the Python that pip installed into (on PATH or not).
SCHEMATHESIS=${SCHEMATHESIS:-$(command -v schemathesis ||
  python3 -c 'import os,sys; print(os.path.join(os.path.dirname(sys.executable), "schemathesis"))')}
WORK=$(mktemp -d)
export NEARDUP_ADMIN_TOKEN="schemathesis-operator-token-$$"
"$BIN" serve --listen 127.0.0.1:0 --data-dir "$WORK/data" --fsync os --log-format json \
  --rate-limit-rps 100000 --rate-limit-burst 100000 >"$WORK/out" 2>"$WORK/server.log" &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do grep -q '^listening on' "$WORK/out" 2>/dev/null && break; sleep 0.1; done
ADDR=$(sed -n 's/^listening on //p' "$WORK/out")
URL="http://$ADDR"
KEY=$(curl -sf -X POST "$URL/v1/tenants" -H "Authorization: Bearer $NEARDUP_ADMIN_TOKEN" \
  -H 'Content-Type: application/json' \
  -d '{"tenant_id":"t1","config":{"normalizer":"seed","shingle_width":2,"threshold":0.75}}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"])')
for i in A B C; do
  curl -sf -o /dev/null -X PUT "$URL/v1/tenants/t1/items/$i" -H "Authorization: Bearer $KEY" \
    -H 'Content-Type: application/json' -d "{\"content\":\"red fox runs very fast $i\"}"
done
cat >"$WORK/schemathesis.toml" <<TOML
[parameters]
"path.tenant" = "t1"
TOML
set +e
"$SCHEMATHESIS" --config-file "$WORK/schemathesis.toml" run "$URL/openapi.json" \
  --header "Authorization: Bearer $KEY" \
  --max-examples "$MAX_EXAMPLES" --checks "$CHECKS" \
  --generation-deterministic --request-timeout 30
RC=$?
set -e
if grep -q '"level":"ERROR"' "$WORK/server.log"; then
  echo "server logged errors:"; grep '"level":"ERROR"' "$WORK/server.log" | head -20
fi
exit $RC
