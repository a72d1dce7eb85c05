#!/usr/bin/env python3
"""Reads an lkplake lake with engines other than lkplake, as docs/QUERY.md shows.

  other_engines.py LAKE

LAKE is a directory or an s3:// URL; for S3 the standard AWS variables (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ALLOW_HTTP) are passed to delta-rs
as storage options. Prints JSON: per engine, per table, the row count and the number of
distinct report keys:

  {"deltalake": {"metrics": {"rows": N, "reports": K}, ...}, "polars": {...}, "duckdb": {...}}

A lake in format 2 stores `metrics` with base and head side by side and values as decimals
(docs/CLI.md, "Lake format"): each engine unpivots it into metric rows and rebuilds the values
as docs/QUERY.md shows, and `metrics` also gets the number of distinct values and the smallest
and largest, which differ from lkplake's if a single value is rebuilt wrong. In format 3 a
compacted row names its report by `report_ref`: each engine takes the report key from the
partition's report row of that number (`metric` null) before unpivoting.

- deltalake: Python deltalake (delta-rs) reads each table's current version into Arrow.
- polars: pl.scan_delta over the same table.
- duckdb: DuckDB's read_parquet over the live file list of the Delta log (local lakes; its
  delta and httpfs extensions are downloaded at run time, which this machine cannot), or, on
  S3, over the Arrow dataset deltalake opens, so DuckDB plans and counts.
"""

import json
import os
import sys

import deltalake
import duckdb
import polars as pl

TABLES = ["metrics", "reports", "failures"]

# Format 3's rows as format 2's, in DuckDB, as docs/QUERY.md gives it: a compacted row takes its
# report's time, key and commits from the report row (no metric) of its partition and number, a
# row appended since has its own.
DUCKDB_OBSERVATIONS_V3 = """
SELECT coalesce(o.time, r.time) AS time, o.testcase, o.machine, o.params, o.metric, o.program,
    coalesce(o.report_key, r.report_key) AS report_key,
    coalesce(o.base_commit, r.base_commit) AS base_commit,
    CASE WHEN o.report_ref IS NOT NULL AND o.role = 'head' THEN r.commit ELSE o.commit END AS commit,
    o.role, o.base_mantissa, o.base_scale, o.base_float, o.base_stddev_pct, o.base_change,
    o.head_mantissa, o.head_scale, o.head_float, o.head_stddev_pct, o.change,
    o.change_unit, o.direction, o.is_headline, o.grouped
FROM stored AS o LEFT JOIN stored AS r
    ON r.metric IS NULL AND r.testcase = o.testcase AND r.machine = o.machine AND r.report_ref = o.report_ref
WHERE o.metric IS NOT NULL
"""

# Format 2's metric rows and values, in DuckDB: a base where there is a base value, the other
# side where there is a role; mantissa / 10^scale, or times 10^-scale for a negative scale.
DUCKDB_METRICS_V2 = """
WITH t AS ({observations}), sides AS (
    SELECT report_key, base_mantissa AS m, base_scale AS s, base_float AS f FROM t
    WHERE base_mantissa IS NOT NULL OR base_float IS NOT NULL
    UNION ALL
    SELECT report_key, head_mantissa, head_scale, head_float FROM t WHERE role IS NOT NULL
), v AS (
    SELECT report_key, CASE
        WHEN m IS NULL THEN f
        WHEN s >= 0 THEN m / pow(10, s)
        ELSE m * pow(10, -s)
    END AS value FROM sides
)
SELECT count(*), count(DISTINCT report_key), count(DISTINCT value), min(value), max(value) FROM v
"""


def format_of(dt):
    return int(dt.metadata().configuration.get("lkplake.format", "1"))


def python_value(m, s, f):
    if m is None:
        return f
    # Integer arithmetic, then one correctly rounded conversion: exact.
    return m / 10**s if s >= 0 else float(m * 10 ** (-s))


def deltalake_metrics_v2(dt, version):
    columns = [
        "report_key", "role", "base_mantissa", "base_scale", "base_float",
        "head_mantissa", "head_scale", "head_float",
    ]
    if version >= 3:
        columns += ["testcase", "machine", "metric", "report_ref"]
    t = dt.to_pyarrow_table(columns=columns).to_pylist()
    if version >= 3:
        # Each partition's report rows, by number.
        named = {(r["testcase"], r["machine"], r["report_ref"]): r["report_key"]
                 for r in t if r["metric"] is None}
        t = [dict(r, report_key=r["report_key"] or named[(r["testcase"], r["machine"], r["report_ref"])])
             for r in t if r["metric"] is not None]
    values, keys = [], set()
    for r in t:
        keys.add(r["report_key"])
        if r["base_mantissa"] is not None or r["base_float"] is not None:
            values.append(python_value(r["base_mantissa"], r["base_scale"], r["base_float"]))
        if r["role"] is not None:
            values.append(python_value(r["head_mantissa"], r["head_scale"], r["head_float"]))
    return summary(len(values), len(keys), len(set(values)), min(values), max(values))


