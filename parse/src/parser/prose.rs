//! The prose around the tables: opening sentence, subject, commit and machine lines, the
//! "In addition to that" box, the parameter header above each table, dates and ids. All
//! functions read canonical single-spaced text (see [`super::quote_streams`]).

use super::table::{Tokens, is_metric};
use crate::decode::parse_rfc2822_date;
use crate::error::ParseError;
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use lkplake_schemas::metric::{Direction, DirectionTable};
use lkplake_schemas::{Commit, Headline, Kind, Machine, Row};
use regex::Regex;
use std::sync::LazyLock;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| unreachable!("built-in pattern {pattern}: {e}"))
}

static SENTENCE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"noticed an? ([+-]?[0-9]+(?:\.[0-9]+)?)% (improvement|regression) of (\S+)")
});
/// A functional report's opening: `kernel test robot noticed "dmesg.WARNING:..." on:`.
static FAILURE_SENTENCE: LazyLock<Regex> = LazyLock::new(|| re(r#"noticed "([^" ]{1,400})" on"#));
/// The commit id in a report's subject: `[linus:master] [mm]  01b9da291c: ...`.
static SUBJECT_COMMIT: LazyLock<Regex> = LazyLock::new(|| re(r"\] +([0-9a-f]{7,40}):"));
/// `in testcase: netperf` (older reports) or `testcase: netperf` (newer ones).
static TESTCASE: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:^| )testcase: ([A-Za-z0-9_.-]+)(?: |$)"));
static SUBJECT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(\S+) ([+-]?[0-9]+(?:\.[0-9]+)?)% (improvement|regression)\b"));
static SUBJECT_BRANCH: LazyLock<Regex> = LazyLock::new(|| re(r"\[([\w.+-]+:[\w./+-]+)\]"));
static HEAD_COMMIT: LazyLock<Regex> =
    LazyLock::new(|| re(r#"commit: ([0-9a-f]{12,40}) \("(.{0,400}?)"\)(?: |$)"#));
static REPO_LINE: LazyLock<Regex> = LazyLock::new(|| re(r"^ ((?:https?|git)://\S+) (\S+)"));
static PATCH_URL: LazyLock<Regex> = LazyLock::new(|| re(r"url: https?://\S+?/commits/(\S+)"));
static MACHINE: LazyLock<Regex> =
    LazyLock::new(|| re(r"test machine: (.{1,400}?) with ([0-9]+)([GT]) memory"));
static THREADS: LazyLock<Regex> =
    LazyLock::new(|| re(r"^([0-9]+) threads?(?: ([0-9]+) sockets?)? ?(.*)$"));
static AXES: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?:^| )([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+):(?: |$)"));
static ROBOT_ID: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\b(([0-9]{12})\.[0-9a-f]{8}-[A-Za-z0-9._-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)")
});
static ATTRIBUTION: LazyLock<Regex> = LazyLock::new(|| {
    re(r"On ([^\n]{6,80}?),? (?:kernel test robot|Oliver Sang)[^\n]{0,80}? wrote:")
});

static DIRECTIONS: LazyLock<DirectionTable> = LazyLock::new(DirectionTable::default);

/// A headline as the prose states it, before the table confirms its sign.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StatedHeadline {
    metric: String,
    change_pct: f64,
    /// The prose printed a sign (`-8.2% improvement`), so it is already table-signed.
    signed: bool,
    kind: Kind,
}

impl StatedHeadline {
    fn new(metric: &str, change: &str, kind: &str) -> Option<Self> {
        let kind = if kind == "regression" {
            Kind::Regression
        } else {
            Kind::Improvement
        };
        Some(Self {
            metric: metric.trim_end_matches(':').to_owned(),
            change_pct: change.parse().ok()?,
            signed: change.starts_with(['+', '-']),
            kind,
        })
    }

    /// The headline signed as the table prints it: from the metric's row when the table has
    /// one, else from the prose, signing an unsigned number by the metric's direction.
    /// `column` holds the commit the prose speaks of: in a follow-up with more commits (a
    /// fix-up, a tag) that is not the last one.
    fn resolve(&self, rows: &[Row], column: usize) -> Headline {
        let from_table = rows
            .iter()
            .find(|r| r.metric == self.metric)
            .and_then(|r| r.values.get(column).and_then(|v| v.change));
        let change_pct = from_table.unwrap_or_else(|| {
            if self.signed {
                return self.change_pct;
            }
            let good = if self.kind == Kind::Improvement {
                1.0
            } else {
                -1.0
            };
            let direction = DIRECTIONS
                .direction(&self.metric)
                .unwrap_or(Direction::HigherIsBetter);
            self.change_pct.abs() * good * direction.sign()
        });
        Headline {
            metric: self.metric.clone(),
            change_pct,
        }
    }
}

/// One entry of the "In addition to that" box: another test the commit affected.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct AdditionalTest {
    pub testcase: String,
    pub headline: Option<StatedHeadline>,
    pub machine: Machine,
    pub params: Vec<String>,
}

