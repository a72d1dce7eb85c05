#!/usr/bin/env bash
# Runs the consumer-group tests again and again on one Tansu, with no retry: the two
# transformers of one group, and three over six partitions with one joining late and one
# leaving early. One broker for every round on purpose: its state from earlier rounds (groups,
# topics, batch boundaries) is what made the two-transformer test lose reports (issue 11).
#   infra/soak-transformers.sh [ROUNDS]     (default 30)
# Prints one line per round and a summary; exits 1 if any round failed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
rounds=${1:-30}
port=${LKPLAKE_SOAK_TANSU_PORT:-19192}
log_dir=${LKPLAKE_SOAK_LOGS:-target/soak}
mkdir -p "$log_dir"

./infra/tansu.sh install
trap './infra/tansu.sh stop "$port"' EXIT
export LKPLAKE_TEST_BROKERS
LKPLAKE_TEST_BROKERS=$(./infra/tansu.sh start "$port")
filter='test(two_transformers_in_one_group) | test(three_transformers_over_six_partitions)'
cargo nextest run --workspace --locked --no-run >/dev/null 2>&1

passed=0
failed=0
for round in $(seq 1 "$rounds"); do
    started=$(date +%s)
    if cargo nextest run --workspace --locked --retries 0 --no-fail-fast -E "$filter" \
        >"$log_dir/round-$round.log" 2>&1; then
        passed=$((passed + 1))
        verdict=passed
    else
        failed=$((failed + 1))
        verdict="FAILED (log: $log_dir/round-$round.log)"
    fi
    echo "round $round: $verdict in $(( $(date +%s) - started )) s"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
