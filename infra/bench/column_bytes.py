#!/usr/bin/env python3
"""Bytes per row of a Delta table's live Parquet files, whole and per column (BENCHMARKS.md).

Usage: infra/bench/column_bytes.py TABLE_DIR [METRIC_ROWS]
METRIC_ROWS divides instead of the files' row count: a lake in format 2 stores `metrics` as one row
per table row (base and head side by side), and what it costs is per metric row of the view.
Reads the live files from the Delta log (query.live_files) and sums each column chunk's
compressed size from the Parquet footers; the partition columns are in the paths, not the
files. Prints a Markdown table: column, bytes per row, share of the file bytes.
"""
import os
import sys

import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import query  # noqa: E402


def main(table_dir, metric_rows=None):
    files = query.live_files(table_dir)
    rows, file_bytes, columns = 0, 0, {}
    for path in files:
        meta = pq.ParquetFile(path).metadata
        rows += meta.num_rows
        file_bytes += os.path.getsize(path)
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                chunk = group.column(c)
                name = chunk.path_in_schema
                columns[name] = columns.get(name, 0) + chunk.total_compressed_size
    stored = rows
    rows = metric_rows or rows
    print(f"{len(files)} live files, {stored} stored rows, {file_bytes} bytes: {file_bytes / rows:.2f} bytes per metric row ({rows})")
    print("| column | bytes/row | share |")
    print("|---|---:|---:|")
    for name, size in sorted(columns.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {size / rows:.3f} | {100 * size / file_bytes:.1f} % |")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
