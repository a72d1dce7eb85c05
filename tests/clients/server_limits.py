#!/usr/bin/env python3
"""Real clients at the edges of `lkplake serve`'s limits, for tests/cli/limits.rs.

  server_limits.py CHECK HOST PORT PASSWORD

Each CHECK prints one JSON object of what the clients saw; a client error is recorded in it
(as {"sqlstate", "message"}), never raised, so the test shows what happened.

  cursors      server-side cursors: psycopg 3 (the implementation PSYCOPG_IMPL picks), psycopg2
               and asyncpg each read seed 002's throughput and every metric row through one
  idle-portal  asyncpg leaves a cursor's portal suspended after 2 of 5 rows; meanwhile a
               psycopg client runs a query; then the cursor is read to its end
  timezone     one psycopg connection sets its time zone; another reads its own
  logins       two logged-in connections fill --max-connections 2; a third is refused; one
               closes and the third gets in
  declare-idle a psycopg client declares a cursor over a query that would run for hours and waits
               3 s before fetching from it; the server's CPU time over those 3 s (PID is its
               process id, the fifth argument), then what FETCH ALL answers
  stream       psycopg's single-row mode reads a query that never ends until the timeout stops it
  plan-timeout asyncpg prepares (Parse and Describe only) a statement whose planning outlasts
               a 1 ms statement timeout
  no-turn      (--max-running 1) while one client's endless count holds the only turn (for
               its 20 s timeout), a query of the lake waits (its 2 s timeout ends it), and
               SELECT 1, SET, SHOW and catalog queries are answered, over the simple and the
               extended protocol
  slow-reader  (--max-running 1) a client reads one row of a 4 MB answer and stops reading;
               another client's query of the lake runs; then one of 40 MB, more than is read
               ahead of a client, keeps the turn until it is read
"""

import asyncio
import json
import sys

THROUGHPUT = (
    "SELECT head_value FROM comparisons WHERE testcase = 'vm-scalability' "
    "AND machine = 'lkp-csl-2sp3' AND metric = 'vm-scalability.throughput'"
)
ALL_METRICS = "SELECT metric FROM metrics"
FIVE = "SELECT x FROM (VALUES (1), (2), (3), (4), (5)) AS t(x) ORDER BY x"


def error_of(e):
    return {"sqlstate": getattr(e, "sqlstate", None) or getattr(e, "pgcode", None),
            "message": str(e).strip()}


def dsn(host, port, password):
    return f"host={host} port={port} user=lkplake dbname=lkplake password='{password}' connect_timeout=10"


def psycopg_cursors(host, port, password):
    import psycopg

    out = {"implementation": psycopg.pq.__impl__}
    try:
        with psycopg.connect(dsn(host, port, password)) as conn:
            with conn.cursor(name="throughput") as cur:
                cur.execute(THROUGHPUT)
                out["columns"] = [d.name for d in cur.description]
                out["throughput"] = float(cur.fetchone()[0])
            with conn.cursor(name="all_metrics") as cur:
                cur.itersize = 100
                cur.execute(ALL_METRICS)
                first = cur.fetchone()
                out["metric_rows"] = 1 + len(cur.fetchmany(9)) + sum(1 for _ in cur)
                out["first_metric_is_text"] = isinstance(first[0], str)
    except psycopg.Error as e:
        out["error"] = error_of(e)
    return out


def psycopg2_cursors(host, port, password):
    import psycopg2

    out = {}
    try:
        conn = psycopg2.connect(dsn(host, port, password))
        with conn.cursor(name="throughput") as cur:
            cur.execute(THROUGHPUT)
            out["throughput"] = float(cur.fetchone()[0])
            out["columns"] = [d.name for d in cur.description]
        with conn.cursor(name="all_metrics") as cur:
            cur.itersize = 100
            cur.execute(ALL_METRICS)
            out["metric_rows"] = sum(1 for _ in cur)
        conn.close()
    except psycopg2.Error as e:
        out["error"] = error_of(e)
    return out


