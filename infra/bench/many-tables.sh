#!/usr/bin/env bash
# Parsing one mail of many tables (issue 36, item 12; BENCHMARKS.md, "Large inputs"): a
# generated report of TABLES detail tables, each its own test (about 5.5 MB for the default
# 20,000), parsed by `lkplake parse --format json` RUNS times. Prints the mail's size, each
# run's wall time and peak RSS (/usr/bin/time -v), and their median. Before the merge was made
# linear this grew with the square of TABLES; run it with a few sizes (5000, 10000, 20000) to
# see how it grows.
#
# Every run is checked: the output must be one report with exactly TABLES tests, in the order
# the mail prints them, the first and last with the row the generator wrote, and the first with
# the headline the opening sentence states. A run that does less fails the script.
#
# Usage: infra/bench/many-tables.sh [TABLES] [RUNS]
#   LKPLAKE_BENCH_BIN=path/to/lkplake  another build (an older commit's, say) instead of the
#                                      release build, which is built when it is not set
set -euo pipefail
cd "$(dirname "$0")/../.."
tables=${1:-20000}
runs=${2:-3}
[ -x /usr/bin/time ] || { echo "many-tables.sh: needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 1; }
bin=${LKPLAKE_BENCH_BIN:-target/release/lkplake}
[ -n "${LKPLAKE_BENCH_BIN:-}" ] || cargo build --release --locked --quiet
work=$(mktemp -d /tmp/lkplake-many-tables.XXXXXX)
trap 'rm -rf "$work"' EXIT

mail=$work/many-tables.eml
python3 infra/bench/gen_mail.py tables "$tables" >"$mail" 2>"$work/gen"
# tables N bytes B first t00000 +1.0% last tNNNNN +X%
read -r _ _ _ bytes _ first first_change _ last last_change <"$work/gen"
echo "mail: $tables tables, $bytes bytes ($(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB); $bin"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(date -u +%F)"

# check OUT: the parse output holds the whole report, as generated.
check() {
    python3 - "$1" "$tables" "$first" "$first_change" "$last" "$last_change" <<'PY'
import json, sys
out, tables, first, first_change, last, last_change = sys.argv[1:]
lines = [l for l in open(out, encoding="utf-8") if l.strip()]
if len(lines) != 1:
    sys.exit(f"expected one report, got {len(lines)} lines")
tests = json.loads(lines[0])["tests"]
if len(tests) != int(tables):
    sys.exit(f"expected {tables} tests, got {len(tests)}")
# Each table's one row is its test's headline metric; the opening sentence names the first's.
for test, name, change in ((tests[0], first, first_change), (tests[-1], last, last_change)):
    metric, pct = f"stress-ng.{name}.ops_per_sec", float(change.rstrip("%"))
    rows = [(r["metric"], r["values"][1]["change"]) for r in test["rows"]]
    if test["params"].get("test") != name or rows != [(metric, pct)]:
        sys.exit(f"expected {name} with the row {metric} {pct}, got {test['params']} {rows}")
want = {"metric": f"stress-ng.{first}.ops_per_sec", "change_pct": float(first_change.rstrip("%"))}
if tests[0].get("headline") != want:
    sys.exit(f"expected the headline {want}, got {tests[0].get('headline')}")
PY
}

seconds=()
printf '%-6s %10s %14s\n' run seconds "peak RSS MiB"
for run in $(seq 1 "$runs"); do
    status=0
    /usr/bin/time -v -o "$work/time" "$bin" parse --format json "$mail" >"$work/out" 2>"$work/err" || status=$?
    if [ "$status" != 0 ]; then
        echo "many-tables.sh: lkplake parse exited $status:" >&2
        cat "$work/err" >&2
        exit 1
    fi
    check "$work/out" || { echo "many-tables.sh: run $run did not parse the whole mail" >&2; exit 1; }
    # Elapsed (wall clock) time (h:mm:ss or m:ss): 0:01.23
    s=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); t = 0; for (i = 1; i <= n; i++) t = t * 60 + p[i]; print t}' "$work/time")
    kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/time")
    seconds+=("$s")
    printf '%-6s %10.2f %14d\n' "$run" "$s" "$((kib / 1024))"
done
median=$(printf '%s\n' "${seconds[@]}" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
echo "median: $median s for $tables tables ($(awk -v t="$tables" -v s="$median" 'BEGIN {printf "%.0f", t / s}') tables/s); every run gave $tables tests"