impl AdditionalTest {
    pub fn headline_for(&self, rows: &[Row], column: usize) -> Option<Headline> {
        self.headline.as_ref().map(|h| h.resolve(rows, column))
    }
}

/// Everything the prose of a report says.
#[derive(Debug, Clone, Default)]
pub(crate) struct Prose {
    pub commit: Option<Commit>,
    pub kind: Option<Kind>,
    headline: Option<StatedHeadline>,
    pub branch: Option<String>,
    pub machine: Machine,
    pub additional: Vec<AdditionalTest>,
    /// The robot's own Message-ID, from a `Closes:` link or the archive URL.
    pub canonical_message_id: Option<String>,
    /// The date encoded in the robot's Message-ID.
    pub id_stamp_date: Option<DateTime<Utc>>,
}

impl Prose {
    /// Reads the prose before the first parameter header.
    pub fn read(text: &str, subject: Option<&str>) -> Self {
        let mut prose = Prose::default();
        let stated = SENTENCE
            .captures(text)
            .and_then(|c| StatedHeadline::new(&c[3], &c[1], &c[2]))
            .or_else(|| {
                let c = SUBJECT.captures(subject?)?;
                is_metric(&c[1]).then(|| StatedHeadline::new(&c[1], &c[2], &c[3]))?
            });
        prose.kind = stated.as_ref().map(|h| h.kind);
        prose.headline = stated;

        if let Some(c) = HEAD_COMMIT.captures(text) {
            prose.commit = Some(Commit {
                id: c[1].to_owned(),
                title: Some(c[2].to_owned()),
            });
            let after = &text[c.get(0).map_or(0, |m| m.end()).saturating_sub(1)..];
            prose.branch = PATCH_URL
                .captures(after.get(..400.min(after.len())).unwrap_or(after))
                .map(|c| c[1].to_owned())
                .or_else(|| REPO_LINE.captures(after).map(|c| repo_branch(&c[1], &c[2])));
        }
        if let Some(branch) = subject.and_then(|s| SUBJECT_BRANCH.captures(s)) {
            prose.branch = Some(branch[1].to_owned());
        }
        if let Some(c) = MACHINE.captures(text) {
            prose.machine = machine(&c[1], &c[2], &c[3]);
        }
        prose.additional = additional_tests(text);
        if let Some(c) = ROBOT_ID.captures(text) {
            prose.canonical_message_id = Some(format!("<{}>", &c[1]));
            prose.id_stamp_date = stamp_date(&c[2]);
        }
        prose
    }

    pub fn headline_for(&self, rows: &[Row], column: usize) -> Option<Headline> {
        self.headline.as_ref().map(|h| h.resolve(rows, column))
    }
}

/// The failure a functional report's opening names (`noticed "X" on:`).
pub(crate) fn stated_failure(text: &str) -> Option<&str> {
    FAILURE_SENTENCE
        .captures(text)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str())
}

/// The commit id a report's subject names.
pub(crate) fn subject_commit(subject: &str) -> Option<&str> {
    SUBJECT_COMMIT
        .captures(subject)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str())
}

/// The commit of a `commit: <id> ("title")` line.
pub(crate) fn commit_line(text: &str) -> Option<Commit> {
    HEAD_COMMIT.captures(text).map(|c| Commit {
        id: c[1].to_owned(),
        title: Some(c[2].to_owned()),
    })
}

/// The test suite of an `in testcase: x` line (not the `testcase: change` column of the
/// "In addition to that" box).
pub(crate) fn testcase_line(text: &str) -> Option<&str> {
    TESTCASE
        .captures_iter(text)
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str())
        .find(|t| *t != "change")
}

/// The opening sentence's metric, change as printed and verdict, else the subject's.
pub(crate) fn stated(text: &str, subject: Option<&str>) -> Option<(String, f64, Kind)> {
    let from = |c: regex::Captures<'_>, metric: usize, change: usize, kind: usize| {
        let h = StatedHeadline::new(&c[metric], &c[change], &c[kind])?;
        Some((h.metric, h.change_pct, h.kind))
    };
    SENTENCE
        .captures(text)
        .and_then(|c| from(c, 3, 1, 2))
        .or_else(|| {
            let c = SUBJECT.captures(subject?)?;
            if is_metric(&c[1]) {
                from(c, 1, 2, 3)
            } else {
                None
            }
        })
}

