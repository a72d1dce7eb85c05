#!/usr/bin/env bash
# Trend analysis against ground truth (BENCHMARKS.md, "Trend analysis"): generated reports with
# planted steps of known size in series of different noise levels and lengths, `lkplake trend`
# on the lake they make, and Apache Otava (PyPI apache-otava) on the same series in the same
# run. Prints precision and recall of both against the planted steps, their agreement, and
# lkplake's speed.
# Usage: infra/bench/trend.sh [REPORTS] [SEED]
set -euo pipefail
cd "$(dirname "$0")/../.."
reports=${1:-4000}
seed=${2:-11}
work=${LKPLAKE_BENCH_DIR:-/tmp/lkplake-trend-bench}-$reports-$seed
mkdir -p "$work"
cargo build --release --locked --quiet
python3 -c 'import otava' 2>/dev/null || python3 -m pip install --quiet apache-otava
bin=target/release/lkplake
if [ ! -d "$work/lake/metrics/_delta_log" ]; then
    $bin gen --reports "$reports" --seed "$seed" --out "$work/reports" --truth "$work/truth.jsonl" 2>"$work/gen.log"
    $bin run --lake "$work/lake" "$work/reports" >"$work/run.log" 2>&1
fi
started=$(date +%s.%N)
$bin trend --lake "$work/lake" --full --format json >"$work/found.jsonl" 2>"$work/trend.log"
ended=$(date +%s.%N)
cat "$work/trend.log" >&2
echo "trend wall time: $(echo "$ended - $started" | bc) s" >&2
python3 infra/bench/trend_eval.py "$bin" "$work/lake" "$work/truth.jsonl"
