//! The `metrics` rows in lake formats 2 and 3: one row per table row of a report test with base
//! and head side by side, values as printed decimals (`lkplake_schemas::tables::OBSERVATIONS`).
//! Format 3 takes them as they are, not numbered by report test yet: `lkplake compact` does that
//! (`lkplake_lake::report_rows`).

use super::{MetricRow, MetricTest, role, unsigned_zero};
use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int8Builder, Int64Builder, RecordBatch,
    StringBuilder, TimestampMicrosecondBuilder, new_null_array,
};
use arrow::error::ArrowError;
use lkplake_schemas::Value;
use lkplake_schemas::decimal::Decimal;
use lkplake_schemas::metric::program;
use lkplake_schemas::tables::{FORMAT_3_OBSERVATIONS, OBSERVATIONS};
use std::sync::Arc;

/// One side of a row: a commit column's value.
#[derive(Debug, Default)]
struct Side {
    mantissa: Int64Builder,
    scale: Int8Builder,
    float: Float64Builder,
    stddev_pct: Float64Builder,
}

impl Side {
    fn append(&mut self, value: Option<&Value>) {
        let mean = value.map(|v| unsigned_zero(v.mean));
        let decimal = mean.and_then(Decimal::of);
        self.mantissa.append_option(decimal.map(|d| d.mantissa));
        self.scale.append_option(decimal.map(|d| d.scale));
        self.float.append_option(mean.filter(|_| decimal.is_none()));
        self.stddev_pct
            .append_option(value.and_then(|v| v.stddev_pct).map(unsigned_zero));
    }

    fn finish(&mut self) -> [ArrayRef; 4] {
        [
            Arc::new(self.mantissa.finish()),
            Arc::new(self.scale.finish()),
            Arc::new(self.float.finish()),
            Arc::new(self.stddev_pct.finish()),
        ]
    }
}

#[derive(Debug, Default)]
struct Columns {
    time: TimestampMicrosecondBuilder,
    testcase: StringBuilder,
    machine: StringBuilder,
    params: StringBuilder,
    metric: StringBuilder,
    program: StringBuilder,
    report_key: StringBuilder,
    base_commit: StringBuilder,
    commit: StringBuilder,
    role: StringBuilder,
    base: Side,
    base_change: Float64Builder,
    head: Side,
    change: Float64Builder,
    change_unit: StringBuilder,
    direction: StringBuilder,
    is_headline: BooleanBuilder,
    grouped: BooleanBuilder,
}

/// What one row of the table shares with the other rows of its table row.
struct Shared<'r> {
    test: &'r MetricTest<'r>,
    row: MetricRow<'r>,
    direction: Option<&'static str>,
    grouped: bool,
}

impl Columns {
    /// A row: the base side when `base` (the base column's value), the other side when `other`
    /// (a column past the base, with its index).
    fn append(&mut self, shared: &Shared<'_>, base: Option<&Value>, other: Option<usize>) {
        let MetricTest {
            report,
            test,
            params,
            time,
        } = shared.test;
        let values = shared.row.values;
        let columns = test.commits.len();
        let commit = |column: usize| test.commits.get(column).map_or("", String::as_str);
        self.time.append_option(*time);
        self.testcase.append_value(&test.testcase);
        self.machine.append_value(&test.tbox_group);
        self.params.append_value(params);
        self.metric.append_value(&values.metric);
        self.program.append_value(program(&values.metric));
        self.report_key.append_value(&report.report_key);
        self.base_commit.append_value(commit(0));
        self.commit.append_option(other.map(commit));
        self.role.append_option(other.map(|c| role(c, columns)));
        self.base.append(base);
        self.base_change
            .append_option(base.and_then(|v| v.change).map(unsigned_zero));
        let value = other.and_then(|c| values.values.get(c));
        self.head.append(value);
        self.change
            .append_option(value.and_then(|v| v.change).map(unsigned_zero));
        self.change_unit.append_value(values.change_unit.as_str());
        self.direction.append_option(shared.direction);
        self.is_headline.append_value(
            test.headline.as_ref().map(|h| h.metric.as_str()) == Some(values.metric.as_str()),
        );
        self.grouped.append_value(shared.grouped);
    }

    fn finish(mut self) -> Result<RecordBatch, ArrowError> {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.time.finish().with_timezone("UTC")),
            Arc::new(self.testcase.finish()),
            Arc::new(self.machine.finish()),
            Arc::new(self.params.finish()),
            Arc::new(self.metric.finish()),
            Arc::new(self.program.finish()),
            Arc::new(self.report_key.finish()),
            Arc::new(self.base_commit.finish()),
            Arc::new(self.commit.finish()),
            Arc::new(self.role.finish()),
        ];
        columns.extend(self.base.finish());
        columns.push(Arc::new(self.base_change.finish()));
        columns.extend(self.head.finish());
        columns.extend([
            Arc::new(self.change.finish()) as ArrayRef,
            Arc::new(self.change_unit.finish()),
            Arc::new(self.direction.finish()),
            Arc::new(self.is_headline.finish()),
            Arc::new(self.grouped.finish()),
        ]);
        RecordBatch::try_new(OBSERVATIONS.clone(), columns)
    }
}

/// The rows of table rows `rows` (one entry per table row, in the order to write them), with
/// each one's direction and whether its report test lists its metric more than once.
pub(super) fn batch<'r>(
    tests: &'r [MetricTest<'r>],
    rows: impl Iterator<Item = (MetricRow<'r>, Option<&'static str>, bool)>,
) -> Result<RecordBatch, ArrowError> {
    let mut out = Columns::default();
    for (row, direction, grouped) in rows {
        let test = &tests[row.test];
        let shared = Shared {
            test,
            row,
            direction,
            grouped,
        };
        let columns = test.test.commits.len();
        let values = &row.values.values;
        let head = (1..values.len()).find(|&c| role(c, columns) == "head");
        out.append(&shared, values.first(), head);
        // A follow-up's middle columns: a row each, without the base.
        for column in (1..values.len()).filter(|&c| Some(c) != head) {
            out.append(&shared, None, Some(column));
        }
    }
    out.finish()
}

/// Format 2's `rows` as format 3 appends them: with no `report_ref` yet.
pub(super) fn unnumbered(rows: RecordBatch) -> Result<RecordBatch, ArrowError> {
    let mut columns = rows.columns().to_vec();
    columns.push(new_null_array(
        &arrow::datatypes::DataType::Int32,
        rows.num_rows(),
    ));
    RecordBatch::try_new(FORMAT_3_OBSERVATIONS.clone(), columns)
}
