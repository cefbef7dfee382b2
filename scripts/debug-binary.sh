#!/usr/bin/env bash
# Builds target/debug/neardup, the binary the Python, console and API
# suites drive. Under CI's lint wrapper (.ci/run sets
# RUSTC_WORKSPACE_WRAPPER for the workspace's test build) it is the test
# build's own binary: `cargo test --no-run` with the same wrapper finds
# it fresh and compiles nothing, where a build of the package alone would
# compile the workspace's crates again (other fingerprints, other
# features). Without the wrapper, the package alone.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${RUSTC_WORKSPACE_WRAPPER:-}" ]; then
    cargo test --workspace --all-targets --locked --no-run -q
else
    cargo build --locked -q -p neardup
fi
