//! The comparison tables: numbers formatted exactly as lkp-tests prints them, and one job's
//! table for one report drawn from its series' levels and noise.

use crate::PlantedStep;
use crate::jobs::Job;
use crate::rng::Rng;
use lkplake_schemas::metric::{Direction, DirectionTable, change_unit};
use lkplake_schemas::{ChangeUnit, Kind};
use std::fmt::Write as _;
use std::sync::LazyLock;

pub(crate) static DIRECTIONS: LazyLock<DirectionTable> = LazyLock::new(DirectionTable::default);

/// A mean as LKP prints it: `%.2f` below 1000, the truncated integer up to 1e8, four
/// significant digits in exponent form above (`2.352e+08`).
fn fmt_mean(v: f64) -> String {
    let a = v.abs();
    if a < 1000.0 {
        format!("{v:.2}")
    } else if a < 1e8 {
        (v.trunc() as i64).to_string()
    } else {
        fmt_g4(v)
    }
}

/// C's `%.4g` for values whose exponent is at least 4 (always exponent form): mantissa without
/// trailing zeros, exponent signed with at least two digits.
fn fmt_g4(v: f64) -> String {
    let s = format!("{v:.3e}");
    let (mantissa, exponent) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.trim_end_matches('0').trim_end_matches('.')
    } else {
        mantissa
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// A change as LKP prints it: `+34.5%` relative (exponent form when huge), `-0.1` absolute.
fn fmt_change(base: f64, head: f64, unit: ChangeUnit) -> String {
    match unit {
        ChangeUnit::Absolute => format!("{:+.1}", head - base),
        ChangeUnit::Percent => {
            let pct = (head - base) / base * 100.0;
            if pct.abs() < 1e5 {
                format!("{pct:+.1}%")
            } else {
                let g = format!("{pct:.1e}");
                let (m, e) = g.split_once('e').unwrap_or((g.as_str(), "0"));
                let e: i32 = e.parse().unwrap_or(0);
                let m = m.trim_end_matches('0').trim_end_matches('.');
                let sign = if m.starts_with('-') { "" } else { "+" };
                format!("{sign}{m}e{}{:02}%", if e < 0 { '-' } else { '+' }, e.abs())
            }
        }
    }
}

/// One table row in LKP's column layout: mean `%10s`, ` ±%3d%%` or six blanks, change
/// right-aligned in ten plus its `%` (or a blank), mean `%11s`, stddev, two blanks, metric.
fn push_row(
    out: &mut String,
    base: f64,
    base_sd: Option<u32>,
    change: &str,
    head: f64,
    head_sd: Option<u32>,
    metric: &str,
) {
    let sd = |sd: Option<u32>| match sd {
        Some(s) => format!(" ±{s:>3}%"),
        None => "      ".to_owned(),
    };
    let (number, suffix) = match change.strip_suffix('%') {
        Some(n) => (n, "%"),
        None => (change, " "),
    };
    let _ = writeln!(
        out,
        "{:>10}{}{number:>10}{suffix}{:>11}{}  {metric}",
        fmt_mean(base),
        sd(base_sd),
        fmt_mean(head),
        sd(head_sd),
    );
}

/// One row before printing.
#[derive(Debug)]
struct RowOut {
    metric: usize,
    group: u8,
    order: u32,
    base: f64,
    head: f64,
    change: String,
}

/// One comparison table before printing, with the truth about it.
#[derive(Debug)]
pub(crate) struct TestOut {
    pub(crate) job: usize,
    pub(crate) rows: String,
    pub(crate) n_rows: usize,
    pub(crate) headline_metric: String,
    pub(crate) headline_change: String,
    pub(crate) headline_change_pct: f64,
    pub(crate) kind: Kind,
    /// Base and head value and noise of the headline metric, for legacy plots.
    pub(crate) headline_levels: (f64, f64, f64),
}

/// Draws and prints one job's table for one report, advancing the job's core levels past the
/// steps planted here and recording them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn render_test(
    job_index: usize,
    job: &Job,
    levels: &mut [f64],
    steps_here: &[(usize, f64)],
    report: usize,
    main: bool,
    rng: &mut Rng,
    steps_out: &mut Vec<PlantedStep>,
) -> TestOut {
    let chosen = pool_rows(job, main, rng);
    let mut rows: Vec<RowOut> = Vec::with_capacity(job.core + chosen.len());
    for m in (0..job.core).chain(chosen) {
        let def = &job.metrics[m];
        let noise = job.noise[m];
        let (base_level, head_level) = if m < job.core {
            let before = levels[m];
            let after = match step_of(steps_here, m) {
                Some(pct) => {
                    steps_out.push(planted(job, m, report, pct));
                    before * (1.0 + pct / 100.0)
                }
                None => before,
            };
            levels[m] = after;
            (before, after)
        } else {
            (job.level0[m], job.level0[m])
        };
        let base = base_level * (1.0 + noise * rng.bounded_gaussian());
        let head = head_level * (1.0 + noise * rng.bounded_gaussian());
        let change = fmt_change(base, head, change_unit(&def.name));
        rows.push(RowOut {
            metric: m,
            group: def.group,
            order: def.order,
            base,
            head,
            change,
        });
    }
    rows.sort_by(|a, b| {
        a.group.cmp(&b.group).then_with(|| match a.group {
            0 => job.metrics[a.metric].name.cmp(&job.metrics[b.metric].name),
            18..=20 => (a.head - a.base).total_cmp(&(b.head - b.base)),
            _ => a.order.cmp(&b.order),
        })
    });

    let headline = headline_of(job, steps_here, &rows);
    let printed = print_rows(job, &rows, headline, rng);
    let headline_metric = job.metrics[headline].name.clone();
    let headline_change_pct: f64 = printed
        .headline_change
        .trim_end_matches('%')
        .parse()
        .unwrap_or(0.0);
    let kind = verdict(&headline_metric, headline_change_pct);
    TestOut {
        job: job_index,
        rows: printed.text,
        n_rows: rows.len(),
        headline_metric,
        headline_change: printed.headline_change,
        headline_change_pct,
        kind,
        headline_levels: printed.headline_levels,
    }
}