async def asyncpg_cursors(host, port, password):
    import asyncpg

    out = {}
    try:
        conn = await asyncpg.connect(host=host, port=int(port), user="lkplake",
                                     password=password, database="lkplake")
        async with conn.transaction():
            cur = await conn.cursor(THROUGHPUT)
            row = await cur.fetchrow()
            out["throughput"] = float(row[0])
            rows = 0
            async for _ in conn.cursor(ALL_METRICS, prefetch=50):
                rows += 1
            out["metric_rows"] = rows
        await conn.close()
    except Exception as e:  # asyncpg's errors share no base class with a sqlstate
        out["error"] = error_of(e)
    return out


def cursors(host, port, password):
    return {
        "psycopg": psycopg_cursors(host, port, password),
        "psycopg2": psycopg2_cursors(host, port, password),
        "asyncpg": asyncio.run(asyncpg_cursors(host, port, password)),
    }


def psycopg_once(host, port, password, statements):
    """Runs statements on one new psycopg connection; the last one's rows, or its error."""
    import psycopg

    try:
        with psycopg.connect(dsn(host, port, password), autocommit=True) as conn:
            rows = None
            for sql in statements:
                rows = conn.execute(sql).fetchall() if sql.lstrip().upper().startswith("SELECT") else conn.execute(sql)
            return {"rows": [list(r) for r in rows]}
    except psycopg.Error as e:
        return {"error": error_of(e)}


async def idle_portal_async(host, port, password):
    import asyncpg

    out = {}
    conn = await asyncpg.connect(host=host, port=int(port), user="lkplake",
                                 password=password, database="lkplake")
    async with conn.transaction():
        cur = await conn.cursor(FIVE)
        out["first"] = [r[0] for r in await cur.fetch(2)]
        # The portal is suspended and the connection idle: another client's query must run.
        out["other_client"] = psycopg_once(host, port, password, [
            "SET statement_timeout = '5s'", "SELECT count(DISTINCT report_key) FROM reports"])
        out["rest"] = [r[0] for r in await cur.fetch(10)]
    await conn.close()
    return out


def idle_portal(host, port, password):
    return asyncio.run(idle_portal_async(host, port, password))


def timezone(host, port, password):
    import psycopg

    setting = ("SELECT value FROM information_schema.df_settings "
               "WHERE name = 'datafusion.execution.time_zone'")
    out = {}
    with psycopg.connect(dsn(host, port, password), autocommit=True) as other:
        out["other_before"] = other.execute(setting).fetchall()[0][0]
        with psycopg.connect(dsn(host, port, password), autocommit=True) as tokyo:
            tokyo.execute("SET timezone = 'Asia/Tokyo'")
            out["tokyo"] = tokyo.execute(setting).fetchall()[0][0]
            out["other_after"] = other.execute(setting).fetchall()[0][0]
    out["new_connection"] = psycopg_once(host, port, password, [setting])["rows"][0][0]
    return out


def logins(host, port, password):
    import psycopg

    out = {}
    first = psycopg.connect(dsn(host, port, password), autocommit=True)
    second = psycopg.connect(dsn(host, port, password), autocommit=True)
    out["logged_in"] = [c.execute("SELECT 1").fetchall()[0][0] for c in (first, second)]
    out["third"] = psycopg_once(host, port, password, ["SELECT 3"])
    first.close()
    # The server frees the place once it has read the first client's goodbye: wait for that
    # (at most 10 s), not for a fixed time.
    import time

    deadline = time.monotonic() + 10
    while True:
        out["third_after_one_left"] = psycopg_once(host, port, password, ["SELECT 3"])
        if "rows" in out["third_after_one_left"] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    second.close()
    return out


async def plan_timeout_async(host, port, password):
    import asyncpg

    values = ", ".join(f"({i})" for i in range(100_000))
    sql = f"SELECT count(*) FROM (VALUES {values}) AS t(x)"
    out = {"sql_bytes": len(sql)}
    conn = await asyncpg.connect(host=host, port=int(port), user="lkplake",
                                 password=password, database="lkplake")
    await conn.execute("SET statement_timeout = '1ms'")
    try:
        await conn.prepare(sql)
        out["prepared"] = True
    except Exception as e:
        out["error"] = error_of(e)
    await conn.execute("SET statement_timeout = '10s'")
    out["after"] = await conn.fetchval("SELECT 41 + 1")
    await conn.close()
    return out


