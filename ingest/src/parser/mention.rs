//! Replies that cite a report: the quoted opening sentence (`> kernel test robot noticed a
//! -29.4% regression of aim7.jobs-per-min on:`, or a functional report's `noticed "..." on:`)
//! or quoted table rows. What they cite is read from the quoted text, else from the subject.

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
    let is_reply = doc.in_reply_to.is_some()
        || !doc.references.is_empty()
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
    let stated = quoted
        .iter()
        .find_map(|text| prose::stated(text, None))
        .map(|(metric, change, kind)| (metric, Some(change), kind))
        .or_else(|| {
            quoted
                .iter()
                .find_map(|text| prose::stated_failure(text))
                .map(|failure| (failure.to_owned(), None, Kind::Failure))
        });
    if stated.is_none() && rows.is_empty() {
        return None;
    }
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
    Some(mention)
}

/// The table rows quoted at any depth, quote marks removed and blanks collapsed.
fn quoted_rows(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|line| {
            let mut rest = line;
            let mut depth = 0;
            while let Some(r) = rest.trim_start_matches([' ', '\t']).strip_prefix('>') {
                depth += 1;
                rest = r;
            }
            (depth > 0 && is_row_line(rest)).then(|| collapse_whitespace(rest.trim()))
        })
        .collect()
}
