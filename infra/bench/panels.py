#!/usr/bin/env python3
"""Every Grafana panel query of infra/grafana/dashboards/*.json timed on `lkplake serve` and on
DuckDB over the same live Parquet files (issue 38: "query.sh also runs each panel query ... each
against DuckDB where DuckDB can run it").

  panels.py LAKE DSN [--table]

LAKE is the lake directory, DSN a libpq connection string of `lkplake serve` over it. Variables
and macros are expanded the way tests/cli/dashboards.rs expands them (Grafana's PostgreSQL
source: the saved or first option, multi-value variables as a quoted list, `$__timeFilter` over
2015-2030). Each panel query runs LKPLAKE_BENCH_RUNS times (default 5) on each engine after one
warm-up; DuckDB gets the lake's tables, query/src/views.sql and query/src/discussion.sql, and a
query either engine cannot run is reported with its error (a panel over `changes` needs
`lkplake trend` first). Prints one JSON object, or with --table a Markdown table.
"""
import glob
import json
import os
import re
import statistics
import sys
import time

import duckdb
import psycopg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import query  # noqa: E402  (the Delta log replay and DuckDB set-up of query.sh)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
RUNS = int(os.environ.get("LKPLAKE_BENCH_RUNS", "5"))
FROM, TO = "2015-01-01T00:00:00Z", "2030-01-01T00:00:00Z"
SECONDS = {"s": 1, "": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def macro_args(sql, start):
    """The arguments of a macro call whose `(` is at start - 1, and where the call ends."""
    depth, args = 0, [""]
    for i in range(start, len(sql)):
        c = sql[i]
        if c == "(":
            depth += 1
        elif c == ")" and depth == 0:
            return [a.strip() for a in args if a.strip()], i + 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            args.append("")
            continue
        args[-1] += c
    raise ValueError(f"unclosed macro call in {sql}")


def expand_macros(sql):
    out = ""
    while (start := sql.find("$__")) >= 0:
        out += sql[:start]
        name = re.match(r"\w*", sql[start + 3:]).group(0)
        args, end = macro_args(sql, start + 3 + len(name) + 1)
        def group():
            number, unit = re.fullmatch(r"(\d+)([a-z]?)", args[1].strip("'")).groups()
            secs = int(number) * SECONDS[unit]
            return f"floor(extract(epoch from {args[0]})/{secs})*{secs}"
        out += {
            "time": lambda: f'{args[0]} AS "time"',
            "timeFilter": lambda: f"{args[0]} BETWEEN '{FROM}' AND '{TO}'",
            "timeFrom": lambda: f"'{FROM}'",
            "timeTo": lambda: f"'{TO}'",
            "timeGroup": group,
            "timeGroupAlias": lambda: f'{group()} AS "time"',
        }[name]()
        sql = sql[end:]
    return out + sql


def interpolate(sql, values):
    for name in sorted(values, key=len, reverse=True):
        sql = sql.replace("${" + name + "}", values[name]).replace("$" + name, values[name])
    return sql


def quote_list(options):
    return ",".join("'" + o.replace("'", "''") + "'" for o in options)


def is_postgres(datasource):
    return isinstance(datasource, dict) and datasource.get("type") == "grafana-postgresql-datasource"


def panel_queries(pg):
    """(dashboard: panel [target], expanded SQL) for every PostgreSQL panel query."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "infra", "grafana", "dashboards", "*.json"))):
        dashboard = json.load(open(path))
        values = {}
        for variable in dashboard.get("templating", {}).get("list", []):
            kind = variable.get("type")
            if kind == "custom":
                options = [o.strip() for o in variable["query"].split(",")]
            elif kind == "query" and is_postgres(variable.get("datasource")):
                query = variable["query"]
                query = query if isinstance(query, str) else query.get("rawSql", "")
                rows = pg.execute(expand_macros(interpolate(query, values))).fetchall()
                options = [str(r[0]) for r in rows]
            else:
                continue
            current = variable.get("current", {}).get("value")
            chosen = current if isinstance(current, list) else [current]
            if "$__all" in chosen:
                chosen = options
            chosen = [c for c in chosen if c in options] or options[:1]
            multi = variable.get("multi") or variable.get("includeAll")
            values[variable["name"]] = quote_list(chosen) if multi else "".join(chosen)
        for panel in dashboard.get("panels", []):
            for target in panel.get("targets", []):
                source = target.get("datasource") if isinstance(target.get("datasource"), dict) \
                    else panel.get("datasource")
                if "rawSql" in target and is_postgres(source):
                    name = f"{dashboard['title']}: {panel.get('title')} [{target.get('refId')}]"
                    out.append((name, expand_macros(interpolate(target["rawSql"], values))))
    return out


def duckdb_lake(lake):
    con = duckdb.connect()
    tables = [os.path.basename(os.path.dirname(d)) for d in sorted(glob.glob(os.path.join(lake, "*", "_delta_log")))]
    query.register(con, lake, tables)
    for sql_file in ("views.sql", "discussion.sql"):
        query.define_views(con, sql_file, skip_failing=True)
    return con


def timed(run, sql):
    rows = len(run(sql))
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        run(sql)
        times.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(statistics.median(times), 2), "rows": rows}


def main():
    lake, dsn = sys.argv[1:3]
    con = duckdb_lake(lake)
    results = {}
    with psycopg.connect(dsn, autocommit=True) as pg:
        for name, sql in panel_queries(pg):
            try:
                result = {"lkplake": timed(lambda q: pg.execute(q).fetchall(), sql)}
            except psycopg.Error as e:
                # A panel over a table the lake does not have yet (`changes` before `lkplake trend`).
                results[name] = {"lkplake": {"error": str(e).splitlines()[0][:160]}}
                continue
            try:
                result["duckdb"] = timed(lambda q: con.execute(q).fetchall(), sql)
            except duckdb.Error as e:
                result["duckdb"] = {"error": str(e).splitlines()[0][:160]}
            results[name] = result
    if sys.argv[3:] == ["--table"]:
        print_table(results)
    else:
        print(json.dumps({"engine": "duckdb " + duckdb.__version__, "panels": results}))


def print_table(results):
    print(f"| panel | lkplake rows | lkplake median | duckdb {duckdb.__version__} median | lkplake / DuckDB |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        ours, duck = r["lkplake"], r.get("duckdb") or {}
        if "error" in ours:
            print(f"| {name} | | {ours['error']} | | |")
        elif "error" in duck:
            print(f"| {name} | {ours['rows']} | {ours['median_ms']:.2f} ms | n/a: {duck['error']} | |")
        else:
            ratio = ours["median_ms"] / duck["median_ms"]
            print(f"| {name} | {ours['rows']} | {ours['median_ms']:.2f} ms | {duck['median_ms']:.2f} ms | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
