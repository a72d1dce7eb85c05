//! The comparison tables, read from a token stream.
//!
//! Tables are parsed from whitespace-separated tokens rather than lines: that one grammar
//! survives collapsed whitespace, a whole message collapsed onto one line, and rows wrapped by
//! a mail client, because a row is recognised by the shape of its tokens
//! (`mean [± sd%] (change mean [± sd%])… metric`), not by where lines break.

use lkplake_schemas::metric::change_unit;
use lkplake_schemas::{FailRuns, Failure, Row, Value};

/// Spellings of `±` after charset accidents: the real sign, `?` from a lossy 7-bit gateway,
/// `ą` (0xB1 read as ISO-8859-2), `Â±` (UTF-8 read as Latin-1), U+FFFD from lossy UTF-8.
const PLUS_MINUS: &[&str] = &["±", "?", "ą", "Â±", "\u{fffd}", "+-", "+/-"];

/// A token stream over canonical single-spaced text.
#[derive(Debug)]
pub(crate) struct Tokens<'a> {
    pub tokens: Vec<&'a str>,
    /// Byte offset of each token in the text it was split from.
    pub offsets: Vec<usize>,
}

impl<'a> Tokens<'a> {
    pub fn new(text: &'a str) -> Self {
        let mut tokens = Vec::new();
        let mut offsets = Vec::new();
        let mut pos = 0;
        for tok in text.split(' ') {
            if !tok.is_empty() {
                tokens.push(tok);
                offsets.push(pos);
            }
            pos += tok.len() + 1;
        }
        Self { tokens, offsets }
    }

    /// Index of the first token starting at or after byte offset `at`.
    pub fn index_at(&self, at: usize) -> usize {
        self.offsets.partition_point(|&o| o < at)
    }

    pub fn get(&self, i: usize) -> Option<&'a str> {
        self.tokens.get(i).copied()
    }
}

/// A plain number as the table prints means: `164231`, `0.34`, `2.352e+08`, `-5.1`.
fn number(tok: &str) -> Option<f64> {
    let digits = tok.strip_prefix(['-', '+']).unwrap_or(tok);
    if !digits.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    tok.parse().ok()
}

/// A change column: always signed (`+34.5%`, `-0.1`, `+1e+102%`), percent sign optional.
fn change(tok: &str) -> Option<f64> {
    if !tok.starts_with(['+', '-']) {
        return None;
    }
    number(tok.strip_suffix('%').unwrap_or(tok))
}

/// A percentage without sign: `19%`.
fn percent(tok: &str) -> Option<f64> {
    let n = tok.strip_suffix('%')?;
    if n.starts_with(['+', '-']) {
        return None;
    }
    number(n)
}

/// Reads the optional `± 19%` after a mean, in any of its damaged spellings; returns the
/// stddev and the number of tokens used.
fn stddev(tokens: &Tokens<'_>, i: usize) -> (Option<f64>, usize) {
    let Some(tok) = tokens.get(i) else {
        return (None, 0);
    };
    if PLUS_MINUS.contains(&tok) {
        if let Some(sd) = tokens.get(i + 1).and_then(percent) {
            return (Some(sd), 2);
        }
        return (None, 0);
    }
    for marker in PLUS_MINUS {
        if let Some(rest) = tok.strip_prefix(marker)
            && let Some(sd) = percent(rest)
        {
            return (Some(sd), 1);
        }
    }
    // The `±` itself lost in transit: a bare unsigned percentage right after a mean can only be
    // a stddev, since changes are always signed.
    match percent(tok) {
        Some(sd) => (Some(sd), 1),
        None => (None, 0),
    }
}

/// Metric names are `<program>.<rest>` with no spaces; the rest may hold almost anything.
pub(crate) fn is_metric(tok: &str) -> bool {
    tok.len() <= 1024
        && tok.contains('.')
        && tok.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && number(tok).is_none()
        && !tok.contains('|')
}

/// Parses one data row with `columns` commit columns at token `i`.
fn row(tokens: &Tokens<'_>, mut i: usize, columns: usize) -> Option<(Row, usize)> {
    let mut values = Vec::with_capacity(columns);
    let mean = number(tokens.get(i)?)?;
    i += 1;
    let (sd, used) = stddev(tokens, i);
    i += used;
    values.push(Value {
        mean,
        stddev_pct: sd,
        change: None,
    });
    for _ in 1..columns {
        let ch = change(tokens.get(i)?)?;
        let mean = number(tokens.get(i + 1)?)?;
        i += 2;
        let (sd, used) = stddev(tokens, i);
        i += used;
        values.push(Value {
            mean,
            stddev_pct: sd,
            change: Some(ch),
        });
    }
    let metric = tokens.get(i)?;
    if !is_metric(metric) {
        return None;
    }
    let row = Row {
        metric: metric.to_owned(),
        change_unit: change_unit(metric),
        values,
    };
    Some((row, i + 1))
}

