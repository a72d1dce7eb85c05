//! Arrow schemas of the lake tables. Column names are the SQL users write; changing one breaks
//! their saved queries and dashboards.

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use std::sync::{Arc, LazyLock};

/// The table of observations, written by the transformer.
pub const METRICS_TABLE: &str = "metrics";
/// The table of reports (one row per test of a report), written by the transformer.
pub const REPORTS_TABLE: &str = "reports";
/// One row per `fail:runs` row and commit column, written by the transformer.
pub const FAILURES_TABLE: &str = "failures";
/// Mails that cite a report without carrying its full table, written by the transformer.
pub const MENTIONS_TABLE: &str = "mentions";
/// Statements of later mail about a report, its culprit or its fix, written by the transformer.
pub const LINKS_TABLE: &str = "links";
/// Statuses people gave culprits with `lkplake triage`, appended, never rewritten.
pub const TRIAGE_TABLE: &str = "triage";
/// Change points found by `lkplake trend`.
pub const CHANGES_TABLE: &str = "changes";
/// Change points grouped across series by overlapping ranges, written by `lkplake trend`.
pub const CHANGE_GROUPS_TABLE: &str = "change_groups";
/// `lkplake trend`'s per-series state, so a re-run resumes where the last one stopped.
pub const TREND_SERIES_TABLE: &str = "trend_series";

/// The table `lkplake trend` writes: the `metrics` files each partition held when it last read
/// that partition whole.
pub const TREND_PARTITIONS_TABLE: &str = "trend_partitions";

/// Partition columns of `metrics`, `reports` and `failures`, in partition order (`mentions`
/// and `links` are small and unpartitioned).
pub const PARTITION_COLUMNS: [&str; 2] = ["testcase", "machine"];

fn time() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// `metrics`: one row per observation, i.e. per table row and commit column of a report.
pub static METRICS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("time", time(), true),
        Field::new("testcase", DataType::Utf8, false),
        Field::new("machine", DataType::Utf8, false),
        Field::new("params", DataType::Utf8, false),
        Field::new("metric", DataType::Utf8, false),
        Field::new("program", DataType::Utf8, false),
        Field::new("commit", DataType::Utf8, false),
        Field::new("role", DataType::Utf8, false),
        Field::new("value", DataType::Float64, false),
        Field::new("stddev_pct", DataType::Float64, true),
        Field::new("change", DataType::Float64, true),
        Field::new("change_unit", DataType::Utf8, false),
        Field::new("direction", DataType::Utf8, true),
        Field::new("is_headline", DataType::Boolean, false),
        Field::new("report_key", DataType::Utf8, false),
    ]))
});

/// `metrics` in lake format 2 (served as `observations`; the `metrics` view gives back the
/// rows above): one row per table row of a report test, base and head side by side, each value
/// as its printed decimal ([`crate::decimal::Decimal`]: mantissa and scale, or the float when
/// it has no short decimal). A follow-up's middle columns (roles `c1`, `c2`, ...) get a row each,
/// without the base. `grouped` marks rows whose report lists the metric more than once in its
/// tests of one testcase, machine and params (a table listing it twice, or two such tests over
/// other commits), which `comparisons` groups as format 1 did.
pub static OBSERVATIONS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let side = |prefix: &str| {
        [
            Field::new(format!("{prefix}_mantissa"), DataType::Int64, true),
            Field::new(format!("{prefix}_scale"), DataType::Int8, true),
            Field::new(format!("{prefix}_float"), DataType::Float64, true),
            Field::new(format!("{prefix}_stddev_pct"), DataType::Float64, true),
        ]
    };
    let mut fields = vec![
        Field::new("time", time(), true),
        Field::new("testcase", DataType::Utf8, false),
        Field::new("machine", DataType::Utf8, false),
        Field::new("params", DataType::Utf8, false),
        Field::new("metric", DataType::Utf8, false),
        Field::new("program", DataType::Utf8, false),
        Field::new("report_key", DataType::Utf8, false),
        Field::new("base_commit", DataType::Utf8, false),
        Field::new("commit", DataType::Utf8, true),
        Field::new("role", DataType::Utf8, true),
    ];
    fields.extend(side("base"));
    fields.push(Field::new("base_change", DataType::Float64, true));
    fields.extend(side("head"));
    fields.extend([
        Field::new("change", DataType::Float64, true),
        Field::new("change_unit", DataType::Utf8, false),
        Field::new("direction", DataType::Utf8, true),
        Field::new("is_headline", DataType::Boolean, false),
        Field::new("grouped", DataType::Boolean, false),
    ]);
    Arc::new(Schema::new(fields))
});

