//! The report parser: a pure function from one message's bytes to the reports it holds.
//!
//! Strategy: decode the message ([`crate::decode`]), split the body by quote depth (a reply's
//! own words never mix with the report it quotes), collapse each depth's text to single-spaced
//! tokens, and read the report from that token stream. Every format the robot used since 2019
//! and every kind of archive damage then reduces to one grammar: line breaks, indentation and
//! collapsed whitespace stop mattering.

mod mention;
mod prose;
pub(crate) mod table;

use crate::decode::{Document, decode};
use crate::error::ParseError;
use lkplake_schemas::key::report_key;
use lkplake_schemas::{
    Commit, Headline, Kind, Mention, Message, Report, SCHEMA_VERSION, Source, Test,
};
use prose::{Prose, parse_axes};
use std::collections::BTreeMap;
use std::sync::LazyLock;
use table::Tokens;

/// The partition value of `machine` for a functional report that prints no parameter header
/// (its test box group is not named anywhere in the mail).
pub const UNKNOWN_MACHINE: &str = "unknown";

/// What one message turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// One or more reports (usually one; a reply can also quote one).
    Reports(Vec<Report>),
    /// A mail that cites a report without carrying its full table: a reply that quotes its
    /// opening sentence or some of its rows, or the report itself cut before its tables.
    /// `reports` holds the complete tables a reply quotes, if any (copies, recognised by
    /// their key).
    Mention {
        /// The mail and what it cites.
        mention: Box<Mention>,
        /// Reports the mail quotes whole.
        reports: Vec<Report>,
    },
    /// Not a report and not a reply that cites one: a patch, a build-failure report,
    /// discussion.
    NotAReport,
}

impl Parsed {
    /// What the mail puts on the report topic: its reports, then its mention; nothing for a
    /// mail that is neither.
    pub fn into_messages(self) -> Vec<Message> {
        let (reports, mention) = match self {
            Parsed::Reports(reports) => (reports, None),
            Parsed::Mention { mention, reports } => (reports, Some(mention)),
            Parsed::NotAReport => (Vec::new(), None),
        };
        reports
            .into_iter()
            .map(|r| Message::Report(Box::new(r)))
            .chain(mention.map(Message::Mention))
            .collect()
    }
}

/// Parses one message. Mail that the byte-level [`crate::prefilter`] settles is not decoded:
/// most list mail is not a report, and decoding costs more than parsing.
pub fn parse_message(bytes: &[u8], source: &Source) -> Result<Parsed, ParseError> {
    if crate::prefilter::settles_as_not_a_report(bytes) {
        return Ok(Parsed::NotAReport);
    }
    parse_document(&decode(bytes), source)
}

