#!/usr/bin/env bash
# End-to-end pipeline benchmark: generated reports -> ingest -> Tansu -> transform -> lake.
# Prints a Markdown table row set for BENCHMARKS.md. Usage: infra/bench/pipeline.sh [REPORTS]
set -euo pipefail
cd "$(dirname "$0")/../.."
reports=${1:-5000}
port=${LKPLAKE_BENCH_TANSU_PORT:-19292}
work=$(mktemp -d /tmp/lkplake-bench.XXXXXX)
trap './infra/tansu.sh stop "$port" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# LKPLAKE_BENCH_BIN runs another build (target/dist/lkplake, say) instead of the release build.
bin=${LKPLAKE_BENCH_BIN:-target/release/lkplake}
[ -n "${LKPLAKE_BENCH_BIN:-}" ] || cargo build --release --locked --quiet
brokers=$(./infra/tansu.sh start "$port")
export LKPLAKE_BROKERS=$brokers LKPLAKE_TOPIC=bench-reports LKPLAKE_DLQ_TOPIC=bench-dlq LKPLAKE_TRANSFORM_DLQ_TOPIC=bench-transform-dlq LKPLAKE_GROUP=bench LKPLAKE_LAKE=$work/lake

$bin gen --reports "$reports" --seed 1 --out "$work/reports" 2>"$work/gen.log"
input_mb=$(du -sm "$work/reports" | cut -f1)

now() { date +%s.%N; }
# Bytes and count of the Parquet files the current table version references (compaction
# leaves the replaced files on disk until vacuum's retention passes).
active() {
    python3 - "$1" <<'PY'
import glob, json, sys
live = {}
for f in sorted(glob.glob(sys.argv[1] + "/_delta_log/*.json")):
    for line in open(f):
        a = json.loads(line)
        if "add" in a:
            live[a["add"]["path"]] = a["add"]["size"]
        elif "remove" in a:
            live.pop(a["remove"]["path"], None)
print(sum(live.values()), len(live))
PY
}
t0=$(now)
/usr/bin/time -f '%M' -o "$work/ingest.rss" $bin ingest --partitions 6 "$work/reports" 2>"$work/ingest.log"
t1=$(now)
LKPLAKE_LOG=warn,lkplake_transform=info /usr/bin/time -f '%M' -o "$work/transform.rss" $bin transform --until-idle --flush-ms 2000 2>"$work/transform.log"
t2=$(now)

# The transformer's own time: from being given partitions to its last commit, without joining
# the group (Tansu takes up to 3 s to answer a new group) and the idle check at the end.
stamps() { sed 's/\x1b\[[0-9;]*m//g' "$work/transform.log" | grep "$1" | cut -d' ' -f1; }
working=$(python3 - "$(stamps 'partitions assigned' | head -1)" "$(stamps 'committed to the lake' | tail -1)" <<'PY'
import datetime, sys
t = [datetime.datetime.fromisoformat(a.replace("Z", "+00:00")) for a in sys.argv[1:]]
print((t[1] - t[0]).total_seconds())
PY
)
written=$(grep -o '[0-9]* reports written' "$work/transform.log" | grep -o '^[0-9]*')
if [ -z "$written" ] || [ "$written" -eq 0 ]; then
    echo "pipeline.sh: the transformer wrote no report; no figure printed. Its log ends:" >&2
    tail -5 "$work/transform.log" >&2
    exit 1
fi

# Then as the pipeline runs when a transformer is running already: ingest into a second topic
# with a transformer consuming beside it (started a second later, into a second lake),
# timed from the start of ingest until the transformer has committed the last report.
t3=$(now)
LKPLAKE_TOPIC=bench-beside LKPLAKE_LAKE=$work/lake-beside $bin ingest --partitions 6 "$work/reports" 2>"$work/ingest-beside.log" &
ingesting=$!
# Ingest creates the topic before its first report; a transformer subscribed to a topic that
# does not exist yet waits for librdkafka's next metadata refresh.
sleep 1
LKPLAKE_TOPIC=bench-beside LKPLAKE_LAKE=$work/lake-beside LKPLAKE_GROUP=bench-beside \
    $bin transform --until-idle --flush-ms 2000 2>"$work/transform-beside.log"
wait "$ingesting"
# An --until-idle transformer that found the topic drained while ingest was still producing
# leaves early: run it again until the second lake holds every report the first one does, so
# the time covers all of them (and the figure is never one of work that did not happen).
written_beside() { cat "$work"/transform-beside*.log | grep -o '[0-9]* reports written' | grep -o '^[0-9]*' | paste -sd+ | bc; }
for round in 1 2 3 4 5; do
    [ "$(written_beside)" -lt "$written" ] || break
    LKPLAKE_TOPIC=bench-beside LKPLAKE_LAKE=$work/lake-beside LKPLAKE_GROUP=bench-beside \
        $bin transform --until-idle --flush-ms 2000 2>"$work/transform-beside-$round.log"
done
t4=$(now)
beside=$(written_beside)
if [ "$beside" -ne "$written" ]; then
    echo "pipeline.sh: the transformer beside ingest wrote $beside reports, not $written; no figure printed. Its logs end:" >&2
    tail -n 3 "$work"/transform-beside*.log >&2
    exit 1
fi

metric_rows=$(grep -o '([0-9]* metric rows' "$work/transform.log" | grep -o '[0-9]*')
read -r parquet_bytes parquet_files < <(active "$work/lake/metrics")
$bin compact --lake "$work/lake" 2>"$work/compact.log"
read -r compacted_bytes compacted_files < <(active "$work/lake/metrics")

awk -v r="$written" -v m="$metric_rows" -v mb="$input_mb" -v ti="$(echo "$t1 - $t0" | bc)" -v tt="$(echo "$t2 - $t1" | bc)" \
    -v pb="$parquet_bytes" -v pf="$parquet_files" -v cb="$compacted_bytes" -v cf="$compacted_files" \
    -v tw="$working" -v tb="$(echo "$t4 - $t3" | bc)" -v rb="$beside" -v ir="$(cat "$work/ingest.rss")" -v tr="$(cat "$work/transform.rss")" 'BEGIN {
    printf "| reports | %d (%d MB of mail) |\n", r, mb
    printf "| metric rows | %d |\n", m
    printf "| ingest (parse + produce to Tansu) | %.1f s, %.0f reports/s, peak RSS %.0f MB |\n", ti, r/ti, ir/1024
    printf "| transform (consume + normalize + Delta commits) | %.1f s, %.0f reports/s, %.0f metric rows/s, peak RSS %.0f MB |\n", tt, r/tt, m/tt, tr/1024
    printf "| transform, from partitions assigned to the last commit | %.2f s, %.0f metric rows/s |\n", tw, m/tw
    printf "| end to end | %.1f s, %.0f reports/s, %.0f metric rows/s |\n", ti+tt, r/(ti+tt), m/(ti+tt)
    printf "| end to end, the transformer consuming beside ingest | %.1f s, %.0f metric rows/s (%d reports written) |\n", tb, m/tb, rb
    printf "| metrics Parquet after transform | %.2f bytes/row (%d files, %.1f MB) |\n", pb/m, pf, pb/1048576
    printf "| metrics Parquet after compact | %.2f bytes/row (%d files, %.1f MB) |\n", cb/m, cf, cb/1048576
}'