def cpu_seconds(pid):
    import os

    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime, fields 14 and 15 of stat(5), counted after the command's closing paren.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def declare_idle(host, port, password, pid):
    import time

    import psycopg

    out = {}
    with psycopg.connect(dsn(host, port, password)) as conn:
        conn.execute("DECLARE c CURSOR FOR SELECT count(*) FROM generate_series(1, 10000000000000)")
        before = cpu_seconds(pid)
        time.sleep(3)
        out["cpu_seconds_while_idle"] = cpu_seconds(pid) - before
        try:
            out["fetched"] = conn.execute("FETCH ALL FROM c").fetchall()
        except psycopg.Error as e:
            out["fetch_error"] = error_of(e)
    return out


def stream(host, port, password):
    import psycopg

    out = {"rows_before_error": 0}
    with psycopg.connect(dsn(host, port, password), autocommit=True) as conn:
        try:
            for _ in conn.cursor().stream("SELECT x FROM generate_series(1, 10000000000) AS t(x)"):
                out["rows_before_error"] += 1
        except psycopg.Error as e:
            out["error"] = error_of(e)
    return out


def plan_timeout(host, port, password):
    return asyncio.run(plan_timeout_async(host, port, password))


LAKE_QUERY = "SELECT count(DISTINCT report_key) FROM reports"
ENDLESS = "SELECT count(*) FROM generate_series(1, 10000000000000)"


def waits_for_a_turn(host, port, password):
    """A query of the lake with a 2 s timeout: its error when it waited that long for a turn."""
    got = psycopg_once(host, port, password, ["SET statement_timeout = '2s'", LAKE_QUERY])
    return got.get("error", {}).get("message", "").startswith("canceling statement due to statement timeout")


def no_turn(host, port, password):
    import threading
    import time

    import psycopg

    out = {}
    holder = psycopg.connect(dsn(host, port, password), autocommit=True)
    # Its own timeout ends it (a cancel request stops a statement only while it is planned).
    holder.execute("SET statement_timeout = '20s'")

    def hold():
        try:
            holder.execute(ENDLESS)
            out["holder"] = "finished"
        except psycopg.Error as e:
            out["holder"] = error_of(e)

    thread = threading.Thread(target=hold)
    thread.start()
    # The holder has its turn once a query of the lake can no longer get one.
    deadline = time.monotonic() + 60
    while not waits_for_a_turn(host, port, password):
        if time.monotonic() > deadline:
            out["never_busy"] = True
            break
    statements = [
        "SET statement_timeout = '2s'",
        "SELECT 1",
        "SHOW statement_timeout",
        "SELECT count(*) FROM pg_catalog.pg_type WHERE typname = 'int8'",
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'metrics'",
    ]
    with psycopg.connect(dsn(host, port, password), autocommit=True) as conn:
        answers = {}
        for prepare in (False, True):
            got = []
            for sql in statements:
                try:
                    cur = conn.execute(sql, prepare=prepare)
                    got.append([list(r) for r in cur.fetchall()] if cur.description else "ok")
                except psycopg.Error as e:
                    got.append(error_of(e))
            answers["extended" if prepare else "simple"] = got
        out["answers"] = answers
    out["lake_query_still_waits"] = waits_for_a_turn(host, port, password)
    thread.join(60)
    holder.close()
    return out


def slow_reader(host, port, password):
    import psycopg

    out = {}
    for mb in (4, 40):
        pad = f"SELECT repeat('x', 1000) || x AS pad FROM generate_series(1, {mb * 1000}) AS t(x)"
        with psycopg.connect(dsn(host, port, password), autocommit=True) as reader:
            rows = reader.cursor().stream(pad)
            first = next(rows)
            other = psycopg_once(host, port, password,
                                 ["SET statement_timeout = '5s'", LAKE_QUERY])
            read = 1 + sum(1 for _ in rows)
            out[f"{mb}MB"] = {"first_len": len(first[0]), "other_client": other, "rows": read}
    return out


CHECKS = {
    "no-turn": no_turn,
    "slow-reader": slow_reader,
    "cursors": cursors,
    "idle-portal": idle_portal,
    "timezone": timezone,
    "logins": logins,
    "plan-timeout": plan_timeout,
    "declare-idle": declare_idle,
    "stream": stream,
}

if __name__ == "__main__":
    check, host, port, password = sys.argv[1:5]
    print(json.dumps(CHECKS[check](host, port, password, *sys.argv[5:]), default=str))
