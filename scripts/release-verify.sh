#!/usr/bin/env bash
# Verifies a release of neardup, one contract a line, on a clean clone:
#
#   bash scripts/release-verify.sh [--pubkey KEY.pub] [--binary PATH]
#                                  [--data-dir DIR] [--only NAME[,NAME...]]
#
# Contracts, in order:
#   build          builds the release binary (cargo build --release --locked
#                  -p neardup); with --binary PATH, uses that binary instead
#   binary         with --binary: PATH matches PATH.sha256 (release-sign.sh
#                  --binary wrote it) and, with --pubkey, its signature
#   checksums      every artifact of release/manifest.toml is listed in
#                  release/SHA256SUMS and matches it; a failure names the file
#   signature      with --pubkey KEY.pub: release/SHA256SUMS.sig is a valid
#                  `ssh-keygen -Y` signature of release/SHA256SUMS by that key
#                  (namespace neardup-release); skipped without --pubkey
#   demonstration  the seed's A/B/C demonstration (neardup eval --demo and
#                  the dedup one-liner of the README)
#   differential   a labelled corpus (neardup gen) and the differential
#                  fixture's texts, fast path against the exact oracle
#                  (neardup eval): precision 1, recall at the threshold at
#                  least 0.99, greedy decisions exact
#   rehearsal:*    on a copy of a data directory (--data-dir DIR, or one this
#                  script fills): restart, rebuild every tenant, roll the
#                  rebuild back, restart again; each step must answer as
#                  before, and the original directory must be untouched.
#                  `neardup serve` takes its other settings from the
#                  NEARDUP_* environment as in service (for example
#                  NEARDUP_SNAPSHOT_KEY_FILE for a sealed directory)
#
# Prints PASS, FAIL or SKIP and the contract's name per line, then a
# summary; exits 1 if any contract failed, 2 on a usage error. --only runs
# the named contracts (for example `--only checksums`). Writes only under a
# temporary folder (removed at exit) and, for the build, target/.
set -uo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
NAMESPACE=neardup-release
pubkey=""
binary=""
data_dir=""
only=""
while [ $# -gt 0 ]; do
    case "$1" in
        --pubkey) pubkey="$2"; shift 2 ;;
        --binary) binary="$2"; shift 2 ;;
        --data-dir) data_dir="$2"; shift 2 ;;
        --only) only=",$2,"; shift 2 ;;
        -h|--help) sed -n '2,36p' "$0"; exit 0 ;;
        *) echo "release-verify: unknown argument $1" >&2; exit 2 ;;
    esac
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/neardup-verify.XXXXXX")
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

passed=0
failed=0
failures=()
pass() { printf 'PASS %-22s %s\n' "$1" "$2"; passed=$((passed + 1)); }
fail() { printf 'FAIL %-22s %s\n' "$1" "$2"; failed=$((failed + 1)); failures+=("$1"); }
skip() { printf 'SKIP %-22s %s\n' "$1" "$2"; }
# Whether contract $1 runs (all of them without --only).
wanted() { [ -z "$only" ] || [[ "$only" == *",$1,"* ]] || [[ "$1" == rehearsal:* && "$only" == *",rehearsal,"* ]]; }

# The artifacts release/manifest.toml lists, in path order, without the
# checksum file and its signature (which cannot list themselves).
manifest_paths() {
    sed -n 's/^path = "\(.*\)"$/\1/p' release/manifest.toml | LC_ALL=C sort -u |
        grep -v -x -e 'release/SHA256SUMS' -e 'release/SHA256SUMS.sig'
}

# `ssh-keygen -Y verify` of file $1 against signature $2 with $pubkey.
verify_signature() {
    local allowed="$WORK/allowed_signers"
    printf 'release %s\n' "$(cat "$pubkey")" > "$allowed"
    ssh-keygen -Y verify -f "$allowed" -I release -n "$NAMESPACE" -s "$2" < "$1" > "$WORK/sigcheck.log" 2>&1
}

