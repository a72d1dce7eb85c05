//! `lkplake gen`: realistic synthetic reports for benchmarks and tests.

#![allow(
    clippy::disallowed_methods,
    reason = "`lkplake gen` runs before main starts a runtime: nothing here is on a runtime worker"
)]

use anyhow::Context;
use clap::Args;
use lkplake_synth::{Lifecycle, SynthConfig, generate, lifecycle, write_all, write_lifecycle};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct GenArgs {
    /// How many reports (one mail file each).
    #[arg(long, env = "LKPLAKE_GEN_REPORTS", default_value_t = 1000)]
    pub reports: usize,
    /// Instead of reports alone, write the regressions tracker's scenario: reports of six
    /// culprits and the list mail that answers them (a reply quoting the robot's suggested
    /// tags, a fix patch with `Closes:` and `Fixes:`, b4's applied notice, a revert, a report
    /// that recovers a level), so that every status and every kind of link occurs. With
    /// `--truth`, what the `regressions` view and the `links` table should then hold.
    /// (`--reports` is ignored: the scenario has its own.)
    #[arg(long, conflicts_with_all = ["start_year", "years"])]
    pub lifecycle: bool,
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
    /// Also write the truth as JSON lines to this file: the planted steps in level (for trend
    /// analysis), or with `--lifecycle` the `regressions` and `links` rows to expect.
    #[arg(long)]
    pub truth: Option<PathBuf>,
}

pub fn run(args: &GenArgs) -> anyhow::Result<()> {
    if args.lifecycle {
        return run_lifecycle(args);
    }
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

fn run_lifecycle(args: &GenArgs) -> anyhow::Result<()> {
    let scenario = lifecycle(args.seed);
    write_lifecycle(&scenario, &args.out)
        .with_context(|| format!("writing the lifecycle's mail to {}", args.out.display()))?;
    if let Some(path) = &args.truth {
        write_lifecycle_truth(&scenario, path)?;
    }
    eprintln!(
        "lkplake gen: {} mails ({} culprits, {} links) in {}",
        scenario.mails.len(),
        scenario.culprits.len(),
        scenario.links.len(),
        args.out.display()
    );
    Ok(())
}

/// One JSON line per culprit (`"table": "regressions"`) and per link (`"table": "links"`),
/// with the lake's column names where the lake has the value; the reports are named by their
/// Message-IDs (`report_message_ids`, `recovered_report_message_id`), which the mail shows.
fn write_lifecycle_truth(scenario: &Lifecycle, path: &std::path::Path) -> anyhow::Result<()> {
    let utc =
        |d: &chrono::DateTime<chrono::Utc>| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut file = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    for c in &scenario.culprits {
        let line = serde_json::json!({
            "table": "regressions",
            "commit": c.commit,
            "commit_title": c.title,
            "verdict": c.verdict.as_str(),
            "status": c.status,
            "reports": c.reports.len(),
            "report_message_ids": c.reports,
            "testcases": c.testcases,
            "machines": c.machines,
            "replies": c.replies,
            "fix_posted": c.fix_posted.as_ref().map(|(d, _)| utc(d)),
            "fix_title": c.fix_posted.as_ref().map(|(_, t)| t),
            "fix_commit": c.fix_merged.as_ref().map(|(commit, _)| commit),
            "fix_merged": c.fix_merged.as_ref().map(|(_, d)| utc(d)),
            "reverted": c.reverted.as_ref().map(utc),
            "recovered_commit": c.recovered_by.as_ref().map(|(_, commit)| commit),
            "recovered_report_message_id": c.recovered_by.as_ref().map(|(id, _)| id),
        });
        writeln!(file, "{line}")?;
    }
    for l in &scenario.links {
        let line = serde_json::json!({
            "table": "links",
            "kind": l.kind,
            "target": l.target,
            "message_id": l.message_id,
            "date": utc(&l.date),
            "sender": l.sender,
            "subject": l.subject,
            "patch_title": l.patch_title,
            "commit": l.commit,
        });
        writeln!(file, "{line}")?;
    }
    file.flush()?;
    Ok(())
}
