//! Metric knowledge: how a metric name is read and which way is better.
//!
//! lkp-tests keeps this knowledge as regex → weight lists (etc/index-perf-all.yaml for
//! throughput-like metrics, etc/index-latency-all.yaml for latencies). The lists contradict
//! themselves in places (`pts.*.milliseconds` is "higher is better" there), so direction is
//! data here: a default table seeded from those conventions, plus user overrides that win.

use crate::report::ChangeUnit;
use regex::RegexSet;
use serde::{Deserialize, Serialize};

/// The program that produced a metric: the text before the first dot
/// (`perf-stat.i.metric.M/sec` → `perf-stat`).
pub fn program(metric: &str) -> &str {
    metric
        .split_once('.')
        .map_or(metric, |(program, _)| program)
}

/// How the robot prints the change of a metric: an absolute difference for profile shares and
/// for metrics that are themselves percentages (`mpstat.cpu.all.soft%`), relative otherwise.
/// `turbostat.%Busy` is relative: only a trailing `%` makes a metric a percentage.
pub fn change_unit(metric: &str) -> ChangeUnit {
    if metric.starts_with("perf-profile") || metric.ends_with('%') {
        ChangeUnit::Absolute
    } else {
        ChangeUnit::Percent
    }
}

/// Which way a metric should move to be an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Throughput, operations per second, scores.
    HigherIsBetter,
    /// Latency, run time, cycles, misses.
    LowerIsBetter,
}

impl Direction {
    /// The name stored in the lake: `higher_is_better` or `lower_is_better`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::HigherIsBetter => "higher_is_better",
            Direction::LowerIsBetter => "lower_is_better",
        }
    }

    /// +1 when a rise is good, -1 when a fall is good.
    pub fn sign(self) -> f64 {
        match self {
            Direction::HigherIsBetter => 1.0,
            Direction::LowerIsBetter => -1.0,
        }
    }
}

/// Full-match patterns for metrics where a higher value is better. Derived from the naming
/// conventions of lkp-tests' throughput index; generalised where the index lists many
/// spellings of one idea.
const HIGHER_IS_BETTER: &[&str] = &[
    r".+\.throughput",
    r".+\.throughput_.+",
    r".+\.ops_per_sec",
    r".+_per_sec",
    r".+\.score",
    r".+_score",
    r"aim7\.jobs-per-min",
    r"reaim\.jobs_per_min",
    r"will-it-scale\..+_ops",
    r"will-it-scale\.scalability",
    r"vm-scalability\.median",
    r"netperf\.Throughput_.+",
    r"fsmark\.files_per_sec",
    r"fio\..+_(bw_MBps|iops)",
    r"lmbench3\..+\.MB/sec",
    r"stress-ng\..+_per_(item|sec|seek)",
    r"hackbench\.throughput",
    r"pgbench\.tps",
    r"unixbench\.(score|throughput)",
    r"dbench\.throughput.+",
    r"tbench\.throughput.+",
    r"sysbench-.+\.throughput_.+",
    r"stream\..+_bandwidth_MBps",
    r"iperf\..+\.bps",
    r"uperf\..+bps",
    r"pts\..+\.(fps|iops|mbps|gbps|ops_s|ops_sec|tps|mips|score|mb_s|gb_s|lps)",
];

/// Full-match patterns for metrics where a lower value is better: latencies, elapsed and
/// per-iteration times, overheads.
const LOWER_IS_BETTER: &[&str] = &[
    r".+latency.*",
    r".+\.elapsed_time(\.max)?",
    r".+_per_iteration",
    r".+\.us_per_event",
    r".+\.ns_per_event",
    r".+\.(usec|msec|ms|us|ns|seconds|sec)_?(average|avg)?",
    r".+_time_ms",
    r"fsmark\.app_overhead",
    r"kernbench\.elapsed_time",
    r"lmbench3\.Pagefaults\.ms",
    r"thrulay\.(jitter|RTT)",
    r"vm-scalability\.stddev",
    r"autonuma-benchmark\..+\.seconds",
    r"perf-bench-futex\.(requeued|wokeup)_time_ms",
];

/// Looks up the direction of a metric: user overrides first (in order), then the default
/// tables, where a lower-is-better match wins because latency patterns are the more specific.
#[derive(Debug, Clone)]
pub struct DirectionTable {
    overrides: Vec<(regex::Regex, Direction)>,
    higher: RegexSet,
    lower: RegexSet,
}

/// A user-supplied pattern that could not be compiled.
#[derive(Debug)]
pub struct InvalidPattern {
    /// The pattern as given.
    pub pattern: String,
    /// What the regex compiler said.
    pub reason: String,
}

impl std::fmt::Display for InvalidPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid metric pattern {:?}: {}; write a Rust regex that matches whole metric names",
            self.pattern, self.reason
        )
    }
}

impl std::error::Error for InvalidPattern {}

fn anchored(pattern: &str) -> String {
    format!("^(?:{pattern})$")
}

impl Default for DirectionTable {
    fn default() -> Self {
        // The default patterns are constants of this module and tested to compile.
        #[allow(clippy::expect_used)]
        let set = |patterns: &[&str]| {
            RegexSet::new(patterns.iter().map(|p| anchored(p))).expect("built-in patterns compile")
        };
        Self {
            overrides: Vec::new(),
            higher: set(HIGHER_IS_BETTER),
            lower: set(LOWER_IS_BETTER),
        }
    }
}

