#!/usr/bin/env bash
# s3s-fs, an S3 server from crates.io that keeps each bucket as a directory, for the tests of
# lakes on object storage (`--lake s3://bucket/prefix`).
#   infra/s3.sh install              install s3s-fs 0.14.1 unless it is already on PATH
#   infra/s3.sh start [PORT]         serve ${LKPLAKE_INFRA_DIR:-target/infra}/s3-PORT on
#                                    127.0.0.1:PORT; prints the endpoint URL
#   infra/s3.sh stop [PORT]          stop it
#   infra/s3.sh start-moto PORT      Python moto in server mode (PyPI moto[server], installed by
#                                    infra/clients.sh), an independent S3 implementation that
#                                    keeps its buckets in memory; prints the endpoint URL
#   infra/s3.sh stop-moto PORT       stop it
# Buckets are the directories below the data directory: `mkdir DATA/lake` makes bucket `lake`.
# The access key and secret are the test's own (LKPLAKE_S3_ACCESS_KEY / LKPLAKE_S3_SECRET_KEY,
# defaults below); the server checks every request's signature against them.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${LKPLAKE_INFRA_DIR:-$PWD/target/infra}
mkdir -p "$state"
export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=infra/lib.sh
. infra/lib.sh
access_key=${LKPLAKE_S3_ACCESS_KEY:-lkplake-test}
secret_key=${LKPLAKE_S3_SECRET_KEY:-lkplake-test-secret}

install() {
    if ! command -v s3s-fs >/dev/null 2>&1; then
        # 0.17 needs a newer rustc than this machine's.
        echo "installing s3s-fs 0.14.1 (about 3 minutes on 2 cores)..." >&2
        cargo install s3s-fs --version 0.14.1 --features binary --locked
    fi
}

start() {
    local port=${1:-19000}
    install
    stop "$port" 2>/dev/null || true
    local data="$state/s3-$port"
    rm -rf "$data"
    mkdir -p "$data"
    s3s-fs \
        --host 127.0.0.1 \
        --port "$port" \
        --access-key "$access_key" \
        --secret-key "$secret_key" \
        "$data" \
        >"$state/s3-$port.log" 2>&1 &
    echo $! >"$state/s3-$port.pid"
    wait_port "$port" s3s-fs "$state/s3-$port.log"
    echo "http://127.0.0.1:$port"
}

stop() {
    local port=${1:-19000}
    local pidfile="$state/s3-$port.pid"
    if [ -f "$pidfile" ]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
}

start_moto() {
    local port=$1
    stop_moto "$port" 2>/dev/null || true
    # moto accepts any credentials; the tests sign with the same key as for s3s-fs.
    moto_server -H 127.0.0.1 -p "$port" >"$state/moto-$port.log" 2>&1 &
    echo $! >"$state/moto-$port.pid"
    wait_port "$port" moto "$state/moto-$port.log"
    echo "http://127.0.0.1:$port"
}

stop_moto() {
    local pidfile="$state/moto-$1.pid"
    if [ -f "$pidfile" ]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
}

case "${1:-}" in
    install) install ;;
    start) start "${2:-19000}" ;;
    stop) stop "${2:-19000}" ;;
    start-moto) start_moto "${2:?port}" ;;
    stop-moto) stop_moto "${2:?port}" ;;
    *) echo "usage: $0 install|start [PORT]|stop [PORT]|start-moto PORT|stop-moto PORT" >&2; exit 2 ;;
esac
