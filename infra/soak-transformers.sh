#!/usr/bin/env bash
# Runs broker tests again and again on one Tansu, with no retry. By default the consumer-group
# tests: the two transformers of one group, and three over six partitions with one joining
# late and one leaving early; LKPLAKE_SOAK_FILTER=pipeline runs every pipeline and
# fault-injection test instead (or give any nextest filter expression). One broker for every
# round on purpose: its state from earlier rounds (groups, topics, batch boundaries) is what
# made the two-transformer test lose reports (issue 11).
# The rounds run a nextest archive of the tests, built once at the start, against a snapshot
# of the checkout (a git worktree of HEAD; uncommitted edits are not in it): work and builds
# in the checkout can go on beside a soak of hours.
# LKPLAKE_SOAK_PROFILE=release builds the tests with Cargo's release profile (the default is
# `dev`, as CI builds them): a round of the pipeline tests then spends less of its time in
# debug-build code (the compaction test sends 2,000 reports through the transformer).
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
# The compaction test's eight clients are psycopg, and its watcher is psql: a new machine has
# neither until infra/clients.sh installs them.
./infra/clients.sh
trap './infra/tansu.sh stop "$port"' EXIT
export LKPLAKE_TEST_BROKERS
LKPLAKE_TEST_BROKERS=$(./infra/tansu.sh start "$port")
filter=${LKPLAKE_SOAK_FILTER:-'test(two_transformers_in_one_group) | test(three_transformers_over_six_partitions)'}
if [ "$filter" = pipeline ]; then
    filter='test(/^pipeline::/) | test(/^faults::/)'
fi
soak_dir=$(realpath "$log_dir")
archive="$soak_dir/tests.tar.zst"
mkdir -p "$soak_dir/extracted"
cargo nextest archive --workspace --locked --features lkplake/fault-injection \
    --cargo-profile "${LKPLAKE_SOAK_PROFILE:-dev}" \
    --archive-file "$archive" >"$soak_dir/archive.log" 2>&1
snapshot="$soak_dir/checkout"
git worktree remove --force "$snapshot" 2>/dev/null || rm -rf "$snapshot"
git worktree add --detach "$snapshot" HEAD >/dev/null 2>&1
trap './infra/tansu.sh stop "$port"; git worktree remove --force "$snapshot"' EXIT
echo "soaking $(git rev-parse --short HEAD) (${LKPLAKE_SOAK_PROFILE:-dev} build): $rounds rounds of $filter"

passed=0
failed=0
for round in $(seq 1 "$rounds"); do
    started=$(date +%s)
    if cargo nextest run --archive-file "$archive" --workspace-remap "$snapshot" \
        --extract-to "$soak_dir/extracted" --extract-overwrite \
        --retries 0 --no-fail-fast -E "$filter" >"$log_dir/round-$round.log" 2>&1; then
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
