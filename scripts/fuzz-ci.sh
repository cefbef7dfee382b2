#!/usr/bin/env bash
# Bounded fuzzing, as CI runs it: every cargo-fuzz target in fuzz/, from its
# committed seeds (fuzz/seeds/TARGET), for FUZZ_SECONDS each (default 20).
# A panic, an allocation over the RSS limit or an input slower than the
# per-input timeout fails the run; the input is printed (base64) and kept
# under fuzz/artifacts/TARGET/. Longer runs by hand: see fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# CI's lint wrapper (.ci/run) is for the workspace's build, not this one.
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
SECS="${FUZZ_SECONDS:-20}"
# The fuzz crate is outside the workspace: build it with the workspace's
# tested dependency versions (cargo adds libFuzzer's own).
cp Cargo.lock fuzz/Cargo.lock
# Built as the workspace's tests are (the dev profile: dependencies at
# opt-level 2, neardup's crates at 1 with debug assertions and overflow
# checks on), into the same target folder, with libFuzzer's instrumentation
# added to neardup's crates only (scripts/fuzz-rustc.sh): the dependencies
# the test build compiled are reused, not compiled again instrumented in
# release mode as `cargo fuzz build -O` does (bench/results/ci.md). No
# sanitizer: a panic aborts the run. Longer runs by hand use `cargo fuzz`
# (fuzz/README.md).
target_dir="$PWD/target"
NEARDUP_REPO_ROOT="$PWD" RUSTC_WRAPPER="$PWD/scripts/fuzz-rustc.sh" \
    cargo build --manifest-path fuzz/Cargo.toml --target-dir "$target_dir" --bins
cd fuzz
export BIN_DIR="$target_dir/debug"
# One target per core at a time (libFuzzer runs one process per target);
# each one's report is printed whole, in the order the targets end.
# Each may take up to its 3 GiB RSS limit: no more jobs than 4 GiB each allows.
mem_jobs=$(awk '/^MemTotal:/ { n = int($2 / 4194304); print (n < 1 ? 1 : n) }' /proc/meminfo)
JOBS="${FUZZ_JOBS:-$(( $(nproc) < mem_jobs ? $(nproc) : mem_jobs ))}"
fuzz_one() {
    local target=$1 corpus max_len
    corpus=$(mktemp -d)
    [ -d "seeds/$target" ] && cp -r "seeds/$target/." "$corpus/"
    # The repository's small document fixtures seed the text targets too.
    case "$target" in
        parse_document | normalize)
            find ../tests/fixtures/docs -type f -size -16k -exec cp {} "$corpus/" \; ;;
    esac
    case "$target" in
        parse_document | snapshot | saved_index | command_log) max_len=16384 ;;
        *) max_len=4096 ;;
    esac
    local ok=0 report
    report="== fuzz $target (${SECS}s, max_len $max_len, $(ls "$corpus" | wc -l) seeds)"$'\n'
    mkdir -p "artifacts/$target"
    if "$BIN_DIR/$target" "$corpus" -artifact_prefix="artifacts/$target/" \
        -max_total_time="$SECS" -max_len="$max_len" -rss_limit_mb=3072 -timeout=25 -print_final_stats=1 \
        2>"$corpus.log"; then
        report+="$(grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$corpus.log" | tr '\n' ' ')"
    else
        ok=1
        report+="$(tail -40 "$corpus.log")"
        for a in artifacts/"$target"/*; do
            [ -f "$a" ] && report+=$'\n'"-- $a (base64):"$'\n'"$(base64 -w0 "$a")"
        done
    fi
    rm -rf "$corpus" "$corpus.log"
    # One report at a time: a failure's (its log and inputs) is larger than
    # a pipe writes at once, and two would interleave.
    { flock 9; printf '%s\n' "$report"; } 9>>"$REPORT_LOCK"
    return $ok
}
export -f fuzz_one
REPORT_LOCK=$(mktemp)
trap 'rm -f "$REPORT_LOCK"' EXIT
export SECS REPORT_LOCK
# xargs exits non-zero when any target failed.
awk '/^\[\[bin\]\]/ { bin = 1; next } bin && /^name = / { gsub(/"/, "", $3); print $3; bin = 0 }' Cargo.toml | xargs -P "$JOBS" -I{} bash -c 'fuzz_one "$1"' _ {}
