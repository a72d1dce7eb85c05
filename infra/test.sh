#!/usr/bin/env bash
# The test command (README): installs what the tests need on a fresh machine, then runs the
# whole suite. Safe to run again: nothing is installed twice.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo nextest --version >/dev/null 2>&1; then
    cargo install cargo-nextest --locked
fi

cargo fmt --all --check
cargo nextest run --workspace --locked --no-fail-fast
