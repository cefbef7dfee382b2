#!/usr/bin/env bash
# Installs Debian's nats-server (the cluster tests start their own servers
# on loopback) unless one is on PATH or NEARDUP_NATS_SERVER names one.
set -euo pipefail
if [ -n "${NEARDUP_NATS_SERVER:-}" ] || command -v nats-server >/dev/null 2>&1; then
    exit 0
fi
echo "installing nats-server from Debian (for the cluster tests)" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nats-server
nats-server --version
