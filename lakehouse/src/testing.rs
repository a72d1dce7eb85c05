//! Batches for the crate's tests.

use crate::Batches;
use deltalake::arrow::array::{
    ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use lkplake_schemas::tables::{FAILURES, LINKS, MENTIONS, METRICS, REPORTS};
use std::sync::Arc;

/// `metrics` rows of one (testcase, machine), one per (metric, time in microseconds, value),
/// all of one head commit and report; the other tables empty.
pub(crate) fn metrics(testcase: &str, machine: &str, rows: &[(&str, i64, f64)]) -> Batches {
    let n = rows.len();
    let text = |value: &str| Arc::new(StringArray::from(vec![value; n])) as ArrayRef;
    let times: Vec<i64> = rows.iter().map(|&(_, time, _)| time).collect();
    let names: Vec<&str> = rows.iter().map(|&(metric, _, _)| metric).collect();
    let values: Vec<f64> = rows.iter().map(|&(_, _, value)| value).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(TimestampMicrosecondArray::from(times).with_timezone("UTC")),
        text(testcase),
        text(machine),
        text(""),
        Arc::new(StringArray::from(names)),
        text("vm-scalability"),
        text("9c167c0450c9a958"),
        text("patched"),
        Arc::new(Float64Array::from(values)),
        Arc::new(Float64Array::from(vec![None; n])),
        Arc::new(Float64Array::from(vec![None; n])),
        text("%"),
        Arc::new(StringArray::from(vec![None::<&str>; n])),
        Arc::new(BooleanArray::from(vec![true; n])),
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
