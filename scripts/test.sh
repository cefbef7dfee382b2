#!/usr/bin/env bash
# The project's test command (README: "Run the tests"). Builds everything
# and runs every test of every crate, including the real-corpus accuracy
# test, the crash tests and the embedding tests with real weights.
set -euo pipefail
cd "$(dirname "$0")/.."
export NEARDUP_TEST_MINILM_DIR="${NEARDUP_TEST_MINILM_DIR:-$PWD/target/minilm}"
[ -s "$NEARDUP_TEST_MINILM_DIR/model.safetensors" ] || bash scripts/fetch-minilm.sh "$NEARDUP_TEST_MINILM_DIR"
bash scripts/install-nats.sh
cargo test --workspace --locked --no-fail-fast
# The Python package (pip builds it with maturin; pytest runs it against the CLI).
bash scripts/test-python.sh
# The review console in a real headless Chromium (Selenium).
bash scripts/test-browser.sh
