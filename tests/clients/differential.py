#!/usr/bin/env python3
"""Differential SQL test: generated queries run through `lkplake serve` (psycopg 3) and through
DuckDB over the same live Parquet files of the lake must return the same rows.

  differential.py LAKE DSN SEED COUNT

DuckDB reads each table's live files (replayed from the Delta log) with the partition values
the log records, and the views from query/src/views.sql, the same text lkplake installs.
Results are compared as multisets; an ORDER BY over every output column makes the order part
of the answer. A LIMIT without a total order only fixes how many rows come back, so there the
rows must be a sub-multiset of the unlimited answer. Floats compare to 1e-9 relative,
timestamps as UTC microseconds.

Prints JSON: {"seed", "queries", "differences": [{"sql", "lkplake", "duckdb"}...] (at most 20),
"different": n, "both_failed": n}.
"""
import collections
import datetime
import glob
import json
import math
import os
import random
import sys
import urllib.parse

import duckdb
import psycopg

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "infra", "bench"))
from query import live_adds  # noqa: E402  (the Delta log replay the DuckDB benchmark uses)

STR, NUM, INT, TS, BOOL = "str", "num", "int", "ts", "bool"
COLUMNS = {
    "metrics": {
        "time": TS, "testcase": STR, "machine": STR, "params": STR, "metric": STR,
        "program": STR, "commit": STR, "role": STR, "value": NUM, "stddev_pct": NUM,
        "change": NUM, "change_unit": STR, "direction": STR, "is_headline": BOOL,
        "report_key": STR,
    },
    "reports": {
        "report_key": STR, "test_index": INT, "message_id": STR, "date": TS, "subject": STR,
        "kind": STR, "headline_metric": STR, "headline_change_pct": NUM, "commit": STR,
        "base_commit": STR, "branch": STR, "testcase": STR, "machine": STR, "threads": INT,
        "sockets": INT, "cpu": STR, "memory_gb": INT, "params": STR, "compiler": STR,
        "kconfig": STR, "rows": INT, "quoted": BOOL,
    },
    "comparisons": {
        "report_key": STR, "time": TS, "testcase": STR, "machine": STR, "params": STR,
        "metric": STR, "base_commit": STR, "commit": STR, "base_value": NUM,
        "head_value": NUM, "change": NUM, "change_unit": STR, "direction": STR,
        "is_headline": BOOL, "verdict": STR,
    },
    "series": {
        "testcase": STR, "machine": STR, "params": STR, "metric": STR, "commit": STR,
        "time": TS, "value": NUM, "min_value": NUM, "max_value": NUM, "samples": INT,
        "direction": STR, "is_headline": BOOL,
    },
    "headlines": {
        "time": TS, "testcase": STR, "machine": STR, "params": STR, "metric": STR,
        "base_commit": STR, "commit": STR, "base_value": NUM, "head_value": NUM,
        "change": NUM, "verdict": STR, "kind": STR, "subject": STR, "report_key": STR,
    },
}
# Columns that hold only partition values: a projection of these alone is answered from the
# Delta log by delta-rs (the LIMIT bug of query/src/limit.rs).
PARTITION = ["testcase", "machine"]
# Joins of the views with the tables, on their keys.
JOINS = [
    ("headlines", "reports", ["report_key", "testcase", "machine", "params"]),
    ("comparisons", "series", ["testcase", "machine", "params", "metric", "commit"]),
    ("comparisons", "reports", ["report_key", "testcase", "machine"]),
    ("metrics", "reports", ["report_key", "testcase", "machine", "params"]),
]


def duckdb_lake(lake):
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for table in ["metrics", "reports"]:
        table_dir = os.path.join(lake, table)
        files = live_adds(table_dir)
        if any(os.path.exists(p) for p in glob.glob(os.path.join(table_dir, "_delta_log", "*.checkpoint.parquet"))):
            raise SystemExit(f"{table_dir} has a checkpoint: replaying JSON commits only is not enough")
        con.execute(f"CREATE TABLE {table}_files (filename VARCHAR, testcase VARCHAR, machine VARCHAR)")
        rows = []
        for path, parts in files.items():
            full = os.path.abspath(os.path.join(table_dir, urllib.parse.unquote(path)))
            rows.append((full, parts["testcase"], parts["machine"]))
        con.executemany(f"INSERT INTO {table}_files VALUES (?, ?, ?)", rows)
        listing = ", ".join("'" + r[0].replace("'", "''") + "'" for r in rows)
        con.execute(
            f"CREATE VIEW {table} AS SELECT * EXCLUDE (filename) FROM "
            f"read_parquet([{listing}], filename = true, hive_partitioning = false) "
            f"JOIN {table}_files USING (filename)"
        )
    with open(os.path.join(ROOT, "query", "src", "views.sql")) as f:
        views = "\n".join(l for l in f.read().splitlines() if not l.lstrip().startswith("--"))
    for view in views.split(";"):
        if view.strip():
            con.execute(view)
    return con