/// The pool metrics a table shows besides the core ones: 20 to 150 rows in all for the main
/// test, 20 to 80 for a test of the "In addition" box.
fn pool_rows(job: &Job, main: bool, rng: &mut Rng) -> Vec<usize> {
    let target = if main {
        rng.between(20, 150)
    } else {
        rng.between(20, 80)
    };
    let pool = job.metrics.len() - job.core;
    let extra = target.saturating_sub(job.core).min(pool);
    let mut chosen: Vec<usize> = (job.core..job.metrics.len()).collect();
    for i in 0..extra {
        let j = i + rng.below(chosen.len() - i);
        chosen.swap(i, j);
    }
    chosen.truncate(extra);
    chosen
}

/// The change planted in metric `m` here, if any.
fn step_of(steps_here: &[(usize, f64)], m: usize) -> Option<f64> {
    steps_here.iter().find(|&&(i, _)| i == m).map(|&(_, p)| p)
}

/// The truth about a step of metric `m` planted in report `report`.
fn planted(job: &Job, m: usize, report: usize, pct: f64) -> PlantedStep {
    PlantedStep {
        testcase: job.testcase.name.to_owned(),
        tbox_group: job.machine.tbox.to_owned(),
        params: job.params_key.clone(),
        metric: job.metrics[m].name.clone(),
        at_report_index: report,
        change_pct: pct,
        noise_pct: job.noise[m] * 100.0,
    }
}

/// The headline: the test's own index metric that stepped most here; without a step, the one
/// that moved most (as the robot would pick it), else the primary one.
fn headline_of(job: &Job, steps_here: &[(usize, f64)], rows: &[RowOut]) -> usize {
    let printed = |r: &RowOut| r.change.trim_end_matches('%').parse::<f64>().unwrap_or(0.0);
    (0..job.core)
        .filter(|&m| job.metrics[m].headline)
        .filter_map(|m| step_of(steps_here, m).map(|p| (m, p)))
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .map(|(m, _)| m)
        .or_else(|| {
            rows.iter()
                .filter(|r| job.metrics[r.metric].headline)
                .max_by(|a, b| printed(a).abs().total_cmp(&printed(b).abs()))
                .map(|r| r.metric)
        })
        .unwrap_or(0)
}

