//! The report parser: a pure function from one message's bytes to the reports it holds.
//!
//! Strategy: decode the message ([`crate::decode`]), split the body by quote depth (a reply's
//! own words never mix with the report it quotes), collapse each depth's text to single-spaced
//! tokens, and read the report from that token stream. Every format the robot used since 2019
//! and every kind of archive damage then reduces to one grammar: line breaks, indentation and
//! collapsed whitespace stop mattering.

mod prose;
pub(crate) mod table;

use crate::decode::{Document, decode};
use crate::error::ParseError;
use lkplake_schemas::key::report_key;
use lkplake_schemas::{Commit, Report, SCHEMA_VERSION, Source, Test};
use prose::{Prose, parse_axes};
use std::collections::BTreeMap;
use std::sync::LazyLock;
use table::Tokens;

/// What one message turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// One or more reports (usually one; a reply can also quote one).
    Reports(Vec<Report>),
    /// Not a performance report: a patch, a build-failure report, discussion, or a reply that
    /// quotes only a fragment of a report.
    NotAReport,
}

/// Parses one message.
pub fn parse_message(bytes: &[u8], source: &Source) -> Result<Parsed, ParseError> {
    parse_document(&decode(bytes), source)
}

/// Parses an already decoded message.
pub fn parse_document(doc: &Document, source: &Source) -> Result<Parsed, ParseError> {
    let streams = quote_streams(&doc.body);
    let mut reports: Vec<Report> = Vec::new();
    let mut first_error = None;
    for (depth, text) in &streams {
        if !text.contains("%stddev") {
            continue;
        }
        match parse_stream(text, *depth, doc, source) {
            Ok(report) => {
                if !reports.iter().any(|r| r.report_key == report.report_key) {
                    reports.push(report);
                }
            }
            // A reply that quotes a few rows of a table is discussion, not a broken report.
            Err(_) if *depth > 0 => {}
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    if let Some(e) = first_error {
        if reports.is_empty() {
            return Err(e);
        }
    }
    if !reports.is_empty() {
        return Ok(Parsed::Reports(reports));
    }
    let top = streams.iter().find(|(d, _)| *d == 0).map(|(_, t)| t.as_str()).unwrap_or("");
    if prose::announces_details(top) {
        return Err(ParseError::Truncated);
    }
    Ok(Parsed::NotAReport)
}

/// Splits a body by quote depth (`>`, `>>`, `> > >`), returning each depth's text collapsed to
/// single spaces, in order of first appearance.
fn quote_streams(body: &str) -> Vec<(usize, String)> {
    let mut streams: Vec<(usize, String)> = Vec::new();
    for line in body.lines() {
        let mut rest = line;
        let mut depth = 0;
        while let Some(r) = rest.trim_start_matches([' ', '\t']).strip_prefix('>') {
            depth += 1;
            rest = r;
        }
        let idx = match streams.iter().position(|(d, _)| *d == depth) {
            Some(i) => i,
            None => {
                streams.push((depth, String::new()));
                streams.len() - 1
            }
        };
        let text = &mut streams[idx].1;
        // Tokens made only of `>` are quote marks that survived a whitespace collapse.
        for tok in rest.split_whitespace().filter(|t| !t.bytes().all(|b| b == b'>')) {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(tok);
        }
    }
    streams
}

static STATS_HEADER: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"%stddev(?: %change %stddev)+").unwrap_or_else(|e| unreachable!("{e}"))
});

fn is_dash_rule(tok: &str) -> bool {
    tok.len() >= 6 && tok.bytes().all(|b| b == b'-')
}

/// One `Details are as below` block: parameter header, commit list and tables.
struct Detail {
    axes: Vec<(String, String)>,
    commits: Vec<Commit>,
    test: Test,
}