def quote(value):
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, datetime.datetime):
        return "TIMESTAMP '" + value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


class Generator:
    """Queries over the lake's tables and views, with literals sampled from the data so that
    filters select something."""

    def __init__(self, rng, con):
        self.rng = rng
        self.samples = {}
        for table, columns in COLUMNS.items():
            for column, kind in columns.items():
                if kind in (STR, NUM, INT, TS):
                    values = [
                        r[0] for r in con.execute(
                            f'SELECT DISTINCT "{column}" FROM {table} WHERE "{column}" IS NOT NULL '
                            f'ORDER BY 1 LIMIT 200'
                        ).fetchall()
                    ]
                    self.samples[(table, column)] = values

    def literal(self, table, column):
        values = self.samples.get((table, column)) or []
        return self.rng.choice(values) if values else None

    def predicate(self, table, alias=""):
        rng = self.rng
        column, kind = rng.choice(list(COLUMNS[table].items()))
        col = f'{alias}"{column}"'
        if kind == BOOL:
            return rng.choice([col, f"NOT {col}", f"{col} IS NOT NULL"])
        if rng.random() < 0.12:
            return f"{col} IS {rng.choice(['', 'NOT '])}NULL"
        value = self.literal(table, column)
        if value is None:
            return f"{col} IS NULL"
        if kind == STR:
            choice = rng.random()
            if choice < 0.5:
                return f"{col} = {quote(value)}"
            if choice < 0.7:
                others = [self.literal(table, column) for _ in range(3)]
                return f"{col} IN ({', '.join(quote(v) for v in [value] + others if v is not None)})"
            if choice < 0.85 and "\\" not in value:
                # No backslash: DataFusion escapes with it by default, DuckDB does not.
                return f"{col} LIKE {quote(value[: max(1, len(value) // 2)] + '%')}"
            return f"{col} <> {quote(value)}"
        if kind == TS:
            other = self.literal(table, column)
            low, high = sorted([value, other or value])
            return rng.choice([
                f"{col} >= {quote(value)}",
                f"{col} < {quote(value)}",
                f"{col} BETWEEN {quote(low)} AND {quote(high)}",
            ])
        op = rng.choice([">", ">=", "<", "<=", "=", "<>"])
        return f"{col} {op} {quote(value)}"

    def where(self, table, alias=""):
        n = self.rng.choice([0, 1, 1, 2, 3])
        if n == 0:
            return ""
        joiner = " AND " if self.rng.random() < 0.8 else " OR "
        return " WHERE " + joiner.join(f"({self.predicate(table, alias)})" for _ in range(n))

    def order_limit(self, outputs, must_limit=False):
        """ORDER BY every output (a total order) or none, and maybe LIMIT/OFFSET."""
        rng = self.rng
        ordered = rng.random() < 0.5
        sql = ""
        if ordered:
            terms = [f"{o} {rng.choice(['ASC', 'DESC'])} NULLS {rng.choice(['FIRST', 'LAST'])}" for o in outputs]
            rng.shuffle(terms)
            sql += " ORDER BY " + ", ".join(terms)
        limited = must_limit or rng.random() < 0.5
        if limited:
            sql += f" LIMIT {rng.choice([0, 1, 2, 3, 5, 10, 50])}"
            if rng.random() < 0.3:
                sql += f" OFFSET {rng.choice([1, 2, 5])}"
        return sql, ordered, limited

    def projection(self):
        rng = self.rng
        table = rng.choice(list(COLUMNS))
        if rng.random() < 0.25 and table in ("metrics", "reports"):
            columns = rng.sample(PARTITION, rng.choice([1, 2]))
        else:
            columns = rng.sample(list(COLUMNS[table]), rng.choice([1, 2, 3, 4]))
        outputs = [f'"{c}"' for c in columns]
        distinct = "DISTINCT " if rng.random() < 0.3 else ""
        tail, ordered, limited = self.order_limit(outputs, must_limit=rng.random() < 0.3)
        sql = f"SELECT {distinct}{', '.join(outputs)} FROM {table}{self.where(table)}{tail}"
        return sql, ordered, limited

    def aggregate(self):
        rng = self.rng
        table = rng.choice(list(COLUMNS))
        columns = COLUMNS[table]
        groups = rng.sample([c for c, k in columns.items() if k in (STR, INT, BOOL)], rng.choice([0, 1, 2]))
        numeric = [c for c, k in columns.items() if k in (NUM, INT)]
        aggs = []
        for i in range(rng.choice([1, 2, 3])):
            f = rng.choice(["count(*)", "count", "count_distinct", "sum", "avg", "min", "max"])
            if f == "count(*)":
                aggs.append(f"count(*) AS a{i}")
            elif f == "count":
                aggs.append(f'count("{rng.choice(list(columns))}") AS a{i}')
            elif f == "count_distinct":
                aggs.append(f'count(DISTINCT "{rng.choice(list(columns))}") AS a{i}')
            elif f in ("min", "max"):
                aggs.append(f'{f}("{rng.choice(list(columns))}") AS a{i}')
            elif numeric:
                aggs.append(f'{f}("{rng.choice(numeric)}") AS a{i}')
            else:
                aggs.append(f"count(*) AS a{i}")
        outputs = [f'"{g}"' for g in groups] + [a.rsplit(" AS ", 1)[1] for a in aggs]
        sql = f"SELECT {', '.join([f'{chr(34)}{g}{chr(34)}' for g in groups] + aggs)} FROM {table}{self.where(table)}"
        if groups:
            sql += " GROUP BY " + ", ".join(f'"{g}"' for g in groups)
            if rng.random() < 0.3:
                sql += f" HAVING count(*) > {rng.choice([1, 2, 5])}"
        tail, ordered, limited = self.order_limit(outputs) if groups else ("", False, False)
        return sql + tail, ordered, limited

    def join(self):
        rng = self.rng
        left, right, keys = rng.choice(JOINS)
        lcols = rng.sample([c for c in COLUMNS[left] if c not in keys], 2)
        rcols = rng.sample([c for c in COLUMNS[right] if c not in keys], 1)
        outputs = [f'l."{c}"' for c in lcols] + [f'r."{c}"' for c in rcols]
        on = " AND ".join(f'l."{k}" = r."{k}"' for k in keys)
        where = self.where(left, "l.")
        tail, ordered, limited = self.order_limit(outputs)
        sql = f"SELECT {', '.join(outputs)} FROM {left} l JOIN {right} r ON {on}{where}{tail}"
        return sql, ordered, limited

    def query(self):
        return self.rng.choices([self.projection, self.aggregate, self.join], [5, 3, 2])[0]()


