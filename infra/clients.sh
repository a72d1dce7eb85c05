#!/usr/bin/env bash
# Real Postgres clients for the tests of `lkplake serve`, and DuckDB for the differential SQL
# test: psql (Debian's postgresql-client); from PyPI psycopg 3, psycopg2, asyncpg, SQLAlchemy 2
# with pandas, pgcli and duckdb, and the other engines that read the lake (Python deltalake,
# polars, pyarrow), and moto, the second S3 server of the object-store tests; node-postgres (`pg`, npm) from tests/clients/node's lock file.
# Installs each only when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_=""
if [ "$(id -u)" != 0 ]; then sudo_="sudo"; fi

if ! command -v psql >/dev/null 2>&1; then
    echo "installing postgresql-client (psql)..." >&2
    $sudo_ apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq postgresql-client >/dev/null
fi

# module to import, and the PyPI requirement that provides it
python_packages=(
    "psycopg psycopg[binary]>=3.1"
    "psycopg2 psycopg2-binary>=2.9"
    "asyncpg asyncpg>=0.29"
    "sqlalchemy sqlalchemy>=2.0"
    "pandas pandas>=2.0"
    "pgcli pgcli>=4.0"
    "duckdb duckdb>=1.1"
    "deltalake deltalake>=1.0"
    "polars polars>=1.0"
    "pyarrow pyarrow>=15"
    "moto moto[server]>=5.1"
)
missing=()
for entry in "${python_packages[@]}"; do
    module=${entry%% *}
    requirement=${entry#* }
    if ! python3 -c "import $module" >/dev/null 2>&1; then missing+=("$requirement"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing from PyPI: ${missing[*]}..." >&2
    python3 -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi

if ! command -v node >/dev/null 2>&1; then
    echo "installing nodejs and npm..." >&2
    $sudo_ apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq nodejs npm >/dev/null
fi
if [ ! -d tests/clients/node/node_modules/pg ]; then
    echo "installing node-postgres (npm ci)..." >&2
    (cd tests/clients/node && npm ci --no-audit --no-fund --silent)
fi