/// Parses an already decoded message.
pub fn parse_document(doc: &Document, source: &Source) -> Result<Parsed, ParseError> {
    // Most mail on a list is not a report: one substring scan settles it before any
    // allocation.
    if !crate::prefilter::has_marker(doc.body.as_bytes()) {
        return not_a_report(doc);
    }
    let streams = quote_streams(&doc.body);
    // `commit:` lines of every depth: a follow-up that quotes the report names its commit
    // only in the quoted part.
    let commit_lines: Vec<Commit> = streams
        .iter()
        .filter_map(|(_, text)| prose::commit_line(text))
        .collect();
    let mut reports: Vec<Report> = Vec::new();
    let mut first_error = None;
    for (depth, text) in &streams {
        if !text.contains("%stddev") && !text.contains("fail:runs") {
            continue;
        }
        match parse_stream(text, *depth, doc, source, &commit_lines) {
            Ok(None) => {}
            Ok(Some(report)) => {
                if !reports.iter().any(|r| r.report_key == report.report_key) {
                    reports.push(report);
                }
            }
            // A reply that quotes a few rows of a table is discussion, not a broken report.
            Err(_) if *depth > 0 => {}
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    if let Some(e) = first_error
        && reports.is_empty()
    {
        return Err(e);
    }
    // A mail with a report of its own is that report; one that only quotes is a reply.
    if reports.iter().any(|r| !r.quoted) {
        return Ok(Parsed::Reports(reports));
    }
    if let Some(mention) = mention::read(doc, &streams, source) {
        return Ok(Parsed::Mention {
            mention: Box::new(mention),
            reports,
        });
    }
    if !reports.is_empty() {
        return Ok(Parsed::Reports(reports));
    }
    let top = streams
        .iter()
        .find(|(d, _)| *d == 0)
        .map(|(_, t)| t.as_str())
        .unwrap_or("");
    // The robot's own report cut before its tables (an archive excerpt, a truncated copy):
    // what it still says about the report is kept, citing it.
    if prose::announces_details(top) {
        return Ok(Parsed::Mention {
            mention: Box::new(mention::excerpt(doc, top, source)),
            reports: Vec::new(),
        });
    }
    not_a_report(doc)
}

/// Mail that is no report is skipped; input that is not even mail is an error, so a wrong
/// file fed by mistake reaches the dead-letter topic instead of vanishing.
fn not_a_report(doc: &Document) -> Result<Parsed, ParseError> {
    if doc.is_binary {
        Err(ParseError::Binary)
    } else if doc.is_mail || doc.body.trim().is_empty() {
        Ok(Parsed::NotAReport)
    } else {
        Err(ParseError::Unrecognized)
    }
}

/// A line's quote depth (`>`, `>>`, `> > >`) and what follows its quote marks.
fn unquote(line: &str) -> (usize, &str) {
    let mut rest = line;
    let mut depth = 0;
    while let Some(r) = rest.trim_start_matches([' ', '\t']).strip_prefix('>') {
        depth += 1;
        rest = r;
    }
    (depth, rest)
}

/// Splits a body by quote depth (`>`, `>>`, `> > >`), returning each depth's text collapsed to
/// single spaces, in order of first appearance.
fn quote_streams(body: &str) -> Vec<(usize, String)> {
    let mut streams: Vec<(usize, String)> = Vec::new();
    for line in body.lines() {
        let (depth, rest) = unquote(line);
        let idx = match streams.iter().position(|(d, _)| *d == depth) {
            Some(i) => i,
            None => {
                streams.push((depth, String::new()));
                streams.len() - 1
            }
        };
        let text = &mut streams[idx].1;
        // Tokens made only of `>` are quote marks that survived a whitespace collapse.
        for tok in rest
            .split_whitespace()
            .filter(|t| !t.bytes().all(|b| b == b'>'))
        {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(tok);
        }
    }
    streams
}

/// The header of a comparison table (`%stddev %change %stddev`) or of a failure table
/// (`fail:runs %reproduction fail:runs`), one `%stddev` or `fail:runs` per commit column.
static TABLE_HEADER: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"%stddev(?: %change %stddev)+|fail:runs(?: %reproduction fail:runs)+")
        .unwrap_or_else(|e| unreachable!("{e}"))
});

const CONTINUATION: &str = "more details following above table FYI>";

fn is_dash_rule(tok: &str) -> bool {
    tok.len() >= 6 && tok.bytes().all(|b| b == b'-')
}

/// One comparison table with the test it belongs to, when its block names one.
struct Detail {
    /// `None` for a table printed without a parameter header (a follow-up's extra
    /// measurement of the same test).
    test: Option<Test>,
    commits: Vec<Commit>,
    rows: Vec<lkplake_schemas::Row>,
    failures: Vec<lkplake_schemas::Failure>,
}

