//! `lkplake export openmetrics`: the lake's history for Prometheus' backfill
//! (`promtool tsdb create-blocks-from openmetrics FILE DIR`).

use anyhow::Context;
use clap::{Args, Subcommand};
use lkplake_query::{Engine, EngineConfig};
use lkplake_serve::exporter::history::{self, HistoryConfig};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(subcommand)]
    pub format: ExportFormat,
}

#[derive(Debug, Subcommand)]
pub enum ExportFormat {
    /// OpenMetrics text with timestamps: the headline series (and `--metric` ones) at every
    /// report date, under the names and labels `lkplake serve --http` exposes.
    Openmetrics(OpenMetricsArgs),
}

#[derive(Debug, Args)]
pub struct OpenMetricsArgs {
    #[command(flatten)]
    pub lake: crate::args::LakeArg,
    /// Only reports dated at or after this, e.g. 2024-01-01.
    #[arg(long)]
    pub since: Option<String>,
    /// Also export every series whose metric matches this regex (as `lkp_metric_value`).
    #[arg(long)]
    pub metric: Option<String>,
    /// Write here instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub async fn run(args: &ExportArgs) -> anyhow::Result<()> {
    let ExportFormat::Openmetrics(args) = &args.format;
    let engine = Engine::open(&args.lake.url, &EngineConfig::default()).await?;
    let config = HistoryConfig {
        since: args.since.clone(),
        metric: args.metric.clone(),
    };
    let mut out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(std::io::BufWriter::new(
            tokio::fs::File::create(path)
                .await
                .with_context(|| format!("creating {}", path.display()))?
                .into_std()
                .await,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let summary = history::export(&engine, &config, &mut out).await?;
    eprintln!(
        "lkplake export: {} samples of {} series{}",
        summary.samples,
        summary.series,
        args.out
            .as_ref()
            .map(|p| format!(" written to {}", p.display()))
            .unwrap_or_default()
    );
    Ok(())
}
