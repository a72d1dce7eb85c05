#!/usr/bin/env bash
# Query benchmark (BENCHMARKS.md, "Query"): a generated lake of at least 10 million metric rows,
# the three queries of query/benches/queries.sql timed on lkplake (criterion, in-process
# DataFusion over the Delta tables) and on DuckDB (Python package, in-process, over the same live
# Parquet files) in the same run, with the ratios; then the first query a freshly started
# `lkplake serve` answers (cold) beside a fresh DuckDB process, and every Grafana panel query on
# both (infra/bench/panels.py).
# Usage: infra/bench/query.sh [REPORTS]    (60000 reports give about 11 million metric rows)
# The lake is kept in $LKPLAKE_BENCH_DIR (default /tmp/lkplake-query-bench) and reused when it was
# built from the same number of reports. DuckDB reads the format-1 layout: for a lake in format 2,
# LKPLAKE_BENCH_DUCKDB_LAKE names a format-1 lake of the same reports (the one it was upgraded from).
set -euo pipefail
cd "$(dirname "$0")/../.."
reports=${1:-60000}
work=${LKPLAKE_BENCH_DIR:-/tmp/lkplake-query-bench}
mkdir -p "$work"
bin=target/release/lkplake
cargo build --release --locked --quiet
python3 -c 'import duckdb' 2>/dev/null || python3 -m pip install --quiet duckdb

if [ "$(cat "$work/reports.count" 2>/dev/null)" != "$reports" ]; then
    rm -rf "$work/lake" "$work/reports"
    $bin gen --reports "$reports" --seed 7 --out "$work/reports" 2>"$work/gen.log"
    # Through Tansu, not `lkplake run`: librdkafka's mock cluster keeps only about 1 MB per
    # partition, too little for tens of thousands of reports.
    port=${LKPLAKE_BENCH_TANSU_PORT:-19392}
    brokers=$(./infra/tansu.sh start "$port")
    trap './infra/tansu.sh stop "$port" >/dev/null 2>&1 || true' EXIT
    LKPLAKE_BROKERS=$brokers LKPLAKE_TOPIC=qbench LKPLAKE_DLQ_TOPIC=qbench-dlq LKPLAKE_TRANSFORM_DLQ_TOPIC=qbench-transform-dlq LKPLAKE_GROUP=qbench \
        LKPLAKE_LAKE=$work/lake $bin ingest --partitions 6 "$work/reports" 2>"$work/ingest.log"
    LKPLAKE_BROKERS=$brokers LKPLAKE_TOPIC=qbench LKPLAKE_DLQ_TOPIC=qbench-dlq LKPLAKE_TRANSFORM_DLQ_TOPIC=qbench-transform-dlq LKPLAKE_GROUP=qbench \
        LKPLAKE_LAKE=$work/lake $bin transform --until-idle --flush-ms 2000 2>"$work/transform.log"
    ./infra/tansu.sh stop "$port" >/dev/null 2>&1 || true
    $bin compact --lake "$work/lake" 2>"$work/compact.log"
    echo "$reports" >"$work/reports.count"
fi
export LKPLAKE_LAKE=$work/lake LKPLAKE_BENCH_LAKE=$work/lake

# The most observed headline series, and the testcase and year with the most regressions.
IFS=$'\t' read -r testcase machine params metric < <($bin sql --format csv \
    "SELECT testcase, machine, params, metric FROM metrics WHERE is_headline
     GROUP BY testcase, machine, params, metric ORDER BY count(*) DESC, metric LIMIT 1" |
    python3 -c 'import csv,sys; r=list(csv.reader(sys.stdin))[1]; print("\t".join(r))')
IFS=$'\t' read -r rtestcase year < <($bin sql --format csv \
    "SELECT testcase, date_part('year', time) AS year FROM comparisons WHERE verdict = 'regression'
     GROUP BY 1, 2 ORDER BY count(*) DESC LIMIT 1" |
    python3 -c 'import csv,sys; r=list(csv.reader(sys.stdin))[1]; print(r[0] + "\t" + str(int(float(r[1]))))')
