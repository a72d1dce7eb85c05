//! `lkplake-synth`: deterministic synthetic kernel test robot performance reports, for
//! benchmarks, demos and tests. A crate of its own so the 3,800 lines of the generator are
//! compiled only into what generates data (`lkplake gen`, benchmarks), never into the parser
//! or its fuzz target.
//!
//! Real reports are scarce (the shipped corpus holds a few dozen) and carry no ground truth,
//! so neither the parser's throughput at scale nor the lake's trend analysis can be measured on
//! them alone. This crate writes as many reports as asked for, in the exact layouts the robot
//! used (the 2019 – early 2023 "Greeting, FYI, we noticed ... due to commit:" mails and the
//! modern "kernel test robot noticed ... on:" ones), over series whose levels are known, with
//! steps planted on purpose at known reports.
//!
//! The model:
//! - A *job* is one (testcase, tbox_group, params) configuration, active over a window of the
//!   time span, with a fixed toolchain (compiler, kconfig, rootfs are job parameters: changing
//!   one starts a new series in the lake, exactly as it does for real data).
//! - A *series* is (job, metric). Each has a base level and a noise level of 0.5 %–8 % of the
//!   level (0.5 %–3 % for headline metrics, which LKP picks for their stability).
//! - A report compares a base and a head commit at a date on one job; about one in ten adds
//!   one or two more jobs in an "In addition to that" box. Both columns are
//!   `level × (1 + noise)`. Where a step is planted, the head column already has the new
//!   level, and every later report of that job starts from it.
//! - A job prints its `series_per_testcase` core series in every report, so each core series
//!   has a point in every report of its job; the rest of the 20–150 rows of a table come from
//!   a per-job pool (monitors, perf-profile call chains) and are stationary.
//!
//! Everything is drawn from splitmix64 streams seeded from the configured seed, so one config
//! always gives byte-identical reports, and no dependency is needed beyond the crate's own.

#![warn(missing_docs)]
#![allow(
    clippy::disallowed_methods,
    reason = "synchronous: the generator writes its files from a blocking thread or a benchmark, never on a runtime worker"
)]

use chrono::{DateTime, NaiveDate, Utc};
use lkplake_schemas::Kind;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

mod commits;
mod jobs;
mod lifecycle;
mod machines;
mod mail;
mod metrics;
mod monitors;
mod rng;
mod table;
mod testcases;

use jobs::{Job, new_job, plan_steps};
use mail::render_report;
use rng::Rng;
use table::{TestOut, render_test};

pub use lifecycle::{
    Lifecycle, PlantedCulprit, PlantedLink, PlantedMail, lifecycle, write_lifecycle,
};

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthConfig {
    /// Number of reports (one mail each).
    pub reports: usize,
    /// Seed of every random draw: the same config gives byte-identical output.
    pub seed: u64,
    /// Year of the first report (dates are China time, like the robot's).
    pub start_year: i32,
    /// Number of years the reports spread over, dates increasing with the report index.
    pub years: u32,
    /// Core series per job (testcase × machine × parameters): metrics printed in every report
    /// of the job, so that each of them forms a complete time series. At most 150 (the most
    /// rows a table gets).
    pub series_per_testcase: usize,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            reports: 1000,
            seed: 0x6c6b_706c_616b_6521,
            start_year: 2019,
            years: 7,
            series_per_testcase: 40,
        }
    }
}

/// The layout a report is written in; chosen by date, as the robot changed it in early 2023.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynthFormat {
    /// "Greeting, FYI, we noticed ... due to commit:", `in testcase:`, `on test machine:`,
    /// `with following parameters:`, ASCII plots after the table.
    Legacy,
    /// "kernel test robot noticed ... on:", `testcase:`, `test machine:`, `parameters:`.
    Modern,
}

/// The truth about one test (one comparison table) of a generated report.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthTest {
    /// The testcase, e.g. `vm-scalability`.
    pub testcase: String,
    /// The machine group, e.g. `lkp-csl-2sp3`.
    pub tbox_group: String,
    /// Canonical `k=v` parameters, sorted, joined by `,` (every axis except testcase and
    /// tbox_group), as [`canonical_params`](lkplake_schemas::key::canonical_params) prints
    /// them.
    pub params: String,
    /// The machine description as printed.
    pub machine: String,
    /// Number of table rows.
    pub rows: usize,
    /// The metric the report's headline names, e.g. `vm-scalability.throughput`.
    pub headline_metric: String,
    /// The headline change as the table prints it (signed, base against head).
    pub headline_change_pct: f64,
}

