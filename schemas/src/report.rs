//! The `Report` model: what the parser extracts from one kernel test robot mail and what
//! travels over Kafka as JSON on `lkp.reports`.
//!
//! Field names are part of the wire format and of the checked-in JSON Schema; renaming a
//! field is a schema version bump.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the JSON wire format. Bump on any incompatible change to these types.
///
/// - 1: performance reports only.
/// - 2: functional reports (kind `failure`, tables of `fail:runs` only), the printed
///   reproduction percentage of each failure column, and [`crate::Mention`] messages. A
///   version 2 reader reads every version 1 message: the new fields have defaults.
/// - 3: [`crate::Link`] messages (a later mail's statement about a report, its culprit or its
///   fix). Reports and mentions are unchanged; a version 2 reader cannot read a link.
pub const SCHEMA_VERSION: u32 = 3;

/// One performance report of the kernel test robot, as found in one mail (or one quoted copy of
/// it inside a reply).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Report {
    /// Wire format version, [`SCHEMA_VERSION`] when produced by this code.
    pub schema_version: u32,
    /// Content hash that is the same for the original mail and for every archive or quoted copy
    /// of it (see [`crate::key::report_key`]).
    pub report_key: String,
    /// Message-ID of the mail the report was read from, with angle brackets, when known.
    pub message_id: Option<String>,
    /// When the report was sent (UTC). For a quoted copy, the date of the quoted mail when the
    /// attribution line gives it.
    pub date: Option<DateTime<Utc>>,
    /// Subject of the mail, unfolded, when known.
    pub subject: Option<String>,
    /// The robot's own verdict on the headline change, when the report states one.
    pub kind: Option<Kind>,
    /// The metric named in the opening sentence or the subject.
    pub headline: Option<Headline>,
    /// The commit the report is about: the one its `commit:` line or subject names, which in a
    /// follow-up with more columns (a fix-up, a tag) need not be the last column; else the
    /// last table column.
    pub commit: Commit,
    /// The commit it is compared against (the first table column).
    pub base_commit: Commit,
    /// The tree and branch the commit was found on, e.g. `linus:master`.
    pub branch: Option<String>,
    /// True when the report was read from a reply that quotes it (`> ` prefixes).
    pub quoted: bool,
    /// Where the report was read from.
    pub source: Source,
    /// The main test first, then the tests of an "In addition to that" block.
    pub tests: Vec<Test>,
}

/// The robot's classification of the headline change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The robot "noticed a ... regression".
    Regression,
    /// The robot "noticed a ... improvement".
    Improvement,
    /// The robot noticed a failure (`noticed "dmesg.WARNING:..." on:`): a functional report,
    /// whose tables count failed runs instead of measuring (since version 2).
    Failure,
}

impl Kind {
    /// The word as the robot writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Regression => "regression",
            Kind::Improvement => "improvement",
            Kind::Failure => "failure",
        }
    }
}

/// A headline metric and its change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Headline {
    /// Full metric name, e.g. `vm-scalability.throughput`.
    pub metric: String,
    /// Signed as the table prints it: a drop is negative even where the prose says
    /// "23.3% regression".
    pub change_pct: f64,
}

/// A kernel commit as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Commit {
    /// Hex commit id: the full 40 characters where the report prints them, else the prefix it
    /// prints (usually 10 characters). May also be a tag such as `v6.9` in follow-up reports.
    pub id: String,
    /// Commit subject line, when printed.
    pub title: Option<String>,
}

/// Where a report was read from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Source {
    /// Path of the input file (`-` for stdin), or of the public-inbox archive as the user named
    /// it (a v2 inbox directory, or a single repository such as a lore mirror).
    pub path: String,
    /// Index of the message within the file (0 for single-message files); in an archive, the
    /// index of its commit within the epoch, oldest first.
    pub index: u64,
    /// The archive's epoch (`git/<epoch>.git`; a lore mirror's name ends in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u32>,
    /// The archive commit that added the message (its blob `m`), 40 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

impl Source {
    /// A message of a file.
    pub fn file(path: impl Into<String>, index: u64) -> Self {
        Self {
            path: path.into(),
            index,
            ..Self::default()
        }
    }
}