/// `metrics` in lake format 3 (served as `observations`, then `metrics`, as in format 2): format
/// 2's rows with each report test's time, report key and commits stored once per partition.
/// `lkplake compact` rewrites a partition into two kinds of rows, told apart by `metric`:
/// - a report row (`metric` null) per report test: `report_ref`, a number unique in the
///   partition, in the order of `params` then `time`, with its `time`, `params`, `report_key`,
///   `base_commit` and, in `commit`, its head column's commit;
/// - an observation row per table row, which names its report row by `report_ref` and leaves
///   `time`, `report_key` and `base_commit` null, and `commit` too unless it is a follow-up's
///   middle column.
///
/// The transformer appends format 2's rows as they are (`report_ref` null) until the next
/// compaction. Every column is nullable: each kind leaves the other's columns empty.
pub static FORMAT_3_OBSERVATIONS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let mut fields: Vec<Field> = OBSERVATIONS
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    fields.push(Field::new("report_ref", DataType::Int32, true));
    Arc::new(Schema::new(fields))
});

/// `reports`: one row per test of a report.
pub static REPORTS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("report_key", DataType::Utf8, false),
        Field::new("test_index", DataType::UInt32, false),
        Field::new("message_id", DataType::Utf8, true),
        Field::new("date", time(), true),
        Field::new("subject", DataType::Utf8, true),
        Field::new("kind", DataType::Utf8, true),
        Field::new("headline_metric", DataType::Utf8, true),
        Field::new("headline_change_pct", DataType::Float64, true),
        Field::new("commit", DataType::Utf8, false),
        Field::new("commit_title", DataType::Utf8, true),
        Field::new("base_commit", DataType::Utf8, false),
        Field::new("base_commit_title", DataType::Utf8, true),
        Field::new("branch", DataType::Utf8, true),
        Field::new("testcase", DataType::Utf8, false),
        Field::new("machine", DataType::Utf8, false),
        Field::new("machine_description", DataType::Utf8, true),
        Field::new("threads", DataType::UInt32, true),
        Field::new("sockets", DataType::UInt32, true),
        Field::new("cpu", DataType::Utf8, true),
        Field::new("memory_gb", DataType::UInt32, true),
        Field::new("params", DataType::Utf8, false),
        Field::new("compiler", DataType::Utf8, true),
        Field::new("kconfig", DataType::Utf8, true),
        Field::new("rootfs", DataType::Utf8, true),
        Field::new("rows", DataType::UInt32, false),
        Field::new("quoted", DataType::Boolean, false),
        Field::new("source", DataType::Utf8, false),
    ]))
});

/// `failures`: one row per row of a `fail:runs` table and commit column: how many runs of
/// that commit showed the failure.
pub static FAILURES: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("time", time(), true),
        Field::new("testcase", DataType::Utf8, false),
        Field::new("machine", DataType::Utf8, false),
        Field::new("params", DataType::Utf8, false),
        Field::new("metric", DataType::Utf8, false),
        Field::new("commit", DataType::Utf8, false),
        Field::new("role", DataType::Utf8, false),
        Field::new("fail", DataType::UInt32, false),
        Field::new("runs", DataType::UInt32, false),
        Field::new("reproduction_pct", DataType::Float64, true),
        Field::new("is_headline", DataType::Boolean, false),
        Field::new("report_key", DataType::Utf8, false),
    ]))
});

/// `mentions`: one row per mail that cites a report (as stored; the query layer's
/// `mentions` view adds the cited report's key).
pub static MENTIONS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("mention_key", DataType::Utf8, false),
        Field::new("message_id", DataType::Utf8, true),
        Field::new("in_reply_to", DataType::Utf8, true),
        Field::new(
            "references",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            false,
        ),
        Field::new("date", time(), true),
        Field::new("sender", DataType::Utf8, true),
        Field::new("subject", DataType::Utf8, true),
        Field::new("commit", DataType::Utf8, true),
        Field::new("testcase", DataType::Utf8, true),
        Field::new("machine", DataType::Utf8, true),
        Field::new("kind", DataType::Utf8, true),
        Field::new("metric", DataType::Utf8, true),
        Field::new("change_pct", DataType::Float64, true),
        Field::new(
            "rows",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            false,
        ),
        Field::new("source", DataType::Utf8, false),
    ]))
});

/// `links`: one row per statement of a later mail about a report, its culprit or its fix (a
/// `Closes:`/`Link:` trailer, a `Fixes:` trailer, a revert, an applied notice). The target is
/// kept as the mail prints it; the query layer joins it with `reports`.
pub static LINKS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("link_key", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("target", DataType::Utf8, false),
        Field::new("message_id", DataType::Utf8, true),
        Field::new("date", time(), true),
        Field::new("sender", DataType::Utf8, true),
        Field::new("subject", DataType::Utf8, true),
        Field::new("patch_title", DataType::Utf8, true),
        Field::new("commit", DataType::Utf8, true),
        Field::new("source", DataType::Utf8, false),
    ]))
});

