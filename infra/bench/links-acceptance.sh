#!/usr/bin/env bash
# Issue 37's acceptance on a real list archive: every Message-ID a later mail's own `Closes:` or
# `Link:` trailer names comes out as a `closes` link of that mail, and nothing else does. The
# count is made twice: by `count_links.py` (Python's `email` package and regular expressions,
# independent of ingest/src/parser/links.rs) and by `lkplake parse`; the two lists of
# (Message-ID, mails naming it) must be equal. Then the archive goes through `lkplake run` and
# the regressions of that archive are counted by status.
# Usage: infra/bench/links-acceptance.sh ARCHIVE   (a lore mirror's bare repository, or an mbox)
#        LKPLAKE_BENCH_BIN selects the binary (default target/release/lkplake, else target/debug/lkplake).
set -euo pipefail
cd "$(dirname "$0")/../.."
archive=${1:?usage: $0 ARCHIVE}
bin=${LKPLAKE_BENCH_BIN:-target/release/lkplake}
[ -x "$bin" ] || bin=target/debug/lkplake
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 infra/bench/count_links.py --json "$archive" >"$work/script.json"
"$bin" parse "$archive" >"$work/parsed.json" 2>"$work/parse.err" || true
tail -1 "$work/parse.err"
python3 - "$work/script.json" "$work/parsed.json" <<'EOF'
import collections, json, sys
script = json.load(open(sys.argv[1]))
kinds = collections.Counter()
mails = collections.defaultdict(set)
reports = set()
for line in open(sys.argv[2]):
    o = json.loads(line)
    if "link_key" in o:
        kinds[o["kind"]] += 1
        if o["kind"] == "closes":
            mails[o["target"]].add((o["source"]["path"], o["source"].get("commit"), o["source"]["index"]))
    elif "report_key" in o and o.get("message_id"):
        reports.add(o["message_id"])
parsed = {k: len(v) for k, v in mails.items()}
wanted = script["message_ids"]
differ = sorted(k for k in set(parsed) | set(wanted) if parsed.get(k) != wanted.get(k))
print(f"count_links.py: {len(wanted)} Message-IDs in {script['links']} (mail, Message-ID) pairs")
print(f"lkplake parse:  {len(parsed)} Message-IDs in {sum(parsed.values())} pairs; links by kind {dict(kinds)}")
print(f"reports of the archive named by a closes link: {sum(1 for k in parsed if k in reports)} of {len(reports)}")
for k in differ[:20]:
    print(f"  differs: {k}: script {wanted.get(k)}, parser {parsed.get(k)}")
print(f"differences: {len(differ)}")
sys.exit(1 if differ else 0)
EOF
"$bin" run --lake "$work/lake" "$archive" >/dev/null 2>"$work/run.err" || true
grep -E '^lkplake (ingest|transform):' "$work/run.err" || tail -3 "$work/run.err"
"$bin" sql --lake "$work/lake" --format csv \
    "SELECT verdict, status, count(*) AS culprits FROM regressions GROUP BY 1, 2 ORDER BY 1, 2"
