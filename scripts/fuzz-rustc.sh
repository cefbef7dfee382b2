#!/usr/bin/env bash
# rustc wrapper for CI's fuzz build (scripts/fuzz-ci.sh): adds libFuzzer's
# coverage instrumentation and `--cfg fuzzing` — the flags `cargo fuzz`
# sets — to neardup's own crates only. Dependencies compile exactly as the
# workspace's test build compiled them, so the fuzz build reuses them
# instead of compiling the whole tree again, instrumented, in release mode
# (bench/results/ci.md). Usage: RUSTC_WRAPPER=scripts/fuzz-rustc.sh, with
# NEARDUP_REPO_ROOT set to the repository's absolute path.
set -euo pipefail
rustc=$1
shift
root=${NEARDUP_REPO_ROOT:?set NEARDUP_REPO_ROOT to the repository root}
flags=()
case "${CARGO_MANIFEST_DIR:-}" in
    "$root" | "$root"/*)
        name="" prev="" macro=0
        for a in "$@"; do
            [ "$prev" = --crate-name ] && name=$a
            [ "$prev" = --crate-type ] && [ "$a" = proc-macro ] && macro=1
            prev=$a
        done
        # Build scripts and proc macros run at compile time: not fuzzed.
        if [ "$macro" = 0 ] && [ "$name" != build_script_build ] && [ -n "$name" ]; then
            # Optimised as the dependencies are (the dev profile's 1 is for
            # a quick test build; libFuzzer wants speed), and without debug
            # assertions, as `cargo fuzz build -O` builds: with them, the
            # standard library's precondition checks inlined into hot loops
            # are instrumented too (normalize ran ~90 inputs/s, not ~13,000).
            # Overflow checks stay on: an overflow is a failure here.
            flags=(-Copt-level=2 -Cdebug-assertions=off -Coverflow-checks=on
                -Cpasses=sancov-module
                -Cllvm-args=-sanitizer-coverage-level=4
                -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
                -Cllvm-args=-sanitizer-coverage-pc-table
                -Cllvm-args=-sanitizer-coverage-trace-compares
                --cfg fuzzing)
        fi
        ;;
esac
exec "$rustc" "$@" "${flags[@]}"
