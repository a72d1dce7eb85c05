//! Normalization: reports, mentions and links into Arrow record batches of the lake's
//! `metrics`, `failures`, `mentions`, `links` and `reports` tables. Pure CPU work, run off the
//! async runtime by the caller.

use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, ListBuilder, RecordBatch, StringBuilder,
    TimestampMicrosecondBuilder, UInt32Builder,
};
use arrow::compute::{SortColumn, lexsort_to_indices, take_record_batch};
use arrow::datatypes::{DataType, Field};
use arrow::error::ArrowError;
use lkplake_lake::{Batches, Format, Progress, Table};
use lkplake_schemas::key::canonical_params;
use lkplake_schemas::metric::{DirectionTable, program};
use lkplake_schemas::tables::{FAILURES, LINKS, MENTIONS, METRICS, REPORTS};
use lkplake_schemas::{Link, Mention, Report, Row, Test};
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

mod side_by_side;

/// The role of a commit column: the base, the commit under test, or a commit in between
/// (follow-ups compare more than two). Borrowed for the base and the head, nearly every row.
pub fn role(column: usize, columns: usize) -> Cow<'static, str> {
    match column {
        0 => Cow::Borrowed("base"),
        c if c + 1 == columns => Cow::Borrowed("head"),
        c => Cow::Owned(format!("c{c}")),
    }
}

/// A test whose table rows wait in [`Normalizer`] for `metrics`: what its rows share.
#[derive(Debug)]
struct MetricTest<'a> {
    report: &'a Report,
    test: &'a Test,
    /// The canonical parameters, built once for all of the test's rows.
    params: String,
    time: Option<i64>,
}

/// One `metrics` row waiting for [`Normalizer::finish`]: a value of a test's table, by
/// reference, so that the rows are sorted before any column is built.
#[derive(Debug, Clone, Copy)]
struct MetricRow<'a> {
    /// Index into the normalizer's tests.
    test: usize,
    /// Index into the normalizer's table rows.
    row: usize,
    values: &'a Row,
    column: usize,
}

#[derive(Debug)]
struct MetricColumns {
    time: TimestampMicrosecondBuilder,
    testcase: StringBuilder,
    machine: StringBuilder,
    params: StringBuilder,
    metric: StringBuilder,
    program: StringBuilder,
    commit: StringBuilder,
    role: StringBuilder,
    value: Float64Builder,
    stddev_pct: Float64Builder,
    change: Float64Builder,
    change_unit: StringBuilder,
    direction: StringBuilder,
    is_headline: BooleanBuilder,
    report_key: StringBuilder,
}

impl MetricColumns {
    fn with_capacity(rows: usize) -> Self {
        let strings = || StringBuilder::with_capacity(rows, rows * 8);
        Self {
            time: TimestampMicrosecondBuilder::with_capacity(rows),
            testcase: strings(),
            machine: strings(),
            params: strings(),
            metric: strings(),
            program: strings(),
            commit: strings(),
            role: strings(),
            value: Float64Builder::with_capacity(rows),
            stddev_pct: Float64Builder::with_capacity(rows),
            change: Float64Builder::with_capacity(rows),
            change_unit: strings(),
            direction: strings(),
            is_headline: BooleanBuilder::with_capacity(rows),
            report_key: strings(),
        }
    }
}

#[derive(Debug, Default)]
struct FailureColumns {
    time: TimestampMicrosecondBuilder,
    testcase: StringBuilder,
    machine: StringBuilder,
    params: StringBuilder,
    metric: StringBuilder,
    commit: StringBuilder,
    role: StringBuilder,
    fail: UInt32Builder,
    runs: UInt32Builder,
    reproduction_pct: Float64Builder,
    is_headline: BooleanBuilder,
    report_key: StringBuilder,
}

/// A list of strings, its items nullable as the `mentions` schema declares them.
fn string_list() -> ListBuilder<StringBuilder> {
    ListBuilder::new(StringBuilder::new()).with_field(Arc::new(Field::new(
        "item",
        DataType::Utf8,
        true,
    )))
}

#[derive(Debug)]
struct MentionColumns {
    mention_key: StringBuilder,
    message_id: StringBuilder,
    in_reply_to: StringBuilder,
    references: ListBuilder<StringBuilder>,
    date: TimestampMicrosecondBuilder,
    sender: StringBuilder,
    subject: StringBuilder,
    commit: StringBuilder,
    testcase: StringBuilder,
    machine: StringBuilder,
    kind: StringBuilder,
    metric: StringBuilder,
    change_pct: Float64Builder,
    rows: ListBuilder<StringBuilder>,
    source: StringBuilder,
}