export LKPLAKE_BENCH_MACHINE=$machine LKPLAKE_BENCH_PARAMS=$params LKPLAKE_BENCH_METRIC=$metric
export LKPLAKE_BENCH_YEAR=$year LKPLAKE_BENCH_NEXT_YEAR=$((year + 1))
# The series query and the regressions query each use their own testcase; the harnesses take one
# LKPLAKE_BENCH_TESTCASE, so the series' testcase wins when they differ and the regressions query
# is then run on it too.
export LKPLAKE_BENCH_TESTCASE=$testcase
[ "$rtestcase" = "$testcase" ] || echo "note: regressions measured on $testcase (most regressions: $rtestcase)" >&2

metric_rows=$($bin sql --format csv "SELECT count(*) FROM metrics" | tail -1)
files=$(python3 -c 'import sys; sys.path.insert(0, "infra/bench"); import query; print(len(query.live_files(sys.argv[1])))' "$work/lake/metrics")

duck_lake=${LKPLAKE_BENCH_DUCKDB_LAKE:-$work/lake}
duck=$(python3 infra/bench/query.py "$duck_lake")
# Not the shutdown crate: its tokio `test-util` dev-dependency would change tokio's features for
# the whole build and recompile everything above tokio (most of the tree) for the bench alone.
cargo bench --workspace --exclude lkplake-shutdown --locked --bench queries -- --noplot >"$work/criterion.log" 2>&1

echo "lake: $reports reports, $metric_rows metric rows, $files live Parquet files (metrics)"
echo "series: $testcase / $machine / $metric ; regressions: $testcase in $year"
python3 - "$work/criterion.log" "$duck" <<'PY'
import json, re, sys
log = open(sys.argv[1]).read()
duck = json.loads(sys.argv[2])
units = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0}
print(f"| query | lkplake rows | lkplake median | {duck['engine']} rows | DuckDB median | lkplake / DuckDB |")
print("|---|---|---|---|---|---|")
for name, d in duck["queries"].items():
    m = re.search(rf"query/{name}\s+time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", log)
    rows = re.search(rf"^{name}: (\d+) rows", log, re.M)
    if not m:
        print(f"| {name} | ? | (no criterion result) | {d['rows']} | {d['median_ms']} ms | |")
        continue
    ours = float(m.group(1)) * units[m.group(2)]
    print(f"| {name} | {rows.group(1) if rows else '?'} | {ours:.2f} ms | {d['rows']} | {d['median_ms']:.2f} ms | {ours / d['median_ms']:.2f}× |")
PY

# Every Grafana panel query, on `lkplake serve` and on DuckDB; first the cold query: the series
# query sent as soon as a freshly started server accepts connections, against a fresh DuckDB
# process doing the same (connect, views, query).
port=${LKPLAKE_BENCH_PG_PORT:-15434}
export PGPASSWORD=bench-panels
started=$(date +%s.%N)
$bin serve --lake "$work/lake" --pg "127.0.0.1:$port" --password "$PGPASSWORD" --memory-limit 2G 2>"$work/serve-panels.log" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
dsn="host=127.0.0.1 port=$port user=lkplake dbname=lkplake"
python3 - "$dsn" "$started" "$duck_lake" <<'PY'
import subprocess, sys, time
import psycopg
sys.path.insert(0, "infra/bench")
import query
dsn, started, lake = sys.argv[1], float(sys.argv[2]), sys.argv[3]
series = dict(query.queries())["series"]
listening = time.time() - started
t = time.perf_counter()
with psycopg.connect(dsn) as c:
    c.execute(series).fetchall()
ours = (time.perf_counter() - t) * 1000
t = time.perf_counter()
subprocess.run([sys.executable, "-c", f"""
import sys; sys.path.insert(0, 'infra/bench'); import duckdb, query
con = duckdb.connect()
query.register(con, {lake!r}, ['metrics', 'reports'])
query.define_views(con, 'views.sql')
con.execute({series!r}).fetchall()
"""], check=True)
duck = (time.perf_counter() - t) * 1000
print(f"cold: lkplake serve accepted connections {listening:.2f} s after starting; first series query {ours:.0f} ms; "
      f"a fresh DuckDB process (start, views, query) {duck:.0f} ms")
PY
python3 infra/bench/panels.py "$duck_lake" "$dsn" --table
