#!/usr/bin/env bash
# Tansu, a Kafka-compatible broker from crates.io, for tests and local runs.
#   infra/tansu.sh install          install tansu 0.6.0 unless it is already on PATH
#   infra/tansu.sh start [PORT]     start it on 127.0.0.1:PORT (default 19092), in-memory storage
#   infra/tansu.sh stop [PORT]      stop the broker started on PORT
# State (pid, log) lives in ${LKPLAKE_INFRA_DIR:-target/infra}.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${LKPLAKE_INFRA_DIR:-$PWD/target/infra}
mkdir -p "$state"
export PATH="$HOME/.cargo/bin:$PATH"

install() {
    if ! command -v tansu >/dev/null 2>&1; then
        echo "installing tansu 0.6.0 (about 8 minutes on 2 cores)..." >&2
        cargo install tansu --locked --version 0.6.0 --features dynostore
    fi
}

wait_port() {
    local port=$1
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "tansu did not open port $port; see $state/tansu-$port.log" >&2
    return 1
}

start() {
    local port=${1:-19092}
    install
    stop "$port" 2>/dev/null || true
    tansu broker \
        --listener-url "tcp://127.0.0.1:$port" \
        --advertised-listener-url "tcp://127.0.0.1:$port" \
        --storage-engine "memory://tansu-$port/" \
        >"$state/tansu-$port.log" 2>&1 &
    echo $! >"$state/tansu-$port.pid"
    wait_port "$port"
    echo "127.0.0.1:$port"
}

stop() {
    local port=${1:-19092}
    local pidfile="$state/tansu-$port.pid"
    if [ -f "$pidfile" ]; then
        kill "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
    fi
}

case "${1:-}" in
    install) install ;;
    start) start "${2:-19092}" ;;
    stop) stop "${2:-19092}" ;;
    *) echo "usage: $0 install|start [PORT]|stop [PORT]" >&2; exit 2 ;;
esac