# ---------------------------------------------------------------- build
BIN=""
if wanted build || wanted demonstration || wanted differential || wanted rehearsal:restart; then
    if [ -n "$binary" ]; then
        if [ -x "$binary" ]; then
            BIN=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
            pass build "using $binary (not built here; the binary contract checks it)"
        else
            fail build "$binary is not an executable file"
        fi
    elif cargo build --release --locked -p neardup > "$WORK/build.log" 2>&1; then
        BIN="$ROOT/target/release/neardup"
        pass build "target/release/neardup ($("$BIN" --version 2>/dev/null), sha256 $(sha256sum "$BIN" | cut -c1-16)…)"
    else
        fail build "cargo build --release --locked -p neardup failed: $(tail -n 3 "$WORK/build.log" | tr '\n' ' ')"
    fi
fi

# ---------------------------------------------------------------- binary
if wanted binary; then
    if [ -z "$binary" ]; then
        skip binary "no --binary: the binary was built here from the checked sources"
    elif [ ! -f "$binary.sha256" ]; then
        fail binary "$binary.sha256 is missing (scripts/release-sign.sh --binary writes it)"
    elif ! (cd "$(dirname "$binary")" && sha256sum --quiet -c "$(basename "$binary").sha256" > /dev/null 2>&1); then
        fail binary "$binary does not match $binary.sha256"
    elif [ -n "$pubkey" ] && ! verify_signature "$binary.sha256" "$binary.sha256.sig"; then
        fail binary "$binary.sha256.sig does not verify with $pubkey: $(tr '\n' ' ' < "$WORK/sigcheck.log")"
    else
        pass binary "$binary matches $binary.sha256${pubkey:+, signature valid}"
    fi
fi

# ---------------------------------------------------------------- checksums
if wanted checksums; then
    if [ ! -f release/SHA256SUMS ]; then
        fail checksums "release/SHA256SUMS is missing (bash scripts/release-sign.sh writes it)"
    else
        bad=()
        declare -A listed=()
        while read -r sum path; do
            [ -z "$path" ] && continue
            listed["$path"]=1
            if [ ! -f "$path" ]; then
                bad+=("$path (missing)")
            elif [ "$(sha256sum < "$path" | cut -d' ' -f1)" != "$sum" ]; then
                bad+=("$path (sha256 differs)")
            fi
        done < release/SHA256SUMS
        n=0
        while read -r path; do
            n=$((n + 1))
            [ -n "${listed[$path]:-}" ] || bad+=("$path (in the manifest, not in release/SHA256SUMS)")
        done < <(manifest_paths)
        if [ "${#bad[@]}" -eq 0 ]; then
            pass checksums "$n artifacts match release/SHA256SUMS"
        else
            fail checksums "${bad[*]}"
        fi
    fi
fi

# ---------------------------------------------------------------- signature
if wanted signature; then
    if [ -z "$pubkey" ]; then
        skip signature "no --pubkey given"
    elif [ ! -f release/SHA256SUMS.sig ]; then
        fail signature "release/SHA256SUMS.sig is missing"
    elif verify_signature release/SHA256SUMS release/SHA256SUMS.sig; then
        pass signature "release/SHA256SUMS signed by $pubkey"
    else
        fail signature "release/SHA256SUMS.sig does not verify with $pubkey: $(tr '\n' ' ' < "$WORK/sigcheck.log")"
    fi
fi

# ---------------------------------------------------------------- demonstration
if wanted demonstration; then
    if [ -z "$BIN" ]; then
        fail demonstration "no binary"
    else
        "$BIN" eval --demo > "$WORK/demo.txt" 2>&1
        pairs=$(printf '%s\n' '{"id":"A","text":"red fox runs very fast"}' \
            '{"id":"B","text":"red fox runs very fast today"}' \
            '{"id":"C","text":"database backup completed nightly"}' |
            "$BIN" dedup - --normalizer seed --shingle-width 2 --threshold 0.75 --pairs - -q 2>&1)
        if grep -qx 'demonstration passed' "$WORK/demo.txt" && [ "$pairs" = "$(printf 'A\tB\t0.8')" ]; then
            pass demonstration "A~B at exact J 0.8, C distinct; neardup eval --demo passed"
        else
            fail demonstration "eval --demo: $(tail -n 1 "$WORK/demo.txt"); dedup pairs: ${pairs//$'\t'/ }"
        fi
    fi
fi

# ---------------------------------------------------------------- differential
# Checks one `neardup eval --json` report ($1) at threshold $2.
check_eval() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
t = float(sys.argv[2])
d = next(d for d in r["decisions"] if abs(d["threshold"] - t) < 1e-9)
g = r["greedy_decisions"]
problems = []
if d["precision"] != 1.0:
    problems.append(f"precision {d['precision']}")
