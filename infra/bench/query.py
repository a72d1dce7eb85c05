#!/usr/bin/env python3
"""DuckDB side of infra/bench/query.sh: the lake's live Parquet files (replayed from the Delta
log, so files replaced by compaction are not read twice), the views of query/src/views.sql and
the queries of query/benches/queries.sql, timed in-process. Prints JSON:
{"engine": "duckdb <version>", "rows": {table: n}, "queries": {name: {"median_ms", "min_ms", "rows"}}}
"""
import glob
import json
import os
import statistics
import sys
import time
import urllib.parse

import duckdb

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
RUNS = int(os.environ.get("LKPLAKE_BENCH_RUNS", "10"))


def live_adds(table_dir):
    """The live files of a Delta table, replayed from its JSON commits: {log path: partition values}."""
    live = {}
    for f in sorted(glob.glob(os.path.join(table_dir, "_delta_log", "*.json"))):
        with open(f) as log:
            for line in log:
                action = json.loads(line)
                if "add" in action:
                    live[action["add"]["path"]] = action["add"]["partitionValues"]
                elif "remove" in action:
                    live.pop(action["remove"]["path"], None)
    return live


def live_files(table_dir):
    live = live_adds(table_dir)
    return [os.path.join(table_dir, urllib.parse.unquote(p)) for p in live]




def queries():
    named, current = [], None
    with open(os.path.join(ROOT, "query", "benches", "queries.sql")) as f:
        for line in f:
            if line.startswith("-- name: "):
                current = [line[len("-- name: "):].strip(), ""]
                named.append(current)
            elif not line.startswith("--") and current is not None:
                current[1] += line
    keys = ["testcase", "machine", "params", "metric", "year", "next_year"]
    out = []
    for name, sql in named:
        for key in keys:
            value = os.environ.get("LKPLAKE_BENCH_" + key.upper())
            if value is not None:
                sql = sql.replace("{" + key + "}", value.replace("'", "''"))
        out.append((name, sql.strip().rstrip(";")))
    return out


def register(con, lake, tables):
    """A DuckDB view over the live Parquet files of each of `tables` that has any (`mentions` as
    `mention_mails`, the name lkplake serves it under)."""
    for table in tables:
        files = live_files(os.path.join(lake, table))
        if not files:
            continue
        name = "mention_mails" if table == "mentions" else table
        listing = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{listing}], hive_partitioning = true)")


def define_views(con, sql_file, skip_failing=False):
    """The views of query/src/SQL_FILE, the text lkplake installs; with skip_failing, a view
    DuckDB cannot define is left out (the queries over it then report DuckDB's error)."""
    with open(os.path.join(ROOT, "query", "src", sql_file)) as f:
        text = "\n".join(l for l in f.read().splitlines() if not l.lstrip().startswith("--"))
    for view in text.split(";"):
        if view.strip():
            try:
                con.execute(view)
            except duckdb.Error:
                if not skip_failing:
                    raise


def main():
    lake = sys.argv[1]
    con = duckdb.connect()
    register(con, lake, ["metrics", "reports"])
    rows = {table: con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] for table in ["metrics", "reports"]}
    define_views(con, "views.sql")
    results = {}
    for name, sql in queries():
        n = len(con.execute(sql).fetchall())  # warm-up, and the row count
        times = []
        for _ in range(RUNS):
            started = time.perf_counter()
            con.execute(sql).fetchall()
            times.append((time.perf_counter() - started) * 1000)
        results[name] = {"median_ms": round(statistics.median(times), 2), "min_ms": round(min(times), 2), "rows": n}
    print(json.dumps({"engine": "duckdb " + duckdb.__version__, "rows": rows, "queries": results}))


if __name__ == "__main__":
    main()
