#!/usr/bin/env bash
# Runs one fuzz target for a number of executions, seeded with the project's real inputs, and
# prints libFuzzer's final statistics (BENCHMARKS.md, "Fuzzing").
# Usage: fuzz/run.sh parse_message|decode_message [RUNS] [-- LIBFUZZER_ARGS...]
#   parse_message   seeded with examples/reports and the corpus fixtures of parse/tests
#   decode_message  seeded with the report JSON `lkplake parse` makes of the same mails
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`); RUSTC_BOOTSTRAP lets the stable
# toolchain build with the flags cargo-fuzz passes. FUZZ_SANITIZER picks cargo-fuzz's
# sanitizer, `none` unless set: with AddressSanitizer parse_message ran 70 inputs a second
# (10 million runs would take 40 hours here), without it 800. lkplake's crates have no unsafe
# code; what `none` gives up is ASan's check of the dependencies' unsafe code. A crash leaves
# its input in fuzz/artifacts/TARGET/ and makes this script exit non-zero.
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: fuzz/run.sh parse_message|decode_message [RUNS]}
runs=${2:-10000000}
shift $(($# < 2 ? $# : 2))
[ "${1:-}" = "--" ] && shift
corpus=corpus/$target
mkdir -p "$corpus"
case "$target" in
    parse_message)
        cp ../examples/reports/* ../parse/tests/fixtures/corpus/*.eml "$corpus"/
        ;;
    decode_message)
        bin=../target/release/lkplake
        [ -x "$bin" ] || bin=../target/debug/lkplake
        [ -x "$bin" ] || { echo "decode_message is seeded by lkplake parse: build lkplake first" >&2; exit 1; }
        n=0
        while IFS= read -r line; do
            printf '%s' "$line" >"$corpus/report-$n.json"
            n=$((n + 1))
        done < <("$bin" parse ../examples/reports ../parse/tests/fixtures/corpus 2>/dev/null)
        ;;
    *) echo "no fuzz target $target" >&2; exit 2 ;;
esac
echo "$target: $(find "$corpus" -type f | wc -l) seed inputs, $runs runs" >&2
log=$(mktemp "/tmp/fuzz-$target.XXXXXX.log")
start=$(date +%s)
status=0
RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer "${FUZZ_SANITIZER:-none}" "$target" "$corpus" -- -runs="$runs" -rss_limit_mb=2048 \
    -print_final_stats=1 "$@" >"$log" 2>&1 || status=$?
grep -E '^(stat::|#[0-9]+[[:space:]]+DONE|==[0-9]+==|SUMMARY|Done )' "$log" || tail -20 "$log"
echo "$target: exit status $status after $(($(date +%s) - start)) s; whole output in $log" >&2
exit "$status"
