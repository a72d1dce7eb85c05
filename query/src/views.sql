-- The views of the lake, in dependency order. Each statement is `CREATE VIEW name AS ...`;
-- the same text runs on DuckDB in infra/bench/query.sh, so keep it to SQL both engines share.

-- comparisons: one row per table row of a report (per test and metric): the base and head
-- values side by side, the change the robot printed, and a verdict from the metric's direction.
-- `time` (the report's date) is a grouping key, not an aggregate, so filters on it reach the scan.
CREATE VIEW comparisons AS
SELECT
    report_key,
    time,
    testcase,
    machine,
    params,
    metric,
    max(program) AS program,
    max(CASE WHEN role = 'base' THEN commit END) AS base_commit,
    max(CASE WHEN role = 'head' THEN commit END) AS commit,
    max(CASE WHEN role = 'base' THEN value END) AS base_value,
    max(CASE WHEN role = 'base' THEN stddev_pct END) AS base_stddev_pct,
    max(CASE WHEN role = 'head' THEN value END) AS head_value,
    max(CASE WHEN role = 'head' THEN stddev_pct END) AS head_stddev_pct,
    max(CASE WHEN role = 'head' THEN change END) AS change,
    max(change_unit) AS change_unit,
    max(direction) AS direction,
    bool_or(is_headline) AS is_headline,
    CASE
        WHEN max(direction) IS NULL OR max(CASE WHEN role = 'head' THEN change END) IS NULL
            OR max(CASE WHEN role = 'head' THEN change END) = 0 THEN NULL
        WHEN (max(CASE WHEN role = 'head' THEN change END) > 0)
            = (max(direction) = 'higher_is_better') THEN 'improvement'
        ELSE 'regression'
    END AS verdict
FROM metrics
GROUP BY report_key, time, testcase, machine, params, metric;

-- series: the observations of each series (testcase, machine, params, metric), one row per
-- commit measured: the first time a report measured it and the mean of its measurements.
CREATE VIEW series AS
SELECT
    testcase,
    machine,
    params,
    metric,
    commit,
    min(time) AS time,
    avg(value) AS value,
    min(value) AS min_value,
    max(value) AS max_value,
    count(*) AS samples,
    max(direction) AS direction,
    bool_or(is_headline) AS is_headline
FROM metrics
GROUP BY testcase, machine, params, metric, commit;

-- headlines: the metric each report is about, with its subject and commit titles. It pairs only
-- the headline rows (a few per report) instead of reading `comparisons`, which would group every
-- row of `metrics` before the `is_headline` filter could apply.
CREATE VIEW headlines AS
SELECT
    c.time,
    c.testcase,
    c.machine,
    c.params,
    c.metric,
    c.base_commit,
    c.commit,
    r.commit_title,
    c.base_value,
    c.head_value,
    c.change,
    c.change_unit,
    CASE
        WHEN c.direction IS NULL OR c.change IS NULL OR c.change = 0 THEN NULL
        WHEN (c.change > 0) = (c.direction = 'higher_is_better') THEN 'improvement'
        ELSE 'regression'
    END AS verdict,
    r.kind,
    r.branch,
    r.subject,
    r.message_id,
    c.report_key
FROM (
    SELECT
        report_key,
        time,
        testcase,
        machine,
        params,
        metric,
        max(CASE WHEN role = 'base' THEN commit END) AS base_commit,
        max(CASE WHEN role = 'head' THEN commit END) AS commit,
        max(CASE WHEN role = 'base' THEN value END) AS base_value,
        max(CASE WHEN role = 'head' THEN value END) AS head_value,
        max(CASE WHEN role = 'head' THEN change END) AS change,
        max(change_unit) AS change_unit,
        max(direction) AS direction
    FROM metrics
    WHERE is_headline
    GROUP BY report_key, time, testcase, machine, params, metric
) c
JOIN reports r
    ON c.report_key = r.report_key
    AND c.testcase = r.testcase
    AND c.machine = r.machine
    AND c.params = r.params;