fn parse_stream(text: &str, depth: usize, doc: &Document, source: &Source) -> Result<Report, ParseError> {
    let tokens = Tokens::new(text);
    let mut details = Vec::new();
    let mut searched_from = 0;
    for header in STATS_HEADER.find_iter(text) {
        if header.start() < searched_from {
            continue;
        }
        let (detail, rows_end) = parse_detail(text, &tokens, searched_from, header)?;
        details.push(detail);
        searched_from = tokens.offsets.get(rows_end).copied().unwrap_or(text.len());
    }
    let first_axes = details
        .first()
        .map(|_| prose::first_axes_offset(text).unwrap_or(text.len()))
        .unwrap_or(text.len());
    let prose = Prose::read(&text[..first_axes], doc.subject.as_deref());

    let mut tests = Vec::with_capacity(details.len());
    let mut extra = prose.additional.iter();
    for (i, mut detail) in details.into_iter().enumerate() {
        if i == 0 {
            detail.test.machine = prose.machine.clone();
            detail.test.headline = prose.headline_for(&detail.test.rows);
        } else if let Some(entry) = extra.next() {
            detail.test.machine = entry.machine.clone();
            detail.test.headline = entry.headline_for(&detail.test.rows);
        }
        if i == 0 {
            tests.push((detail.commits, detail.test));
        } else {
            tests.push((Vec::new(), detail.test));
        }
        let _ = detail.axes;
    }
    let Some((main_commits, _)) = tests.first() else { return Err(ParseError::EmptyTable) };
    let base_commit = main_commits.first().cloned().ok_or(ParseError::MissingCommits)?;
    let last_commit = main_commits.last().cloned().ok_or(ParseError::MissingCommits)?;
    let commit = match &prose.commit {
        Some(c) if prefix_match(&c.id, &last_commit.id) => c.clone(),
        _ => last_commit,
    };
    let tests: Vec<Test> = tests.into_iter().map(|(_, t)| t).collect();
    let headline = tests.first().and_then(|t| t.headline.clone());
    let quoted = depth > 0;
    let date = if quoted { prose::attribution_date(&doc.body).or(doc.date) } else { doc.date }
        .or_else(|| prose::message_id_date(doc.message_id.as_deref().unwrap_or("")))
        .or(prose.id_stamp_date);
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        report_key: String::new(),
        message_id: doc.message_id.clone().or(prose.canonical_message_id.clone()),
        date,
        subject: doc.subject.clone(),
        kind: prose.kind,
        headline,
        commit,
        base_commit,
        branch: prose.branch.clone(),
        quoted,
        source: source.clone(),
        tests,
    };
    report.report_key = report_key(&report);
    Ok(report)
}

/// Ids printed at different lengths name the same commit when one is a prefix of the other.
fn prefix_match(a: &str, b: &str) -> bool {
    let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
    !a.is_empty() && !b.is_empty() && (a.starts_with(&b) || b.starts_with(&a))
}

/// Parses the block that ends with the stats header `header`, searching back no further than
/// `from`. Returns the detail and the token index after its last row.
fn parse_detail(
    text: &str,
    tokens: &Tokens<'_>,
    from: usize,
    header: regex::Match<'_>,
) -> Result<(Detail, usize), ParseError> {
    let block = &text[from..header.start()];
    let axes_at = prose::last_axes_offset(block).ok_or(ParseError::MissingAxes)? + from;
    let axes_tok = tokens.index_at(axes_at);
    let header_tok = tokens.index_at(header.start());
    let (axes, after_axes) = parse_axes(tokens, axes_tok, header_tok, block)?;

    let commit_tok = (after_axes..header_tok)
        .find(|&i| tokens.get(i) == Some("commit:"))
        .ok_or(ParseError::MissingCommits)?;
    let dash_tok = (commit_tok..header_tok)
        .find(|&i| tokens.get(i).is_some_and(is_dash_rule))
        .ok_or(ParseError::MissingCommits)?;
    let columns = (dash_tok..header_tok).take_while(|&i| tokens.get(i).is_some_and(is_dash_rule)).count();
    let header_columns = header.as_str().matches("%stddev").count();
    if header_columns != columns {
        return Err(ParseError::ColumnMismatch { columns: header_columns, commits: columns });
    }
    let list_start = tokens.offsets[commit_tok] + "commit:".len();
    let titles_start = dash_tok.saturating_sub(columns).max(commit_tok + 1);
    let with_titles = prose::commit_list(&text[list_start..tokens.offsets[titles_start]]);
    let titles = &tokens.tokens[titles_start..dash_tok];
    let commits = if with_titles.len() == columns
        && titles.iter().zip(&with_titles).all(|(t, c)| prefix_match(t, &c.id))
    {
        with_titles
    } else {
        prose::commit_list(&text[list_start..tokens.offsets[dash_tok]])
    };
    if commits.is_empty() {
        return Err(ParseError::MissingCommits);
    }
    if commits.len() != columns {
        return Err(ParseError::ColumnMismatch { columns, commits: commits.len() });
    }

    let failures = (dash_tok + columns..header_tok)
        .find(|&i| tokens.get(i) == Some("fail:runs"))
        .map(|i| table::failures(tokens, i, columns))
        .unwrap_or_default();
    let stats_end = tokens.index_at(header.end());
    let (rows, rows_end) = table::rows(tokens, stats_end, columns);
    if rows.is_empty() {
        return Err(ParseError::EmptyTable);
    }

    let mut params: BTreeMap<String, String> = axes.iter().cloned().collect();
    let testcase = params.remove("testcase").ok_or(ParseError::MissingTestIdentity)?;
    let tbox_group = params.remove("tbox_group").ok_or(ParseError::MissingTestIdentity)?;
    let test = Test {
        testcase,
        tbox_group,
        machine: Default::default(),
        params,
        headline: None,
        commits: commits.iter().map(|c| c.id.clone()).collect(),
        rows,
        failures,
    };
    Ok((Detail { axes, commits, test }, rows_end))
}
