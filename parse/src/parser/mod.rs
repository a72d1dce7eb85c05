//! The report parser: a pure function from one message's bytes to the reports it holds.
//!
//! Strategy: decode the message ([`crate::decode`]), split the body by quote depth (a reply's
//! own words never mix with the report it quotes), collapse each depth's text to single-spaced
//! tokens, and read the report from that token stream. Every format the robot used since 2019
//! and every kind of archive damage then reduces to one grammar: line breaks, indentation and
//! collapsed whitespace stop mattering.

pub mod links;
mod mention;
mod prose;
pub(crate) mod table;

use crate::decode::{Document, decode};
use crate::error::ParseError;
use lkplake_schemas::key::report_key;
use lkplake_schemas::{
    Commit, Headline, Kind, Link, Mention, Message, Report, SCHEMA_VERSION, Source, Test,
};
use prose::{Prose, parse_axes};
use std::collections::{BTreeMap, HashMap, HashSet};
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
        /// What the mail's own text says of a report, its culprit or its fix (a patch sent
        /// in reply to a report, quoting its opening, with a `Closes:` trailer).
        links: Vec<Link>,
    },
    /// A mail that is no report and cites none, yet names one, its culprit or its fix: a
    /// patch with a `Closes:` or `Fixes:` trailer, a revert, an applied notice.
    Links(Vec<Link>),
    /// Not a report and not a reply that cites one: a patch, a build-failure report,
    /// discussion.
    NotAReport,
}

impl Parsed {
    /// What the mail puts on the report topic: its reports, then its mention, then its
    /// links; nothing for a mail that is none of them.
    pub fn into_messages(self) -> Vec<Message> {
        let (reports, mention, links) = match self {
            Parsed::Reports(reports) => (reports, None, Vec::new()),
            Parsed::Mention {
                mention,
                reports,
                links,
            } => (reports, Some(mention), links),
            Parsed::Links(links) => (Vec::new(), None, links),
            Parsed::NotAReport => (Vec::new(), None, Vec::new()),
        };
        reports
            .into_iter()
            .map(|r| Message::Report(Box::new(r)))
            .chain(mention.map(Message::Mention))
            .chain(links.into_iter().map(|l| Message::Link(Box::new(l))))
            .collect()
    }
}

/// Parses one message. Mail that the byte-level [`crate::prefilter`] settles is not decoded:
/// most list mail is neither a report nor a link, and decoding costs more than parsing.
pub fn parse_message(bytes: &[u8], source: &Source) -> Result<Parsed, ParseError> {
    use crate::prefilter::{Plain, read_plain, read_raw};
    match read_plain(bytes, read_raw(bytes)) {
        Plain::Settled => Ok(Parsed::NotAReport),
        Plain::Links(body) => parse_links(bytes, body, source),
        Plain::Decode => parse_document(&decode(bytes), source),
    }
}

/// Parses a plain mail that holds no report, only maybe links, from its raw bytes and its
/// body's text ([`crate::prefilter::Plain::Links`]): only its header fields are decoded.
pub fn parse_links(bytes: &[u8], body: String, source: &Source) -> Result<Parsed, ParseError> {
    let Some(doc) = crate::decode::decode_headers(bytes, body) else {
        return parse_document(&decode(bytes), source);
    };
    let links = links::links(&doc, source);
    Ok(if links.is_empty() {
        Parsed::NotAReport
    } else {
        Parsed::Links(links)
    })
}

/// Parses an already decoded message.
pub fn parse_document(doc: &Document, source: &Source) -> Result<Parsed, ParseError> {
    // Most mail on a list is not a report: one substring scan settles it before any
    // allocation.
    if !crate::prefilter::has_marker(doc.body.as_bytes()) {
        return not_a_report(doc, source);
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
            links: links::links(doc, source),
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
            links: Vec::new(),
        });
    }
    not_a_report(doc, source)
}