/// One generated report with the truth it was generated from.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthReport {
    /// File name for [`write_all`], e.g. `000123.eml`.
    pub file_name: String,
    /// The whole mail: RFC 822 headers and body.
    pub text: String,
    /// Testcase of the main test.
    pub testcase: String,
    /// Machine of the main test.
    pub tbox_group: String,
    /// The commit under test, 40 hex digits.
    pub commit_id: String,
    /// Its title as the commit line prints it (a patch from the list: without the
    /// `[PATCH v2 1/3]` tag).
    pub commit_title: String,
    /// The commit it is compared against, 40 hex digits (tables print its first 10).
    pub base_commit_id: String,
    /// Canonical parameters of the main test.
    pub params: String,
    /// With angle brackets.
    pub message_id: String,
    /// The `Subject:` header, unfolded.
    pub subject: String,
    /// The `Date:` header.
    pub date: DateTime<Utc>,
    /// Which of the robot's layouts it is written in.
    pub format: SynthFormat,
    /// The verdict the prose states, from the headline's direction.
    pub kind: Kind,
    /// The metric the headline names.
    pub headline_metric: String,
    /// As the table prints it.
    pub headline_change_pct: f64,
    /// The main test first, then the tests of the "In addition to that" box.
    pub tests: Vec<SynthTest>,
}

/// A step planted in the level of one series: from report `at_report_index` on, the series'
/// level is `1 + change_pct / 100` times what it was.
#[derive(Debug, Clone, PartialEq)]
pub struct PlantedStep {
    /// The series' testcase.
    pub testcase: String,
    /// The series' machine group.
    pub tbox_group: String,
    /// Canonical `k=v` parameters, sorted, joined by `,`.
    pub params: String,
    /// The series' metric.
    pub metric: String,
    /// Index into [`Synth::reports`] of the report whose head column first shows the step.
    pub at_report_index: usize,
    /// Relative change of the level, signed, 3–40 %.
    pub change_pct: f64,
    /// The series' noise level (standard deviation relative to the level, in percent). Noise
    /// is a normal distribution truncated at 3 standard deviations; steps are at least 4 of
    /// them, so each step shows in the report that carries it.
    pub noise_pct: f64,
}

/// The generated reports and the steps planted in them.
#[derive(Debug, Clone, PartialEq)]
pub struct Synth {
    /// In date order, the order [`write_all`] numbers them.
    pub reports: Vec<SynthReport>,

    /// Ordered by report index.
    pub steps: Vec<PlantedStep>,
}

/// Writes each report to its own file `dir/<file_name>`, creating `dir` if needed.
pub fn write_all(synth: &Synth, dir: &Path) -> std::io::Result<()> {
    write_files(dir, synth.reports.iter().map(|r| (&r.file_name, &r.text)))
}

fn write_files<'a>(
    dir: &Path,
    files: impl Iterator<Item = (&'a String, &'a String)>,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, text) in files {
        std::fs::write(dir.join(name), text.as_bytes())?;
    }
    Ok(())
}

