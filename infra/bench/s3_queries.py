"""The query half of infra/bench/s3.sh: the benchmark queries (query/benches/queries.sql, plus a
count and the headlines panel of the dashboards) on a local lake and on the same lake on S3,
each through one `lkplake serve` (a first run, then repeats) and through `lkplake sql` (a new
process per query), with the S3 requests each run made, read off s3s-fs's request log.
Prints Markdown tables."""

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import time

import psycopg

sys.path.insert(0, os.path.dirname(__file__))
import s3_requests  # noqa: E402

REPEATS = 5
IDLE_SECONDS = 20


def benchmark_queries(args) -> dict:
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    text = open(os.path.join(root, "query/benches/queries.sql")).read()
    queries = {}
    for block in re.split(r"^-- name: ", text, flags=re.M)[1:]:
        name, body = block.split("\n", 1)
        sql = "\n".join(l for l in body.splitlines() if not l.startswith("--")).strip()
        queries[name.strip()] = sql.format(
            testcase=args.testcase,
            machine=args.machine,
            params=args.params,
            metric=args.metric,
            year=args.year,
            next_year=int(args.year) + 1,
        )
    queries["count"] = "SELECT count(*) FROM metrics"
    queries["headlines"] = (
        "SELECT time, testcase, machine, metric, change, kind, subject FROM headlines "
        "ORDER BY time DESC LIMIT 50"
    )
    return queries


def log_size(args) -> int:
    return os.path.getsize(args.s3_log)


def requests_since(args, start: int) -> tuple[int, str]:
    counts = s3_requests.kinds(args.s3_log, start, log_size(args))
    return sum(counts.values()), s3_requests.describe(counts)


def wait_port(port: int, proc: subprocess.Popen, log: str) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"serve exited: {open(log).read()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"serve did not listen on {port}: {open(log).read()}")


def through_serve(args, lake: str, queries: dict) -> tuple[dict, str]:
    """Per query: (first run ms, first run requests, median repeat ms, median repeat
    requests, rows); and the requests the idle server made in IDLE_SECONDS."""
    log = os.path.join(args.work, f"serve-{'s3' if lake.startswith('s3://') else 'local'}.log")
    start = log_size(args)
    proc = subprocess.Popen(
        [args.bin, "serve", "--lake", lake, "--pg", f"127.0.0.1:{args.pg_port}",
         "--statement-timeout", "600s"],
        stderr=open(log, "w"),
    )
    try:
        wait_port(args.pg_port, proc, log)
        opening, _ = requests_since(args, start)
        results = {}
        with psycopg.connect(
            f"host=127.0.0.1 port={args.pg_port} user=lkplake dbname=lkplake", autocommit=True
        ) as conn:
            for name, sql in queries.items():
                runs = []
                for _ in range(1 + REPEATS):
                    before = log_size(args)
                    t0 = time.perf_counter()
                    rows = conn.execute(sql).fetchall()
                    ms = (time.perf_counter() - t0) * 1000
                    runs.append((ms, requests_since(args, before)[0], len(rows)))
                first, repeats = runs[0], runs[1:]
                results[name] = (
                    first[0],
                    first[1],
                    statistics.median(r[0] for r in repeats),
                    statistics.median(r[1] for r in repeats),
                    first[2],
                )
        before = log_size(args)
        time.sleep(IDLE_SECONDS)
        idle = requests_since(args, before)[1]
        return results, f"opening the lake: {opening} requests; idle for {IDLE_SECONDS} s (default --refresh 2s): {idle}"
    finally:
        proc.terminate()
        proc.wait()


def through_sql(args, lake: str, queries: dict) -> dict:
    """Per query, one new `lkplake sql` process: (ms, requests, request kinds)."""
    results = {}
    for name, sql in queries.items():
        before = log_size(args)
        t0 = time.perf_counter()
        subprocess.run(
            [args.bin, "sql", "--lake", lake, "--format", "csv", sql],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        ms = (time.perf_counter() - t0) * 1000
        results[name] = (ms, *requests_since(args, before))
    return results


def main() -> None:
    p = argparse.ArgumentParser()
    for a in ["bin", "local", "s3", "s3-log", "work", "testcase", "machine", "params", "metric", "year"]:
        p.add_argument(f"--{a}", required=True)
    p.add_argument("--pg-port", type=int, required=True)
    args = p.parse_args()
    queries = benchmark_queries(args)

    local, local_note = through_serve(args, args.local, queries)
    remote, remote_note = through_serve(args, args.s3, queries)
    print(f"`lkplake serve`, one connection; first run, then the median of {REPEATS} repeats:")
    print()
    print("| query | rows | local first | local repeat | S3 first | S3 first requests | S3 repeat | S3 repeat requests |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in queries:
        lf, _, lr, _, rows = local[name]
        sf, sfr, sr, srr, srows = remote[name]
        if rows != srows:
            sys.exit(f"{name}: {rows} rows locally, {srows} on S3")
        print(f"| {name} | {rows} | {lf:.1f} ms | {lr:.1f} ms | {sf:.1f} ms | {sfr} | {sr:.1f} ms | {srr:g} |")
    print()
    print(f"- local serve: {local_note}")
    print(f"- S3 serve: {remote_note}")
    print()
    local_sql = through_sql(args, args.local, queries)
    remote_sql = through_sql(args, args.s3, queries)
    print("`lkplake sql`, a new process per query (opens the lake, reads footers, runs the query):")
    print()
    print("| query | local | S3 | S3 requests |")
    print("|---|---:|---:|---|")
    for name in queries:
        print(f"| {name} | {local_sql[name][0]:.0f} ms | {remote_sql[name][0]:.0f} ms | {remote_sql[name][2]} |")


if __name__ == "__main__":
    main()