/// Mail that is no report keeps only the links it makes; input that is not even mail is an
/// error, so a wrong file fed by mistake reaches the dead-letter topic instead of vanishing.
fn not_a_report(doc: &Document, source: &Source) -> Result<Parsed, ParseError> {
    if doc.is_mail {
        let links = links::links(doc, source);
        if !links.is_empty() {
            return Ok(Parsed::Links(links));
        }
    }
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

/// How far after a table's last row its continuation may start.
const CONTINUATION_WITHIN: usize = 2048;

/// Where [`CONTINUATION`] starts after byte `from`, when it starts within
/// [`CONTINUATION_WITHIN`] bytes. Only that window is searched: searching the rest of the text
/// after every table made a mail of many tables quadratic.
fn continuation_at(text: &str, from: usize) -> Option<usize> {
    let rest = text.as_bytes().get(from..).unwrap_or_default();
    let window = rest
        .get(..CONTINUATION_WITHIN + CONTINUATION.len())
        .unwrap_or(rest);
    memchr::memmem::find(window, CONTINUATION.as_bytes()).filter(|&at| at < CONTINUATION_WITHIN)
}

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
    adopt_orphans(&mut tests, orphans);
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
    let width = key_width(
        tests
            .iter()
            .filter_map(|d| d.test.as_ref())
            .flat_map(|t| t.commits.iter().map(String::as_str)),
    );
    let mut merged = MergedTests::new(width, tests.len());
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
        merged.add(test);
    }
    let tests = merged.tests;
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
        && same_commits(
            a.commits.iter().map(String::as_str),
            b.commits.iter().map(String::as_str),
        )
}

/// Whether two tables' columns hold the same commits, column by column (see [`prefix_match`]).
fn same_commits<'a>(
    a: impl ExactSizeIterator<Item = &'a str>,
    b: impl ExactSizeIterator<Item = &'a str>,
) -> bool {
    a.len() == b.len() && a.zip(b).all(|(x, y)| prefix_match(x, y))
}

/// The most of each commit id a key may hold: the length of the shortest id. Two ids that
/// [`prefix_match`] agree, ignoring ASCII case, on as many bytes as the shorter one has, so on
/// this many; keys cut to it therefore never separate commits the comparison would match.
fn key_width<'a>(ids: impl Iterator<Item = &'a str>) -> usize {
    ids.map(str::len).min().unwrap_or(0)
}

/// A table's columns as a hash key: their number and each id's first `width` bytes,
/// lowercased. Equal keys are necessary for [`same_commits`] but not sufficient (a prefix
/// relation is not an equivalence, so it cannot be hashed exactly): a lookup finds the only
/// candidates, and each is still compared with [`same_commits`].
#[derive(Debug, PartialEq, Eq, Hash)]
struct CommitsKey {
    count: usize,
    /// Each id's first `width` bytes, one after another (every id has at least `width`).
    prefixes: Vec<u8>,
}

impl CommitsKey {
    fn new<'a>(ids: impl Iterator<Item = &'a str>, width: usize) -> Self {
        let mut count = 0;
        let mut prefixes = Vec::new();
        for id in ids {
            count += 1;
            let head = id.as_bytes().get(..width).unwrap_or(id.as_bytes());
            prefixes.extend(head.iter().map(u8::to_ascii_lowercase));
        }
        Self { count, prefixes }
    }
}

/// What [`same_test`] compares, normalized once per test: the fields it compares exactly and
/// the [`CommitsKey`] of its columns.
#[derive(Debug, PartialEq, Eq, Hash)]
struct TestKey {
    testcase: String,
    tbox_group: String,
    params: BTreeMap<String, String>,
    commits: CommitsKey,
}

impl TestKey {
    fn of(test: &Test, width: usize) -> Self {
        Self {
            testcase: test.testcase.clone(),
            tbox_group: test.tbox_group.clone(),
            params: test.params.clone(),
            commits: CommitsKey::new(test.commits.iter().map(String::as_str), width),
        }
    }
}