if d["recall"] < 0.99:
    problems.append(f"recall {d['recall']:.4f} < 0.99")
if d["truth"] == 0:
    problems.append("no oracle pair at the threshold")
if g.get("recall", 1.0) != 1.0 or g.get("precision", 1.0) != 1.0:
    problems.append(f"greedy decisions {g}")
print("; ".join(problems) if problems else
      f"{d['true_positives']}/{d['truth']} oracle pairs at J >= {t}, precision 1, greedy decisions exact")
sys.exit(1 if problems else 0)
EOF
}

if wanted differential; then
    if [ -z "$BIN" ]; then
        fail differential "no binary"
    else
        ok=1
        detail=""
        if "$BIN" gen --out "$WORK/corpus.jsonl" --truth "$WORK/truth.jsonl" --bases 500 > /dev/null 2>&1 &&
            "$BIN" eval "$WORK/corpus.jsonl" --json --thresholds 0.8 > "$WORK/eval-gen.json" 2> "$WORK/eval-gen.log" &&
            line=$(check_eval "$WORK/eval-gen.json" 0.8); then
            detail="labelled corpus: $line"
        else
            ok=0
            detail="labelled corpus: ${line:-$(tail -n 2 "$WORK/eval-gen.log" | tr '\n' ' ')}"
        fi
        python3 - "$ROOT/tests/fixtures/differential/ops.json" > "$WORK/fixture.jsonl" <<'EOF'
import json, sys
texts = {}
for op in json.load(open(sys.argv[1]))["ops"]:
    item = op.get("item") or {}
    if op.get("op") == "upsert" and "content" in item:
        texts[item["item_id"]] = item["content"]
for k, v in texts.items():
    print(json.dumps({"id": k, "text": v}))
EOF
        line=""
        if "$BIN" eval "$WORK/fixture.jsonl" --json --shingle-width 3 --threshold 0.6 --thresholds 0.6 \
            > "$WORK/eval-fixture.json" 2> "$WORK/eval-fixture.log" &&
            line=$(check_eval "$WORK/eval-fixture.json" 0.6); then
            detail="$detail; differential fixture: $line"
        else
            ok=0
            detail="$detail; differential fixture: ${line:-$(tail -n 2 "$WORK/eval-fixture.log" | tr '\n' ' ')}"
        fi
        if [ "$ok" = 1 ]; then pass differential "$detail"; else fail differential "$detail"; fi
    fi
fi

# ---------------------------------------------------------------- rehearsal
if wanted rehearsal:restart || wanted rehearsal:rebuild || wanted rehearsal:rollback || wanted rehearsal:original; then
    if [ -z "$BIN" ]; then
        fail rehearsal:restart "no binary"
    else
        export NEARDUP_ADMIN_TOKEN="release-verify-$$-operator-token"
        if [ -n "$data_dir" ]; then
            original="$data_dir"
        else
            original="$WORK/data"
            "$BIN" gen --out "$WORK/rehearse.jsonl" --truth "$WORK/rehearse-truth.jsonl" --bases 40 > /dev/null 2>&1
        fi
        BIN="$BIN" ORIGINAL="$original" WORK="$WORK" FILL="$([ -z "$data_dir" ] && echo 1)" \
            python3 - > "$WORK/rehearsal.txt" 2> "$WORK/rehearsal.log" <<'EOF'
# Restart, rebuild and roll back on a copy of a data directory; one line
# per contract: NAME<TAB>ok|fail<TAB>detail.
import hashlib, json, os, shutil, signal, subprocess, urllib.parse, urllib.request

BIN, ORIGINAL, WORK = os.environ["BIN"], os.environ["ORIGINAL"], os.environ["WORK"]
TOKEN = os.environ["NEARDUP_ADMIN_TOKEN"]

def start(data):
    p = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--data-dir", data, "--fsync", "always",
                          "--checkpoint-interval-secs", "0", "--log-format", "text"],
                         stdout=subprocess.PIPE, stderr=open(os.path.join(WORK, "serve.log"), "a"), text=True)
    line = p.stdout.readline().strip()
    if not line.startswith("listening on "):
        p.kill()
        raise SystemExit(f"serve did not start: {line!r}")
    return p, line.removeprefix("listening on ")