impl Default for MentionColumns {
    fn default() -> Self {
        Self {
            mention_key: StringBuilder::new(),
            message_id: StringBuilder::new(),
            in_reply_to: StringBuilder::new(),
            references: string_list(),
            date: TimestampMicrosecondBuilder::new(),
            sender: StringBuilder::new(),
            subject: StringBuilder::new(),
            commit: StringBuilder::new(),
            testcase: StringBuilder::new(),
            machine: StringBuilder::new(),
            kind: StringBuilder::new(),
            metric: StringBuilder::new(),
            change_pct: Float64Builder::new(),
            rows: string_list(),
            source: StringBuilder::new(),
        }
    }
}

#[derive(Debug, Default)]
struct LinkColumns {
    link_key: StringBuilder,
    kind: StringBuilder,
    target: StringBuilder,
    message_id: StringBuilder,
    date: TimestampMicrosecondBuilder,
    sender: StringBuilder,
    subject: StringBuilder,
    patch_title: StringBuilder,
    commit: StringBuilder,
    source: StringBuilder,
}

#[derive(Debug, Default)]
struct ReportColumns {
    report_key: StringBuilder,
    test_index: UInt32Builder,
    message_id: StringBuilder,
    date: TimestampMicrosecondBuilder,
    subject: StringBuilder,
    kind: StringBuilder,
    headline_metric: StringBuilder,
    headline_change_pct: Float64Builder,
    commit: StringBuilder,
    commit_title: StringBuilder,
    base_commit: StringBuilder,
    base_commit_title: StringBuilder,
    branch: StringBuilder,
    testcase: StringBuilder,
    machine: StringBuilder,
    machine_description: StringBuilder,
    threads: UInt32Builder,
    sockets: UInt32Builder,
    cpu: StringBuilder,
    memory_gb: UInt32Builder,
    params: StringBuilder,
    compiler: StringBuilder,
    kconfig: StringBuilder,
    rootfs: StringBuilder,
    rows: UInt32Builder,
    quoted: BooleanBuilder,
    source: StringBuilder,
}

/// Which tables a message's rows go to: the lake's tables it is not yet in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tables([bool; Table::ALL.len()]);

impl Tables {
    /// A message new to the lake: every table.
    pub const ALL: Tables = Tables([true; Table::ALL.len()]);

    /// Whether rows go to `table`.
    pub fn contains(self, table: Table) -> bool {
        self.0[table.index()]
    }

    /// Leaves out the tables whose recorded progress already covers the message at `offset`.
    pub fn remove_covered(&mut self, progress: Progress, offset: i64) {
        for table in Table::ALL {
            if progress.covers(table, offset) {
                self.0[table.index()] = false;
            }
        }
    }
}

/// Accumulates reports, mentions and links into column builders; the `metrics` rows, most of the
/// data, stay references into the reports until [`Normalizer::finish`] sorts them.
#[derive(Debug, Default)]
pub struct Normalizer<'a> {
    directions: DirectionTable,
    /// The lake's format: how `metrics` rows are laid out.
    format: Format,
    metric_tests: Vec<MetricTest<'a>>,
    /// One per table row (a metric), shared by the row's commit columns.
    metric_names: Vec<&'a str>,
    metrics: Vec<MetricRow<'a>>,
    failures: FailureColumns,
    mentions: MentionColumns,
    links: LinkColumns,
    reports: ReportColumns,
}

impl<'a> Normalizer<'a> {
    /// An empty normalizer for a lake in `format` that labels each metric's direction from
    /// `directions`.
    pub fn new(directions: DirectionTable, format: Format) -> Self {
        Self {
            directions,
            format,
            ..Self::default()
        }
    }

    /// Rows of the `metrics` table buffered so far.
    pub fn metric_rows(&self) -> usize {
        self.metrics.len()
    }

    /// Buffers a report's rows for every table.
    pub fn push(&mut self, report: &'a Report) {
        self.push_into(report, Tables::ALL, 0);
    }

    /// Adds a report's rows to the chosen tables only (a replay after a crash between two
    /// tables' commits completes the ones that are missing). Its first test gets `test_index`
    /// `first_index` (more than 0 for tests added to a report the lake holds).
    pub fn push_into(&mut self, report: &'a Report, tables: Tables, first_index: u32) {
        let time = report.date.map(|d| d.timestamp_micros());
        for (index, test) in (first_index as usize..).zip(&report.tests) {
            if tables.contains(Table::Metrics) {
                self.push_metrics(report, test, time);
            }
            if tables.contains(Table::Failures) {
                self.push_failures(report, test, time);
            }
            if tables.contains(Table::Reports) {
                self.push_report(report, index, test, time);
            }
        }
    }