/// The rows of a `%stddev %change` table whose header ends before token `i`: every row that
/// fits the grammar, up to the first token that cannot start one (the footer, an ASCII plot's
/// title, the next block).
pub(crate) fn rows(tokens: &Tokens<'_>, mut i: usize, columns: usize) -> (Vec<Row>, usize) {
    while tokens
        .get(i)
        .is_some_and(|t| t.chars().all(|c| c == '\\' || c == '|'))
    {
        i += 1;
    }
    let mut out = Vec::new();
    while let Some((row, next)) = row(tokens, i, columns) {
        out.push(row);
        i = next;
    }
    (out, i)
}

/// `6:30` → 6 failed of 30 runs; `:30` → none failed.
fn fail_runs(tok: &str) -> Option<FailRuns> {
    let (fail, runs) = tok.split_once(':')?;
    let runs = runs.parse().ok()?;
    let fail = if fail.is_empty() {
        0
    } else {
        fail.parse().ok()?
    };
    Some(FailRuns {
        fail,
        runs,
        reproduction_pct: None,
    })
}

/// A marker the robot prints after a failure's name to refer to it from the prose:
/// `<-------- (1)`.
fn is_annotation(tok: &str) -> bool {
    (tok.starts_with("<-") && tok.trim_start_matches('<').bytes().all(|b| b == b'-'))
        || (tok.starts_with('(') && tok.ends_with(')') && tok.len() > 2 && {
            tok[1..tok.len() - 1].bytes().all(|b| b.is_ascii_digit())
        })
}

fn failure(tokens: &Tokens<'_>, mut i: usize, columns: usize) -> Option<(Failure, usize)> {
    let mut out = vec![fail_runs(tokens.get(i)?)?];
    i += 1;
    for _ in 1..columns {
        // `%reproduction` is printed left of a column when that commit reproduces the failure
        // differently from the base.
        let reproduction = tokens
            .get(i)
            .filter(|t| t.ends_with('%'))
            .and_then(|t| percent(t).or_else(|| change(t)));
        if reproduction.is_some() {
            i += 1;
        }
        let mut column = fail_runs(tokens.get(i)?)?;
        column.reproduction_pct = reproduction;
        out.push(column);
        i += 1;
    }
    let metric = tokens.get(i)?;
    if fail_runs(metric).is_some() || metric == "%stddev" {
        return None;
    }
    i += 1;
    if tokens
        .get(i)
        .is_some_and(|t| t.starts_with("<-") && is_annotation(t))
    {
        i += 1;
        if tokens
            .get(i)
            .is_some_and(|t| t.starts_with('(') && is_annotation(t))
        {
            i += 1;
        }
    }
    Some((
        Failure {
            metric: metric.to_owned(),
            columns: out,
        },
        i,
    ))
}

/// The rows of a `fail:runs %reproduction fail:runs` table starting at token `i` (the first
/// `fail:runs`), and the token index after the last.
pub(crate) fn failures(tokens: &Tokens<'_>, mut i: usize, columns: usize) -> (Vec<Failure>, usize) {
    while tokens
        .get(i)
        .is_some_and(|t| t == "fail:runs" || t == "%reproduction" || t.chars().all(|c| c == '|'))
    {
        i += 1;
    }
    let mut out = Vec::new();
    while let Some((failure, next)) = failure(tokens, i, columns) {
        out.push(failure);
        i = next;
    }
    (out, i)
}