/// Reads the report in one quote depth's text. `None` when its tables carry no parameter
/// header at all: a follow-up's fragment that names no test cannot be placed in a series.
fn parse_stream(
    text: &str,
    depth: usize,
    doc: &Document,
    source: &Source,
    commit_lines: &[Commit],
) -> Result<Option<Report>, ParseError> {
    let tokens = Tokens::new(text);
    let mut details = Vec::new();
    let mut searched_from = 0;
    let headers: Vec<regex::Match<'_>> = TABLE_HEADER.find_iter(text).collect();
    for (i, header) in headers.iter().enumerate() {
        if header.start() < searched_from {
            continue;
        }
        let failures_only = header.as_str().starts_with("fail:runs");
        // A failure block printed inside a comparison table, between its dash rule and its
        // `%stddev` header, is read with that table.
        if failures_only
            && let Some(next) = headers.get(i + 1)
            && !next.as_str().starts_with("fail:runs")
            && !text[header.end()..next.start()]
                .split(' ')
                .any(is_dash_rule)
        {
            continue;
        }
        let (detail, rows_end) = parse_detail(text, &tokens, searched_from, *header)?;
        details.push(detail);
        searched_from = tokens.offsets.get(rows_end).copied().unwrap_or(text.len());
    }
    let functional = details.iter().all(|d| d.rows.is_empty());
    // A functional report without a parameter header still names its suite.
    if functional && let Some(testcase) = prose::testcase_line(text) {
        for detail in details.iter_mut().filter(|d| d.test.is_none()) {
            detail.test = Some(Test {
                testcase: testcase.to_owned(),
                tbox_group: UNKNOWN_MACHINE.to_owned(),
                machine: Default::default(),
                params: BTreeMap::new(),
                headline: None,
                commits: detail.commits.iter().map(|c| c.id.clone()).collect(),
                rows: Vec::new(),
                failures: Vec::new(),
            });
        }
    }
    let (mut tests, orphans): (Vec<Detail>, Vec<Detail>) =
        details.into_iter().partition(|d| d.test.is_some());
    // A table without a parameter header measures the same test again (perf-c2c data, one
    // more commit): its rows join the test that compares the same commits.
    for orphan in orphans {
        let same = tests.iter_mut().find(|t| {
            t.commits.len() == orphan.commits.len()
                && t.commits
                    .iter()
                    .zip(&orphan.commits)
                    .all(|(a, b)| prefix_match(&a.id, &b.id))
        });
        if let Some(test) = same {
            extend_unique(&mut test.rows, orphan.rows, |r| r.metric.clone());
            extend_unique(&mut test.failures, orphan.failures, |f| f.metric.clone());
        }
    }
    let Some(main) = tests.first() else {
        return Ok(None);
    };
    let base_commit = main
        .commits
        .first()
        .cloned()
        .ok_or(ParseError::MissingCommits)?;
    let last_commit = main
        .commits
        .last()
        .cloned()
        .ok_or(ParseError::MissingCommits)?;

    // A functional report may print its table before the opening sentence.
    let first_axes = if functional {
        text.len()
    } else {
        prose::first_axes_offset(text).unwrap_or(text.len())
    };
    let prose = Prose::read(&text[..first_axes], doc.subject.as_deref());
    let (commit, column) =
        commit_of_report(&prose, doc, commit_lines, &main.commits).unwrap_or((last_commit, 1));
    let mut extra = prose.additional.iter();
    let mut merged: Vec<Test> = Vec::with_capacity(tests.len());
    for (i, detail) in tests.into_iter().enumerate() {
        let Some(mut test) = detail.test else {
            continue;
        };
        test.rows = detail.rows;
        test.failures = detail.failures;
        if i == 0 {
            test.machine = prose.machine.clone();
            test.headline = if functional {
                prose::stated_failure(text).and_then(|f| failure_headline(&test, f, column))
            } else {
                prose.headline_for(&test.rows, column)
            };
        } else if let Some(entry) = extra.next() {
            test.machine = entry.machine.clone();
            test.headline = entry.headline_for(&test.rows, column);
        }
        // The same test over the same commits printed twice (an excerpt in the body, the full
        // table attached) is one measurement.
        match merged.iter_mut().find(|t| same_test(t, &test)) {
            Some(existing) => merge_rows(existing, test),
            None => merged.push(test),
        }
    }
    let tests = merged;
    let headline = tests.first().and_then(|t| t.headline.clone());
    let quoted = depth > 0;
    let date = if quoted {
        prose::attribution_date(&doc.body).or(doc.date)
    } else {
        doc.date
    }
    .or_else(|| prose::message_id_date(doc.message_id.as_deref().unwrap_or("")))
    .or(prose.id_stamp_date);
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        report_key: String::new(),
        message_id: doc
            .message_id
            .clone()
            .or(prose.canonical_message_id.clone()),
        date,
        subject: doc.subject.clone(),
        kind: if functional {
            prose::stated_failure(text).map(|_| Kind::Failure)
        } else {
            prose.kind
        },
        headline,
        commit,
        base_commit,
        branch: prose.branch.clone(),
        quoted,
        source: source.clone(),
        tests,
    };
    report.report_key = report_key(&report);
    Ok(Some(report))
}