    /// Adds a mention's row, if `mentions` does not hold it yet.
    pub fn push_mention(&mut self, mention: &Mention, tables: Tables) {
        if !tables.contains(Table::Mentions) {
            return;
        }
        let m = &mut self.mentions;
        m.mention_key.append_value(&mention.mention_key);
        m.message_id.append_option(mention.message_id.as_deref());
        m.in_reply_to.append_option(mention.in_reply_to.as_deref());
        m.references
            .append_value(mention.references.iter().map(|r| Some(r.as_str())));
        m.date
            .append_option(mention.date.map(|d| d.timestamp_micros()));
        m.sender.append_option(mention.sender.as_deref());
        m.subject.append_option(mention.subject.as_deref());
        m.commit.append_option(mention.commit.as_deref());
        m.testcase.append_option(mention.testcase.as_deref());
        m.machine.append_option(mention.machine.as_deref());
        m.kind.append_option(mention.kind.map(|k| k.as_str()));
        m.metric.append_option(mention.metric.as_deref());
        m.change_pct
            .append_option(mention.change_pct.map(unsigned_zero));
        m.rows
            .append_value(mention.rows.iter().map(|r| Some(r.as_str())));
        m.source.append_value(mention.source.to_string());
    }

    /// Adds a link's row, if `links` does not hold it yet.
    pub fn push_link(&mut self, link: &Link, tables: Tables) {
        if !tables.contains(Table::Links) {
            return;
        }
        let l = &mut self.links;
        l.link_key.append_value(&link.link_key);
        l.kind.append_value(link.kind.as_str());
        l.target.append_value(&link.target);
        l.message_id.append_option(link.message_id.as_deref());
        l.date
            .append_option(link.date.map(|d| d.timestamp_micros()));
        l.sender.append_option(link.sender.as_deref());
        l.subject.append_option(link.subject.as_deref());
        l.patch_title.append_option(link.patch_title.as_deref());
        l.commit.append_option(link.commit.as_deref());
        l.source.append_value(link.source.to_string());
    }

    fn push_failures(&mut self, report: &Report, test: &Test, time: Option<i64>) {
        let params = canonical_params(&test.params);
        let headline = test.headline.as_ref().map(|h| h.metric.as_str());
        let columns = test.commits.len();
        let f = &mut self.failures;
        for failure in &test.failures {
            for (column, runs) in failure.columns.iter().enumerate() {
                f.time.append_option(time);
                f.testcase.append_value(&test.testcase);
                f.machine.append_value(&test.tbox_group);
                f.params.append_value(&params);
                f.metric.append_value(&failure.metric);
                f.commit
                    .append_value(test.commits.get(column).map_or("", String::as_str));
                f.role.append_value(role(column, columns));
                f.fail.append_value(runs.fail);
                f.runs.append_value(runs.runs);
                f.reproduction_pct
                    .append_option(runs.reproduction_pct.map(unsigned_zero));
                f.is_headline
                    .append_value(headline == Some(failure.metric.as_str()));
                f.report_key.append_value(&report.report_key);
            }
        }
    }

    fn push_metrics(&mut self, report: &'a Report, test: &'a Test, time: Option<i64>) {
        if test.rows.is_empty() {
            return;
        }
        let index = self.metric_tests.len();
        self.metric_tests.push(MetricTest {
            report,
            test,
            params: canonical_params(&test.params),
            time,
        });
        for values in &test.rows {
            let row = self.metric_names.len();
            self.metric_names.push(&values.metric);
            for column in 0..values.values.len() {
                self.metrics.push(MetricRow {
                    test: index,
                    row,
                    values,
                    column,
                });
            }
        }
    }