impl DirectionTable {
    /// Adds an override that wins over the defaults and over later overrides.
    pub fn with_override(
        mut self,
        pattern: &str,
        direction: Direction,
    ) -> Result<Self, InvalidPattern> {
        let regex = regex::Regex::new(&anchored(pattern)).map_err(|e| InvalidPattern {
            pattern: pattern.to_owned(),
            reason: e.to_string(),
        })?;
        self.overrides.push((regex, direction));
        Ok(self)
    }

    /// Adds the overrides of a directions file (`lkplake transform --directions FILE`): one
    /// `PATTERN higher|lower` per line, the pattern a regex over whole metric names, earlier
    /// lines winning; blank lines and `#` comments are skipped.
    pub fn with_overrides_text(mut self, text: &str) -> Result<Self, InvalidPattern> {
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let invalid = |reason: &str| InvalidPattern {
                pattern: line.to_owned(),
                reason: format!("line {}: {reason}", number + 1),
            };
            let Some((pattern, word)) = line.rsplit_once(char::is_whitespace) else {
                return Err(invalid("expected `PATTERN higher` or `PATTERN lower`"));
            };
            let direction = match word {
                "higher" | "higher_is_better" => Direction::HigherIsBetter,
                "lower" | "lower_is_better" => Direction::LowerIsBetter,
                other => {
                    return Err(invalid(&format!(
                        "the direction is `higher` or `lower`, not `{other}`"
                    )));
                }
            };
            self = self
                .with_override(pattern.trim(), direction)
                .map_err(|e| invalid(&e.reason))?;
        }
        Ok(self)
    }

    /// The direction of `metric`, or `None` for metrics that are only diagnostics
    /// (`perf-stat.*`, `proc-vmstat.*`, ...), where neither way is better.
    pub fn direction(&self, metric: &str) -> Option<Direction> {
        if let Some((_, direction)) = self.overrides.iter().find(|(re, _)| re.is_match(metric)) {
            return Some(*direction);
        }
        if self.lower.is_match(metric) {
            Some(Direction::LowerIsBetter)
        } else if self.higher.is_match(metric) {
            Some(Direction::HigherIsBetter)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directions_file_overrides_the_defaults_line_by_line() -> Result<(), InvalidPattern> {
        let table = DirectionTable::default().with_overrides_text(
            "# our fork prints latency here\n\nvm-scalability\\.throughput  lower\nperf-stat\\.i\\.ipc higher\n",
        )?;
        assert_eq!(
            table.direction("vm-scalability.throughput"),
            Some(Direction::LowerIsBetter)
        );
        assert_eq!(
            table.direction("perf-stat.i.ipc"),
            Some(Direction::HigherIsBetter)
        );
        // Untouched metrics keep their default.
        assert_eq!(
            table.direction("will-it-scale.per_process_ops"),
            Some(Direction::HigherIsBetter)
        );
        Ok(())
    }

    #[test]
    fn a_directions_file_error_names_the_line_and_what_is_expected() {
        let err = DirectionTable::default()
            .with_overrides_text("fio.read_bw_MBps higher\nfio.latency sideways\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("line 2"), "{err}");
        assert!(err.contains("`higher` or `lower`, not `sideways`"), "{err}");
    }

    #[test]
    fn program_is_the_text_before_the_first_dot() {
        assert_eq!(program("perf-stat.i.metric.M/sec"), "perf-stat");
        assert_eq!(program("sched_debug.cfs_rq:/.load.min"), "sched_debug");
        assert_eq!(program("nodots"), "nodots");
    }

    #[test]
    fn percent_metrics_and_profiles_change_absolutely() {
        assert_eq!(change_unit("mpstat.cpu.all.soft%"), ChangeUnit::Absolute);
        assert_eq!(
            change_unit("perf-profile.calltrace.cycles-pp.a.b.c"),
            ChangeUnit::Absolute
        );
        assert_eq!(change_unit("turbostat.%Busy"), ChangeUnit::Percent);
        assert_eq!(
            change_unit("vm-scalability.throughput"),
            ChangeUnit::Percent
        );
    }

    #[test]
    fn throughput_is_higher_better_and_latency_lower_better() {
        let table = DirectionTable::default();
        for metric in [
            "vm-scalability.throughput",
            "will-it-scale.per_process_ops",
            "aim7.jobs-per-min",
            "stress-ng.switch.ops_per_sec",
            "netperf.Throughput_Mbps",
            "aim9.disk_src.ops_per_sec",
            "lmbench3.TCP.socket.bandwidth.10MB.MB/sec",
        ] {
            assert_eq!(
                table.direction(metric),
                Some(Direction::HigherIsBetter),
                "{metric}"
            );
        }
        for metric in [
            "phoronix-test-suite.osbench.LaunchPrograms.us_per_event",
            "kbuild.buildtime_per_iteration",
            "fsmark.app_overhead",
            "schbench.wakeup_latency_max_us",
            "kernbench.elapsed_time",
        ] {
            assert_eq!(
                table.direction(metric),
                Some(Direction::LowerIsBetter),
                "{metric}"
            );
        }
        assert_eq!(table.direction("perf-stat.i.ipc"), None);
        assert_eq!(table.direction("proc-vmstat.pgfree"), None);
    }

    #[test]
    fn overrides_win_over_defaults() -> Result<(), InvalidPattern> {
        let table = DirectionTable::default()
            .with_override(r"vm-scalability\.throughput", Direction::LowerIsBetter)?;
        assert_eq!(
            table.direction("vm-scalability.throughput"),
            Some(Direction::LowerIsBetter)
        );
        Ok(())
    }

    #[test]
    fn an_invalid_override_names_the_pattern() {
        let err = DirectionTable::default()
            .with_override("(", Direction::LowerIsBetter)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("\"(\""), "{err}");
    }
}