/// `triage`: one row per status a person gave a culprit (`lkplake triage`): who, when, from
/// what status to what, and why. The newest row of a culprit stands over the automatic status
/// of the `regressions` view; older rows are its history.
pub static TRIAGE: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("culprit", DataType::Utf8, false),
        Field::new("verdict", DataType::Utf8, false),
        Field::new("triaged_at", time(), false),
        Field::new("triaged_by", DataType::Utf8, false),
        Field::new("from_status", DataType::Utf8, false),
        Field::new("to_status", DataType::Utf8, false),
        Field::new("note", DataType::Utf8, true),
        Field::new("fix_commit", DataType::Utf8, true),
    ]))
});

/// `changes`: one row per change point that `lkplake trend` found in a series.
pub static CHANGES: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("testcase", DataType::Utf8, false),
        Field::new("machine", DataType::Utf8, false),
        Field::new("params", DataType::Utf8, false),
        Field::new("metric", DataType::Utf8, false),
        Field::new("time", time(), false),
        Field::new("last_commit_before", DataType::Utf8, false),
        Field::new("first_commit_after", DataType::Utf8, false),
        Field::new("time_before", time(), false),
        Field::new("mean_before", DataType::Float64, false),
        Field::new("mean_after", DataType::Float64, false),
        Field::new("change_pct", DataType::Float64, false),
        Field::new("pvalue", DataType::Float64, false),
        Field::new("kind", DataType::Utf8, true),
        Field::new("direction", DataType::Utf8, true),
        Field::new("observations_before", DataType::UInt32, false),
        Field::new("observations_after", DataType::UInt32, false),
    ]))
});

/// `change_groups`: one row per group of change points whose ranges overlap (Skia Perf's
/// anomaly groups): the intersection of their ranges, how many and of which kind, the series
/// they are in, the commits that start their ranges, and the robot's report of one of those
/// commits when the lake holds one (null: a change the robot did not mail).
pub static CHANGE_GROUPS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("group_id", DataType::UInt32, false),
        Field::new("time_before", time(), false),
        Field::new("time", time(), false),
        Field::new("changes", DataType::UInt32, false),
        Field::new("regressions", DataType::UInt32, false),
        Field::new("improvements", DataType::UInt32, false),
        Field::new("testcases", DataType::Utf8, false),
        Field::new("machines", DataType::Utf8, false),
        Field::new("metrics", DataType::Utf8, false),
        Field::new("commits", DataType::Utf8, false),
        Field::new("report_key", DataType::Utf8, true),
    ]))
});

/// `trend_series`: what `lkplake trend` last analysed per series, so a re-run recomputes only
/// series with new observations.
pub static TREND_SERIES: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("testcase", DataType::Utf8, false),
        Field::new("machine", DataType::Utf8, false),
        Field::new("params", DataType::Utf8, false),
        Field::new("metric", DataType::Utf8, false),
        Field::new("observations", DataType::UInt64, false),
        Field::new("last_time", time(), false),
        Field::new("settings", DataType::Utf8, false),
    ]))
});

/// `trend_partitions`: per `metrics` partition, a fingerprint of its live files (their paths and
/// sizes) when `lkplake trend` last read the whole partition, and the settings it read with. A
/// re-run does not read a partition whose files and settings are the same: none of its series
/// can have changed.
pub static TREND_PARTITIONS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new("testcase", DataType::Utf8, false),
        Field::new("machine", DataType::Utf8, false),
        Field::new("files", DataType::Utf8, false),
        Field::new("settings", DataType::Utf8, false),
    ]))
});

/// The schema of lake table `name`, if it is one of the tables above.
pub fn schema_of(name: &str) -> Option<SchemaRef> {
    let schema = match name {
        METRICS_TABLE => &METRICS,
        REPORTS_TABLE => &REPORTS,
        FAILURES_TABLE => &FAILURES,
        MENTIONS_TABLE => &MENTIONS,
        LINKS_TABLE => &LINKS,
        TRIAGE_TABLE => &TRIAGE,
        CHANGES_TABLE => &CHANGES,
        CHANGE_GROUPS_TABLE => &CHANGE_GROUPS,
        TREND_SERIES_TABLE => &TREND_SERIES,
        TREND_PARTITIONS_TABLE => &TREND_PARTITIONS,
        _ => return None,
    };
    Some(Arc::clone(schema))
}
