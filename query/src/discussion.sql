-- The views over `failures` and `mentions` (and `links` and `triage`, empty until written),
-- installed once the lake has the first two tables (a lake
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
    array_agg(DISTINCT arrow_cast(m.sender, 'Utf8')) FILTER (WHERE m.sender IS NOT NULL) AS senders,
    min(m.date) AS first_reply,
    max(m.date) AS last_reply
FROM reports r
LEFT JOIN mentions m ON m.report_key = r.report_key
WHERE r.test_index = 0
GROUP BY
    r.report_key, r.date, r.kind, r.subject, r.commit, r.commit_title, r.testcase, r.machine,
    r.headline_metric, r.headline_change_pct, r.message_id;

-- regressions: one row per culprit commit and verdict, from every report that names it: where
-- it showed (testcases, machines, headline metrics), how bad (the largest headline change),
-- when it was reported, who answered, and whether a later report of the same series came back
-- to the level before the culprit. Culprits are compared on 10 hex digits, as report keys are.
--
-- A regression report is recovered when a later report of one of its headline series (same
-- testcase, machine, parameters and metric) goes the other way (an improvement) and ends
-- nearer the level before the culprit than the level the culprit left: often the robot's
-- improvement report on the fixing commit. The culprit is recovered when every regression
-- report of it is.
--
-- Fixes come from `links`: a patch whose `Closes:`/`Link:` trailer names one of the culprit's
-- reports, or whose `Fixes:` trailer names the culprit, is a fix posted; an applied notice for
-- a patch of the same title is the fix merged (its commit and date); a patch `Revert "<the
-- culprit's title>"` is a revert posted, merged once an applied notice names it. The automatic
-- status (`auto_status`), for regressions: `fixed` (a fix or a revert merged), else
-- `recovered`, else `fix-posted` (a fix or a revert posted), else `discussed` (a reply cites
-- one of its reports), else `open`; an improvement is `improvement`, never open or
-- recovered. A status a person gave with `lkplake triage` (`acknowledged`, `investigating`,
-- `invalid`, `wontfix`, `fixed`) stands over it: `status` is the newest one, else the automatic.
CREATE VIEW regressions AS
WITH tests AS (
    SELECT
        report_key, date, kind, subject, commit, commit_title, branch, testcase, machine,
        headline_metric, headline_change_pct, message_id, quoted,
        lower(left(commit, 10)) AS culprit,
        -- The title without the `[PATCH v4 4/5]` tag of a patch the robot tested from the list.
        regexp_replace(commit_title, '^\[[^\]]*\] *', '') AS title
    FROM reports
    WHERE kind IN ('regression', 'improvement')
),
culprit_reports AS (
    SELECT DISTINCT report_key, culprit, kind FROM tests
),
recoveries AS (
    SELECT
        g.report_key,
        l.report_key AS recovered_report,
        l.time AS recovered_at,
        row_number() OVER (PARTITION BY g.report_key ORDER BY l.time, l.report_key) AS pick
    FROM headlines g
    JOIN headlines l
        ON l.testcase = g.testcase AND l.machine = g.machine AND l.params = g.params
        AND l.metric = g.metric AND l.time > g.time
    WHERE g.kind = 'regression' AND l.kind = 'improvement'
        AND abs(l.head_value - g.base_value) < abs(l.head_value - g.head_value)
),
-- Per culprit: whether every report of it recovered, and the recovery that came last (the one
-- that completed it), so that the commit and the report shown belong together.
ranked AS (
    SELECT
        t.culprit,
        t.kind,
        r.recovered_report,
        min(CASE WHEN r.recovered_report IS NULL THEN 0 ELSE 1 END)
            OVER (PARTITION BY t.culprit, t.kind) = 1 AS recovered,
        row_number() OVER (
            PARTITION BY t.culprit, t.kind
            ORDER BY r.recovered_at DESC NULLS LAST, r.recovered_report
        ) AS pick
    FROM culprit_reports t
    LEFT JOIN recoveries r ON r.report_key = t.report_key AND r.pick = 1
),
verdicts AS (
    SELECT
        v.culprit,
        v.kind,
        v.recovered,
        v.recovered_report,
        -- The commit as the report's commit line prints it (40 digits), not the table's 10.
        c.commit AS recovered_commit
    FROM ranked v
    LEFT JOIN (SELECT report_key, max(commit) AS commit FROM reports GROUP BY report_key) c
        ON c.report_key = v.recovered_report
    WHERE v.pick = 1
),
-- The culprit's first report, an original before a quoted copy: where a reader starts.
first_reports AS (
    SELECT
        culprit,
        kind,
        message_id,
        row_number() OVER (PARTITION BY culprit, kind ORDER BY quoted, date, report_key) AS pick
    FROM tests
    WHERE message_id IS NOT NULL
),
replies AS (
    SELECT
        t.culprit,
        t.kind,
        count(DISTINCT m.mention_key) AS replies,
        count(DISTINCT m.sender) AS repliers,
        array_agg(DISTINCT arrow_cast(m.sender, 'Utf8')) FILTER (WHERE m.sender IS NOT NULL) AS senders,
        min(m.date) AS first_reply
    FROM culprit_reports t
    JOIN mentions m ON m.report_key = t.report_key
    GROUP BY t.culprit, t.kind
),
-- Patches that answer the culprit: by a report's Message-ID, or by the culprit's commit id (a
-- `Fixes:` hash is usually 12 digits, at least 7: the shorter of the two hashes is a prefix of
-- the other) in a patch sent after a report of it. Equality joins, one per kind: a join on an
-- OR of both would pair every report with every link.
fix_patches AS (
    SELECT t.culprit, t.kind, l.link_key, l.date, l.patch_title
    FROM tests t
    JOIN links l ON l.kind = 'closes' AND l.target = t.message_id
    UNION
    SELECT t.culprit, t.kind, l.link_key, l.date, l.patch_title
    FROM tests t
    JOIN links l ON l.kind = 'fixes' AND left(l.target, 7) = left(t.culprit, 7)
    WHERE (starts_with(lower(t.commit), l.target) OR starts_with(l.target, lower(t.commit)))
        AND (l.date IS NULL OR t.date IS NULL OR l.date >= t.date)
),
first_fixes AS (
    SELECT
        culprit,
        kind,
        date,
        patch_title,
        row_number() OVER (PARTITION BY culprit, kind ORDER BY date NULLS LAST, link_key) AS pick
    FROM fix_patches
),
-- A fix merged: the first applied notice for a patch of the title of any of its fixes.
merged AS (
    SELECT
        f.culprit,
        f.kind,
        a.target AS commit,
        a.date,
        row_number() OVER (PARTITION BY f.culprit, f.kind ORDER BY a.date NULLS LAST, a.link_key)
            AS pick
    FROM (SELECT DISTINCT culprit, kind, patch_title FROM fix_patches) f
    JOIN links a ON a.kind = 'applied' AND a.patch_title = f.patch_title
),
-- A revert names the culprit by its title, or by its commit in `This reverts commit <hash>.`;
-- it is merged when an applied notice names a patch of the revert's title.
revert_patches AS (
    SELECT t.culprit, t.kind, l.date, l.patch_title
    FROM tests t
    JOIN links l ON l.kind = 'revert' AND l.target = t.title
    UNION
    SELECT t.culprit, t.kind, l.date, l.patch_title
    FROM tests t
    JOIN links l ON l.kind = 'revert' AND left(l.commit, 10) = t.culprit
),
reverts AS (
    SELECT r.culprit, r.kind, min(r.date) AS date, min(a.date) AS merged
    FROM revert_patches r
    LEFT JOIN links a ON a.kind = 'applied' AND a.patch_title = r.patch_title
    GROUP BY r.culprit, r.kind
),
culprits AS (
    SELECT
        culprit,
        kind,
        max(commit) AS commit,
        max(commit_title) AS commit_title,
        -- The robot's subject names the branch, then the subsystem: `[linus:master] [mm] ...`.
        max(nullif(split_part(split_part(subject, '] [', 2), ']', 1), '')) AS subject_tag,
        -- Else the commit title's prefix, past a `[PATCH v4 4/5]` tag.
        max(split_part(title, ':', 1)) AS title_prefix,
        max(branch) AS branch,
        count(DISTINCT report_key) AS reports,
        -- Lists of plain strings, here and for `senders`: a list of string views holds the
        -- scan's whole data buffers, and DataFusion's memory accounting counts them once per
        -- row. On the 10.6M-row lake `culprits` counted 3.5 GB for 1.6 MB of names, and
        -- keeping `regressions` failed with "resources exhausted" on every version.
        array_agg(DISTINCT arrow_cast(testcase, 'Utf8')) AS testcases,
        array_agg(DISTINCT arrow_cast(machine, 'Utf8')) AS machines,
        array_agg(DISTINCT arrow_cast(headline_metric, 'Utf8')) FILTER (WHERE headline_metric IS NOT NULL)
            AS headline_metrics,
        max(abs(headline_change_pct)) AS worst_change_pct,
        min(date) AS first_report,
        max(date) AS last_report
    FROM tests
    GROUP BY culprit, kind
),
automatic AS (
    SELECT
        c.commit,
        c.commit_title,
        coalesce(c.subject_tag, c.title_prefix) AS subsystem,
        c.kind AS verdict,
        c.branch,
        c.reports,
        c.testcases,
        c.machines,
        c.headline_metrics,
        c.worst_change_pct,
        c.first_report,
        c.last_report,
        coalesce(p.replies, 0) AS replies,
        coalesce(p.repliers, 0) AS repliers,
        p.senders,
        p.first_reply,
        x.date AS fix_posted,
        x.patch_title AS fix_title,
        g.commit AS fix_commit,
        g.date AS fix_merged,
        rv.date AS reverted,
        rv.merged AS revert_merged,
        CASE WHEN v.recovered AND c.kind = 'regression' THEN v.recovered_commit END AS recovered_commit,
        CASE WHEN v.recovered AND c.kind = 'regression' THEN v.recovered_report END AS recovered_report,
        CASE
            WHEN c.kind <> 'regression' THEN 'improvement'
            WHEN g.commit IS NOT NULL OR rv.merged IS NOT NULL THEN 'fixed'
            WHEN v.recovered THEN 'recovered'
            WHEN x.pick IS NOT NULL OR rv.date IS NOT NULL THEN 'fix-posted'
            WHEN coalesce(p.replies, 0) > 0 THEN 'discussed'
            ELSE 'open'
        END AS auto_status,
        f.message_id,
        concat('https://lore.kernel.org/all/', btrim(f.message_id, '<>'), '/') AS lore_url
    FROM culprits c
    JOIN verdicts v ON v.culprit = c.culprit AND v.kind = c.kind
    LEFT JOIN replies p ON p.culprit = c.culprit AND p.kind = c.kind
    LEFT JOIN first_fixes x ON x.culprit = c.culprit AND x.kind = c.kind AND x.pick = 1
    LEFT JOIN merged g ON g.culprit = c.culprit AND g.kind = c.kind AND g.pick = 1
    LEFT JOIN reverts rv ON rv.culprit = c.culprit AND rv.kind = c.kind
    LEFT JOIN first_reports f ON f.culprit = c.culprit AND f.kind = c.kind AND f.pick = 1
),
-- The newest status a person gave each culprit (`lkplake triage`); older rows are history.
triaged AS (
    SELECT
        lower(left(culprit, 10)) AS culprit,
        verdict,
        to_status,
        triaged_by,
        triaged_at,
        note,
        fix_commit,
        row_number() OVER (
            PARTITION BY lower(left(culprit, 10)), verdict
            ORDER BY triaged_at DESC, to_status, triaged_by
        ) AS pick
    FROM triage
)
SELECT
    a.*,
    t.to_status AS triage_status,
    t.triaged_by,
    t.triaged_at,
    t.note AS triage_note,
    t.fix_commit AS triage_fix,
    coalesce(t.to_status, a.auto_status) AS status
FROM automatic a
LEFT JOIN triaged t
    ON t.culprit = lower(left(a.commit, 10)) AND t.verdict = a.verdict AND t.pick = 1;
