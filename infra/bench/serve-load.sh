#!/usr/bin/env bash
# Load on `lkplake serve` (BENCHMARKS.md, "Postgres wire server under load"): N psycopg clients
# (default 32) run a dashboard-like mix of queries for S seconds (default 30) against the lake
# that infra/bench/query.sh built; prints throughput, latency, errors and the server's peak RSS.
# Usage: infra/bench/serve-load.sh [CLIENTS] [SECONDS]
# LKPLAKE_BENCH_BIN runs a given binary instead of building this checkout's (to compare two builds
# side by side in one session).
set -euo pipefail
cd "$(dirname "$0")/../.."
clients=${1:-32}
seconds=${2:-30}
work=${LKPLAKE_BENCH_DIR:-/tmp/lkplake-query-bench}
[ -d "$work/lake/metrics/_delta_log" ] || { echo "no lake in $work: run infra/bench/query.sh first" >&2; exit 1; }
bin=${LKPLAKE_BENCH_BIN:-}
if [ -z "$bin" ]; then cargo build --release --locked --quiet; bin=target/release/lkplake; fi
./infra/clients.sh
port=${LKPLAKE_BENCH_PG_PORT:-15433}
export PGPASSWORD=bench-load
$bin serve --lake "$work/lake" --pg "127.0.0.1:$port" --password "$PGPASSWORD" --memory-limit 2G \
    2>"$work/serve.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
idle_rss=$(awk '/VmRSS/ {print $2 / 1024}' "/proc/$server/status")

# What a dashboard sends: a series, the latest headlines, one testcase's regressions of a year,
# a per-day count for a time-series panel (Grafana macros expanded), a catalog lookup.
read -r -d '' mix <<'JSON' || true
[
 "SELECT time, value FROM series WHERE testcase = 'will-it-scale' AND metric = 'will-it-scale.per_thread_ops' AND machine = (SELECT min(machine) FROM reports WHERE testcase = 'will-it-scale') ORDER BY time",
 "SELECT time, testcase, machine, metric, change, kind, subject FROM headlines ORDER BY time DESC LIMIT 50",
 "SELECT time, machine, metric, change FROM comparisons WHERE testcase = 'stress-ng' AND verdict = 'regression' AND time >= '2024-01-01T00:00:00Z' AND time < '2025-01-01T00:00:00Z' ORDER BY time",
 "SELECT floor(extract(epoch from date)/86400)*86400 AS \"time\", count(*) AS reports FROM reports WHERE date BETWEEN '2024-01-01T00:00:00Z' AND '2024-12-31T00:00:00Z' GROUP BY 1 ORDER BY 1",
 "SELECT current_setting('server_version_num')::int/100 as version"
]
JSON
result=$(printf '%s' "$mix" | python3 tests/clients/pg_client.py \
    "host=127.0.0.1 port=$port user=lkplake dbname=lkplake" --clients "$clients" --seconds "$seconds" --pid "$server")
echo "idle RSS before load: ${idle_rss} MB"
echo "$result"
