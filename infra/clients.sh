#!/usr/bin/env bash
# Real Postgres clients for the tests of `lkplake serve`: psql (Debian's postgresql-client) and
# Python psycopg 3 (PyPI). Installs each only when it is missing.
set -euo pipefail

if ! command -v psql >/dev/null 2>&1; then
    echo "installing postgresql-client (psql)..." >&2
    sudo_=""
    if [ "$(id -u)" != 0 ]; then sudo_="sudo"; fi
    $sudo_ apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq postgresql-client >/dev/null
fi

if ! python3 -c 'import psycopg' >/dev/null 2>&1; then
    echo "installing psycopg 3 (PyPI)..." >&2
    python3 -m pip install --quiet --disable-pip-version-check 'psycopg[binary]>=3.1'
fi
