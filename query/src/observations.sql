-- Lake format 2 keeps `metrics` as `observations`: one row per table row of a report test,
-- base and head side by side, values as printed decimals, and a row of its own, without a base,
-- for each middle column of a follow-up (roles c1, c2, ...). A row holds a base when it has a
-- base value (a mantissa or a float). `metrics` is format 1's rows of it, a table of its own
-- (query/src/unpivot.rs); this view gives back format 1's `comparisons` exactly. The other
-- views read both as they read format 1's.

-- comparisons: each row that holds a base is one of format 1's groups already. A report test
-- that lists a metric more than once (`grouped`) is grouped as format 1 groups it.
CREATE VIEW comparisons AS
SELECT
    report_key,
    time,
    testcase,
    machine,
    params,
    metric,
    program,
    base_commit,
    commit,
    lkplake_value(base_mantissa, base_scale, base_float) AS base_value,
    base_stddev_pct,
    lkplake_value(head_mantissa, head_scale, head_float) AS head_value,
    head_stddev_pct,
    change,
    change_unit,
    direction,
    is_headline,
    CASE
        WHEN direction IS NULL OR change IS NULL OR change = 0 THEN NULL
        WHEN (change > 0) = (direction = 'higher_is_better') THEN 'improvement'
        ELSE 'regression'
    END AS verdict
FROM observations
WHERE (base_mantissa IS NOT NULL OR base_float IS NOT NULL) AND NOT grouped
UNION ALL
SELECT
    report_key,
    time,
    testcase,
    machine,
    params,
    metric,
    max(program) AS program,
    max(CASE WHEN base_mantissa IS NOT NULL OR base_float IS NOT NULL THEN base_commit END) AS base_commit,
    max(CASE WHEN role = 'head' THEN commit END) AS commit,
    max(lkplake_value(base_mantissa, base_scale, base_float)) AS base_value,
    max(CASE WHEN base_mantissa IS NOT NULL OR base_float IS NOT NULL
        THEN base_stddev_pct END) AS base_stddev_pct,
    max(CASE WHEN role = 'head'
        THEN lkplake_value(head_mantissa, head_scale, head_float) END) AS head_value,
    max(CASE WHEN role = 'head' THEN head_stddev_pct END) AS head_stddev_pct,
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
FROM observations
-- A constant of the installed version (query/src/grouped.rs): false drops this branch at
-- planning time when the version has no grouped row.
WHERE grouped AND lkplake_version_has_grouped_rows()
GROUP BY report_key, time, testcase, machine, params, metric;