/// Midnight of 1 January of `year`, China time, as a Unix timestamp.
fn year_start(year: i32) -> i64 {
    NaiveDate::from_ymd_opt(year, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map_or(0, |d| d.and_utc().timestamp() - 8 * 3600)
}

/// Everything fixed about one report before its tables are drawn.
#[derive(Debug)]
struct Slot {
    time: DateTime<Utc>,
    jobs: Vec<usize>,
}

/// Generates the reports and the steps planted in them.
pub fn generate(config: &SynthConfig) -> Synth {
    let n = config.reports;
    if n == 0 {
        return Synth {
            reports: Vec::new(),
            steps: Vec::new(),
        };
    }
    let start_year = config.start_year.clamp(1971, 9000);
    let years = config.years.clamp(1, 1000);
    let start = year_start(start_year);
    let end = year_start(start_year.saturating_add(years as i32));
    let span = (end - start).max(1) as f64;

    let jobs = draw_jobs(config);
    if jobs.is_empty() {
        return Synth {
            reports: Vec::new(),
            steps: Vec::new(),
        };
    }
    let slots = schedule(config, &jobs, start, span);
    let plans = plan_all(config, &jobs, &slots);

    let mut levels: Vec<Vec<f64>> = jobs.iter().map(|j| j.level0[..j.core].to_vec()).collect();
    let modern_from = year_start(2023) + 59 * 86400; // 2023-03-01, China time
    let mut reports = Vec::with_capacity(n);
    let mut steps = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        let mut rng = Rng::derive(config.seed, 0x2000_0000 + i as u64);
        let format = if slot.time.timestamp() >= modern_from {
            SynthFormat::Modern
        } else {
            SynthFormat::Legacy
        };
        let tests: Vec<TestOut> = slot
            .jobs
            .iter()
            .enumerate()
            .map(|(k, &j)| {
                render_test(
                    j,
                    &jobs[j],
                    &mut levels[j],
                    plans[j].get(&i).map_or(&[], Vec::as_slice),
                    i,
                    k == 0,
                    &mut rng,
                    &mut steps,
                )
            })
            .collect();
        reports.push(render_report(
            i, slot, format, &jobs, &tests, None, &mut rng,
        ));
    }
    Synth { reports, steps }
}

/// Jobs: about one per 15 reports, so each series has a few dozen points (jobs also run in an
/// "In addition" box, and only over their window).
fn draw_jobs(config: &SynthConfig) -> Vec<Job> {
    let n = config.reports;
    let mut rng = Rng::derive(config.seed, 1);
    let wanted = (n / 15).clamp(n.min(6), 3000);
    let mut jobs: Vec<Job> = Vec::with_capacity(wanted);
    let mut seen = HashSet::new();
    for _ in 0..wanted {
        for _ in 0..20 {
            let job = new_job(&mut rng, config, config.series_per_testcase);
            if seen.insert(job.identity()) {
                jobs.push(job);
                break;
            }
        }
    }
    jobs
}

/// The schedule: dates increase with the index; each report runs one active job, sometimes
/// with one or two more in an "In addition" box.
fn schedule(config: &SynthConfig, jobs: &[Job], start: i64, span: f64) -> Vec<Slot> {
    let n = config.reports;
    let mut rng = Rng::derive(config.seed, 2);
    let mut slots: Vec<Slot> = Vec::with_capacity(n);
    for i in 0..n {
        let f = (i as f64 + rng.uniform(0.1, 0.9)) / n as f64;
        let secs = start + (f * span) as i64;
        let time = DateTime::<Utc>::from_timestamp(secs, 0).unwrap_or_default();
        let active = |j: &Job| j.window.0 <= f && f <= j.window.1;
        let any_active = jobs.iter().any(active);
        let weight = |j: &Job| {
            if !any_active || active(j) {
                j.weight
            } else {
                0.0
            }
        };
        let main = rng.weighted(jobs.iter().map(&weight));
        let mut chosen = vec![main];
        if jobs.len() > 1 && rng.chance(0.1) {
            let extra = if rng.chance(0.25) { 2 } else { 1 };
            for _ in 0..8 {
                if chosen.len() > extra {
                    break;
                }
                let j = rng.weighted(jobs.iter().map(&weight));
                if !chosen.contains(&j) {
                    chosen.push(j);
                }
            }
        }
        slots.push(Slot { time, jobs: chosen });
    }
    slots
}

