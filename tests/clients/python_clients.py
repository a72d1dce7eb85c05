#!/usr/bin/env python3
"""The Python Postgres clients people already use, against `lkplake serve`, for the tests.

  python_clients.py CLIENT HOST PORT PASSWORD

CLIENT is one of sqlalchemy (SQLAlchemy 2 engine over psycopg 3, pandas.read_sql with a bound
parameter, inspect()), psycopg2 or asyncpg. Each reads the same things and prints one JSON
object:

  {"throughput": head value of seed 002's vm-scalability.throughput,
   "reports": count(*) of reports, "metrics": count(*) of metrics, ...client extras}

A failure prints {"error": "..."} and exits 1, so the test shows what the client said.
"""

import asyncio
import json
import sys
import traceback

THROUGHPUT = (
    "SELECT head_value FROM comparisons WHERE testcase = {tc} AND machine = {m} "
    "AND metric = {metric}"
)
PARAMS = ("vm-scalability", "lkp-csl-2sp3", "vm-scalability.throughput")


def sqlalchemy_client(host, port, password):
    import pandas
    import sqlalchemy

    url = sqlalchemy.engine.URL.create(
        "postgresql+psycopg", username="lkplake", password=password,
        host=host, port=int(port), database="lkplake",
    )
    engine = sqlalchemy.create_engine(url)
    sql = sqlalchemy.text(THROUGHPUT.format(tc=":tc", m=":m", metric=":metric"))
    frame = pandas.read_sql(sql, engine, params=dict(zip(("tc", "m", "metric"), PARAMS)))
    counts = pandas.read_sql(
        "SELECT (SELECT count(*) FROM reports) AS reports, (SELECT count(*) FROM metrics) AS metrics",
        engine,
    )
    inspector = sqlalchemy.inspect(engine)
    with engine.connect() as conn:
        server_version = list(conn.dialect.server_version_info)
    return {
        "throughput": float(frame["head_value"].iloc[0]),
        "rows": len(frame),
        "reports": int(counts["reports"].iloc[0]),
        "metrics": int(counts["metrics"].iloc[0]),
        "server_version_info": server_version,
        "tables": sorted(inspector.get_table_names()),
        "views": sorted(inspector.get_view_names()),
        "reports_columns": [c["name"] for c in inspector.get_columns("reports")][:4],
    }


def psycopg2_client(host, port, password):
    import psycopg2

    conn = psycopg2.connect(host=host, port=port, user="lkplake", dbname="lkplake",
                            password=password, connect_timeout=10)
    with conn.cursor() as cur:
        cur.execute(THROUGHPUT.format(tc="%s", m="%s", metric="%s"), PARAMS)
        throughput = cur.fetchall()
        cur.execute("SELECT count(*) FROM reports")
        reports = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM metrics")
        metrics = cur.fetchone()[0]
    conn.rollback()
    return {
        "throughput": float(throughput[0][0]),
        "rows": len(throughput),
        "reports": reports,
        "metrics": metrics,
        "server_version": conn.server_version,
    }


def asyncpg_client(host, port, password):
    import asyncpg

    async def run():
        conn = await asyncpg.connect(host=host, port=int(port), user="lkplake",
                                     database="lkplake", password=password, timeout=10)
        try:
            rows = await conn.fetch(THROUGHPUT.format(tc="$1", m="$2", metric="$3"), *PARAMS)
            reports = await conn.fetchval("SELECT count(*) FROM reports")
            metrics = await conn.fetchval("SELECT count(*) FROM metrics")
            async with conn.transaction():
                inside = await conn.fetchval("SELECT count(DISTINCT report_key) FROM reports")
            return {
                "throughput": float(rows[0]["head_value"]),
                "rows": len(rows),
                "reports": reports,
                "metrics": metrics,
                "distinct_in_transaction": inside,
            }
        finally:
            await conn.close()

    return asyncio.run(run())


CLIENTS = {
    "sqlalchemy": sqlalchemy_client,
    "psycopg2": psycopg2_client,
    "asyncpg": asyncpg_client,
}


def main():
    client, host, port, password = sys.argv[1:5]
    try:
        print(json.dumps(CLIENTS[client](host, port, password)))
    except Exception as e:  # the test prints whatever the client raised
        print(json.dumps({"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}))
        sys.exit(1)


if __name__ == "__main__":
    main()
