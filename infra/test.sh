#!/usr/bin/env bash
# The test command (README): installs and starts what the tests need on a fresh machine
# (cargo-nextest, Tansu, Prometheus and promtool, Debian's public-inbox, and the Postgres clients and DuckDB of infra/clients.sh), runs the whole suite, and stops the services again.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

if ! cargo nextest --version >/dev/null 2>&1; then
    cargo install cargo-nextest --locked
fi

./infra/clients.sh
./infra/prometheus.sh
# Debian's public-inbox builds the real v2 inboxes the archive tests read.
./infra/public-inbox.sh install

port=${LKPLAKE_TEST_TANSU_PORT:-19092}
./infra/tansu.sh install
trap './infra/tansu.sh stop "$port"' EXIT
export LKPLAKE_TEST_BROKERS
LKPLAKE_TEST_BROKERS=$(./infra/tansu.sh start "$port")
echo "Tansu broker at $LKPLAKE_TEST_BROKERS" >&2

cargo fmt --all --check
# The workspace lints (no unwrap in libraries, no blocking calls in async crates, docs on public
# items) hold only if a warning fails the run.
cargo clippy --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps --locked
# With the crash points of lkplake-faults compiled in: tests/cli/faults.rs aborts the binary at
# each of them (LKPLAKE_CRASH_AT) and restarts it.
cargo nextest run --workspace --locked --no-fail-fast --features lkplake/fault-injection
