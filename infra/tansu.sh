#!/usr/bin/env bash
# Tansu, a Kafka-compatible broker from crates.io, for tests and local runs.
#   infra/tansu.sh install          install tansu 0.6.0 unless it is already on PATH
#   infra/tansu.sh start [PORT]     start it on 127.0.0.1:PORT (default 19092), in-memory storage
#   infra/tansu.sh start-durable PORT DIR
#                                   start it on PORT with its SQLite engine in DIR/tansu.db:
#                                   stopped and started again on the same DIR, it keeps its
#                                   topics, records, committed offsets and groups
#   infra/tansu.sh stop [PORT]      stop the broker started on PORT (SIGTERM, waits for it)
# State (pid, log) lives in ${LKPLAKE_INFRA_DIR:-target/infra}.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${LKPLAKE_INFRA_DIR:-$PWD/target/infra}
mkdir -p "$state"
export PATH="$HOME/.cargo/bin:$PATH"
# shellcheck source=infra/lib.sh
. infra/lib.sh

# dynostore: the in-memory engine; libsql: the SQLite engine of start-durable.
features=dynostore,libsql

# Whether the installed tansu was built with every feature above (cargo records them).
has_features() {
    command -v tansu >/dev/null 2>&1 || return 1
    python3 - "$HOME/.cargo/.crates2.json" "$features" <<'PY'
import json, sys
installs = json.load(open(sys.argv[1])).get("installs", {})
want = set(sys.argv[2].split(","))
ok = any(key.startswith("tansu 0.6.0 ") and want <= set(v.get("features", [])) for key, v in installs.items())
sys.exit(0 if ok else 1)
PY
}

install() {
    if ! has_features 2>/dev/null; then
        echo "installing tansu 0.6.0 with $features (about 10 minutes on 2 cores)..." >&2
        cargo install tansu --locked --version 0.6.0 --features "$features"
    fi
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
    wait_port "$port" tansu "$state/tansu-$port.log"
    echo "127.0.0.1:$port"
}

start_durable() {
    local port=$1 dir=$2
    install
    stop "$port" 2>/dev/null || true
    mkdir -p "$dir"
    # Tansu resolves sqlite://NAME against its working directory.
    (cd "$dir" && exec tansu broker \
        --listener-url "tcp://127.0.0.1:$port" \
        --advertised-listener-url "tcp://127.0.0.1:$port" \
        --storage-engine "sqlite://tansu.db" \
        >>"$state/tansu-$port.log" 2>&1) &
    echo $! >"$state/tansu-$port.pid"
    wait_port "$port" tansu "$state/tansu-$port.log"
    echo "127.0.0.1:$port"
}

stop() {
    local port=${1:-19092}
    local pidfile="$state/tansu-$port.pid"
    if [ -f "$pidfile" ]; then
        local pid
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || true
        # A durable broker started again on the same files must find them closed.
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        rm -f "$pidfile"
    fi
}

case "${1:-}" in
    install) install ;;
    start) start "${2:-19092}" ;;
    start-durable) start_durable "${2:?PORT}" "${3:?DIR}" ;;
    stop) stop "${2:-19092}" ;;
    *) echo "usage: $0 install|start [PORT]|start-durable PORT DIR|stop [PORT]" >&2; exit 2 ;;
esac
