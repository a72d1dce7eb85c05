//! `lkplake export openmetrics`: the lake's history as OpenMetrics with timestamps, for
//! `promtool tsdb create-blocks-from openmetrics`. The series and their labels are the ones the
//! exporter scrapes, so backfilled history and live scrapes line up in Prometheus.

use super::exposition::{Family, Format, write_sample};
use crate::ServeError;
use datafusion::arrow::array::AsArray;
use futures::StreamExt;
use lkplake_query::Engine;
use lkplake_query::columns::{floats, micros, quote, strings};
use std::io::Write;

/// Which history to export.
#[derive(Debug, Clone, Default)]
pub struct HistoryConfig {
    /// Only reports dated at or after this (anything DataFusion reads as a timestamp).
    pub since: Option<String>,
    /// Series whose metric matches this regex are exported as `lkp_metric_value` besides the
    /// headline series.
    pub metric: Option<String>,
}

/// What an export wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistorySummary {
    /// Series written.
    pub series: u64,
    /// Samples written, over all series.
    pub samples: u64,
}

/// Writes the history to `out`: one sample per series and report date (the mean when two
/// reports share a date, because a TSDB keeps one value per timestamp), in time order within
/// each series, families contiguous, closed by `# EOF`.
pub async fn export(
    engine: &Engine,
    config: &HistoryConfig,
    out: &mut dyn Write,
) -> Result<HistorySummary, ServeError> {
    let mut filters = vec![
        "role = 'head'".to_owned(),
        "time IS NOT NULL".to_owned(),
        super::selected_series("--metric", config.metric.as_deref())?,
    ];
    if let Some(since) = &config.since {
        filters.push(format!("time >= CAST({} AS TIMESTAMP)", quote(since)));
    }
    let sql = format!(
        "SELECT testcase, machine, params, metric, is_headline, time, avg(value) AS value \
         FROM metrics WHERE {} \
         GROUP BY testcase, machine, params, metric, is_headline, time \
         ORDER BY is_headline DESC, testcase, machine, params, metric, time",
        filters.join(" AND ")
    );
    let io = |source| ServeError::Io {
        what: "writing the export".to_owned(),
        source,
    };
    let families = [
        Family::gauge(
            "lkp_headline_value",
            "Head-commit value of each headline series, at each report's date.",
        ),
        Family::gauge(
            "lkp_metric_value",
            "Head-commit value of each series whose metric matches --metric, at each report's date.",
        ),
    ];
    let mut stream = engine.context().sql(&sql).await?.execute_stream().await?;
    let mut summary = HistorySummary::default();
    let mut family: Option<bool> = None;
    let mut last_series: Option<[String; 4]> = None;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let (testcase, machine, params, metric) = (
            strings(batch.column(0))?,
            strings(batch.column(1))?,
            strings(batch.column(2))?,
            strings(batch.column(3))?,
        );
        let is_headline = batch.column(4).as_boolean();
        let time = micros(batch.column(5))?;
        let value = floats(batch.column(6))?;
        let mut text = String::new();
        for row in 0..batch.num_rows() {
            let headline = is_headline.value(row);
            if family != Some(headline) {
                families[usize::from(!headline)].write(Format::OpenMetrics, &mut text);
                family = Some(headline);
                last_series = None;
            }
            let series = [
                testcase.value(row),
                machine.value(row),
                params.value(row),
                metric.value(row),
            ];
            let new_series = last_series
                .as_ref()
                .is_none_or(|last| last.iter().zip(series).any(|(a, b)| a != b));
            if new_series {
                summary.series += 1;
                last_series = Some(series.map(str::to_owned));
            }
            write_sample(
                &mut text,
                families[usize::from(!headline)].name,
                [
                    ("testcase", series[0]),
                    ("machine", series[1]),
                    ("params", series[2]),
                    ("metric", series[3]),
                ],
                value.value(row),
                Some(time.value(row) as f64 / 1e6),
            );
            summary.samples += 1;
        }
        out.write_all(text.as_bytes()).map_err(io)?;
    }
    out.write_all(b"# EOF\n").map_err(io)?;
    out.flush().map_err(io)?;
    Ok(summary)
}