/// `https://git.kernel.org/.../torvalds/linux.git master` → `linus:master`; other trees as
/// `owner/repo:branch`.
fn repo_branch(url: &str, branch: &str) -> String {
    let mut parts = url.trim_end_matches('/').rsplit('/');
    let repo = parts.next().unwrap_or_default().trim_end_matches(".git");
    let owner = parts.next().unwrap_or_default();
    if owner == "torvalds" && repo == "linux" {
        format!("linus:{branch}")
    } else {
        format!("{owner}/{repo}:{branch}")
    }
}

/// Reads `96 threads 2 sockets <cpu>` plus the memory size.
fn machine(head: &str, memory: &str, unit: &str) -> Machine {
    let description = format!("{head} with {memory}{unit} memory");
    let memory_gb = memory
        .parse::<u32>()
        .ok()
        .map(|m| if unit == "T" { m * 1024 } else { m });
    let mut out = Machine {
        description: Some(description),
        memory_gb,
        ..Machine::default()
    };
    if let Some(c) = THREADS.captures(head) {
        out.threads = c[1].parse().ok();
        out.sockets = c.get(2).and_then(|s| s.as_str().parse().ok());
        out.cpu = Some(c[3].to_owned()).filter(|s| !s.is_empty());
    } else {
        out.cpu = Some(head.to_owned());
    }
    out
}

fn machine_cell(cell: &str) -> Machine {
    match MACHINE.captures(&format!("test machine: {cell}")) {
        Some(c) => machine(&c[1], &c[2], &c[3]),
        None => Machine {
            description: Some(cell.to_owned()),
            ..Machine::default()
        },
    }
}

/// Reads the boxed table after "In addition to that": `| label | value |` rows, where a
/// `testcase: change` row starts an entry and blank labels continue the one above.
fn additional_tests(text: &str) -> Vec<AdditionalTest> {
    let Some(start) = text.find("In addition to that") else {
        return Vec::new();
    };
    let rest = &text[start..];
    let end = [
        "If you fix",
        "Details are as below",
        "=====",
        "Reported-by",
        "The kernel config",
    ]
    .iter()
    .filter_map(|m| rest.find(m))
    .min()
    .unwrap_or(rest.len());
    let cells: Vec<&str> = rest[..end].split('|').map(str::trim).collect();
    let mut out: Vec<AdditionalTest> = Vec::new();
    let mut i = 1;
    while i + 1 < cells.len() {
        let (label, value) = (cells[i], cells[i + 1]);
        i += 3;
        if label.starts_with("testcase") {
            let (testcase, stated) = value.split_once(": ").unwrap_or((value, ""));
            let headline = SUBJECT
                .captures(stated)
                .and_then(|c| StatedHeadline::new(&c[1], &c[2], &c[3]));
            out.push(AdditionalTest {
                testcase: testcase.to_owned(),
                headline,
                ..Default::default()
            });
        } else if let Some(entry) = out.last_mut() {
            match label {
                "test machine" => entry.machine = machine_cell(value),
                "test parameters" | "" if !value.is_empty() => entry.params.push(value.to_owned()),
                _ => {}
            }
        }
    }
    out
}

fn axes_offsets(text: &str) -> impl Iterator<Item = usize> + '_ {
    AXES.captures_iter(text).filter_map(|c| {
        let names = c.get(1)?;
        names
            .as_str()
            .split('/')
            .any(|n| n == "testcase" || n == "tbox_group")
            .then_some(names.start())
    })
}

pub(crate) fn first_axes_offset(text: &str) -> Option<usize> {
    axes_offsets(text).next()
}

pub(crate) fn last_axes_offset(text: &str) -> Option<usize> {
    axes_offsets(text).last()
}

/// Reads the parameter header at token `at` (`compiler/…/testcase:`) and its value line.
/// Values may contain spaces (`Launch Programs`), so value tokens are joined until they hold
/// one `/`-separated value per name. Returns the pairs and the token index after the values.
pub(crate) fn parse_axes(
    tokens: &Tokens<'_>,
    at: usize,
    limit: usize,
) -> Result<(Vec<(String, String)>, usize), ParseError> {
    let header = tokens.get(at).ok_or(ParseError::MissingAxes)?;
    let names: Vec<&str> = header.trim_end_matches(':').split('/').collect();
    let mut values = String::new();
    let mut i = at + 1;
    while i < limit {
        let Some(tok) = tokens.get(i) else { break };
        if tok == "commit:" || values.split('/').count() >= names.len() && !values.is_empty() {
            break;
        }
        if !values.is_empty() {
            values.push(' ');
        }
        values.push_str(tok);
        i += 1;
    }
    let values: Vec<&str> = values.split('/').collect();
    if values.len() != names.len() {
        return Err(ParseError::AxesMismatch {
            names: names.len(),
            values: values.len(),
        });
    }
    let pairs = names
        .iter()
        .zip(values)
        .map(|(n, v)| ((*n).to_owned(), v.to_owned()))
        .collect();
    Ok((pairs, i))
}