    /// The buffered `metrics` rows as one batch sorted by testcase, machine, metric, params
    /// and time, rows of equal keys in the order they came. Every distinct key string is
    /// ranked once, so the sort compares integers, and the columns are built in sorted order:
    /// sorting the built batch compared strings row by row and then copied every column,
    /// 36 % of the transformer's CPU time on the pipeline benchmark (BENCHMARKS.md).
    fn metrics_batch(&mut self) -> Result<RecordBatch, ArrowError> {
        let tests = std::mem::take(&mut self.metric_tests);
        let names = std::mem::take(&mut self.metric_names);
        let rows = std::mem::take(&mut self.metrics);
        let (partition, _) = ranks(
            tests
                .iter()
                .map(|t| (t.test.testcase.as_str(), t.test.tbox_group.as_str())),
        );
        let (params, _) = ranks(tests.iter().map(|t| t.params.as_str()));
        let (metric, metrics_sorted) = ranks(names.iter().copied());
        // Ranked metrics are distinct, so each one's direction is looked up (regexes) once.
        let directions: Vec<Option<&'static str>> = metrics_sorted
            .iter()
            .map(|m| self.directions.direction(m).map(|d| d.as_str()))
            .collect();
        // Formats 2 and 3 write a row per table row: its first column stands for it.
        let side_by_side = self.format != Format::One;
        let mut order: Vec<(u32, u32, u32, Option<i64>, usize)> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| !side_by_side || r.column == 0)
            .map(|(i, r)| {
                (
                    partition[r.test],
                    metric[r.row],
                    params[r.test],
                    tests[r.test].time,
                    i,
                )
            })
            .collect();
        // The index last makes every key distinct: unstable sorting keeps arrival order.
        order.sort_unstable();
        if side_by_side {
            // A report's table rows of one metric in its tests of one testcase, machine and
            // params, the ones `comparisons` groups, share every key: they sit together.
            let same_group = |a: usize, b: usize| {
                let ((p, m, q, t, i), (p2, m2, q2, t2, j)) = (order[a], order[b]);
                (p, m, q, t) == (p2, m2, q2, t2)
                    && std::ptr::eq(tests[rows[i].test].report, tests[rows[j].test].report)
            };
            let grouped = |k: usize| {
                (k > 0 && same_group(k - 1, k)) || (k + 1 < order.len() && same_group(k, k + 1))
            };
            let table_rows = (0..order.len()).map(|k| {
                let r = rows[order[k].4];
                (r, directions[metric[r.row] as usize], grouped(k))
            });
            let rows = side_by_side::batch(&tests, table_rows)?;
            return match self.format {
                Format::Three => side_by_side::unnumbered(rows),
                _ => Ok(rows),
            };
        }
        let mut m = MetricColumns::with_capacity(rows.len());
        for &(.., i) in &order {
            let r = rows[i];
            let MetricTest {
                report,
                test,
                params,
                time,
            } = &tests[r.test];
            let value = &r.values.values[r.column];
            let columns = test.commits.len();
            m.time.append_option(*time);
            m.testcase.append_value(&test.testcase);
            m.machine.append_value(&test.tbox_group);
            m.params.append_value(params);
            m.metric.append_value(&r.values.metric);
            m.program.append_value(program(&r.values.metric));
            m.commit
                .append_value(test.commits.get(r.column).map_or("", String::as_str));
            m.role.append_value(role(r.column, columns));
            m.value.append_value(unsigned_zero(value.mean));
            m.stddev_pct
                .append_option(value.stddev_pct.map(unsigned_zero));
            m.change.append_option(value.change.map(unsigned_zero));
            m.change_unit.append_value(r.values.change_unit.as_str());
            m.direction
                .append_option(directions[metric[r.row] as usize]);
            m.is_headline.append_value(
                test.headline.as_ref().map(|h| h.metric.as_str()) == Some(r.values.metric.as_str()),
            );
            m.report_key.append_value(&report.report_key);
        }
        let metric_columns: Vec<ArrayRef> = vec![
            Arc::new(m.time.finish().with_timezone("UTC")),
            Arc::new(m.testcase.finish()),
            Arc::new(m.machine.finish()),
            Arc::new(m.params.finish()),
            Arc::new(m.metric.finish()),
            Arc::new(m.program.finish()),
            Arc::new(m.commit.finish()),
            Arc::new(m.role.finish()),
            Arc::new(m.value.finish()),
            Arc::new(m.stddev_pct.finish()),
            Arc::new(m.change.finish()),
            Arc::new(m.change_unit.finish()),
            Arc::new(m.direction.finish()),
            Arc::new(m.is_headline.finish()),
            Arc::new(m.report_key.finish()),
        ];
        RecordBatch::try_new(METRICS.clone(), metric_columns)
    }

    fn push_report(&mut self, report: &Report, index: usize, test: &Test, time: Option<i64>) {
        let params = canonical_params(&test.params);
        let r = &mut self.reports;
        r.report_key.append_value(&report.report_key);
        r.test_index
            .append_value(u32::try_from(index).unwrap_or(u32::MAX));
        r.message_id.append_option(report.message_id.as_deref());
        r.date.append_option(time);
        r.subject.append_option(report.subject.as_deref());
        r.kind.append_option(report.kind.map(|k| k.as_str()));
        r.headline_metric
            .append_option(test.headline.as_ref().map(|h| h.metric.as_str()));
        r.headline_change_pct
            .append_option(test.headline.as_ref().map(|h| unsigned_zero(h.change_pct)));
        r.commit.append_value(&report.commit.id);
        r.commit_title.append_option(report.commit.title.as_deref());
        r.base_commit.append_value(&report.base_commit.id);
        r.base_commit_title
            .append_option(report.base_commit.title.as_deref());
        r.branch.append_option(report.branch.as_deref());
        r.testcase.append_value(&test.testcase);
        r.machine.append_value(&test.tbox_group);
        r.machine_description
            .append_option(test.machine.description.as_deref());
        r.threads.append_option(test.machine.threads);
        r.sockets.append_option(test.machine.sockets);
        r.cpu.append_option(test.machine.cpu.as_deref());
        r.memory_gb.append_option(test.machine.memory_gb);
        r.params.append_value(&params);
        r.compiler.append_option(test.params.get("compiler"));
        r.kconfig.append_option(test.params.get("kconfig"));
        r.rootfs.append_option(test.params.get("rootfs"));
        r.rows
            .append_value(u32::try_from(test.rows.len()).unwrap_or(u32::MAX));
        r.quoted.append_value(report.quoted);
        r.source.append_value(report.source.to_string());
    }

    /// Takes the buffered rows as sorted batches and resets the buffers.
    pub fn finish(&mut self) -> Result<Batches, ArrowError> {
        let metrics = self.metrics_batch()?;
        let r = &mut self.reports;
        let report_columns: Vec<ArrayRef> = vec![
            Arc::new(r.report_key.finish()),
            Arc::new(r.test_index.finish()),
            Arc::new(r.message_id.finish()),
            Arc::new(r.date.finish().with_timezone("UTC")),
            Arc::new(r.subject.finish()),
            Arc::new(r.kind.finish()),
            Arc::new(r.headline_metric.finish()),
            Arc::new(r.headline_change_pct.finish()),
            Arc::new(r.commit.finish()),
            Arc::new(r.commit_title.finish()),
            Arc::new(r.base_commit.finish()),
            Arc::new(r.base_commit_title.finish()),
            Arc::new(r.branch.finish()),
            Arc::new(r.testcase.finish()),
            Arc::new(r.machine.finish()),
            Arc::new(r.machine_description.finish()),
            Arc::new(r.threads.finish()),
            Arc::new(r.sockets.finish()),
            Arc::new(r.cpu.finish()),
            Arc::new(r.memory_gb.finish()),
            Arc::new(r.params.finish()),
            Arc::new(r.compiler.finish()),
            Arc::new(r.kconfig.finish()),
            Arc::new(r.rootfs.finish()),
            Arc::new(r.rows.finish()),
            Arc::new(r.quoted.finish()),
            Arc::new(r.source.finish()),
        ];
        let reports = RecordBatch::try_new(REPORTS.clone(), report_columns)?;
        let f = &mut self.failures;
        let failure_columns: Vec<ArrayRef> = vec![
            Arc::new(f.time.finish().with_timezone("UTC")),
            Arc::new(f.testcase.finish()),
            Arc::new(f.machine.finish()),
            Arc::new(f.params.finish()),
            Arc::new(f.metric.finish()),
            Arc::new(f.commit.finish()),
            Arc::new(f.role.finish()),
            Arc::new(f.fail.finish()),
            Arc::new(f.runs.finish()),
            Arc::new(f.reproduction_pct.finish()),
            Arc::new(f.is_headline.finish()),
            Arc::new(f.report_key.finish()),
        ];
        let failures = RecordBatch::try_new(FAILURES.clone(), failure_columns)?;
        let m = &mut self.mentions;
        let mention_columns: Vec<ArrayRef> = vec![
            Arc::new(m.mention_key.finish()),
            Arc::new(m.message_id.finish()),
            Arc::new(m.in_reply_to.finish()),
            Arc::new(m.references.finish()),
            Arc::new(m.date.finish().with_timezone("UTC")),
            Arc::new(m.sender.finish()),
            Arc::new(m.subject.finish()),
            Arc::new(m.commit.finish()),
            Arc::new(m.testcase.finish()),
            Arc::new(m.machine.finish()),
            Arc::new(m.kind.finish()),
            Arc::new(m.metric.finish()),
            Arc::new(m.change_pct.finish()),
            Arc::new(m.rows.finish()),
            Arc::new(m.source.finish()),
        ];
        let mentions = RecordBatch::try_new(MENTIONS.clone(), mention_columns)?;
        let l = &mut self.links;
        let link_columns: Vec<ArrayRef> = vec![
            Arc::new(l.link_key.finish()),
            Arc::new(l.kind.finish()),
            Arc::new(l.target.finish()),
            Arc::new(l.message_id.finish()),
            Arc::new(l.date.finish().with_timezone("UTC")),
            Arc::new(l.sender.finish()),
            Arc::new(l.subject.finish()),
            Arc::new(l.patch_title.finish()),
            Arc::new(l.commit.finish()),
            Arc::new(l.source.finish()),
        ];
        let links = RecordBatch::try_new(LINKS.clone(), link_columns)?;
        // Sorted by testcase, machine, metric, params, time: rows of one series sit together,
        // which is what compresses and what queries prune on.
        let series = ["testcase", "machine", "metric", "params", "time"];
        Ok(Batches {
            metrics,
            failures: sort_by(&failures, &series)?,
            mentions,
            links,
            reports,
        })
    }
}

