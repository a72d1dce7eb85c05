//! `lkplake gen`: realistic synthetic reports for benchmarks and tests.

use anyhow::Context;
use clap::Args;
use lkplake_synth::{SynthConfig, generate, write_all};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct GenArgs {
    /// How many reports (one mail file each).
    #[arg(long, env = "LKPLAKE_GEN_REPORTS", default_value_t = 1000)]
    pub reports: usize,
    /// Seed: the same seed gives byte-identical reports.
    #[arg(long, env = "LKPLAKE_GEN_SEED", default_value_t = 1)]
    pub seed: u64,
    /// Year of the first report.
    #[arg(long, default_value_t = 2019)]
    pub start_year: i32,
    /// Years the reports spread over.
    #[arg(long, default_value_t = 7)]
    pub years: u32,
    /// Directory to write the reports to (created when missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Also write the planted steps in level (the ground truth for trend analysis) as JSON
    /// lines to this file.
    #[arg(long)]
    pub truth: Option<PathBuf>,
}

pub fn run(args: &GenArgs) -> anyhow::Result<()> {
    let config = SynthConfig {
        reports: args.reports,
        seed: args.seed,
        start_year: args.start_year,
        years: args.years,
        ..SynthConfig::default()
    };
    let synth = generate(&config);
    write_all(&synth, &args.out)
        .with_context(|| format!("writing reports to {}", args.out.display()))?;
    if let Some(path) = &args.truth {
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        for step in &synth.steps {
            let line = serde_json::json!({
                "testcase": step.testcase,
                "machine": step.tbox_group,
                "params": step.params,
                "metric": step.metric,
                "at_report_index": step.at_report_index,
                // The report whose head column first shows the step: its date and commit are
                // where a trend analysis should place the change.
                "time": synth.reports.get(step.at_report_index).map(|r| r.date.to_rfc3339()),
                "commit": synth.reports.get(step.at_report_index).map(|r| r.commit_id.clone()),
                "change_pct": step.change_pct,
            });
            writeln!(file, "{line}")?;
        }
        file.flush()?;
    }
    let rows: usize = synth
        .reports
        .iter()
        .flat_map(|r| &r.tests)
        .map(|t| t.rows)
        .sum();
    eprintln!(
        "lkplake gen: {} reports ({} table rows) with {} planted steps in {}",
        synth.reports.len(),
        rows,
        synth.steps.len(),
        args.out.display()
    );
    Ok(())
}
