#!/usr/bin/env bash
# Make PostgreSQL server binaries available for the reliability tests (Debian/Ubuntu).
# Idempotent and quiet: does nothing when initdb is already installed.
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-postgres: apt-get not found; install PostgreSQL yourself" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq postgresql >/dev/null