def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)

def q(s):
    return urllib.parse.quote(s, safe="")

def call(addr, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{addr}{path}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        raw = r.read()
        return json.loads(raw) if raw else None

def answers(addr):
    """Every tenant's live ids, and the verified candidates of up to 50 of them."""
    out = {}
    for t in call(addr, "GET", "/v1/tenants")["tenants"]:
        ids, after = [], None
        while True:
            page = call(addr, "GET", f"/v1/tenants/{q(t)}/items?limit=1000" + (f"&after={q(after)}" if after else ""))
            ids += [i["item_id"] for i in page["items"]]
            after = page.get("next_after")
            if not after:
                break
        cands = {}
        for i in ids[:50]:
            c = call(addr, "GET", f"/v1/tenants/{q(t)}/items/{q(i)}/candidates")
            cands[i] = sorted((x["item_id"], x["score"]) for x in c.get("candidates", []))
        out[t] = {"ids": ids, "candidates": cands}
    return out

def report(name, ok, detail):
    print(f"{name}\t{'ok' if ok else 'fail'}\t{detail}", flush=True)

if os.environ.get("FILL"):
    p, addr = start(ORIGINAL)
    call(addr, "POST", "/v1/tenants", {"tenant_id": "t1", "config": {"normalizer": "seed", "shingle_width": 2,
                                                                       "threshold": 0.75}})
    items = [json.loads(l) for l in open(os.path.join(WORK, "rehearse.jsonl"))]
    for i in range(0, len(items), 64):
        call(addr, "POST", "/v1/tenants/t1/items",
             {"items": [{"item_id": x["id"], "content": x["text"]} for x in items[i:i + 64]]})
    call(addr, "POST", "/v1/tenants/t1/compact")
    stop(p)

def digest(folder):
    """SHA-256 of every file under `folder`, by relative path."""
    out = {}
    for d, _, files in os.walk(folder):
        for f in files:
            path = os.path.join(d, f)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, folder)] = hashlib.sha256(fh.read()).hexdigest()
    return out

original_digest = digest(ORIGINAL)
copy = os.path.join(WORK, "copy")
shutil.copytree(ORIGINAL, copy, symlinks=True)
p, addr = start(copy)
before = answers(addr)
n = sum(len(v["ids"]) for v in before.values())
stop(p)
p, addr = start(copy)
again = answers(addr)
probes = sum(len(c) for v in before.values() for c in v["candidates"].values())
report("rehearsal:restart", again == before and probes > 0,
       f"{len(before)} tenants, {n} items; {probes} verified candidates of up to 50 items a tenant answer as "
       "before after a restart")
for t in before:
    call(addr, "POST", f"/v1/tenants/{q(t)}/rebuild", {"config": {}})
rebuilt = answers(addr)
stop(p)
p, addr = start(copy)
rebuilt_restarted = answers(addr)
report("rehearsal:rebuild", rebuilt == before and rebuilt_restarted == before,
       "every tenant rebuilt from its records under its configuration; same answers, and after a restart")
for t in before:
    call(addr, "POST", f"/v1/tenants/{q(t)}/rollback")
rolled = answers(addr)
stop(p)
p, addr = start(copy)
rolled_restarted = answers(addr)
stop(p)
report("rehearsal:rollback", rolled == before and rolled_restarted == before,
       "every rebuild rolled back; same answers, and after a restart")
report("rehearsal:original", digest(ORIGINAL) == original_digest,
       f"{ORIGINAL if not os.environ.get('FILL') else 'the original data directory'} untouched: "
       f"{len(original_digest)} files, only its copy was served")
EOF
        status=$?
        if [ "$status" -ne 0 ] || [ ! -s "$WORK/rehearsal.txt" ]; then
            fail rehearsal:restart "the rehearsal stopped: $(tail -n 3 "$WORK/rehearsal.log" | tr '\n' ' ')"
        fi
        while IFS=$'\t' read -r name result detail; do
            if [ "$result" = ok ]; then pass "$name" "$detail"; else fail "$name" "$detail"; fi
        done < "$WORK/rehearsal.txt"
    fi
fi

echo "release-verify: $passed passed, $failed failed${failures[*]:+ (${failures[*]})}"
[ "$failed" -eq 0 ]