/// Reads a `commit:` list: `id ("title")` entries, titles optional.
pub(crate) fn commit_list(text: &str) -> Vec<Commit> {
    let mut out = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let (id, after) = rest.split_once(' ').unwrap_or((rest, ""));
        if id.starts_with('(') || id.ends_with(':') {
            break;
        }
        let after = after.trim_start();
        let (title, after) = match after.strip_prefix("(\"") {
            Some(t) => match t
                .find("\") ")
                .or_else(|| t.ends_with("\")").then(|| t.len() - 2))
            {
                Some(end) => (Some(t[..end].to_owned()), &t[end + 2..]),
                None => break,
            },
            None => (None, after),
        };
        out.push(Commit {
            id: id.to_owned(),
            title,
        });
        rest = after.trim_start();
    }
    out
}

/// True for prose that promises a table (`Details are as below`) in a robot report.
pub(crate) fn announces_details(text: &str) -> bool {
    text.contains("Details are as below") && SENTENCE.is_match(text)
}

/// `YYYYMMDDhhmm` of a robot Message-ID, in the robot's time zone (UTC+8).
fn stamp_date(stamp: &str) -> Option<DateTime<Utc>> {
    let naive = NaiveDateTime::parse_from_str(stamp, "%Y%m%d%H%M").ok()?;
    let tz = chrono::FixedOffset::east_opt(8 * 3600)?;
    tz.from_local_datetime(&naive)
        .single()
        .map(|d| d.with_timezone(&Utc))
}

/// The date stamped into a robot Message-ID such as `<202309122106.b440c4c6-…>`.
pub(crate) fn message_id_date(message_id: &str) -> Option<DateTime<Utc>> {
    ROBOT_ID
        .captures(message_id)
        .and_then(|c| stamp_date(&c[2]))
}

/// The date of a quoted report from its attribution line (`On Mon, Feb 19, 2024 at
/// 01:44:05PM +0800, kernel test robot wrote:`).
pub(crate) fn attribution_date(body: &str) -> Option<DateTime<Utc>> {
    let c = ATTRIBUTION.captures(body)?;
    let when = c[1].split_whitespace().collect::<Vec<_>>().join(" ");
    for format in [
        "%a, %b %d, %Y at %I:%M:%S%p %z",
        "%a, %b %d, %Y at %I:%M:%S %p %z",
        "%a, %d %b %Y at %H:%M:%S %z",
    ] {
        if let Ok(d) = DateTime::parse_from_str(&when, format) {
            return Some(d.with_timezone(&Utc));
        }
    }
    parse_rfc2822_date(&when)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_list_reads_ids_and_titles() {
        let list = commit_list(
            r#" c439d5e8a0 ("pcpcntr: add group allocation/free") 14ef95be6f ("kernel/fork: "x" (y)") "#,
        );
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].id, "c439d5e8a0");
        assert_eq!(
            list[0].title.as_deref(),
            Some("pcpcntr: add group allocation/free")
        );
        assert_eq!(list[1].title.as_deref(), Some(r#"kernel/fork: "x" (y)"#));
    }

    #[test]
    fn axes_values_may_contain_spaces() -> Result<(), ParseError> {
        let text = "compiler/option_a/tbox_group/testcase: gcc-12/Launch Programs/lkp-csl-2sp7/phoronix-test-suite commit: x";
        let tokens = Tokens::new(text);
        let (pairs, next) = parse_axes(&tokens, 0, tokens.tokens.len())?;
        assert_eq!(
            pairs[1],
            ("option_a".to_owned(), "Launch Programs".to_owned())
        );
        assert_eq!(pairs[3].1, "phoronix-test-suite");
        assert_eq!(tokens.get(next), Some("commit:"));
        Ok(())
    }

    #[test]
    fn mutt_attribution_dates_parse() {
        let date =
            attribution_date("On Mon, Feb 19, 2024 at 01:44:05PM +0800, kernel test robot wrote:");
        assert_eq!(
            date.map(|d| d.to_rfc3339()).as_deref(),
            Some("2024-02-19T05:44:05+00:00")
        );
    }

    #[test]
    fn robot_message_ids_carry_a_china_time_stamp() {
        let date = message_id_date("<202503312148.c74b0351-lkp@intel.com>");
        assert_eq!(
            date.map(|d| d.to_rfc3339()).as_deref(),
            Some("2025-03-31T13:48:00+00:00")
        );
    }

    #[test]
    fn torvalds_tree_is_linus() {
        assert_eq!(
            repo_branch(
                "https://git.kernel.org/cgit/linux/kernel/git/torvalds/linux.git",
                "master"
            ),
            "linus:master"
        );
        assert_eq!(
            repo_branch(
                "git://git.kernel.org/cgit/linux/kernel/git/cel/linux",
                "simple-offset-maple"
            ),
            "cel/linux:simple-offset-maple"
        );
    }
}
