#!/usr/bin/env bash
# Installs promtool (from Debian's prometheus package) for the alert-rule
# tests (crates/cli/tests/deploy_files.rs) unless one is on PATH or
# NEARDUP_PROMTOOL names one. Only the promtool binary is taken from the
# package (apt-get download, dpkg-deb -x): the Prometheus server, its
# service and its web assets are not installed.
set -euo pipefail
if [ -n "${NEARDUP_PROMTOOL:-}" ] || command -v promtool >/dev/null 2>&1; then
    exit 0
fi
echo "installing promtool from Debian's prometheus package (for the alert-rule tests)" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$SUDO apt-get update -qq
(cd "$work" && apt-get download -qq prometheus)
dpkg-deb -x "$work"/prometheus_*.deb "$work/root"
$SUDO install -m 0755 "$work/root/usr/bin/promtool" /usr/local/bin/promtool
promtool --version