/// A table's printed rows, with what the headline's row printed.
#[derive(Debug)]
struct Printed {
    text: String,
    headline_change: String,
    /// Base and head value and noise of the headline metric, for legacy plots.
    headline_levels: (f64, f64, f64),
}

/// Prints the rows, drawing each mean's `%stddev` (printed from 3 % up) around its noise.
fn print_rows(job: &Job, rows: &[RowOut], headline: usize, rng: &mut Rng) -> Printed {
    let mut text = String::new();
    let mut headline_change = String::new();
    let mut headline_levels = (0.0, 0.0, 0.0);
    for row in rows {
        let noise = job.noise[row.metric];
        let sd = |rng: &mut Rng| {
            let s = (noise * 100.0 * rng.uniform(0.4, 1.6)).trunc() as u32;
            (s > 2).then_some(s)
        };
        let (bsd, hsd) = (sd(rng), sd(rng));
        push_row(
            &mut text,
            row.base,
            bsd,
            &row.change,
            row.head,
            hsd,
            &job.metrics[row.metric].name,
        );
        if row.metric == headline {
            headline_change = row.change.clone();
            headline_levels = (row.base, row.head, noise);
        }
    }
    Printed {
        text,
        headline_change,
        headline_levels,
    }
}

/// Improvement or regression: whether the change went the way the metric's direction says is
/// better.
fn verdict(metric: &str, change_pct: f64) -> Kind {
    let direction = DIRECTIONS
        .direction(metric)
        .unwrap_or(Direction::HigherIsBetter);
    if change_pct * direction.sign() >= 0.0 {
        Kind::Improvement
    } else {
        Kind::Regression
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_laid_out_like_lkp() {
        let mut out = String::new();
        push_row(
            &mut out,
            5222.7,
            Some(19),
            "-22.2%",
            4060.2,
            Some(16),
            "numa-meminfo.node1.Active(anon)",
        );
        push_row(
            &mut out,
            1.69,
            None,
            "+0.1",
            1.80,
            Some(2),
            "turbostat.C1E%",
        );
        push_row(
            &mut out,
            14072.0,
            None,
            "+4.1%",
            14642.0,
            None,
            "vmstat.system.cs",
        );
        push_row(
            &mut out,
            2.352e8,
            None,
            "+34.5%",
            3.164e8,
            None,
            "vm-scalability.median",
        );
        push_row(
            &mut out,
            2.40,
            Some(107),
            "+5.3",
            7.74,
            Some(47),
            "perf-profile.children.cycles-pp.path_openat",
        );
        assert_eq!(
            out,
            "      5222 ± 19%     -22.2%       4060 ± 16%  numa-meminfo.node1.Active(anon)\n\
             \x20     1.69            +0.1        1.80 ±  2%  turbostat.C1E%\n\
             \x20    14072            +4.1%      14642        vmstat.system.cs\n\
             \x202.352e+08           +34.5%  3.164e+08        vm-scalability.median\n\
             \x20     2.40 ±107%      +5.3        7.74 ± 47%  perf-profile.children.cycles-pp.path_openat\n"
        );
    }

    #[test]
    fn means_print_like_lkp() {
        assert_eq!(fmt_mean(0.004), "0.00");
        assert_eq!(fmt_mean(98.316), "98.32");
        assert_eq!(fmt_mean(9835435.9), "9835435");
        assert_eq!(fmt_mean(1.34e10), "1.34e+10");
        assert_eq!(fmt_mean(8.8e8), "8.8e+08");
        assert_eq!(fmt_mean(5e11), "5e+11");
        assert_eq!(fmt_mean(2.3524e8), "2.352e+08");
        assert_eq!(fmt_change(100.0, 134.5, ChangeUnit::Percent), "+34.5%");
        assert_eq!(fmt_change(0.34, 0.20, ChangeUnit::Absolute), "-0.1");
        assert_eq!(fmt_change(1.0, 1201.0, ChangeUnit::Percent), "+1.2e+05%");
    }
}
