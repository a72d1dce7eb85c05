#!/usr/bin/env bash
# The test command (README): installs and starts what the tests need on a fresh machine
# (cargo-nextest, Tansu, s3s-fs and moto, Prometheus and promtool, Debian's public-inbox, and the Postgres clients and DuckDB of infra/clients.sh), runs the whole suite, and stops the services again.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
# Free space where the build and the tests write, for the log: a CI run once failed on a disk
# that was nearly full (tests/cli/prometheus.rs, BlocksDir).
df -h . "${TMPDIR:-/tmp}" /dev/shm >&2 || true

if ! cargo nextest --version >/dev/null 2>&1; then
    cargo install cargo-nextest --locked
fi

./infra/clients.sh
./infra/prometheus.sh
# Debian's public-inbox builds the real v2 inboxes the archive tests read.
./infra/public-inbox.sh install

port=${LKPLAKE_TEST_TANSU_PORT:-19092}
s3_port=${LKPLAKE_TEST_S3_PORT:-19000}
moto_port=${LKPLAKE_TEST_MOTO_PORT:-19001}
./infra/tansu.sh install
./infra/s3.sh install
trap './infra/tansu.sh stop "$port"; ./infra/s3.sh stop "$s3_port"; ./infra/s3.sh stop-moto "$moto_port"' EXIT
export LKPLAKE_TEST_BROKERS
LKPLAKE_TEST_BROKERS=$(./infra/tansu.sh start "$port")
echo "Tansu broker at $LKPLAKE_TEST_BROKERS" >&2
# The object-store tests put lakes in buckets of a real S3 server (tests/cli/objectstore.rs).
export LKPLAKE_TEST_S3_ENDPOINT LKPLAKE_TEST_S3_DATA
LKPLAKE_TEST_S3_ENDPOINT=$(./infra/s3.sh start "$s3_port")
LKPLAKE_TEST_S3_DATA=${LKPLAKE_INFRA_DIR:-$PWD/target/infra}/s3-$s3_port
echo "s3s-fs at $LKPLAKE_TEST_S3_ENDPOINT, buckets in $LKPLAKE_TEST_S3_DATA" >&2
# moto, a second S3 implementation: the two-writer test runs on it, since s3s-fs does not
# refuse simultaneous conditional puts (infra/README.md).
export LKPLAKE_TEST_MOTO_ENDPOINT
LKPLAKE_TEST_MOTO_ENDPOINT=$(./infra/s3.sh start-moto "$moto_port")
echo "moto at $LKPLAKE_TEST_MOTO_ENDPOINT" >&2

cargo fmt --all --check
# The workspace lints (no unwrap in libraries, no blocking calls in async crates, docs on public
# items) hold only if a warning fails the run.
cargo clippy --workspace --all-targets --locked -- -D warnings
RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps --locked
# With the crash points of lkplake-faults compiled in: tests/cli/faults.rs aborts the binary at
# each of them (LKPLAKE_CRASH_AT) and restarts it.
cargo nextest run --workspace --locked --no-fail-fast --features lkplake/fault-injection