/// The metrics a test's rows and failures hold, so that a merge checks each new row in
/// constant time instead of collecting the test's metrics again.
#[derive(Debug, Default)]
struct Metrics {
    rows: HashSet<String>,
    failures: HashSet<String>,
}

impl Metrics {
    fn of(rows: &[lkplake_schemas::Row], failures: &[lkplake_schemas::Failure]) -> Self {
        Self {
            rows: rows.iter().map(|r| r.metric.clone()).collect(),
            failures: failures.iter().map(|f| f.metric.clone()).collect(),
        }
    }
}

/// A report's tests in the order first printed, a test printed again merged into its first
/// printing. Each test is found by its [`TestKey`], not by a scan of the tests before it: a
/// mail of thousands of tables merges in linear time, where the scan (with lowercase copies
/// of the ids per comparison) was quadratic.
struct MergedTests {
    tests: Vec<Test>,
    /// Indices into `tests`, by key, in print order: the first in a bucket that is
    /// [`same_test`] is the first in `tests`, as the scan found it.
    by_key: HashMap<TestKey, Vec<usize>>,
    /// Each test's [`Metrics`], made at its first merge: most tests are printed once.
    metrics: Vec<Option<Metrics>>,
    /// See [`key_width`]: the shortest commit id of every test to be added.
    width: usize,
}

impl MergedTests {
    fn new(width: usize, capacity: usize) -> Self {
        Self {
            tests: Vec::with_capacity(capacity),
            by_key: HashMap::with_capacity(capacity),
            metrics: Vec::with_capacity(capacity),
            width,
        }
    }

    /// Adds a test, or merges it into the first test added that is the same.
    fn add(&mut self, test: Test) {
        let Self {
            tests,
            by_key,
            metrics,
            width,
        } = self;
        let bucket = by_key.entry(TestKey::of(&test, *width)).or_default();
        let same = bucket
            .iter()
            .copied()
            .find(|&i| same_test(&tests[i], &test));
        match same {
            Some(i) => {
                let into = &mut tests[i];
                let seen =
                    metrics[i].get_or_insert_with(|| Metrics::of(&into.rows, &into.failures));
                merge_rows(into, test, seen);
            }
            None => {
                bucket.push(tests.len());
                tests.push(test);
                metrics.push(None);
            }
        }
    }
}

/// A table without a parameter header measures the same test again (perf-c2c data, one more
/// commit): its rows join the first test that compares the same commits, found by its
/// [`CommitsKey`] rather than a scan of every test per table.
fn adopt_orphans(tests: &mut [Detail], orphans: Vec<Detail>) {
    if orphans.is_empty() {
        return;
    }
    let width = key_width(
        tests
            .iter()
            .chain(&orphans)
            .flat_map(|d| d.commits.iter().map(|c| c.id.as_str())),
    );
    let mut by_key: HashMap<CommitsKey, Vec<usize>> = HashMap::new();
    for (i, test) in tests.iter().enumerate() {
        let key = CommitsKey::new(test.commits.iter().map(|c| c.id.as_str()), width);
        by_key.entry(key).or_default().push(i);
    }
    let mut metrics: Vec<Option<Metrics>> = (0..tests.len()).map(|_| None).collect();
    for orphan in orphans {
        let key = CommitsKey::new(orphan.commits.iter().map(|c| c.id.as_str()), width);
        let same = by_key.get(&key).and_then(|bucket| {
            bucket.iter().copied().find(|&i| {
                same_commits(
                    tests[i].commits.iter().map(|c| c.id.as_str()),
                    orphan.commits.iter().map(|c| c.id.as_str()),
                )
            })
        });
        let Some(i) = same else { continue };
        let test = &mut tests[i];
        let seen = metrics[i].get_or_insert_with(|| Metrics::of(&test.rows, &test.failures));
        extend_new(&mut test.rows, orphan.rows, &mut seen.rows, |r| {
            r.metric.as_str()
        });
        extend_new(
            &mut test.failures,
            orphan.failures,
            &mut seen.failures,
            |f| f.metric.as_str(),
        );
    }
}

