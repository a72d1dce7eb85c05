#!/usr/bin/env python3
"""Reads an lkplake lake with engines other than lkplake, as docs/QUERY.md shows.

  other_engines.py LAKE

LAKE is a directory or an s3:// URL; for S3 the standard AWS variables (AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ALLOW_HTTP) are passed to delta-rs
as storage options. Prints JSON: per engine, per table, the row count and the number of
distinct report keys:

  {"deltalake": {"metrics": {"rows": N, "reports": K}, ...}, "polars": {...}, "duckdb": {...}}

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
