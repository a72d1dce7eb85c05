//! Batches for the crate's tests.

use crate::Batches;
use deltalake::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use lkplake_schemas::tables::{FAILURES, LINKS, MENTIONS, METRICS, REPORTS};
use std::sync::Arc;

/// One format-1 `metrics` row of a test's batch: what tests vary.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observation {
    pub metric: &'static str,
    /// Microseconds since the epoch.
    pub time: i64,
    pub role: &'static str,
    pub commit: &'static str,
    pub value: f64,
    pub is_headline: bool,
}

/// `metrics` rows of one (testcase, machine) and report, with empty params, no stddev or
/// change; the other tables empty.
pub(crate) fn observations(testcase: &str, machine: &str, rows: &[Observation]) -> Batches {
    let n = rows.len();
    let text = |value: &str| Arc::new(StringArray::from(vec![value; n])) as ArrayRef;
    let pick = |f: fn(&Observation) -> &'static str| {
        Arc::new(StringArray::from(rows.iter().map(f).collect::<Vec<_>>())) as ArrayRef
    };
    let times: Vec<i64> = rows.iter().map(|r| r.time).collect();
    let values: Vec<f64> = rows.iter().map(|r| r.value).collect();
    let headlines: Vec<bool> = rows.iter().map(|r| r.is_headline).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(TimestampMicrosecondArray::from(times).with_timezone("UTC")),
        text(testcase),
        text(machine),
        text(""),
        pick(|r| r.metric),
        text("vm-scalability"),
        pick(|r| r.commit),
        pick(|r| r.role),
        Arc::new(Float64Array::from(values)),
        Arc::new(Float64Array::from(vec![None; n])),
        Arc::new(Float64Array::from(vec![None; n])),
        text("%"),
        Arc::new(StringArray::from(vec![None::<&str>; n])),
        Arc::new(BooleanArray::from(headlines)),
        text("k"),
    ];
    Batches {
        metrics: RecordBatch::try_new(Arc::clone(&METRICS), columns)
            .unwrap_or_else(|e| panic!("{e}")),
        failures: RecordBatch::new_empty(Arc::clone(&FAILURES)),
        mentions: RecordBatch::new_empty(Arc::clone(&MENTIONS)),
        links: RecordBatch::new_empty(Arc::clone(&LINKS)),
        reports: RecordBatch::new_empty(Arc::clone(&REPORTS)),
    }
}

/// `metrics` rows of one (testcase, machine), one per (metric, time in microseconds, value),
/// all of one head commit and report; the other tables empty.
pub(crate) fn metrics(testcase: &str, machine: &str, rows: &[(&'static str, i64, f64)]) -> Batches {
    let rows: Vec<Observation> = rows
        .iter()
        .map(|&(metric, time, value)| Observation {
            metric,
            time,
            role: "patched",
            commit: "9c167c0450c9a958",
            value,
            is_headline: true,
        })
        .collect();
    observations(testcase, machine, &rows)
}

/// Each row of `batches` as one line, its cells (nulls as `NULL`) joined by `separator`.
pub(crate) fn lines(batches: &[RecordBatch], separator: &str) -> Vec<String> {
    use deltalake::arrow::util::display::{ArrayFormatter, FormatOptions};
    let options = FormatOptions::default().with_null("NULL");
    let mut out = Vec::new();
    for batch in batches {
        let columns: Vec<ArrayFormatter> = batch
            .columns()
            .iter()
            .map(|c| {
                ArrayFormatter::try_new(c.as_ref(), &options).unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        for row in 0..batch.num_rows() {
            let cells: Vec<String> = columns.iter().map(|c| c.value(row).to_string()).collect();
            out.push(cells.join(separator));
        }
    }
    out
}
