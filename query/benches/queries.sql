-- The benchmark queries of BENCHMARKS.md ("Query"), run by query/benches/queries.rs on lkplake and by
-- infra/bench/query.py on DuckDB: the same text, with {placeholders} filled by infra/bench/query.sh.
-- name: series
-- One series over all time.
SELECT time, commit, value
FROM series
WHERE testcase = '{testcase}' AND machine = '{machine}' AND params = '{params}' AND metric = '{metric}'
ORDER BY time, commit;
-- name: regressions
-- All regressions of one testcase in one year.
SELECT time, machine, params, metric, base_commit, commit, base_value, head_value, change
FROM comparisons
WHERE testcase = '{testcase}' AND verdict = 'regression'
  AND time >= '{year}-01-01T00:00:00Z' AND time < '{next_year}-01-01T00:00:00Z'
ORDER BY time, machine, params, metric;
-- name: monthly
-- A monthly aggregate over everything.
SELECT date_trunc('month', time) AS month, testcase, count(*) AS observations, avg(value) AS mean_value
FROM metrics
GROUP BY date_trunc('month', time), testcase
ORDER BY month, testcase;