/// Merges a test printed again into its first printing; `seen` holds `into`'s metrics.
fn merge_rows(into: &mut Test, from: Test, seen: &mut Metrics) {
    extend_new(&mut into.rows, from.rows, &mut seen.rows, |r| {
        r.metric.as_str()
    });
    extend_new(&mut into.failures, from.failures, &mut seen.failures, |f| {
        f.metric.as_str()
    });
    if into.headline.is_none() {
        into.headline = from.headline;
    }
}

/// Appends the items whose key `seen` does not hold yet, and records their keys: never two
/// values for one metric of one test, and the first table printed wins. `seen` must hold the
/// keys of `into`.
fn extend_new<T>(
    into: &mut Vec<T>,
    from: Vec<T>,
    seen: &mut HashSet<String>,
    key: impl Fn(&T) -> &str,
) {
    for item in from {
        if !seen.contains(key(&item)) {
            seen.insert(key(&item).to_owned());
            into.push(item);
        }
    }
}

/// Appends the items whose key is new: never two values for one metric of one test, and the
/// first table printed wins.
fn extend_unique<T>(into: &mut Vec<T>, from: Vec<T>, key: impl Fn(&T) -> String) {
    let mut seen: HashSet<String> = into.iter().map(&key).collect();
    for item in from {
        if seen.insert(key(&item)) {
            into.push(item);
        }
    }
}

