#!/usr/bin/env bash
# The lake on S3 beside the lake on a local disk (BENCHMARKS.md, "Object storage"), in one run:
# the same generated reports are ingested once into Tansu and transformed twice, by two consumer
# groups, into a local lake and into an s3:// lake on s3s-fs (started here with its request log
# on, so every request the lake makes is counted); then both lakes are compacted, and the
# benchmark queries are run on each, through `lkplake serve` (one process, repeated queries)
# and through `lkplake sql` (a process per query), with the requests each one made.
# Usage: infra/bench/s3.sh [REPORTS]    (default 5000)
set -euo pipefail
cd "$(dirname "$0")/../.."
reports=${1:-5000}
tansu_port=${LKPLAKE_BENCH_TANSU_PORT:-19492}
s3_port=${LKPLAKE_BENCH_S3_PORT:-19400}
pg_port=${LKPLAKE_BENCH_PG_PORT:-15533}
work=$(mktemp -d /tmp/lkplake-s3-bench.XXXXXX)
export LKPLAKE_INFRA_DIR=$work/infra
cleanup() {
    ./infra/tansu.sh stop "$tansu_port" >/dev/null 2>&1 || true
    ./infra/s3.sh stop "$s3_port" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

cargo build --release --locked --quiet
./infra/clients.sh
bin=$PWD/target/release/lkplake
brokers=$(./infra/tansu.sh start "$tansu_port")
# s3s::service logs each request it receives (method, path and query, headers): the count.
endpoint=$(RUST_LOG=s3s::service=debug ./infra/s3.sh start "$s3_port")
s3_log=$LKPLAKE_INFRA_DIR/s3-$s3_port.log
mkdir "$LKPLAKE_INFRA_DIR/s3-$s3_port/bench"
export AWS_ACCESS_KEY_ID=lkplake-test AWS_SECRET_ACCESS_KEY=lkplake-test-secret AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=$endpoint AWS_ALLOW_HTTP=true
local_lake=$work/lake
s3_lake=s3://bench/lake
export LKPLAKE_BROKERS=$brokers LKPLAKE_TOPIC=s3bench LKPLAKE_DLQ_TOPIC=s3bench-dlq LKPLAKE_TRANSFORM_DLQ_TOPIC=s3bench-transform-dlq

$bin gen --reports "$reports" --seed 1 --out "$work/reports" 2>"$work/gen.log"
$bin ingest --partitions 6 "$work/reports" 2>"$work/ingest.log"

now() { date +%s.%N; }
mark() { wc -c <"$s3_log"; }
requests() { python3 infra/bench/s3_requests.py "$s3_log" "$1" "$2"; }
# step NAME LAKE COMMAND...: times one command, keeps its peak RSS and the requests it made.
step() {
    local name=$1 lake=$2
    shift 2
    local from t0 t1
    from=$(mark)
    t0=$(now)
    LKPLAKE_LAKE=$lake /usr/bin/time -f '%M' -o "$work/$name.rss" "$@" 2>"$work/$name.log"
    t1=$(now)
    printf '%s\t%.2f\t%.0f\t%s\n' "$name" "$(echo "$t1 - $t0" | bc)" \
        "$(($(cat "$work/$name.rss") / 1024))" "$(requests "$from" "$(mark)")" >>"$work/steps.tsv"
}
step transform-local "$local_lake" $bin transform --group s3bench-local --until-idle --flush-ms 2000
step transform-s3 "$s3_lake" $bin transform --group s3bench-s3 --until-idle --flush-ms 2000
step compact-local "$local_lake" $bin compact
step compact-s3 "$s3_lake" $bin compact

metric_rows=$(grep -o '([0-9]* metric rows' "$work/transform-local.log" | grep -o '[0-9]*')
written=$(grep -o '[0-9]* reports written' "$work/transform-local.log" | grep -o '^[0-9]*')
s3_written=$(grep -o '[0-9]* reports written' "$work/transform-s3.log" | grep -o '^[0-9]*')
commits=$(grep -o 'metric rows, [0-9]* commits' "$work/transform-s3.log" | grep -o '[0-9]* commits' | grep -o '^[0-9]*')
[ "$written" = "$s3_written" ] || { echo "the lakes differ: $written and $s3_written reports written" >&2; exit 1; }

# The benchmark queries' placeholders, as infra/bench/query.sh picks them.
export LKPLAKE_LAKE=$local_lake
IFS=$'\t' read -r testcase machine params metric < <($bin sql --format csv \
    "SELECT testcase, machine, params, metric FROM metrics WHERE is_headline
     GROUP BY testcase, machine, params, metric ORDER BY count(*) DESC, metric LIMIT 1" |
    python3 -c 'import csv,sys; r=list(csv.reader(sys.stdin))[1]; print("\t".join(r))')
year=$($bin sql --format csv \
    "SELECT date_part('year', time) AS year FROM comparisons WHERE verdict = 'regression' AND testcase = '$testcase'
     GROUP BY 1 ORDER BY count(*) DESC LIMIT 1" | tail -1 | python3 -c 'import sys; print(int(float(sys.stdin.read())))')

echo "reports: $written ($metric_rows metric rows), the same in both lakes; S3 transform: $commits flushes, each one Delta commit per table"
echo "series: $testcase / $machine / $params / $metric ; regressions: $testcase in $year"
echo
echo "| step | local | S3 | S3 requests |"
echo "|---|---:|---:|---|"
for s in transform compact; do
    IFS=$'\t' read -r _ lt lr _ < <(grep "^$s-local" "$work/steps.tsv")
    IFS=$'\t' read -r _ st sr sq < <(grep "^$s-s3" "$work/steps.tsv")
    echo "| $s | $lt s, peak RSS $lr MB | $st s, peak RSS $sr MB | $sq |"
done
echo
python3 infra/bench/s3_queries.py --bin "$bin" --local "$local_lake" --s3 "$s3_lake" \
    --s3-log "$s3_log" --pg-port "$pg_port" --work "$work" \
    --testcase "$testcase" --machine "$machine" --params "$params" --metric "$metric" --year "$year"
