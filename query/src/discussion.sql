-- The views over `failures` and `mentions`, installed once the lake has both tables (a lake
-- written before them gets them at its next transform run). DataFusion only.
--
-- The `mentions` Delta table is served as `mention_mails` (the mails as stored); the
-- `mentions` view adds the report each mail cites.

-- failure_comparisons: one row per fail:runs row of a report: base and head counts side by
-- side and the reproduction the robot printed for the head.
CREATE VIEW failure_comparisons AS
SELECT
    report_key,
    time,
    testcase,
    machine,
    params,
    metric,
    max(CASE WHEN role = 'base' THEN commit END) AS base_commit,
    max(CASE WHEN role = 'head' THEN commit END) AS commit,
    max(CASE WHEN role = 'base' THEN fail END) AS base_fail,
    max(CASE WHEN role = 'base' THEN runs END) AS base_runs,
    max(CASE WHEN role = 'head' THEN fail END) AS head_fail,
    max(CASE WHEN role = 'head' THEN runs END) AS head_runs,
    max(CASE WHEN role = 'head' THEN reproduction_pct END) AS reproduction_pct,
    bool_or(is_headline) AS is_headline
FROM failures
GROUP BY report_key, time, testcase, machine, params, metric;

-- mentions: every mail that cites a report, with the cited report's key when the lake has it.
-- A mail that quotes a commit and a metric (its opening sentence, else its subject) cites the
-- earliest original report of that commit with that headline (the table may prefix a failure's
-- name, `dmesg.`); one that quotes neither (rows only) cites the earliest report its thread
-- (`References:`, `In-Reply-To:`) names. Lists cut long `References:` chains, which is why the
-- commit comes first. Commits are compared on 10 hex digits, as report keys are.
CREATE VIEW mentions AS
WITH reported AS (
    SELECT report_key, message_id, commit, headline_metric, date, quoted
    FROM reports
    WHERE test_index = 0
),
by_commit AS (
    SELECT
        m.mention_key,
        r.report_key,
        row_number() OVER (
            PARTITION BY m.mention_key ORDER BY r.quoted, r.date, r.report_key
        ) AS pick
    FROM mention_mails m
    JOIN reported r
        ON lower(left(r.commit, 10)) = lower(left(m.commit, 10))
    WHERE character_length(m.commit) >= 10
        AND character_length(r.commit) >= 10
        AND m.metric IS NOT NULL
        AND (r.headline_metric = m.metric OR ends_with(r.headline_metric, concat('.', m.metric)))
),
by_thread AS (
    SELECT
        t.mention_key,
        r.report_key,
        row_number() OVER (
            PARTITION BY t.mention_key ORDER BY r.quoted, r.date, r.report_key
        ) AS pick
    FROM (SELECT mention_key, unnest("references") AS reference FROM mention_mails) t
    JOIN reported r ON r.message_id = t.reference
)
SELECT
    m.mention_key,
    m.message_id,
    m.in_reply_to,
    m."references",
    m.date,
    m.sender,
    m.subject,
    m.commit,
    m.testcase,
    m.machine,
    m.kind,
    m.metric,
    m.change_pct,
    m."rows",
    m.source,
    coalesce(c.report_key, t.report_key) AS report_key,
    CASE
        WHEN c.report_key IS NOT NULL THEN 'commit'
        WHEN t.report_key IS NOT NULL THEN 'thread'
    END AS linked_by
FROM mention_mails m
LEFT JOIN by_commit c ON c.mention_key = m.mention_key AND c.pick = 1
LEFT JOIN by_thread t ON t.mention_key = m.mention_key AND t.pick = 1;

-- discussion: every report with the replies that cite it: how many, from whom, when the first
-- and last came. "Which regressions got an answer, and from whom."
CREATE VIEW discussion AS
SELECT
    r.report_key,
    r.date,
    r.kind,
    r.subject,
    r.commit,
    r.commit_title,
    r.testcase,
    r.machine,
    r.headline_metric,
    r.headline_change_pct,
    r.message_id,
    count(m.mention_key) AS replies,
    count(DISTINCT m.sender) AS repliers,
    array_agg(DISTINCT m.sender) FILTER (WHERE m.sender IS NOT NULL) AS senders,
    min(m.date) AS first_reply,
    max(m.date) AS last_reply
FROM reports r
LEFT JOIN mentions m ON m.report_key = r.report_key
WHERE r.test_index = 0
GROUP BY
    r.report_key, r.date, r.kind, r.subject, r.commit, r.commit_title, r.testcase, r.machine,
    r.headline_metric, r.headline_change_pct, r.message_id;
