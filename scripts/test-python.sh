#!/usr/bin/env bash
# The Python package's checks and tests: format and lint its Rust crate,
# build and install ./python (maturin, fetched by pip), and run pytest
# against the `neardup` binary cargo built. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
(cd python && cargo fmt --check && cargo clippy --locked --all-targets -q -- -D warnings)
cargo build --locked -q -p neardup
python3 -m pip install --quiet --disable-pip-version-check ./python
python3 -c 'import pytest' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pytest
NEARDUP_BIN="$PWD/target/debug/neardup" python3 -m pytest -q python/tests
