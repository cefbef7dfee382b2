#!/usr/bin/env bash
# The project's test command (README: "Run the tests"). Builds everything
# and runs every test of every crate, including the real-corpus accuracy
# test, the crash tests and the embedding tests with real weights, then the
# Python package's and the console's. Every suite runs even when an earlier
# one fails; a table at the end says which failed, and the exit status is
# non-zero if any did.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/stages.sh
export NEARDUP_TEST_MINILM_DIR="${NEARDUP_TEST_MINILM_DIR:-$PWD/target/minilm}"
setup() {
    [ -s "$NEARDUP_TEST_MINILM_DIR/model.safetensors" ] || bash scripts/fetch-minilm.sh "$NEARDUP_TEST_MINILM_DIR"
    bash scripts/install-nats.sh
    bash scripts/install-promtool.sh
    bash scripts/install-seaweedfs.sh
}
stage "test setup (MiniLM weights, nats-server, promtool, SeaweedFS)" setup
stage "Rust tests (cargo test --workspace)" cargo test --workspace --locked --no-fail-fast
# The Python package (pip builds it with maturin; pytest runs it against the CLI).
stage "Python package and Spark job (pytest)" bash scripts/test-python.sh
# The review console in a real headless Chromium (Selenium).
stage "review console (headless Chromium)" bash scripts/test-browser.sh
stages_report
