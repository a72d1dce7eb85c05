#!/usr/bin/env bash
# Peak memory of `lkplake parse` on a large `.gz` (issue 36, item 12; BENCHMARKS.md, "Large
# inputs"): memory must stay bounded whatever the input's size.
#
# 1. archive.gz: GIB GiB of generated list mail in mbox form (discussion, and a kernel test robot
#    report every 50th message), streamed through `gzip -1` into a lone `.gz` (not `.mbox.gz`:
#    any `.gz` whose content starts with a `From ` line is split as an mbox). Expected: every
#    message read, every report found, exit 0, peak RSS a few tens of MiB.
# 2. text.gz: GIB GiB of one text that is not an mbox, so one message far over the 64 MiB a
#    message may be (`source::MAX_MAIL_BYTES`). Expected: the message refused with the error
#    naming the file and the limit, exit 1; peak RSS about 64 MiB more than case 1 (the
#    message's first 64 MiB are held to know it is larger). How much of the file is read is not
#    measured here; that reading stops at the limit is checked by a unit test
#    (`source::tests::a_single_message_over_the_limit_is_read_no_further_than_the_limit_and_one_byte`).
#
# GIB counts the bytes lkplake reads (decompressed); generated mail repeats itself, so the `.gz`
# files are about 25 times smaller (2 GiB of mbox makes an 80 MB archive.gz). Generating takes
# about 15 s per GiB and case (Python beside `gzip -1`, 2026-12-05, 2 cores). Each case is
# checked, and the script fails when lkplake did not do the work it is timed for.
#
# Usage: infra/bench/large-gz.sh [GIB]     (default 2)
#   LKPLAKE_BENCH_BIN=path/to/lkplake  another build instead of the release build, which is
#                                      built when it is not set
set -euo pipefail
cd "$(dirname "$0")/../.."
gib=${1:-2}
[ -x /usr/bin/time ] || { echo "large-gz.sh: needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 1; }
bin=${LKPLAKE_BENCH_BIN:-target/release/lkplake}
[ -n "${LKPLAKE_BENCH_BIN:-}" ] || cargo build --release --locked --quiet
work=$(mktemp -d /tmp/lkplake-large-gz.XXXXXX)
trap 'rm -rf "$work"' EXIT
bytes=$(awk -v g="$gib" 'BEGIN {printf "%.0f", g * 1073741824}')
now() { date +%s.%N; }

t0=$(now)
python3 infra/bench/gen_mail.py mbox "$bytes" 2>"$work/gen-mbox" | gzip -1 >"$work/archive.gz"
python3 infra/bench/gen_mail.py text "$bytes" 2>"$work/gen-text" | gzip -1 >"$work/text.gz"
t1=$(now)
# messages M reports R bytes B
read -r _ messages _ reports _ mbox_bytes <"$work/gen-mbox"
echo "generated in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", b - a}') s: archive.gz $(du -h "$work/archive.gz" | cut -f1) ($mbox_bytes bytes of mbox, $messages messages, $reports reports), text.gz $(du -h "$work/text.gz" | cut -f1) ($bytes bytes of text)"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(date -u +%F); $bin"

# measure NAME FILE: runs `lkplake parse FILE`, leaves its exit status in $status and its
# stderr in $work/NAME.err, and prints wall time and peak RSS.
measure() {
    local name=$1 file=$2
    status=0
    /usr/bin/time -v -o "$work/$name.time" "$bin" parse --format json "$file" >"$work/$name.out" 2>"$work/$name.err" || status=$?
    local s kib
    s=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); t = 0; for (i = 1; i <= n; i++) t = t * 60 + p[i]; print t}' "$work/$name.time")
    kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$work/$name.time")
    printf '%-12s %10.2f s %12d MiB peak RSS   exit %d\n' "$name" "$s" "$((kib / 1024))" "$status"
}

fail() {
    echo "large-gz.sh: $1" >&2
    tail -5 "$work/$2.err" >&2
    exit 1
}

measure archive.gz "$work/archive.gz"
summary=$(tail -1 "$work/archive.gz.err")
echo "  $summary"
[ "$status" = 0 ] || fail "archive.gz: lkplake parse exited $status" archive.gz
# lkplake parse: M messages: R reports (0 quoted copies), 0 mentions, 0 links, N not reports, 0 failed
case "$summary" in
"lkplake parse: $messages messages: $reports reports (0 quoted copies), 0 mentions, 0 links, $((messages - reports)) not reports, 0 failed") ;;
*) fail "archive.gz: expected $messages messages and $reports reports, none failed" archive.gz ;;
esac
[ "$(grep -c . "$work/archive.gz.out")" = "$reports" ] || fail "archive.gz: expected $reports reports on stdout" archive.gz

measure text.gz "$work/text.gz"
echo "  $(grep -m1 'larger than' "$work/text.gz.err" || true)"
[ "$status" = 1 ] || fail "text.gz: expected exit 1 (one message refused), got $status" text.gz
grep -q "^lkplake parse: $work/text.gz, message 0: larger than 67108864 bytes" "$work/text.gz.err" ||
    fail "text.gz: expected the error naming the file and the 64 MiB limit" text.gz
grep -q "1 messages: 0 reports (0 quoted copies), 0 mentions, 0 links, 0 not reports, 1 failed" "$work/text.gz.err" ||
    fail "text.gz: expected one message, refused" text.gz