/// The commit a report is about and its column: its `commit:` line, else its subject's id,
/// else a `commit:` line quoted at another depth (a follow-up that quotes the report), each
/// only when it names one of the columns. `None` leaves the last column.
fn commit_of_report(
    prose: &Prose,
    doc: &Document,
    commit_lines: &[Commit],
    columns: &[Commit],
) -> Option<(Commit, usize)> {
    let column_of = |id: &str| columns.iter().position(|c| prefix_match(&c.id, id));
    let subject = doc
        .subject
        .as_deref()
        .and_then(prose::subject_commit)
        .map(|id| Commit {
            id: id.to_owned(),
            title: None,
        });
    let candidates: Vec<&Commit> = prose
        .commit
        .iter()
        .chain(subject.iter())
        .chain(commit_lines)
        .collect();
    let column = candidates.iter().find_map(|c| column_of(&c.id))?;
    // Every spelling of that commit: the longest id, and a title if any has one.
    let listed = &columns[column];
    let spellings: Vec<&Commit> = candidates
        .into_iter()
        .filter(|c| prefix_match(&c.id, &listed.id))
        .chain([listed])
        .collect();
    let id = spellings
        .iter()
        .map(|c| c.id.as_str())
        .max_by_key(|id| id.len())
        .unwrap_or(listed.id.as_str())
        .to_owned();
    let title = spellings.iter().find_map(|c| c.title.clone());
    Some((Commit { id, title }, column))
}

/// A functional report's headline: the failure its opening names (the table may prefix it,
/// `dmesg.`), with the reproduction printed for the commit the report is about.
fn failure_headline(test: &Test, stated: &str, column: usize) -> Option<Headline> {
    let failure = test.failures.iter().find(|f| {
        f.metric == stated
            || f.metric
                .strip_suffix(stated)
                .is_some_and(|prefix| prefix.ends_with('.'))
    })?;
    Some(Headline {
        metric: failure.metric.clone(),
        change_pct: failure.columns.get(column)?.reproduction_pct?,
    })
}

fn same_test(a: &Test, b: &Test) -> bool {
    a.testcase == b.testcase
        && a.tbox_group == b.tbox_group
        && a.params == b.params
        && a.commits.len() == b.commits.len()
        && a.commits
            .iter()
            .zip(&b.commits)
            .all(|(x, y)| prefix_match(x, y))
}

fn merge_rows(into: &mut Test, from: Test) {
    extend_unique(&mut into.rows, from.rows, |r| r.metric.clone());
    extend_unique(&mut into.failures, from.failures, |f| f.metric.clone());
    if into.headline.is_none() {
        into.headline = from.headline;
    }
}

/// Appends the items whose key is new: never two values for one metric of one test, and the
/// first table printed wins.
fn extend_unique<T>(into: &mut Vec<T>, from: Vec<T>, key: impl Fn(&T) -> String) {
    let mut seen: std::collections::HashSet<String> = into.iter().map(&key).collect();
    for item in from {
        if seen.insert(key(&item)) {
            into.push(item);
        }
    }
}

/// Ids printed at different lengths name the same commit when one is a prefix of the other.
fn prefix_match(a: &str, b: &str) -> bool {
    let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
    !a.is_empty() && !b.is_empty() && (a.starts_with(&b) || b.starts_with(&a))
}

