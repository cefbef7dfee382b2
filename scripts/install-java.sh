#!/usr/bin/env bash
# Installs Debian's Java 17 runtime (the Spark job's tests run PySpark on
# local[2]) unless a java is on PATH.
set -euo pipefail
if command -v java >/dev/null 2>&1; then
    exit 0
fi
echo "installing openjdk-17-jre-headless from Debian (for the Spark tests)" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless
java -version