def normal(value):
    """A value as (kind, comparable): the same answer from both engines gives the same pair."""
    if value is None:
        return ("null", 0)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return ("ts", round(value.timestamp() * 1_000_000))
    if isinstance(value, bool):
        return ("bool", int(value))
    if isinstance(value, (int, float)) or hasattr(value, "as_integer_ratio"):
        f = float(value)
        return ("nan", 0) if math.isnan(f) else ("num", f)
    return ("str", str(value))


def same_value(a, b):
    if a[0] == "num" and b[0] == "num":
        return a[1] == b[1] or math.isclose(a[1], b[1], rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def same_row(a, b):
    return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))


def key(row):
    # Floats to 9 significant digits, so that rows differing only in the last bits (sums added
    # up in another order) sort together and count as the same row.
    return tuple((kind, float(f"{v:.9g}")) if kind == "num" else (kind, v) for kind, v in row)


def same_multiset(a, b):
    if len(a) != len(b):
        return False
    return all(same_row(x, y) for x, y in zip(sorted(a, key=key), sorted(b, key=key)))


def contained(part, whole):
    remaining = collections.Counter(key(r) for r in whole)
    for r in part:
        k = key(r)
        if remaining[k] <= 0:
            return False
        remaining[k] -= 1
    return True


def unlimited(sql):
    return sql[: sql.index(" LIMIT ")] if " LIMIT " in sql else sql


def main():
    lake, dsn, seed, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    duck = duckdb_lake(lake)
    lk = psycopg.connect(dsn, autocommit=True)
    gen = Generator(random.Random(seed), duck)
    differences, different, both_failed = [], 0, 0
    for _ in range(count):
        sql, ordered, limited = gen.query()
        got, want = {}, {}
        try:
            with lk.cursor() as cur:
                cur.execute(sql)
                got["rows"] = [[normal(v) for v in r] for r in cur.fetchall()]
        except psycopg.Error as e:
            got["error"] = str(e).strip()
        try:
            want["rows"] = [[normal(v) for v in r] for r in duck.execute(sql).fetchall()]
        except duckdb.Error as e:
            want["error"] = str(e).strip()
        if "error" in got and "error" in want:
            both_failed += 1
            continue
        if "error" in got or "error" in want:
            ok = False
        elif ordered:
            ok = len(got["rows"]) == len(want["rows"]) and all(
                same_row(a, b) for a, b in zip(got["rows"], want["rows"]))
        elif limited:
            full = [[normal(v) for v in r] for r in duck.execute(unlimited(sql)).fetchall()]
            ok = len(got["rows"]) == len(want["rows"]) and contained(got["rows"], full)
        else:
            ok = same_multiset(got["rows"], want["rows"])
        if not ok:
            different += 1
            if len(differences) < 20:
                differences.append({
                    "sql": sql,
                    "lkplake": got.get("error") or got["rows"][:5],
                    "lkplake_rows": len(got.get("rows", [])),
                    "duckdb": want.get("error") or want["rows"][:5],
                    "duckdb_rows": len(want.get("rows", [])),
                })
    print(json.dumps({
        "seed": seed, "queries": count, "different": different, "both_failed": both_failed,
        "differences": differences,
    }, default=str))


if __name__ == "__main__":
    main()
