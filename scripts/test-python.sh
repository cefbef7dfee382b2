#!/usr/bin/env bash
# The Python package's checks and tests: format and lint its Rust crate,
# build and install ./python (maturin, fetched by pip), install what the
# Spark job's tests need, and run pytest against the `neardup` binary cargo
# built. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
(cd python && cargo fmt --check)
bash scripts/debug-binary.sh
# The extension (another workspace, one library crate) is linted while
# pip builds it (scripts/lint-env.sh), its dependencies compiled once, in
# release mode. A finding fails the install, and so this stage.
(source scripts/lint-env.sh && python3 -m pip install --quiet --disable-pip-version-check ./python)
unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
python3 -c 'import pytest' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pytest
# The event feed's tests validate every event with the JSON Schema package.
python3 -c 'import jsonschema' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check jsonschema
# The Spark job's tests: Java 17 (Debian) and PyPI's pyspark with its
# Arrow exchange (PyArrow, pandas).
bash scripts/install-java.sh
python3 -c 'import pyspark, pyarrow, pandas' 2>/dev/null ||
    python3 -m pip install --quiet --disable-pip-version-check "pyspark[sql]>=4,<5"
# Spark talks only to loopback.
export SPARK_LOCAL_IP=127.0.0.1
NEARDUP_BIN="$PWD/target/debug/neardup" python3 -m pytest -q python/tests