/// The robot prints a change that rounds to zero as `-0.0%`: a zero, whose sign SQL engines
/// disagree on (DataFusion 55 counts `-0.0` and `0.0` as two values in some `count(DISTINCT
/// ...)` plans and sorts `-0.0` first; DuckDB and Postgres call them equal, as the
/// differential test in `tests/cli/clients.rs` found), so the lake stores every zero unsigned.
fn unsigned_zero(x: f64) -> f64 {
    if x == 0.0 { 0.0 } else { x }
}

/// Each key's rank among the distinct keys, in the keys' order, and the distinct keys sorted.
fn ranks<K: Ord + Hash + Copy>(keys: impl Iterator<Item = K>) -> (Vec<u32>, Vec<K>) {
    let mut ids: HashMap<K, u32> = HashMap::new();
    let mut distinct: Vec<K> = Vec::new();
    let of: Vec<u32> = keys
        .map(|k| {
            *ids.entry(k).or_insert_with(|| {
                distinct.push(k);
                u32::try_from(distinct.len() - 1).unwrap_or(u32::MAX)
            })
        })
        .collect();
    let mut by_key: Vec<u32> = (0..u32::try_from(distinct.len()).unwrap_or(u32::MAX)).collect();
    by_key.sort_unstable_by_key(|&id| distinct[id as usize]);
    let mut rank = vec![0; distinct.len()];
    for (r, &id) in by_key.iter().enumerate() {
        rank[id as usize] = u32::try_from(r).unwrap_or(u32::MAX);
    }
    let sorted = by_key.iter().map(|&id| distinct[id as usize]).collect();
    (of.into_iter().map(|id| rank[id as usize]).collect(), sorted)
}