/// How a source is written where one string must do (the lake's `source` column, dead-letter
/// keys, messages): `path#index` for a file; `inbox#epoch:commit` for an archive, from which
/// `git --git-dir=<inbox>/git/<epoch>.git show <commit>:m` (or `--git-dir=<inbox>` for a single
/// repository) prints the mail.
impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.commit {
            Some(commit) => write!(f, "{}#{}:{commit}", self.path, self.epoch.unwrap_or(0)),
            None => write!(f, "{}#{}", self.path, self.index),
        }
    }
}

/// One tested configuration with its comparison table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Test {
    /// LKP test suite, e.g. `will-it-scale`.
    pub testcase: String,
    /// Test box group: the machine's name, e.g. `lkp-csl-2sp7`.
    pub tbox_group: String,
    /// The test machine as described by the report.
    pub machine: Machine,
    /// Every other job parameter (compiler, kconfig, rootfs, test options), by name.
    pub params: BTreeMap<String, String>,
    /// Headline of this test: the report's headline for the main test, the boxed table's entry
    /// for additional tests.
    pub headline: Option<Headline>,
    /// Commit ids of the table columns, base first, as the `commit:` list above the table
    /// prints them.
    pub commits: Vec<String>,
    /// Data rows of the `%stddev %change` table, in printed order.
    pub rows: Vec<Row>,
    /// Rows of the `fail:runs %reproduction` table, in printed order.
    pub failures: Vec<Failure>,
}

/// The machine a test ran on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Machine {
    /// The report's description, e.g. `96 threads 2 sockets Intel(R) Xeon(R) Gold 6252 CPU @
    /// 2.10GHz (Cascade Lake) with 512G memory`.
    pub description: Option<String>,
    /// Hardware threads, e.g. 96.
    pub threads: Option<u32>,
    /// CPU sockets, e.g. 2.
    pub sockets: Option<u32>,
    /// CPU model as printed, e.g. `Intel(R) Xeon(R) Gold 6252 CPU @ 2.10GHz (Cascade Lake)`.
    pub cpu: Option<String>,
    /// Memory in GiB as printed (`512G`), e.g. 512.
    pub memory_gb: Option<u32>,
}

/// One data row of a comparison table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Row {
    /// Full metric name, e.g. `perf-stat.i.metric.M/sec`.
    pub metric: String,
    /// One value per commit column, base first.
    pub values: Vec<Value>,
    /// How `change` is expressed, decided by the metric name.
    pub change_unit: ChangeUnit,
}

/// The value of one commit column in a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Value {
    /// Mean over the runs, as printed.
    pub mean: f64,
    /// Relative standard deviation in percent; absent when the report prints none (2 % or
    /// less, or a single run).
    pub stddev_pct: Option<f64>,
    /// Change against the first column as printed; `None` for the first column.
    pub change: Option<f64>,
}

/// Whether a row's change is relative (percent) or an absolute difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChangeUnit {
    /// `-34.5%`: relative to the base.
    Percent,
    /// `+0.3` (printed for metrics whose base is near zero): the difference itself.
    Absolute,
}

impl ChangeUnit {
    /// The name stored in the lake: `percent` or `absolute`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeUnit::Percent => "percent",
            ChangeUnit::Absolute => "absolute",
        }
    }
}

/// One row of a `fail:runs` table: how often a failure (a dmesg warning, a kernel message)
/// was seen per commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Failure {
    /// The failure's name, e.g. `dmesg.WARNING:at_kernel/sched/deadline.c:#task_contending`.
    pub metric: String,
    /// One entry per commit column, base first.
    pub columns: Vec<FailRuns>,
}

/// Failed runs out of all runs for one commit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FailRuns {
    /// Runs that showed the failure.
    pub fail: u32,
    /// Runs in all.
    pub runs: u32,
    /// The `%reproduction` printed left of this column (`67%`, `-100%`): how much more often
    /// this commit showed the failure than the base. `None` for the base column, where the
    /// robot prints none, and in version 1 messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproduction_pct: Option<f64>,
}