/// Ids printed at different lengths name the same commit when one is a prefix of the other,
/// ignoring ASCII case. Compared in place: lowercase copies per comparison were most of the
/// cost of merging a mail of many tables.
fn prefix_match(a: &str, b: &str) -> bool {
    let n = a.len().min(b.len());
    n > 0 && a.as_bytes()[..n].eq_ignore_ascii_case(&b.as_bytes()[..n])
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
    let rows_at = tokens.offsets.get(rows_end).copied().unwrap_or(text.len());
    if let Some(more) = continuation_at(text, rows_at) {
        let at = rows_at + more + CONTINUATION.len();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One test of a generated report: its `test` parameter, its headline metric and the
    /// change its table prints for that metric.
    struct Spec {
        test: String,
        metric: String,
        change: String,
    }

    fn spec(k: usize) -> Spec {
        Spec {
            test: format!("t{k:04}"),
            metric: format!("stress-ng.t{k:04}.ops_per_sec"),
            // t0000: +1.0%, t0001: +1.1%, ..., t1999: +200.9%.
            change: format!("+{}.{}%", 1 + k / 10, k % 10),
        }
    }

    /// The column titles the robot prints: the base cut to 16 characters, the head to 27.
    const TITLES: &str = "4793cb599b1bdc3d 2125c0034c5dfd61171b494bd30 ";

    /// One detail table as the robot prints it (the shape of tests/fixtures/corpus/0750.eml),
    /// with a `commit:` list unless `listed` is false, the headline row printing `change`, and
    /// one more row per name in `more`.
    fn detail(spec: &Spec, titles: &str, listed: bool, change: &str, more: &[&str]) -> String {
        let mut lines = vec![
            "=========================================================================================".to_owned(),
            "compiler/cpufreq_governor/kconfig/rootfs/tbox_group/test/testcase:".to_owned(),
            format!(
                "  gcc-13/performance/x86_64-rhel-8.3/debian-12-x86_64-20240206.cgz/lkp-icl-2sp9/{}/stress-ng",
                spec.test
            ),
            String::new(),
        ];
        if listed {
            lines.extend([
                "commit: ".to_owned(),
                "  4793cb599b (\"selftests: cgroup: skip test_cgcore_lesser_ns_open\")".to_owned(),
                "  2125c0034c (\"cgroup/cpuset: Make cpuset hotplug processing synchronous\")"
                    .to_owned(),
                String::new(),
            ]);
        }
        lines.extend([
            titles.to_owned(),
            "---------------- --------------------------- ".to_owned(),
            "         %stddev     %change         %stddev".to_owned(),
            "             \\          |                \\  ".to_owned(),
            format!(
                "      7.72 ±  2%     {change}       9.09 ±  3%  {}",
                spec.metric
            ),
        ]);
        for name in more {
            lines.push(format!(
                "    516.50           +14.8%     593.00 ±  3%  stress-ng.{}.{name}",
                spec.test
            ));
        }
        lines.push(String::new());
        lines.join("\n")
    }

    /// A whole report mail: the opening names `specs[0]`'s headline, the "In addition to that"
    /// box one entry for each other spec, then the detail tables separated as the robot
    /// separates them.
    fn report_mail(specs: &[Spec], details: &[String]) -> String {
        let mut mail = String::from(
            "From: kernel test robot <oliver.sang@intel.com>\n\
             Subject: [linus:master] [cgroup/cpuset]  2125c0034c: many tests\n\
             Date: Wed, 22 May 2024 22:37:55 +0800\n\
             Message-ID: <202405222215.d537a85f-oliver.sang@intel.com>\n\
             MIME-Version: 1.0\n\
             Content-Type: text/plain; charset=\"utf-8\"\n\
             Content-Transfer-Encoding: 8bit\n\n\
             Hello,\n\n",
        );
        if let Some(first) = specs.first() {
            mail.push_str(&format!(
                "kernel test robot noticed a {} improvement of {} on:\n\n\n",
                first.change.trim_start_matches('+'),
                first.metric
            ));
        }
        mail.push_str(
            "commit: 2125c0034c5dfd61171b494bd309bb7637bff6eb (\"cgroup/cpuset: Make cpuset hotplug processing synchronous\")\n\
             https://git.kernel.org/cgit/linux/kernel/git/torvalds/linux.git master\n\n\
             testcase: stress-ng\n\
             test machine: 64 threads 2 sockets Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz (Ice Lake) with 256G memory\n\
             parameters:\n\n\
             \tcpufreq_governor: performance\n\n\n",
        );
        if specs.len() > 1 {
            let rule =
                "+------------------+------------------------------------------------------+\n";
            mail.push_str(
                "In addition to that, the commit also has significant impact on the following tests:\n\n",
            );
            mail.push_str(rule);
            for spec in &specs[1..] {
                mail.push_str(&format!(
                    "| testcase: change | stress-ng: {} {} improvement |\n\
                     | test parameters  | cpufreq_governor=performance |\n\
                     |                  | test={} |\n",
                    spec.metric,
                    spec.change.trim_start_matches('+'),
                    spec.test
                ));
                mail.push_str(rule);
            }
            mail.push_str("\n\n");
        }
        mail.push_str(
            "Details are as below:\n\
             -------------------------------------------------------------------------------------------------->\n\n\n\
             The kernel config and materials to reproduce are available at:\n\
             https://download.01.org/0day-ci/archive/20240522/202405222215.d537a85f-oliver.sang@intel.com\n\n",
        );
        let separator = "\n***************************************************************************************************\n\
             lkp-icl-2sp9: 64 threads 2 sockets Intel(R) Xeon(R) Gold 6346 CPU @ 3.10GHz (Ice Lake) with 256G memory\n";
        mail.push_str(&details.join(separator));
        mail.push_str(
            "\n\nDisclaimer:\nResults have been estimated based on internal Intel analysis.\n",
        );
        mail
    }

    fn the_report(mail: &str) -> Report {
        match parse_message(mail.as_bytes(), &Source::file("generated.eml", 0)) {
            Ok(Parsed::Reports(mut reports)) if reports.len() == 1 => reports.remove(0),
            other => panic!("expected one report, got {other:?}"),
        }
    }

    /// What the generated text states for a spec's headline.
    fn stated(spec: &Spec) -> Headline {
        Headline {
            metric: spec.metric.clone(),
            change_pct: spec
                .change
                .trim_end_matches('%')
                .parse()
                .unwrap_or_else(|e| panic!("{}: {e}", spec.change)),
        }
    }

    #[test]
    fn a_mail_of_two_thousand_tables_yields_two_thousand_tests_in_print_order() {
        let specs: Vec<Spec> = (0..2000).map(spec).collect();
        let details: Vec<String> = specs
            .iter()
            .map(|s| detail(s, TITLES, true, &s.change, &["ops"]))
            .collect();
        let report = the_report(&report_mail(&specs, &details));
        assert_eq!(report.tests.len(), 2000);
        let first = &report.tests[0];
        let last = &report.tests[1999];
        assert_eq!(first.params.get("test").map(String::as_str), Some("t0000"));
        assert_eq!(last.params.get("test").map(String::as_str), Some("t1999"));
        assert_eq!(
            first.headline,
            Some(Headline {
                metric: "stress-ng.t0000.ops_per_sec".to_owned(),
                change_pct: 1.0,
            })
        );
        assert_eq!(first.headline, Some(stated(&specs[0])));
        assert_eq!(
            last.headline,
            Some(Headline {
                metric: "stress-ng.t1999.ops_per_sec".to_owned(),
                change_pct: 200.9,
            })
        );
        assert_eq!(last.headline, Some(stated(&specs[1999])));
        assert_eq!(report.headline, first.headline);
        assert_eq!(
            last.rows
                .iter()
                .map(|r| r.metric.as_str())
                .collect::<Vec<_>>(),
            vec!["stress-ng.t1999.ops_per_sec", "stress-ng.t1999.ops"]
        );
    }

    #[test]
    fn a_test_printed_again_with_longer_uppercase_ids_merges_into_its_first_printing() {
        let specs = [spec(0), spec(1)];
        let details = [
            detail(&specs[0], TITLES, true, "+1.0%", &["ops"]),
            detail(&specs[1], TITLES, true, "+1.1%", &["ops"]),
            // No `commit:` list: the ids are the titles, longer and in upper case.
            detail(
                &specs[0],
                "4793CB599B1BDC3D 2125C0034C5DFD61171B494BD30 ",
                false,
                "+99.0%",
                &["ops", "bogo"],
            ),
        ];
        let report = the_report(&report_mail(&specs, &details));
        let tests: Vec<&str> = report
            .tests
            .iter()
            .map(|t| t.params.get("test").map_or("", String::as_str))
            .collect();
        assert_eq!(tests, vec!["t0000", "t0001"]);
        let first = &report.tests[0];
        assert_eq!(
            first
                .rows
                .iter()
                .map(|r| r.metric.as_str())
                .collect::<Vec<_>>(),
            vec![
                "stress-ng.t0000.ops_per_sec",
                "stress-ng.t0000.ops",
                "stress-ng.t0000.bogo"
            ]
        );
        // The first printing's value wins over the second's +99.0%.
        assert_eq!(first.rows[0].values[1].change, Some(1.0));
        assert_eq!(first.commits, vec!["4793cb599b", "2125c0034c"]);
    }

    #[test]
    fn commit_ids_match_as_prefixes_ignoring_ascii_case() {
        assert!(prefix_match("4793cb599b", "4793CB599B1BDC3D"));
        assert!(prefix_match("4793CB599B1BDC3D", "4793cb599b"));
        assert!(!prefix_match("4793cb599b", "4793cb599c"));
        assert!(!prefix_match("", "4793cb599b"));
        assert!(!prefix_match("4793cb599b", ""));
        assert!(prefix_match("v6.9", "V6.9"));
    }

    #[test]
    fn a_continuation_is_found_only_within_its_window() {
        let near = format!("{}<below {CONTINUATION} 1 2", " x".repeat(10));
        assert_eq!(continuation_at(&near, 0), Some(27));
        let far = format!("{}<below {CONTINUATION}", "x".repeat(CONTINUATION_WITHIN));
        assert_eq!(continuation_at(&far, 0), None);
        assert_eq!(
            continuation_at(&far, 10),
            Some(CONTINUATION_WITHIN - 10 + 7)
        );
        assert_eq!(continuation_at(&far, far.len()), None);
    }
}
