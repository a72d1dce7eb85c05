#!/usr/bin/env bash
# Reading a whole real lore mirror (BENCHMARKS.md, "Reading a public-inbox archive"), side by
# side in one run: git's own dump of the repository (`git cat-file --batch-all-objects
# --batch`), git reading every commit's message the way lkplake asks for it (`rev-list` into
# `cat-file --batch` with `<commit>:m`), and lkplake reading, decoding and parsing every
# message: the `read_archive` example of lkplake-parse (the code path of `lkplake parse`
# without printing, in a release build that needs neither Kafka nor the lake), and the
# `lkplake parse` binary given as LKPLAKE_BENCH_BIN (or target/release/lkplake if built). Wall
# time, messages/s and MB/s of message bytes; peak RSS of each process on its own (lkplake's
# without its git children, sampled from /proc).
# Usage: infra/bench/archive.sh GIT_DIR   (a bare repository, e.g. a mirror brought by
#        `git clone --mirror https://github.com/linux-mailinglist-archives/io-uring.vger.kernel.org.0`)
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=${1:?usage: $0 GIT_DIR}
bin=${LKPLAKE_BENCH_BIN:-target/release/lkplake}
cargo build --release --locked --quiet -p lkplake-parse --example read_archive
reader=target/release/examples/read_archive
export GIT_NO_LAZY_FETCH=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# peak KIB PID: the highest VmHWM of PID and of each of its children while PID runs.
peak() {
    local pid=$1 main=0 kids=0
    while kill -0 "$pid" 2>/dev/null; do
        local v
        v=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        [ "${v:-0}" -gt "$main" ] && main=$v
        for c in $(cat "/proc/$pid/task/$pid/children" 2>/dev/null); do
            v=$(awk '/VmHWM/ {print $2}' "/proc/$c/status" 2>/dev/null || echo 0)
            [ "${v:-0}" -gt "$kids" ] && kids=$v
        done
        sleep 0.1
    done
    echo "$main $kids"
}

now() { date +%s.%N; }

commits=$(git --git-dir="$repo" rev-list --count HEAD)
bytes=$(git --git-dir="$repo" rev-list --reverse HEAD | sed 's/$/:m/' |
    git --git-dir="$repo" cat-file --batch-check='%(objectsize)' | awk '$2 != "missing" {s += $1} END {print s}')
mb=$(echo "$bytes / 1000000" | bc -l)
echo "repository: $repo, $commits commits, $(printf %.1f "$mb") MB of messages, $(du -sh "$repo" | cut -f1) on disk"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(date -u +%F)"
printf '%-44s %9s %12s %9s %14s\n' what seconds messages/s MB/s "peak RSS MiB"

run() {
    local label=$1
    shift
    local t0 t1 pid
    t0=$(now)
    bash -c "$*" >"$work/out" 2>"$work/err" &
    pid=$!
    read -r main kids < <(peak "$pid")
    wait "$pid"
    t1=$(now)
    local s
    s=$(echo "$t1 - $t0" | bc -l)
    printf '%-44s %9.2f %12.0f %9.1f %14s\n' "$label" "$s" "$(echo "$commits / $s" | bc -l)" \
        "$(echo "$mb / $s" | bc -l)" "$((main / 1024)) (+$((kids / 1024)))"
}

run "git cat-file --batch-all-objects --batch" \
    "git --git-dir='$repo' cat-file --batch-all-objects --batch >/dev/null"
run "git rev-list | git cat-file --batch (<c>:m)" \
    "git --git-dir='$repo' rev-list --reverse HEAD | sed 's/\$/:m/' | git --git-dir='$repo' cat-file --batch >/dev/null"
run "lkplake-parse read_archive (release)" "exec '$reader' '$repo'"
echo "read_archive: $(cat "$work/out")"
if [ -x "$bin" ]; then
    run "lkplake parse ($bin)" "exec '$bin' parse '$repo' >/dev/null"
    echo "lkplake: $(tail -1 "$work/err")"
fi
echo "(peak RSS: the measured process, and in brackets its largest child: git cat-file for lkplake;"
echo " the pipelines' first command for the git rows)"
