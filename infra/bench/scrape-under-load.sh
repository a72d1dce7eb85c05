#!/usr/bin/env bash
# `/metrics` scrape latency while 32 Postgres clients run the dashboard mix of serve-load.sh
# (BENCHMARKS.md, "Scrapes under query load"), side by side in one run: the server with its
# dedicated query executor (the default), and with `--query-threads 0`, which runs queries on
# the threads that also accept connections and answer scrapes, as lkplake did before.
# Usage: infra/bench/scrape-under-load.sh [CLIENTS] [SECONDS]   (after infra/bench/query.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
clients=${1:-32}
seconds=${2:-30}
work=${LKPLAKE_BENCH_DIR:-/tmp/lkplake-query-bench}
[ -d "$work/lake/metrics/_delta_log" ] || { echo "no lake in $work: run infra/bench/query.sh first" >&2; exit 1; }
# LKPLAKE_BENCH_BIN runs another build (a debug one, say) instead of the release build.
bin=${LKPLAKE_BENCH_BIN:-target/release/lkplake}
[ -n "${LKPLAKE_BENCH_BIN:-}" ] || cargo build --release --locked --quiet
./infra/clients.sh
pg=${LKPLAKE_BENCH_PG_PORT:-15433}
http=${LKPLAKE_BENCH_HTTP_PORT:-19464}
export PGPASSWORD=bench-load

mix=$(sed -n "/^read -r -d '' mix <<'JSON'/,/^JSON/p" infra/bench/serve-load.sh | sed '1d;$d')

# Scrapes /metrics every 100 ms for SECONDS; prints the latency percentiles in ms as JSON.
scraper() {
    python3 - "$http" "$seconds" <<'PY'
import json, sys, time, urllib.request
port, seconds = int(sys.argv[1]), float(sys.argv[2])
took, errors, end = [], 0, time.monotonic() + seconds
while time.monotonic() < end:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            r.read()
        took.append((time.monotonic() - started) * 1000)
    except Exception:
        errors += 1
    time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
took.sort()
pick = lambda q: round(took[min(len(took) - 1, int(q * len(took)))], 1) if took else None
print(json.dumps({"scrapes": len(took), "errors": errors, "p50_ms": pick(0.50),
                  "p99_ms": pick(0.99), "max_ms": round(took[-1], 1) if took else None}))
PY
}

run() {
    local threads=$1
    $bin serve --lake "$work/lake" --pg "127.0.0.1:$pg" --password "$PGPASSWORD" --memory-limit 2G \
        --http "127.0.0.1:$http" ${threads:+--query-threads "$threads"} 2>"$work/serve-scrape.log" &
    local server=$!
    for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$http") 2>/dev/null && break; sleep 0.1; done
    local idle
    idle=$(seconds=5 scraper)
    printf '%s' "$mix" | python3 tests/clients/pg_client.py \
        "host=127.0.0.1 port=$pg user=lkplake dbname=lkplake" --clients "$clients" --seconds "$seconds" \
        >"$work/load.json" &
    local load=$!
    sleep 2
    local loaded
    loaded=$(scraper)
    wait "$load"
    kill "$server"; wait "$server" 2>/dev/null || true
    echo "query threads ${threads:-default}: idle $idle"
    echo "query threads ${threads:-default}: under load $loaded"
    echo "query threads ${threads:-default}: clients $(cat "$work/load.json")"
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(date -u +%F)"
run 0
run ""