/// Steps, planned per job over its appearances, each job from a stream of its own.
fn plan_all(
    config: &SynthConfig,
    jobs: &[Job],
    slots: &[Slot],
) -> Vec<BTreeMap<usize, Vec<(usize, f64)>>> {
    let mut appearances: Vec<Vec<(usize, bool)>> = vec![Vec::new(); jobs.len()];
    for (i, slot) in slots.iter().enumerate() {
        for (k, &j) in slot.jobs.iter().enumerate() {
            appearances[j].push((i, k == 0));
        }
    }
    jobs.iter()
        .enumerate()
        .map(|(j, job)| {
            let mut r = Rng::derive(config.seed, 0x1000_0000 + j as u64);
            plan_steps(job, &appearances[j], &mut r)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::{MAX_STEP_PCT, MIN_STEP_PCT, MIN_STEP_SIGMAS};
    use crate::rng::NOISE_LIMIT_SIGMA;
    use lkplake_parse::parser::{Parsed, parse_message};
    use lkplake_schemas::key::canonical_params;
    use lkplake_schemas::{Report, Source};
    use std::collections::HashMap;

    fn config(reports: usize, seed: u64) -> SynthConfig {
        SynthConfig {
            reports,
            seed,
            start_year: 2019,
            years: 7,
            series_per_testcase: 40,
        }
    }

    fn parse(report: &SynthReport) -> Report {
        let source = Source::file(report.file_name.clone(), 0);
        match parse_message(report.text.as_bytes(), &source) {
            Ok(Parsed::Reports(mut reports)) => {
                assert_eq!(reports.len(), 1, "{}: one report", report.file_name);
                reports.remove(0)
            }
            other => panic!("{}: {other:?}\n{}", report.file_name, report.text),
        }
    }

    #[test]
    fn same_seed_same_bytes_other_seed_other_bytes() {
        let a = generate(&config(60, 11));
        let b = generate(&config(60, 11));
        assert_eq!(a, b);
        let c = generate(&config(60, 12));
        assert_ne!(a.reports[0].text, c.reports[0].text);
    }

    #[test]
    fn every_report_parses_to_what_was_generated() {
        let synth = generate(&config(400, 7));
        assert_eq!(synth.reports.len(), 400);
        for truth in &synth.reports {
            let r = parse(truth);
            let name = &truth.file_name;
            assert_eq!(r.commit.id, truth.commit_id, "{name}: commit");
            assert_eq!(r.base_commit.id, truth.base_commit_id[..10], "{name}: base");
            assert_eq!(r.message_id.as_deref(), Some(truth.message_id.as_str()));
            assert_eq!(r.date, Some(truth.date), "{name}: date");
            assert_eq!(r.kind, Some(truth.kind), "{name}: kind");
            let headline = r
                .headline
                .as_ref()
                .map(|h| (h.metric.as_str(), h.change_pct));
            assert_eq!(
                headline,
                Some((truth.headline_metric.as_str(), truth.headline_change_pct)),
                "{name}: headline"
            );
            assert_eq!(r.tests.len(), truth.tests.len(), "{name}: tests");
            for (parsed, t) in r.tests.iter().zip(&truth.tests) {
                assert_eq!(parsed.testcase, t.testcase, "{name}");
                assert_eq!(parsed.tbox_group, t.tbox_group, "{name}");
                assert_eq!(canonical_params(&parsed.params), t.params, "{name}");
                assert_eq!(parsed.rows.len(), t.rows, "{name}: rows of {}", t.testcase);
                assert_eq!(
                    parsed.machine.description.as_deref(),
                    Some(t.machine.as_str()),
                    "{name}: machine"
                );
                let h = parsed
                    .headline
                    .as_ref()
                    .map(|h| (h.metric.as_str(), h.change_pct));
                assert_eq!(
                    h,
                    Some((t.headline_metric.as_str(), t.headline_change_pct)),
                    "{name}: headline of {}",
                    t.testcase
                );
                assert_eq!(parsed.commits.len(), 2);
            }
            assert_eq!(truth.testcase, truth.tests[0].testcase);
            assert_eq!(truth.tbox_group, truth.tests[0].tbox_group);
            assert_eq!(truth.params, truth.tests[0].params);
        }
    }

    /// Bound on the difference between a printed mean and the value it was printed from.
    fn printed_error(v: f64) -> f64 {
        if v < 1000.0 {
            0.005
        } else if v < 1e8 {
            1.0
        } else {
            v * 5e-4
        }
    }

    #[test]
    fn planted_steps_show_in_the_parsed_values() {
        let synth = generate(&config(400, 3));
        assert!(synth.steps.len() > 50, "{} steps", synth.steps.len());
        let mut parsed: HashMap<usize, Report> = HashMap::new();
        let mut agree = 0;
        for step in &synth.steps {
            assert!(
                (MIN_STEP_PCT..=MAX_STEP_PCT).contains(&step.change_pct.abs()),
                "{step:?}"
            );
            assert!(step.change_pct.abs() >= MIN_STEP_SIGMAS * step.noise_pct - 1e-9);
            let report = parsed
                .entry(step.at_report_index)
                .or_insert_with(|| parse(&synth.reports[step.at_report_index]));
            let test = report
                .tests
                .iter()
                .find(|t| {
                    t.testcase == step.testcase
                        && t.tbox_group == step.tbox_group
                        && canonical_params(&t.params) == step.params
                })
                .unwrap_or_else(|| panic!("no test for {step:?}"));
            let row = test
                .rows
                .iter()
                .find(|r| r.metric == step.metric)
                .unwrap_or_else(|| panic!("no row for {step:?}"));
            let (b, h) = (row.values[0].mean, row.values[1].mean);
            // The truth: head/base = (1 + step) (1 + e_head) / (1 + e_base), |e| <= 3 sigma.
            let s = NOISE_LIMIT_SIGMA * step.noise_pct / 100.0;
            let expected = 1.0 + step.change_pct / 100.0;
            let (lo, hi) = (
                expected * (1.0 - s) / (1.0 + s),
                expected * (1.0 + s) / (1.0 - s),
            );
            let (obs_lo, obs_hi) = (
                (h - printed_error(h)) / (b + printed_error(b)),
                (h + printed_error(h)) / (b - printed_error(b)),
            );
            assert!(
                obs_hi >= lo * 0.999 && obs_lo <= hi * 1.001,
                "{step:?}: base {b} head {h}, expected ratio in [{lo}, {hi}]"
            );
            if (h - b).signum() == step.change_pct.signum() {
                agree += 1;
            }
        }
        let share = f64::from(agree) / synth.steps.len() as f64;
        assert!(share > 0.97, "only {share} of steps show their direction");
    }

    #[test]
    fn reports_cover_both_formats_additions_and_the_row_range() {
        let synth = generate(&config(500, 5));
        let formats: HashSet<SynthFormat> = synth.reports.iter().map(|r| r.format).collect();
        assert_eq!(formats.len(), 2);
        let with_box = synth.reports.iter().filter(|r| r.tests.len() > 1).count();
        assert!(
            (20..=90).contains(&with_box),
            "{with_box} reports with a box"
        );
        let testcases: HashSet<&str> = synth.reports.iter().map(|r| r.testcase.as_str()).collect();
        assert!(testcases.len() >= 6, "{testcases:?}");
        for r in &synth.reports {
            assert!((20..=150).contains(&r.tests[0].rows), "{}", r.tests[0].rows);
            for t in &r.tests {
                assert!(t.rows >= 20);
            }
            assert!(r.text.contains("%stddev"));
        }
        assert!(synth.reports.windows(2).all(|w| w[0].date < w[1].date));
        assert!(synth.reports.iter().any(|r| r.kind == Kind::Regression));
        assert!(synth.reports.iter().any(|r| r.kind == Kind::Improvement));
        let first = synth.reports.first().map(|r| r.date.to_rfc3339());
        assert!(first.is_some_and(|d| d.starts_with("2018-12-31") || d.starts_with("2019")));
    }

    #[test]
    fn odd_configs_still_give_parseable_reports() {
        assert!(generate(&config(0, 1)).reports.is_empty());
        for (series, start_year, years) in [(0, 2024, 1), (500, 2019, 2), (1, 2020, 40)] {
            let cfg = SynthConfig {
                reports: 40,
                seed: 99,
                start_year,
                years,
                series_per_testcase: series,
            };
            let synth = generate(&cfg);
            assert_eq!(synth.reports.len(), 40);
            for truth in &synth.reports {
                let r = parse(truth);
                assert_eq!(r.tests.len(), truth.tests.len());
                assert!((20..=150).contains(&r.tests[0].rows.len()));
                assert_eq!(r.tests[0].rows.len(), truth.tests[0].rows);
            }
            if start_year >= 2024 {
                assert!(
                    synth
                        .reports
                        .iter()
                        .all(|r| r.format == SynthFormat::Modern)
                );
            }
        }
    }

    #[test]
    fn write_all_writes_one_file_per_report() -> std::io::Result<()> {
        let synth = generate(&config(5, 1));
        let dir = std::env::temp_dir().join(format!("lkplake-synth-{}", std::process::id()));
        write_all(&synth, &dir)?;
        for r in &synth.reports {
            assert_eq!(std::fs::read_to_string(dir.join(&r.file_name))?, r.text);
        }
        std::fs::remove_dir_all(&dir)
    }
}
