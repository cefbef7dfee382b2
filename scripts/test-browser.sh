#!/usr/bin/env bash
# The review console's browser tests: a real headless Chromium (Debian's
# chromium and chromium-driver) driven by Selenium (PyPI) against the
# `neardup` binary cargo built. Installs what is missing. Called by
# scripts/test.sh. NEARDUP_CONSOLE_SCREENSHOTS=docs/console also saves the
# screenshots the README shows.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    echo "installing chromium and chromium-driver from Debian (for the console's browser tests)" >&2
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver
fi
chromium --version
python3 -c 'import selenium' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check "selenium>=4.20,<5"
python3 -c 'import pytest' 2>/dev/null || python3 -m pip install --quiet --disable-pip-version-check pytest
bash scripts/debug-binary.sh
# Selenium must not look for (or download) a driver: the test names Debian's.
export SE_OFFLINE=true SE_AVOID_STATS=true
NEARDUP_BIN="$PWD/target/debug/neardup" python3 -m pytest -q tests/browser