fn sort_by(batch: &RecordBatch, columns: &[&str]) -> Result<RecordBatch, ArrowError> {
    if batch.num_rows() < 2 {
        return Ok(batch.clone());
    }
    let keys = columns
        .iter()
        .map(|name| {
            let values = batch
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| ArrowError::SchemaError(format!("no column {name}")))?;
            Ok(SortColumn {
                values,
                options: None,
            })
        })
        .collect::<Result<Vec<_>, ArrowError>>()?;
    let indices = lexsort_to_indices(&keys, None)?;
    take_record_batch(batch, &indices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Float64Type, TimestampMicrosecondType};
    use lkplake_schemas::{
        ChangeUnit, Commit, Headline, Machine, Row, SCHEMA_VERSION, Source, Value,
    };

    fn report() -> Report {
        let row = |metric: &str, base: f64, head: f64, change: f64, unit| Row {
            metric: metric.into(),
            values: vec![
                Value {
                    mean: base,
                    stddev_pct: Some(3.0),
                    change: None,
                },
                Value {
                    mean: head,
                    stddev_pct: None,
                    change: Some(change),
                },
            ],
            change_unit: unit,
        };
        Report {
            schema_version: SCHEMA_VERSION,
            report_key: "k1".into(),
            message_id: Some("<m@x>".into()),
            date: chrono::DateTime::from_timestamp(1_674_136_852, 0),
            subject: None,
            kind: Some(lkplake_schemas::Kind::Improvement),
            headline: Some(Headline {
                metric: "vm-scalability.throughput".into(),
                change_pct: 34.5,
            }),
            commit: Commit {
                id: "cb67f4282bf9693658dbda934a441ddbbb1446df".into(),
                title: None,
            },
            base_commit: Commit {
                id: "dad6a5eb55".into(),
                title: None,
            },
            branch: None,
            quoted: false,
            source: Source::file("a", 3),
            tests: vec![Test {
                testcase: "vm-scalability".into(),
                tbox_group: "lkp-csl-2sp3".into(),
                machine: Machine::default(),
                params: [
                    ("size".to_owned(), "128G".to_owned()),
                    ("runtime".to_owned(), "300s".to_owned()),
                ]
                .into(),
                headline: Some(Headline {
                    metric: "vm-scalability.throughput".into(),
                    change_pct: 34.5,
                }),
                commits: vec!["dad6a5eb55".into(), "cb67f4282b".into()],
                rows: vec![
                    row(
                        "vm-scalability.throughput",
                        2.352e8,
                        3.164e8,
                        34.5,
                        ChangeUnit::Percent,
                    ),
                    row(
                        "mpstat.cpu.all.soft%",
                        0.34,
                        0.20,
                        -0.1,
                        ChangeUnit::Absolute,
                    ),
                ],
                failures: vec![],
            }],
        }
    }

    #[test]
    fn every_row_and_column_becomes_one_observation_sorted_by_series() -> Result<(), ArrowError> {
        let r = report();
        let mut n = Normalizer::default();
        n.push(&r);
        assert_eq!(n.metric_rows(), 4);
        let b = n.finish()?;
        assert_eq!(b.metrics.num_rows(), 4);
        let metric = b
            .metrics
            .column_by_name("metric")
            .map(|c| c.as_string::<i32>().clone());
        let metric = metric.ok_or_else(|| ArrowError::SchemaError("metric".into()))?;
        assert_eq!(metric.value(0), "mpstat.cpu.all.soft%");
        assert_eq!(metric.value(2), "vm-scalability.throughput");
        let value = b
            .metrics
            .column_by_name("value")
            .map(|c| c.as_primitive::<Float64Type>().clone());
        let value = value.ok_or_else(|| ArrowError::SchemaError("value".into()))?;
        assert_eq!((value.value(2), value.value(3)), (2.352e8, 3.164e8));
        let role = b
            .metrics
            .column_by_name("role")
            .map(|c| c.as_string::<i32>().clone());
        let role = role.ok_or_else(|| ArrowError::SchemaError("role".into()))?;
        assert_eq!((role.value(2), role.value(3)), ("base", "head"));
        let params = b
            .metrics
            .column_by_name("params")
            .map(|c| c.as_string::<i32>().value(0).to_owned());
        assert_eq!(params.as_deref(), Some("runtime=300s,size=128G"));
        let headline = b
            .metrics
            .column_by_name("is_headline")
            .map(|c| c.as_boolean().clone());
        let headline = headline.ok_or_else(|| ArrowError::SchemaError("is_headline".into()))?;
        assert!(!headline.value(0) && headline.value(3));
        let time = b
            .metrics
            .column_by_name("time")
            .map(|c| c.as_primitive::<TimestampMicrosecondType>().value(0));
        assert_eq!(time, Some(1_674_136_852_000_000));
        let stddev = b.metrics.column_by_name("stddev_pct").map(|c| c.is_null(3));
        assert_eq!(stddev, Some(true));
        assert_eq!(b.reports.num_rows(), 1);
        Ok(())
    }

    /// A string column of the `metrics` batch.
    fn strings(batch: &RecordBatch, name: &str) -> Vec<Option<String>> {
        batch
            .column_by_name(name)
            .map(|c| {
                c.as_string::<i32>()
                    .iter()
                    .map(|v| v.map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn rows_of_many_reports_come_out_by_series_and_time_ties_in_arrival_order()
    -> Result<(), ArrowError> {
        // k1 as in `report()`; k2 the same test a year earlier; k3 another testcase holding
        // only the soft% row; k4 a second copy of k1's series at k1's very time.
        let k1 = report();
        let mut k2 = report();
        k2.report_key = "k2".into();
        k2.date = chrono::DateTime::from_timestamp(1_642_600_852, 0);
        let mut k3 = report();
        k3.report_key = "k3".into();
        k3.tests[0].testcase = "aim9".into();
        k3.tests[0].rows.remove(0);
        let mut k4 = report();
        k4.report_key = "k4".into();
        let mut n = Normalizer::default();
        for r in [&k1, &k2, &k3, &k4] {
            n.push(r);
        }
        assert_eq!(n.metric_rows(), 14);
        let b = n.finish()?.metrics;
        let got: Vec<String> = strings(&b, "testcase")
            .into_iter()
            .zip(strings(&b, "metric"))
            .zip(
                strings(&b, "report_key")
                    .into_iter()
                    .zip(strings(&b, "role")),
            )
            .map(|((t, m), (k, r))| {
                format!(
                    "{} {} {} {}",
                    t.unwrap_or_default(),
                    m.unwrap_or_default(),
                    k.unwrap_or_default(),
                    r.unwrap_or_default()
                )
            })
            .collect();
        let soft = "mpstat.cpu.all.soft%";
        let tput = "vm-scalability.throughput";
        let want: Vec<String> = [
            ("aim9", soft, "k3", "base"),
            ("aim9", soft, "k3", "head"),
            ("vm-scalability", soft, "k2", "base"),
            ("vm-scalability", soft, "k2", "head"),
            ("vm-scalability", soft, "k1", "base"),
            ("vm-scalability", soft, "k1", "head"),
            ("vm-scalability", soft, "k4", "base"),
            ("vm-scalability", soft, "k4", "head"),
            ("vm-scalability", tput, "k2", "base"),
            ("vm-scalability", tput, "k2", "head"),
            ("vm-scalability", tput, "k1", "base"),
            ("vm-scalability", tput, "k1", "head"),
            ("vm-scalability", tput, "k4", "base"),
            ("vm-scalability", tput, "k4", "head"),
        ]
        .iter()
        .map(|(t, m, k, r)| format!("{t} {m} {k} {r}"))
        .collect();
        assert_eq!(got, want);
        // Each row keeps its own report's values and labels after the sort.
        let value = b
            .column_by_name("value")
            .map(|c| c.as_primitive::<Float64Type>().clone())
            .ok_or_else(|| ArrowError::SchemaError("value".into()))?;
        assert_eq!((value.value(0), value.value(1)), (0.34, 0.20));
        assert_eq!((value.value(8), value.value(9)), (2.352e8, 3.164e8));
        let direction = strings(&b, "direction");
        assert_eq!(direction[2], None);
        assert_eq!(direction[9].as_deref(), Some("higher_is_better"));
        let headline = b
            .column_by_name("is_headline")
            .map(|c| c.as_boolean().clone())
            .ok_or_else(|| ArrowError::SchemaError("is_headline".into()))?;
        assert!(!headline.value(7) && headline.value(8));
        let commit = strings(&b, "commit");
        assert_eq!(commit[12].as_deref(), Some("dad6a5eb55"));
        assert_eq!(commit[13].as_deref(), Some("cb67f4282b"));
        Ok(())
    }

    #[test]
    fn a_change_printed_as_minus_zero_is_stored_as_zero() -> Result<(), ArrowError> {
        let mut r = report();
        r.tests[0].rows[1].values[1].change = Some(-0.0);
        let mut n = Normalizer::default();
        n.push(&r);
        let b = n.finish()?;
        let change = b
            .metrics
            .column_by_name("change")
            .map(|c| c.as_primitive::<Float64Type>().clone());
        let change = change.ok_or_else(|| ArrowError::SchemaError("change".into()))?;
        let zeros: Vec<f64> = change.iter().flatten().filter(|c| *c == 0.0).collect();
        assert_eq!(zeros.len(), 1);
        assert!(zeros[0].is_sign_positive());
        Ok(())
    }

    /// Column `name` of `batch` as text, one entry per row, nulls as `-`.
    fn texts(batch: &RecordBatch, name: &str) -> Vec<String> {
        let options = arrow::util::display::FormatOptions::default().with_null("-");
        batch
            .column_by_name(name)
            .and_then(|c| arrow::util::display::ArrayFormatter::try_new(c, &options).ok())
            .map(|f| {
                (0..batch.num_rows())
                    .map(|i| f.value(i).to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn format_2_sets_base_beside_head_and_gives_a_middle_column_a_row_of_its_own()
    -> Result<(), ArrowError> {
        let mut r = report();
        let test = &mut r.tests[0];
        test.commits = vec![
            "dad6a5eb55".into(),
            "1111111111".into(),
            "cb67f4282b".into(),
        ];
        // Throughput under all three commits; soft% under the first two only.
        test.rows[0].values.insert(
            1,
            Value {
                mean: 2.5e8,
                stddev_pct: Some(2.0),
                change: Some(6.3),
            },
        );
        let mut n = Normalizer::new(DirectionTable::default(), Format::Two);
        n.push(&r);
        assert_eq!(n.metric_rows(), 5);
        let b = n.finish()?.metrics;
        assert_eq!(b.schema(), lkplake_schemas::tables::OBSERVATIONS.clone());
        let rows: Vec<String> = (0..b.num_rows())
            .map(|i| {
                [
                    "metric",
                    "role",
                    "base_commit",
                    "commit",
                    "base_mantissa",
                    "base_scale",
                    "head_mantissa",
                    "head_scale",
                    "head_stddev_pct",
                    "change",
                    "grouped",
                ]
                .iter()
                .map(|c| texts(&b, c)[i].clone())
                .collect::<Vec<_>>()
                .join(" ")
            })
            .collect();
        assert_eq!(
            rows,
            [
                // 0.34 under the base, 0.20 under c1: no column is the head.
                "mpstat.cpu.all.soft% - dad6a5eb55 - 34 2 - - - - false",
                "mpstat.cpu.all.soft% c1 dad6a5eb55 1111111111 - - 2 1 - -0.1 false",
                // 2.352e8 and 3.164e8 keep their four printed digits.
                "vm-scalability.throughput head dad6a5eb55 cb67f4282b 2352 -5 3164 -5 - 34.5 false",
                "vm-scalability.throughput c1 dad6a5eb55 1111111111 - - 25 -7 2.0 6.3 false",
            ]
        );
        Ok(())
    }

    #[test]
    fn format_2_marks_the_rows_of_a_metric_a_test_lists_twice_as_grouped() -> Result<(), ArrowError>
    {
        let mut r = report();
        let again = r.tests[0].rows[0].clone();
        r.tests[0].rows.push(again);
        let mut n = Normalizer::new(DirectionTable::default(), Format::Two);
        n.push(&r);
        let b = n.finish()?.metrics;
        assert_eq!(texts(&b, "metric").len(), 3);
        assert_eq!(texts(&b, "grouped"), ["false", "true", "true"]);
        Ok(())
    }

    #[test]
    fn follow_up_columns_get_base_middle_and_head_roles() {
        assert_eq!(
            (role(0, 4), role(1, 4), role(2, 4), role(3, 4)),
            ("base".into(), "c1".into(), "c2".into(), "head".into())
        );
    }
}