/// True when a line (quote marks removed) reads as one row of a comparison or failure table:
/// numbers, changes and `±` spreads, then the metric name last.
pub(crate) fn is_row_line(line: &str) -> bool {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let Some((metric, cells)) = tokens.split_last() else {
        return false;
    };
    let numeric = |t: &&str| {
        number(t).is_some()
            || change(t).is_some()
            || percent(t).is_some()
            || fail_runs(t).is_some()
            || PLUS_MINUS.contains(t)
            || PLUS_MINUS
                .iter()
                .any(|m| t.strip_prefix(m).and_then(percent).is_some())
    };
    cells.len() >= 2
        && is_metric(metric)
        && metric.contains(['.', ':'])
        && cells
            .first()
            .is_some_and(|t| number(t).is_some() || fail_runs(t).is_some())
        && cells.iter().all(numeric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lkplake_schemas::ChangeUnit;

    fn parse(text: &str, columns: usize) -> Vec<Row> {
        let tokens = Tokens::new(text);
        rows(&tokens, 0, columns).0
    }

    #[test]
    fn row_with_stddevs_and_percent_change() {
        let rows = parse(
            "5222 ± 19% -22.2% 4060 ± 16% numa-meminfo.node1.Active(anon)",
            2,
        );
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].metric, "numa-meminfo.node1.Active(anon)");
        assert_eq!(
            rows[0].values[0],
            Value {
                mean: 5222.0,
                stddev_pct: Some(19.0),
                change: None
            }
        );
        assert_eq!(
            rows[0].values[1],
            Value {
                mean: 4060.0,
                stddev_pct: Some(16.0),
                change: Some(-22.2)
            }
        );
        assert_eq!(rows[0].change_unit, ChangeUnit::Percent);
    }

    #[test]
    fn damaged_plus_minus_spellings_all_read_as_stddev() {
        for text in [
            "0.01 ±264% +1.0 1.06 ± 40% perf-profile.children.cycles-pp.run_ksoftirqd",
            "0.01 ?264% +1.0 1.06 ? 40% perf-profile.children.cycles-pp.run_ksoftirqd",
            "0.01 ą264% +1.0 1.06 ą 40% perf-profile.children.cycles-pp.run_ksoftirqd",
            "0.01 264% +1.0 1.06 40% perf-profile.children.cycles-pp.run_ksoftirqd",
        ] {
            let rows = parse(text, 2);
            assert_eq!(rows.len(), 1, "{text}");
            assert_eq!(rows[0].values[0].stddev_pct, Some(264.0), "{text}");
            assert_eq!(rows[0].values[1].stddev_pct, Some(40.0), "{text}");
            assert_eq!(rows[0].values[1].change, Some(1.0), "{text}");
            assert_eq!(rows[0].change_unit, ChangeUnit::Absolute);
        }
    }

    #[test]
    fn huge_changes_and_scientific_means() {
        let rows = parse("0.00 +1e+102% 2.352e+08 a.b 1.5 +1.2e+05% 1800 c.d", 2);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].values[1].change, Some(1e102));
        assert_eq!(rows[0].values[1].mean, 2.352e8);
        assert_eq!(rows[1].values[1].change, Some(1.2e5));
    }

    #[test]
    fn three_columns_compare_each_to_the_first() {
        let rows = parse(
            "100 +10.0% 110 ± 3% -5.0% 95 will-it-scale.per_thread_ops",
            3,
        );
        assert_eq!(rows.len(), 1);
        let changes: Vec<_> = rows[0].values.iter().map(|v| v.change).collect();
        assert_eq!(changes, vec![None, Some(10.0), Some(-5.0)]);
        assert_eq!(rows[0].values[1].stddev_pct, Some(3.0));
    }

    #[test]
    fn table_ends_at_a_plot_title_or_footer() {
        let rows = parse(
            "\\ | \\ 664655 +7.4% 713914 will-it-scale.per_process_ops will-it-scale.per_process_ops 720000 +-----+ Disclaimer:",
            2,
        );
        assert_eq!(rows.len(), 1);
    }

    #[test]
    fn failure_rows_with_and_without_reproduction() {
        let tokens = Tokens::new(
            "fail:runs %reproduction fail:runs | | | :6 33% 2:6 dmesg.BUG:kernel_NULL_pointer 1:6 -17% :6 kmsg.x %stddev",
        );
        let (failures, _) = failures(&tokens, 0, 2);
        assert_eq!(failures.len(), 2);
        assert_eq!(failures[0].metric, "dmesg.BUG:kernel_NULL_pointer");
        assert_eq!(
            failures[0].columns,
            vec![
                FailRuns {
                    fail: 0,
                    runs: 6,
                    reproduction_pct: None
                },
                FailRuns {
                    fail: 2,
                    runs: 6,
                    reproduction_pct: Some(33.0)
                }
            ]
        );
        assert_eq!(failures[1].columns[1].reproduction_pct, Some(-17.0));
    }
}
