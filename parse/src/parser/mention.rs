//! Mails that cite a report without carrying its full table: replies that quote the opening
//! sentence (`> kernel test robot noticed a -29.4% regression of aim7.jobs-per-min on:`, or a
//! functional report's `noticed "..." on:`) or table rows, and the robot's report itself cut
//! before its tables. What they cite is read from the quoted text, else from the subject.

use super::prose;
use super::table::{Tokens, is_row_line};
use crate::decode::{Document, collapse_whitespace};
use lkplake_schemas::{Kind, Mention, SCHEMA_VERSION, Source, mention_key};

/// The mention a reply makes, if it quotes a report's opening or rows. The caller has made
/// sure the mail holds no report of its own.
pub(super) fn read(
    doc: &Document,
    streams: &[(usize, String)],
    source: &Source,
) -> Option<Mention> {
    let is_reply = doc.in_thread()
        || doc
            .subject
            .as_deref()
            .is_some_and(|s| s.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("re:")));
    if !is_reply {
        return None;
    }
    let quoted: Vec<&str> = streams
        .iter()
        .filter(|(depth, _)| *depth > 0)
        .map(|(_, text)| text.as_str())
        .collect();
    let rows = quoted_rows(&doc.body);
    let stated = stated(&quoted);
    if stated.is_none() && rows.is_empty() {
        return None;
    }
    Some(cite(doc, &quoted, stated, rows, source))
}

/// The robot's report cut before its tables: it cites itself, by its own Message-ID (from the
/// headers, else the archive link in its text), commit and headline.
pub(super) fn excerpt(doc: &Document, top: &str, source: &Source) -> Mention {
    let texts = [top];
    let mut mention = cite(doc, &texts, stated(&texts), Vec::new(), source);
    if mention.message_id.is_none() {
        mention.message_id = prose::Prose::read(top, doc.subject.as_deref()).canonical_message_id;
        mention.mention_key = mention_key(&mention);
    }
    if mention.date.is_none() {
        mention.date = mention
            .message_id
            .as_deref()
            .and_then(prose::message_id_date);
    }
    mention
}

/// The headline the texts state: a performance report's opening sentence, else a functional
/// report's.
fn stated(texts: &[&str]) -> Option<(String, Option<f64>, Kind)> {
    texts
        .iter()
        .find_map(|text| prose::stated(text, None))
        .map(|(metric, change, kind)| (metric, Some(change), kind))
        .or_else(|| {
            texts
                .iter()
                .find_map(|text| prose::stated_failure(text))
                .map(|failure| (failure.to_owned(), None, Kind::Failure))
        })
}

/// The mention of the report that `quoted` (the quoted or excerpted parts of the mail) cite.
fn cite(
    doc: &Document,
    quoted: &[&str],
    stated: Option<(String, Option<f64>, Kind)>,
    rows: Vec<String>,
    source: &Source,
) -> Mention {
    // Rows alone, with no opening quoted: the subject says what they are about.
    let stated = stated
        .or_else(|| prose::stated("", doc.subject.as_deref()).map(|(m, c, k)| (m, Some(c), k)));
    let commit = quoted
        .iter()
        .find_map(|text| prose::commit_line(text))
        .map(|c| c.id)
        .or_else(|| {
            doc.subject
                .as_deref()
                .and_then(prose::subject_commit)
                .map(str::to_owned)
        });
    let testcase = quoted
        .iter()
        .find_map(|text| prose::testcase_line(text))
        .map(str::to_owned);
    let axes = quoted.iter().find_map(|text| {
        let at = prose::first_axes_offset(text)?;
        let tokens = Tokens::new(text);
        let (pairs, _) =
            prose::parse_axes(&tokens, tokens.index_at(at), tokens.tokens.len()).ok()?;
        Some(pairs)
    });
    let axis = |name: &str| {
        axes.as_ref()
            .and_then(|pairs| pairs.iter().find(|(n, _)| n == name))
            .map(|(_, v)| v.clone())
    };
    let (metric, change_pct, kind) = match stated {
        Some((metric, change, kind)) => (Some(metric), change, Some(kind)),
        None => (None, None, None),
    };
    let mut references = doc.references.clone();
    if let Some(parent) = &doc.in_reply_to
        && !references.contains(parent)
    {
        references.push(parent.clone());
    }
    let mut mention = Mention {
        schema_version: SCHEMA_VERSION,
        mention_key: String::new(),
        message_id: doc.message_id.clone(),
        in_reply_to: doc.in_reply_to.clone(),
        references,
        date: doc.date,
        sender: doc.sender.clone(),
        subject: doc.subject.clone(),
        commit,
        testcase: testcase.or_else(|| axis("testcase")),
        machine: axis("tbox_group"),
        kind,
        metric,
        change_pct,
        rows,
        source: source.clone(),
    };
    mention.mention_key = mention_key(&mention);
    mention
}

/// The table rows quoted at any depth, quote marks removed and blanks collapsed.
fn quoted_rows(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|line| {
            let (depth, rest) = super::unquote(line);
            (depth > 0 && is_row_line(rest)).then(|| collapse_whitespace(rest.trim()))
        })
        .collect()
}
