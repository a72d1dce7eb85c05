//! `lkplake trend`: change points of every series, saved to the lake's `changes` table.

use clap::Args;
use datafusion::arrow::array::{Float64Array, RecordBatch, StringArray, UInt32Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use indicatif::{ProgressBar, ProgressStyle};
use lkplake_query::format;
use lkplake_query::{Engine, EngineConfig};
use lkplake_trend::{self as trend, Change, TrendConfig, detect};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Args)]
pub struct TrendArgs {
    #[command(flatten)]
    pub lake: crate::args::LakeArg,
    /// Only this testcase.
    #[arg(long)]
    pub testcase: Option<String>,
    /// Only this machine (tbox_group).
    #[arg(long)]
    pub machine: Option<String>,
    /// Only metrics matching this regular expression, e.g. 'throughput|ops_per_sec$'.
    #[arg(long)]
    pub metric: Option<String>,
    /// Only observations at or after this time, e.g. 2024-01-01.
    #[arg(long)]
    pub since: Option<String>,
    /// Observations per E-Divisive window.
    #[arg(long, env = "LKPLAKE_TREND_WINDOW", default_value_t = detect::Params::default().window)]
    pub window: usize,
    /// Largest t-test p-value a change point may have.
    #[arg(long, env = "LKPLAKE_TREND_PVALUE", default_value_t = detect::Params::default().max_pvalue)]
    pub pvalue: f64,
    /// Smallest change of the mean, in percent, a change point must show.
    #[arg(long, env = "LKPLAKE_TREND_MIN_CHANGE", default_value_t = 5.0)]
    pub min_change: f64,
    /// Series with fewer observations are not analysed.
    #[arg(long, default_value_t = 6)]
    pub min_observations: usize,
    /// Recompute every series, not only those with new observations.
    #[arg(long)]
    pub full: bool,
    /// Draw each series with change points as an SVG in this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// How to print the change points.
    #[arg(long, value_enum, default_value_t = crate::sql::OutputFormat::Table)]
    pub format: crate::sql::OutputFormat,
}

pub async fn run(args: &TrendArgs) -> anyhow::Result<()> {
    let engine = Engine::open(&args.lake.url, &EngineConfig::default()).await?;
    let config = TrendConfig {
        testcase: args.testcase.clone(),
        machine: args.machine.clone(),
        metric: args.metric.clone(),
        since: args.since.clone(),
        detect: detect::Params {
            window: args.window,
            max_pvalue: args.pvalue,
            min_magnitude: args.min_change / 100.0,
        },
        min_observations: args.min_observations,
        full: args.full,
        plot_dir: args.plot.clone(),
    };
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(0).with_style(
            ProgressStyle::with_template(
                "{bar:40} {pos}/{len} metrics partitions {per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        )
    } else {
        ProgressBar::hidden()
    };
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let started = std::time::Instant::now();
    let (summary, changes) = trend::run(&engine, &config, &progress).await?;
    bar.finish_and_clear();
    let (schema, batch) = table(&changes)?;
    format::write(
        &mut std::io::stdout().lock(),
        &schema,
        &[batch],
        args.format.into(),
    )?;
    eprintln!(
        "lkplake trend: {} series: {} analysed, {} unchanged since the last run, {} too short; \
         {} change points; {} plots; {} metrics partitions read, {} skipped as last read; {:.1} s",
        summary.series,
        summary.analysed,
        summary.unchanged,
        summary.too_short,
        summary.changes,
        summary.plots,
        summary.partitions_read,
        summary.partitions_skipped,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn table(changes: &[Change]) -> anyhow::Result<(Arc<Schema>, RecordBatch)> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("series", DataType::Utf8, false),
        Field::new("time", DataType::Utf8, false),
        Field::new("last_commit_before", DataType::Utf8, false),
        Field::new("first_commit_after", DataType::Utf8, false),
        Field::new("mean_before", DataType::Float64, false),
        Field::new("mean_after", DataType::Float64, false),
        Field::new("change_pct", DataType::Float64, false),
        Field::new("pvalue", DataType::Float64, false),
        Field::new("kind", DataType::Utf8, true),
        Field::new("points", DataType::UInt32, false),
    ]));
    let text = |f: &dyn Fn(&Change) -> String| {
        Arc::new(StringArray::from_iter_values(changes.iter().map(f)))
    };
    let float = |f: &dyn Fn(&Change) -> f64| {
        Arc::new(Float64Array::from_iter_values(changes.iter().map(f)))
    };
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            text(&|c| {
                format!(
                    "{}/{}/{}",
                    c.series.testcase, c.series.machine, c.series.metric
                )
            }),
            text(&|c| {
                chrono::DateTime::<chrono::Utc>::from_timestamp_micros(c.time)
                    .map(|d| d.format("%Y-%m-%d").to_string())
                    .unwrap_or_default()
            }),
            text(&|c| c.last_commit_before.chars().take(12).collect()),
            text(&|c| c.first_commit_after.chars().take(12).collect()),
            float(&|c| (c.mean_before * 1000.0).round() / 1000.0),
            float(&|c| (c.mean_after * 1000.0).round() / 1000.0),
            float(&|c| (c.change_pct * 10.0).round() / 10.0),
            float(&|c| c.pvalue),
            Arc::new(StringArray::from_iter(
                changes.iter().map(|c| c.kind.as_deref()),
            )),
            Arc::new(UInt32Array::from_iter_values(
                changes
                    .iter()
                    .map(|c| c.observations_before + c.observations_after),
            )),
        ],
    )?;
    Ok((schema, batch))
}