def polars_metrics_v2(uri, options, version):
    lf = pl.scan_delta(uri, storage_options=options)
    if version >= 3:
        keys = ["testcase", "machine", "report_ref"]
        named = lf.filter(pl.col("metric").is_null()).select(*keys, pl.col("report_key").alias("named"))
        lf = (
            lf.filter(pl.col("metric").is_not_null())
            .join(named, on=keys, how="left")
            .with_columns(pl.coalesce("report_key", "named").alias("report_key"))
        )

    def side(prefix, keep):
        m, s = pl.col(f"{prefix}_mantissa"), pl.col(f"{prefix}_scale").cast(pl.Float64)
        value = (
            pl.when(m.is_null()).then(pl.col(f"{prefix}_float"))
            .when(s >= 0).then(m.cast(pl.Float64) / pl.lit(10.0).pow(s))
            .otherwise(m.cast(pl.Float64) * pl.lit(10.0).pow(-s))
        )
        return lf.filter(keep).select(pl.col("report_key"), value.alias("value"))

    has_base = pl.col("base_mantissa").is_not_null() | pl.col("base_float").is_not_null()
    v = pl.concat([side("base", has_base), side("head", pl.col("role").is_not_null())])
    c = v.select(
        pl.len().alias("rows"), pl.col("report_key").n_unique().alias("reports"),
        pl.col("value").n_unique().alias("values"), pl.col("value").min().alias("min"),
        pl.col("value").max().alias("max"),
    ).collect()
    return summary(*(c[k][0] for k in ["rows", "reports", "values", "min", "max"]))


def summary(rows, reports, values, lo, hi):
    return {"rows": rows, "reports": reports, "values": values, "min": lo, "max": hi}


def storage_options(lake):
    if not lake.startswith(("s3://", "s3a://")):
        return None
    names = ["AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ALLOW_HTTP"]
    return {name: os.environ[name] for name in names if name in os.environ}


def main():
    lake = sys.argv[1].rstrip("/")
    options = storage_options(lake)
    out = {"deltalake": {}, "polars": {}, "duckdb": {}}
    con = duckdb.connect()
    for table in TABLES:
        uri = f"{lake}/{table}"
        dt = deltalake.DeltaTable(uri, storage_options=options)
        version = format_of(dt)
        if table == "metrics" and version >= 2:
            out["deltalake"][table] = deltalake_metrics_v2(dt, version)
            out["polars"][table] = polars_metrics_v2(uri, options, version)
            con.register("stored", dt.to_pyarrow_dataset())
            observations = DUCKDB_OBSERVATIONS_V3 if version >= 3 else "SELECT * FROM stored"
            sql = DUCKDB_METRICS_V2.format(observations=observations)
            out["duckdb"][table] = summary(*con.execute(sql).fetchall()[0])
            con.unregister("stored")
            continue

        arrow = dt.to_pyarrow_table(columns=["report_key"])
        keys = arrow.column("report_key").unique()
        out["deltalake"][table] = {"rows": arrow.num_rows, "reports": len(keys)}

        counted = (
            pl.scan_delta(uri, storage_options=options)
            .select(pl.len().alias("rows"), pl.col("report_key").n_unique().alias("reports"))
            .collect()
        )
        out["polars"][table] = {"rows": counted["rows"][0], "reports": counted["reports"][0]}

        if options is None:
            files = dt.file_uris()
            if files:
                # Partition values live in the directory names, hive style.
                rows, reports = con.execute(
                    "SELECT count(*), count(DISTINCT report_key) FROM read_parquet(?, hive_partitioning = true)",
                    [files],
                ).fetchall()[0]
            else:
                rows, reports = 0, 0
        else:
            dataset = dt.to_pyarrow_dataset()
            con.register("lake_table", dataset)
            rows, reports = con.execute(
                "SELECT count(*), count(DISTINCT report_key) FROM lake_table"
            ).fetchall()[0]
            con.unregister("lake_table")
        out["duckdb"][table] = {"rows": rows, "reports": reports}
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
