#!/usr/bin/env python3
"""A real Postgres client (psycopg 3) for the tests and benchmarks of `lkplake serve`.

Reads a JSON list of statements on stdin — each a string or {"sql": ..., "params": [...]} —
and prints JSON on stdout.

  pg_client.py DSN                  run each statement once on one connection:
                                    [{"columns": [...], "rows": [[...]]} | {"error": {...}}, ...]
  pg_client.py DSN --clients 32 --seconds 30 [--pid PID]
                                    32 connections run the statements round-robin for 30 s:
                                    {"queries", "errors", "error_samples", "qps",
                                     "p50_ms", "p99_ms", "max_rss_mb" (of PID, sampled)}

A failed connection prints {"connect_error": {"sqlstate", "message"}} and exits 3. Values that
JSON lacks (timestamps, decimals) are written as ISO strings and floats.
"""

import argparse
import datetime
import decimal
import json
import sys
import threading
import time

import psycopg


def jsonable(value):
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def error_of(e):
    return {
        "sqlstate": getattr(e, "sqlstate", None),
        "class": type(e).__name__,
        "message": str(e).strip(),
    }


def execute(conn, statement):
    sql, params = (statement, None) if isinstance(statement, str) else (statement["sql"], statement.get("params"))
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            if cur.description is None:
                return {"columns": [], "rows": []}
            rows = cur.fetchall()
            return {
                "columns": [d.name for d in cur.description],
                "rows": [[jsonable(v) for v in row] for row in rows],
            }
    except psycopg.Error as e:
        return {"error": error_of(e)}


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def load(dsn, statements, clients, seconds, pid):
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    latencies, errors, samples = [], [0], []
    peak = [rss_mb(pid) if pid else None]

    def client(index):
        try:
            conn = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as e:
            with lock:
                errors[0] += 1
                samples.append(error_of(e))
            return
        mine = []
        i = index
        while time.monotonic() < deadline:
            started = time.monotonic()
            result = execute(conn, statements[i % len(statements)])
            i += 1
            if "error" in result:
                with lock:
                    errors[0] += 1
                    if len(samples) < 5:
                        samples.append(result["error"])
            else:
                mine.append(time.monotonic() - started)
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        if pid:
            now = rss_mb(pid)
            if now is not None and (peak[0] is None or now > peak[0]):
                peak[0] = now
        time.sleep(0.2)
    elapsed = time.monotonic() - started
    latencies.sort()

    def pct(p):
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 2) if latencies else None

    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "queries": len(latencies),
        "errors": errors[0],
        "error_samples": samples,
        "qps": round(len(latencies) / elapsed, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "max_rss_mb": round(peak[0], 1) if peak[0] is not None else None,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dsn")
    parser.add_argument("--clients", type=int)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--pid", type=int)
    args = parser.parse_args()
    statements = json.load(sys.stdin)
    if args.clients:
        print(json.dumps(load(args.dsn, statements, args.clients, args.seconds, args.pid)))
        return 0
    try:
        conn = psycopg.connect(args.dsn, autocommit=True)
    except psycopg.Error as e:
        print(json.dumps({"connect_error": error_of(e)}))
        return 3
    with conn:
        print(json.dumps([execute(conn, s) for s in statements]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