/// Parses the table whose stats header is `header`, reading its block back to no further
/// than byte `from`: the dash rule under the column titles, the optional failure table, the
/// optional `commit:` list and the optional parameter header. Returns the detail and the token
/// index after its last row.
fn parse_detail(
    text: &str,
    tokens: &Tokens<'_>,
    from: usize,
    header: regex::Match<'_>,
) -> Result<(Detail, usize), ParseError> {
    let block_tok = tokens.index_at(from);
    let header_tok = tokens.index_at(header.start());
    let failures_only = header.as_str().starts_with("fail:runs");
    let columns = if failures_only {
        header.as_str().matches("fail:runs").count()
    } else {
        header.as_str().matches("%stddev").count()
    };
    // The dash rule: the last run of exactly `columns` dash tokens before the header.
    let dash_tok = (block_tok..header_tok)
        .rev()
        .find(|&i| {
            (i..i + columns).all(|j| tokens.get(j).is_some_and(is_dash_rule))
                && !tokens.get(i + columns).is_some_and(is_dash_rule)
                && !(i > 0 && tokens.get(i - 1).is_some_and(is_dash_rule))
        })
        .ok_or(ParseError::MissingCommits)?;
    let titles_tok = dash_tok
        .checked_sub(columns)
        .filter(|&t| t >= block_tok)
        .ok_or(ParseError::MissingCommits)?;
    let titles = &tokens.tokens[titles_tok..dash_tok];

    let block = &text[from..tokens.offsets[titles_tok]];
    let axes = match prose::last_axes_offset(block) {
        Some(at) => {
            let axes_tok = tokens.index_at(at + from);
            Some(parse_axes(tokens, axes_tok, titles_tok)?)
        }
        None => None,
    };
    let list_from = axes.as_ref().map_or(block_tok, |(_, next)| *next);
    let listed = (list_from..titles_tok)
        .rev()
        .find(|&i| tokens.get(i) == Some("commit:"))
        .map(|i| {
            prose::commit_list(
                &text[tokens.offsets[i] + "commit:".len()..tokens.offsets[titles_tok]],
            )
        })
        .unwrap_or_default();
    // Column titles are the authority on which commits the columns hold; the `commit:` list
    // adds the printed ids and titles (and may carry notes such as `<--- v2`).
    let commits: Vec<Commit> = titles
        .iter()
        .map(|t| {
            listed
                .iter()
                .find(|c| prefix_match(t, &c.id) && c.id.len().min(t.len()) >= 4)
                .cloned()
                .unwrap_or_else(|| Commit {
                    id: (*t).to_owned(),
                    title: None,
                })
        })
        .collect();

    if failures_only {
        let (failures, end) = table::failures(tokens, header_tok, columns);
        if failures.is_empty() {
            return Err(ParseError::EmptyTable);
        }
        let test = test_of(axes, &commits)?;
        let detail = Detail {
            test,
            commits,
            rows: Vec::new(),
            failures,
        };
        return Ok((detail, end));
    }
    let failures = (dash_tok + columns..header_tok)
        .find(|&i| tokens.get(i) == Some("fail:runs"))
        .map(|i| table::failures(tokens, i, columns).0)
        .unwrap_or_default();
    let stats_end = tokens.index_at(header.end());
    let (mut rows, mut rows_end) = table::rows(tokens, stats_end, columns);
    // Some reports print a short table, the footer, then the rest of the same table under
    // `<below more details following above table FYI>`.
    if let Some(more) = text[tokens.offsets.get(rows_end).copied().unwrap_or(text.len())..]
        .find(CONTINUATION)
        .filter(|&at| at < 2048)
    {
        let at =
            tokens.offsets.get(rows_end).copied().unwrap_or(text.len()) + more + CONTINUATION.len();
        let (more_rows, end) = table::rows(tokens, tokens.index_at(at), columns);
        extend_unique(&mut rows, more_rows, |r| r.metric.clone());
        rows_end = end;
    }
    if rows.is_empty() {
        return Err(ParseError::EmptyTable);
    }

    let test = test_of(axes, &commits)?;
    Ok((
        Detail {
            test,
            commits,
            rows,
            failures,
        },
        rows_end,
    ))
}

/// The test a parameter header names, if the table has one.
fn test_of(
    axes: Option<(Vec<(String, String)>, usize)>,
    commits: &[Commit],
) -> Result<Option<Test>, ParseError> {
    Ok(match axes {
        Some((pairs, _)) => {
            let mut params: BTreeMap<String, String> = pairs.into_iter().collect();
            let testcase = params
                .remove("testcase")
                .ok_or(ParseError::MissingTestIdentity)?;
            let tbox_group = params
                .remove("tbox_group")
                .ok_or(ParseError::MissingTestIdentity)?;
            Some(Test {
                testcase,
                tbox_group,
                machine: Default::default(),
                params,
                headline: None,
                commits: commits.iter().map(|c| c.id.clone()).collect(),
                rows: Vec::new(),
                failures: Vec::new(),
            })
        }
        None => None,
    })
}
