#!/usr/bin/env python3
"""Scores `lkplake trend` and Apache Otava against planted steps (see infra/bench/trend.sh).

A found change point matches a planted step when it is in the same series and its first
observation after the change is within TOLERANCE observations of the planted step's first
observation (the head commit of the report that first shows the step). Each planted step and
each found point match at most once.
"""
import csv
import io
import json
import subprocess
import sys

from otava.analysis import compute_change_points

TOLERANCE = 1
WINDOW, PVALUE, MIN_CHANGE, MIN_OBS = 50, 0.001, 0.05, 6

# The observations `lkplake trend` analyses (trend/src/lib.rs): one per commit, base
# before head within a report.
OBSERVATIONS = """
SELECT testcase, machine, params, metric, commit, min(time) AS time, avg(value) AS value,
       min(CASE role WHEN 'base' THEN 0 WHEN 'head' THEN 2 ELSE 1 END) AS position
FROM metrics WHERE time IS NOT NULL
GROUP BY testcase, machine, params, metric, commit
ORDER BY testcase, machine, params, metric, time, position, commit
"""


def sql(binary, lake, query):
    out = subprocess.run([binary, "sql", "--lake", lake, "--format", "csv", query],
                         check=True, capture_output=True, text=True).stdout
    return list(csv.DictReader(io.StringIO(out)))


def score(found, truth):
    """found, truth: {series: [index, ...]} -> (true positives, found, planted)."""
    tp = 0
    for key, planted in truth.items():
        candidates = list(found.get(key, []))
        for p in planted:
            hit = next((c for c in candidates if abs(c - p) <= TOLERANCE), None)
            if hit is not None:
                candidates.remove(hit)
                tp += 1
    return tp, sum(len(v) for v in found.values()), sum(len(v) for v in truth.values())


def main():
    binary, lake, truth_path = sys.argv[1:4]
    series = {}
    for row in sql(binary, lake, OBSERVATIONS):
        key = (row["testcase"], row["machine"], row["params"], row["metric"])
        series.setdefault(key, []).append((row["commit"], float(row["value"])))
    index = {key: {commit: i for i, (commit, _) in enumerate(obs)} for key, obs in series.items()}

    truth, unplaceable = {}, 0
    for line in open(truth_path):
        step = json.loads(line)
        key = (step["testcase"], step["machine"], step["params"], step["metric"])
        commit = (step.get("commit") or "")[:10]
        i = next((j for c, j in index.get(key, {}).items() if c[:10] == commit), None)
        if i is None or len(series.get(key, [])) < MIN_OBS:
            unplaceable += 1
            continue
        truth.setdefault(key, []).append(i)

    ours = {}
    for row in sql(binary, lake, "SELECT testcase, machine, params, metric, first_commit_after FROM changes"):
        key = (row["testcase"], row["machine"], row["params"], row["metric"])
        i = index.get(key, {}).get(row["first_commit_after"])
        if i is not None:
            ours.setdefault(key, []).append(i)

    otava = {}
    for key, obs in series.items():
        if len(obs) < MIN_OBS:
            continue
        points, _ = compute_change_points([v for _, v in obs], window_len=WINDOW,
                                          max_pvalue=PVALUE, min_magnitude=MIN_CHANGE)
        if points:
            otava[key] = [p.index for p in points]

    def line(name, found):
        tp, nf, nt = score(found, truth)
        precision = tp / nf if nf else 1.0
        recall = tp / nt if nt else 1.0
        return f"| {name} | {nf} | {tp} | {precision:.3f} | {recall:.3f} |"

    analysed = sum(1 for obs in series.values() if len(obs) >= MIN_OBS)
    print(f"series: {len(series)} ({analysed} with >= {MIN_OBS} observations); "
          f"planted steps: {sum(len(v) for v in truth.values())} placeable, {unplaceable} not "
          f"(series too short, or the step's report not in the series)")
    print(f"settings: window {WINDOW}, max p-value {PVALUE}, min change {MIN_CHANGE:.0%}, tolerance ±{TOLERANCE} observation")
    print("| detector | change points | matching a planted step | precision | recall |")
    print("|---|---|---|---|---|")
    print(line("lkplake trend", ours))
    print(line("apache-otava " + __import__("importlib.metadata").metadata.version("apache-otava"), otava))
    tp, nf, no = score(ours, otava)
    print(f"agreement: {tp} of lkplake's {nf} change points are within ±{TOLERANCE} of one of Otava's {no} "
          f"({tp / nf if nf else 1:.3f} / {tp / no if no else 1:.3f})")


if __name__ == "__main__":
    main()
