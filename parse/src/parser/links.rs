//! Links from later mail to a report (issue 37): the trailers and notices by which a patch or
//! a maintainer's reply names a report, the culprit commit or the fix.
//!
//! The report parser skips such mail (most of it is patches), yet it is where a regression's
//! fate is written: `Closes:`/`Link:` trailers naming the report's Message-ID, `Fixes:`
//! trailers naming the culprit, `Revert "<culprit>"` patches, and the applied notices of b4,
//! the patchwork bot and maintainers. Only the mail's own text counts: every robot report
//! prints the tags it asks a fix to carry in a box of `| ` lines (`| Closes:
//! https://lore.kernel.org/oe-lkp/<its own Message-ID>`), and replies quote that box and the
//! patches' trailers with `> `; none of those is a link. Targets are kept as the mail prints
//! them; which report a link belongs to is the lake's join with `reports`, so a link to a mail
//! that is no report (most `Link:` trailers name the patch itself) costs one row and no error.

use crate::decode::{Document, collapse_whitespace};
use lkplake_schemas::{Link, LinkKind, SCHEMA_VERSION, Source, link_key};
use regex::Regex;
use std::sync::LazyLock;

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| unreachable!("built-in pattern {pattern}: {e}"))
}

/// A `Closes:` or `Link:` trailer at the start of a line (indented, in a cover letter's
/// change log, counts; `| Closes:` and `> Closes:` do not), and its value.
static TRAILER: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)^[ \t]*(?:closes|link):(.*)$"));
/// A URL that names a mail by its Message-ID: lore (any list, `/r/`, `/all/`, none),
/// lkml.kernel.org and msgid.link. The path is read further by [`url_message_id`].
static MAIL_URL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)https?://(?:lore\.kernel\.org|lkml\.kernel\.org|(?:patch\.)?msgid\.link)/([^\s<>"]+)"#,
    )
});
/// `Fixes: 8d59d2214c23 ("title")` (also without the parentheses, or with `commit`).
static FIXES: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)^[ \t]*fixes:[ \t]*(?:commit[ \t]+)?([0-9a-f]{7,40})\b"));
/// The upstream commit a stable backport names: `[ Upstream commit <hash> ]` or `commit
/// <hash> upstream.`.
static UPSTREAM: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^[ \t]*(?:\[[ \t]*upstream commit[ \t]+([0-9a-f]{12,40})[ \t]*\]|commit[ \t]+([0-9a-f]{12,40})[ \t]+upstream\b)",
    )
});
/// `This reverts commit <hash>.`, as `git revert` writes it.
static REVERTS: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)\bthis reverts commit[ \t]+([0-9a-f]{7,40})\b"));
/// A line of the mail's own text that says something was applied.
static APPLIED_WORD: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bapplied\b"));
/// The title line of an applied notice: b4's `[1/2] title`, the patchwork bot's `- [v2,net]
/// title`.
static NOTICE_TITLE: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^[ \t]*(?:\[[0-9]+/[0-9]+\]|-(?:[ \t]+\[[^\]]*\])?)[ \t]+(\S.*?)[ \t]*$")
});
/// The line after it: b4's `      commit: <hash or URL>`, the bot's bare `git.kernel.org` URL.
static NOTICE_COMMIT: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)^[ \t]*(?:commit:[ \t]*(\S+)|(https?://git\.kernel\.org/\S+))[ \t]*$")
});
/// The first line of `git format-patch` output: the commit a maintainer applied and pasted.
static FORMAT_PATCH: LazyLock<Regex> =
    LazyLock::new(|| re(r"^From ([0-9a-f]{40}) Mon Sep 17 00:00:00 2001"));
/// "Applied to <tree> as commit <hash>", "applied ..., as abc1234": one paragraph.
static APPLIED_AS: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)\bapplied\b[^\n]{0,160}?\bas[ \t]+(?:commit[ \t]+)?([0-9a-f]{7,40})\b")
});

/// A link before it is told which mail made it: kind, target, patch title, commit.
type Found = (LinkKind, String, Option<String>, Option<String>);

/// The links a decoded mail makes, in this order: `closes`, `fixes`, `revert`, `applied`.
/// Nothing for a mail whose own text holds none (a robot report, a reply that only quotes).
pub fn links(doc: &Document, source: &Source) -> Vec<Link> {
    let own = own_lines(&doc.body);
    let inline = inline_patch_title(&own);
    let header = doc.subject.as_deref().map(Subject::read);
    let patch_title = inline.clone().or_else(|| {
        header
            .as_ref()
            .filter(|s| s.patch && !s.title.is_empty())
            .map(|s| s.title.to_owned())
    });
    let upstream = upstream_commit(&own);
    // A mail never closes itself (a robot report printing its own link unboxed).
    let closes = closes_targets(&own)
        .into_iter()
        .filter(|target| doc.message_id.as_deref() != Some(target.as_str()))
        .map(|target| (LinkKind::Closes, target));
    let fixes = fixes_targets(&own)
        .into_iter()
        .map(|hash| (LinkKind::Fixes, hash));
    let mut found: Vec<Found> = closes
        .chain(fixes)
        .map(|(kind, target)| (kind, target, patch_title.clone(), upstream.clone()))
        .collect();
    found.extend(revert(inline, header.as_ref(), &own));
    if is_reply(doc, header.as_ref()) {
        found.extend(
            applied(&own, patch_title.as_deref())
                .into_iter()
                .map(|(hash, title)| (LinkKind::Applied, hash.clone(), title, Some(hash))),
        );
    }
    // One statement per kind and target: a trailer repeated in a cover letter's change log
    // is one link, under one key.
    let mut stated = std::collections::HashSet::new();
    found.retain(|(kind, target, ..)| stated.insert((*kind, target.clone())));
    found
        .into_iter()
        .map(|(kind, target, patch_title, commit)| {
            let mut link = Link {
                schema_version: SCHEMA_VERSION,
                link_key: String::new(),
                kind,
                target,
                message_id: doc.message_id.clone(),
                date: doc.date,
                sender: doc.sender.clone(),
                subject: doc.subject.clone(),
                patch_title,
                commit,
                source: source.clone(),
            };
            link.link_key = link_key(&link);
            link
        })
        .collect()
}

/// The lines of the mail's own text: not quoted (`>` at any depth), and before the first
/// `diff --git` (a diff's context lines are some file's text, not the mail's).
fn own_lines(body: &str) -> Vec<&str> {
    body.lines()
        .take_while(|line| !line.starts_with("diff --git "))
        .filter(|line| super::unquote(line).0 == 0)
        .collect()
}

/// What a subject line says about the mail.
#[derive(Debug, Clone, PartialEq)]
struct Subject<'a> {
    /// The subject without `Re:`-style prefixes and leading `[...]` tags.
    title: &'a str,
    /// It had a `Re:`, `Fwd:`, `Fw:` or `Aw:` prefix.
    reply: bool,
    /// A leading tag names a patch (`[PATCH v2 1/3]`, `[PATCHv6 6/7]`, `[RFC PATCH]`, `[RFC]`).
    patch: bool,
}

impl<'a> Subject<'a> {
    fn read(subject: &'a str) -> Self {
        let mut rest = subject.trim();
        let mut reply = false;
        while let Some(after) = ["re:", "fwd:", "fw:", "aw:"]
            .iter()
            .find_map(|prefix| strip_prefix_ignoring_case(rest, prefix))
        {
            rest = after.trim_start();
            reply = true;
        }
        let mut patch = false;
        while let Some(inner) = rest.strip_prefix('[') {
            let Some(end) = inner.find(']') else { break };
            let tag = inner[..end].to_ascii_uppercase();
            patch |= tag.contains("PATCH") || tag.contains("RFC");
            rest = inner[end + 1..].trim_start();
        }
        Subject {
            title: rest,
            reply,
            patch,
        }
    }
}

/// Whether the line, after its leading blanks, starts with one of the lowercase `words` in
/// any ASCII case: the test that keeps a trailer's regex off the lines that cannot match it.
fn starts_with_any(line: &str, words: &[&str]) -> bool {
    let line = line.trim_start_matches([' ', '\t']);
    words
        .iter()
        .any(|word| strip_prefix_ignoring_case(line, word).is_some())
}

/// The text after `prefix`, which it starts with in any ASCII case.
fn strip_prefix_ignoring_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| text.get(prefix.len()..))
        .flatten()
}

/// The title of a patch sent inside the mail (after `----8<----`, or `git format-patch` output
/// pasted whole): its `Subject: [PATCH] title` line, unfolded, tags stripped.
fn inline_patch_title(own: &[&str]) -> Option<String> {
    own.iter().enumerate().find_map(|(at, line)| {
        let first = line.strip_prefix("Subject:")?;
        let folded = own
            .get(at + 1..)
            .unwrap_or_default()
            .iter()
            .take_while(|l| l.starts_with([' ', '\t']) && !l.trim().is_empty());
        let mut subject = first.to_owned();
        for more in folded {
            subject.push(' ');
            subject.push_str(more.trim());
        }
        let read = Subject::read(&subject);
        (read.patch && !read.title.is_empty()).then(|| collapse_whitespace(read.title))
    })
}

/// Whether the mail answers another (so it may be an applied notice).
fn is_reply(doc: &Document, subject: Option<&Subject<'_>>) -> bool {
    doc.in_thread() || subject.is_some_and(|s| s.reply)
}

/// The Message-IDs the own `Closes:`/`Link:` trailers name, in order, each once. A trailer
/// with nothing after its colon takes the next line (a client that wrapped the URL there).
fn closes_targets(own: &[&str]) -> Vec<String> {
    let mut targets = Vec::new();
    for (at, line) in own.iter().enumerate() {
        if !starts_with_any(line, &["closes:", "link:"]) {
            continue;
        }
        let Some(value) = TRAILER.captures(line).and_then(|c| c.get(1)) else {
            continue;
        };
        let mut value = value.as_str().trim();
        if value.is_empty() {
            value = own.get(at + 1).map_or("", |next| next.trim());
        }
        if let Some(id) = url_message_id(value)
            && !targets.contains(&id)
        {
            targets.push(id);
        }
    }
    targets
}

/// The Message-ID, with angle brackets, that a lore, lkml or msgid.link URL holds: the first
/// path segment with an `@` once percent escapes are decoded (`%40` is `@`, `%2B` is `+`),
/// whatever list name, `/r/`, `/all/`, `/T/`, `#u` or `#m...` anchor surrounds it.
fn url_message_id(value: &str) -> Option<String> {
    let path = MAIL_URL.captures(value)?.get(1)?.as_str();
    let path = path.split(['#', '?']).next().unwrap_or(path);
    path.split('/').map(percent_decode).find_map(|segment| {
        let id = segment
            .trim_start_matches('<')
            .trim_end_matches(['.', ',', ';', ':', ')', ']', '>']);
        id.contains('@').then(|| format!("<{id}>"))
    })
}

/// `%XX` escapes decoded (invalid ones kept as they are), as UTF-8.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&b) = bytes.get(at) {
        let escaped = (b == b'%')
            .then(|| bytes.get(at + 1..at + 3))
            .flatten()
            .filter(|hex| hex.iter().all(u8::is_ascii_hexdigit))
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        if let Some(decoded) = escaped {
            out.push(decoded);
            at += 3;
        } else {
            out.push(b);
            at += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The commit hashes the own `Fixes:` trailers name, lowercase, in order, each once. A hash
/// has a digit (`Fixes: defaced ...` is a sentence).
fn fixes_targets(own: &[&str]) -> Vec<String> {
    let mut hashes: Vec<String> = Vec::new();
    for line in own.iter().filter(|line| starts_with_any(line, &["fixes:"])) {
        if let Some(hash) = FIXES.captures(line).and_then(|c| c.get(1)) {
            let hash = hash.as_str().to_ascii_lowercase();
            if has_digit(&hash) && !hashes.contains(&hash) {
                hashes.push(hash);
            }
        }
    }
    hashes
}

/// The upstream commit a stable backport names, lowercase.
fn upstream_commit(own: &[&str]) -> Option<String> {
    own.iter().find_map(|line| {
        if !starts_with_any(line, &["[", "commit"]) {
            return None;
        }
        let c = UPSTREAM.captures(line)?;
        c.get(1)
            .or_else(|| c.get(2))
            .map(|m| m.as_str().to_ascii_lowercase())
    })
}

/// The revert link of a patch `Revert "<title>"`: the patch sent inside the mail, else the
/// mail itself when it is no reply (a reply to a revert is discussion of it).
fn revert(inline: Option<String>, header: Option<&Subject<'_>>, own: &[&str]) -> Option<Found> {
    let title = inline.or_else(|| header.filter(|s| !s.reply).map(|s| s.title.to_owned()))?;
    let target = reverted_title(&title)?;
    Some((LinkKind::Revert, target, Some(title), reverts_commit(own)))
}

/// The reverted title of a patch title `Revert "<title>"`.
fn reverted_title(title: &str) -> Option<String> {
    let inner = title.strip_prefix("Revert \"")?;
    let inner = inner.strip_suffix('"').unwrap_or(inner).trim();
    (!inner.is_empty()).then(|| inner.to_owned())
}

/// The commit of the own `This reverts commit <hash>.` line, lowercase.
fn reverts_commit(own: &[&str]) -> Option<String> {
    own.iter().find_map(|line| {
        REVERTS
            .captures(line)
            .and_then(|c| c.get(1))
            .map(|m| m.as_str().to_ascii_lowercase())
    })
}

/// The commits an applied notice names, each with its patch's title: b4's and the patchwork
/// bot's title and commit lines, else the `git format-patch` output a maintainer pasted after
/// saying "Applied", else a sentence "applied ... as <hash>". Only when an own line says
/// "applied".
fn applied(own: &[&str], patch_title: Option<&str>) -> Vec<(String, Option<String>)> {
    let Some(said) = own.iter().position(|line| {
        // The regex only where the word can be: most lines of a patch say nothing of it.
        (line.contains("pplied") || line.contains("PPLIED")) && APPLIED_WORD.is_match(line)
    }) else {
        return Vec::new();
    };
    let mut found = notice_commits(own);
    if found.is_empty() {
        found.extend(
            own.get(said..)
                .unwrap_or_default()
                .iter()
                .find_map(|line| FORMAT_PATCH.captures(line).and_then(|c| c.get(1)))
                .map(|hash| (hash.as_str().to_owned(), patch_title.map(str::to_owned))),
        );
    }
    if found.is_empty() {
        let hashes = APPLIED_AS
            .captures_iter(&paragraphs(own))
            .filter_map(|c| c.get(1).map(|m| m.as_str().to_ascii_lowercase()))
            .filter(|hash| has_digit(hash))
            .collect::<Vec<_>>();
        found.extend(
            hashes
                .into_iter()
                .map(|hash| (hash, patch_title.map(str::to_owned))),
        );
    }
    let mut unique: Vec<(String, Option<String>)> = Vec::new();
    for (hash, title) in found {
        if !unique.iter().any(|(h, _)| *h == hash) {
            unique.push((hash, title));
        }
    }
    unique
}

/// The lines as text with one paragraph a line (lines within one joined by a space), so a
/// sentence wrapped across lines reads whole.
fn paragraphs(own: &[&str]) -> String {
    let mut text = String::new();
    for line in own {
        if line.trim().is_empty() {
            text.push('\n');
        } else {
            text.push_str(line.trim());
            text.push(' ');
        }
    }
    text
}

/// Whether a hex string has a decimal digit: commit ids nearly always do, English words never.
fn has_digit(hex: &str) -> bool {
    hex.bytes().any(|b| b.is_ascii_digit())
}

/// The commits of b4's `[1/2] title` / `commit: <hash or URL>` pairs and the patchwork bot's
/// `- [tags] title` / `https://git.kernel.org/.../c/<hash>` pairs, with their titles.
fn notice_commits(own: &[&str]) -> Vec<(String, Option<String>)> {
    own.windows(2)
        .filter_map(|pair| {
            let [title_line, commit_line] = pair else {
                return None;
            };
            let title = NOTICE_TITLE.captures(title_line)?.get(1)?.as_str();
            let c = NOTICE_COMMIT.captures(commit_line)?;
            let hash = commit_of(c.get(1).or_else(|| c.get(2))?.as_str())?;
            Some((hash, Some(title.to_owned())))
        })
        .collect()
}

/// The commit hash a `commit:` value gives: the hash itself, or the last part of a URL
/// (`.../c/<hash>`, `?id=<hash>`), lowercase.
fn commit_of(value: &str) -> Option<String> {
    let last = value.trim_end_matches('/').rsplit(['/', '=']).next()?;
    ((7..=40).contains(&last.len()) && last.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| last.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::decode;
    use crate::prefilter::may_link;

    /// A fixture of `tests/fixtures/links/`, decoded.
    fn fixture(name: &str) -> (Vec<u8>, Document) {
        let path = format!(
            "{}/tests/fixtures/links/{name}.eml",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let doc = decode(&bytes);
        (bytes, doc)
    }

    fn links_of(name: &str) -> Vec<Link> {
        let (bytes, doc) = fixture(name);
        let links = links(&doc, &Source::file(name, 0));
        assert!(
            links.is_empty() || may_link(&bytes),
            "{name}: the raw test must let every mail with a link through"
        );
        links
    }

    /// The kind, target, patch title and commit of each link, to compare in one assertion.
    fn summary(links: &[Link]) -> Vec<(LinkKind, &str, Option<&str>, Option<&str>)> {
        links
            .iter()
            .map(|l| {
                (
                    l.kind,
                    l.target.as_str(),
                    l.patch_title.as_deref(),
                    l.commit.as_deref(),
                )
            })
            .collect()
    }

    /// A mail of the given subject and body, with nothing else.
    fn mail(subject: &str, body: &str) -> Document {
        Document {
            subject: Some(subject.to_owned()),
            message_id: Some("<x@example.org>".to_owned()),
            body: body.to_owned(),
            is_mail: true,
            ..Document::default()
        }
    }

    fn targets(doc: &Document) -> Vec<String> {
        links(doc, &Source::file("t", 0))
            .into_iter()
            .map(|l| format!("{} {}", l.kind.as_str(), l.target))
            .collect()
    }

    #[test]
    fn a_patch_closing_a_robot_report_links_it_and_its_culprit() {
        let links = links_of("patch_closes");
        let title = Some("mm: memcg: optimize parent iteration in memcg_rstat_updated()");
        assert_eq!(
            summary(&links),
            vec![
                (
                    LinkKind::Closes,
                    "<202401221624.cb53a8ca-oliver.sang@intel.com>",
                    title,
                    None
                ),
                (LinkKind::Fixes, "8d59d2214c23", title, None),
            ]
        );
        let link = &links[0];
        assert_eq!(
            link.message_id.as_deref(),
            Some("<20240124100023.660032-1-yosryahmed@google.com>")
        );
        assert_eq!(
            link.sender.as_deref(),
            Some("Yosry Ahmed <yosryahmed@google.com>")
        );
        assert_eq!(
            link.subject.as_deref(),
            Some("[PATCH] mm: memcg: optimize parent iteration in memcg_rstat_updated()")
        );
        assert_eq!(
            link.date.map(|d| d.to_rfc3339()).as_deref(),
            Some("2024-01-24T10:00:22+00:00")
        );
        assert_eq!(link.source, Source::file("patch_closes", 0));
    }

    #[test]
    fn the_robot_report_itself_links_nothing() {
        // It prints `| Closes: https://lore.kernel.org/oe-lkp/<its own id>`.
        assert_eq!(links_of("robot_report"), vec![]);
    }

    #[test]
    fn replies_that_quote_the_suggested_tags_or_the_trailers_link_nothing() {
        // `> | Closes: ...oliver.san=` + soft break: the robot's box, quoted.
        assert_eq!(links_of("reply_quoting_box"), vec![]);
        // `> Fixes: 8d59d2214c23 (...)` and `> Closes: ...`: the patch's trailers, quoted.
        assert_eq!(links_of("reply_quoting_trailers"), vec![]);
    }

    #[test]
    fn a_patch_sent_inside_a_reply_links_with_its_own_title() {
        let title = Some("mm: Fix the flipped condition in gfpflags_allow_spinning()");
        assert_eq!(
            summary(&links_of("inline_patch_reply")),
            vec![
                (
                    LinkKind::Closes,
                    "<202503101254.cfd454df-lkp@intel.com>",
                    title,
                    None
                ),
                (LinkKind::Fixes, "97769a53f117", title, None),
            ]
        );
    }

    #[test]
    fn a_stable_backport_names_the_upstream_commit() {
        let title = Some("cgroup: Wait for dying tasks to leave on rmdir");
        let upstream = Some("1b164b876c36c3eb5561dd9b37702b04401b0166");
        assert_eq!(
            summary(&links_of("stable_backport")),
            vec![
                (
                    LinkKind::Closes,
                    "<202603222104.2c81684e-lkp@intel.com>",
                    title,
                    upstream
                ),
                (LinkKind::Fixes, "a72f73c4dd9b", title, upstream),
            ]
        );
    }

    #[test]
    fn b4_thanks_name_each_applied_commit_with_its_title() {
        let links = links_of("b4_applied");
        assert_eq!(
            summary(&links),
            vec![
                (
                    LinkKind::Applied,
                    "89ed5fa3b5419f04452051fbcb6d3e5b801cdb1b",
                    Some("block: release q->elevator_lock in ioc_qos_write"),
                    Some("89ed5fa3b5419f04452051fbcb6d3e5b801cdb1b")
                ),
                (
                    LinkKind::Applied,
                    "9730763f4756e32520cb86778331465e8d063a8f",
                    Some("block: correct locking order for protecting blk-wbt parameters"),
                    Some("9730763f4756e32520cb86778331465e8d063a8f")
                ),
            ]
        );
        assert_eq!(
            links[0].message_id.as_deref(),
            Some("<174240575789.107020.18022154030332779642.b4-ty@kernel.dk>")
        );
        assert_eq!(
            links[0].sender.as_deref(),
            Some("Jens Axboe <axboe@kernel.dk>")
        );
    }

    #[test]
    fn the_patchwork_bot_names_the_applied_commit_by_its_url() {
        assert_eq!(
            summary(&links_of("pwbot_applied")),
            vec![(
                LinkKind::Applied,
                "689b097a06ba",
                Some("compiler-gcc: Suppress -Wmissing-prototypes warning for all supported GCC"),
                Some("689b097a06ba")
            )]
        );
    }

    #[test]
    fn a_maintainer_pasting_the_applied_commit_names_it() {
        // "Applied the following patch to cgroup/for-5.13." then `git format-patch` output.
        assert_eq!(
            summary(&links_of("applied_following_patch")),
            vec![(
                LinkKind::Applied,
                "dd3f4e4972f146a685930ccfed95e4e1d13d952a",
                Some("cgroup: misc: mark dummy misc_cg_res_total_usage() static inline"),
                Some("dd3f4e4972f146a685930ccfed95e4e1d13d952a")
            )]
        );
    }

    #[test]
    fn a_revert_names_the_culprit_title_and_commit() {
        // Synthetic (the corpus holds no revert): built from patch_closes.eml's headers and
        // trailers, reverting robot_report.eml's commit.
        let title = Some("Revert \"mm: memcg: make stats flushing threshold per-memcg\"");
        assert_eq!(
            summary(&links_of("revert")),
            vec![
                (
                    LinkKind::Closes,
                    "<202401221624.cb53a8ca-oliver.sang@intel.com>",
                    title,
                    None
                ),
                (
                    LinkKind::Revert,
                    "mm: memcg: make stats flushing threshold per-memcg",
                    title,
                    Some("8d59d2214c2362e7a9d185d80b613e632581af7b")
                ),
            ]
        );
    }

    #[test]
    fn a_reply_to_a_revert_is_no_revert() {
        let doc = mail(
            "Re: [PATCH] Revert \"mm: memcg: make stats flushing threshold per-memcg\"",
            "> This reverts commit 8d59d2214c2362e7a9d185d80b613e632581af7b.\n\nNAK.\n",
        );
        assert_eq!(targets(&doc), Vec::<String>::new());
    }

    #[test]
    fn lore_paths_of_every_shape_give_the_message_id() {
        let id = "<202401221624.cb53a8ca-oliver.sang@intel.com>";
        for url in [
            "https://lore.kernel.org/oe-lkp/202401221624.cb53a8ca-oliver.sang@intel.com",
            "https://lore.kernel.org/oe-lkp/202401221624.cb53a8ca-oliver.sang@intel.com/",
            "https://lore.kernel.org/r/202401221624.cb53a8ca-oliver.sang@intel.com",
            "https://lore.kernel.org/all/202401221624.cb53a8ca-oliver.sang@intel.com/T/#u",
            "https://lore.kernel.org/linux-mm/202401221624.cb53a8ca-oliver.sang@intel.com/#m4a2b",
            "https://lore.kernel.org/202401221624.cb53a8ca-oliver.sang@intel.com/",
            "https://lkml.kernel.org/r/202401221624.cb53a8ca-oliver.sang@intel.com",
            "https://lore.kernel.org/oe-lkp/202401221624.cb53a8ca-oliver.sang%40intel.com",
            "<https://lore.kernel.org/r/202401221624.cb53a8ca-oliver.sang@intel.com>",
            "https://patch.msgid.link/202401221624.cb53a8ca-oliver.sang@intel.com",
        ] {
            assert_eq!(url_message_id(url).as_deref(), Some(id), "{url}");
        }
        assert_eq!(
            url_message_id("https://lore.kernel.org/all/CA+G9fYs%2Bx%3D@mail.gmail.com/")
                .as_deref(),
            Some("<CA+G9fYs+x=@mail.gmail.com>")
        );
        // No Message-ID in the path: a list's front page, another archive.
        assert_eq!(url_message_id("https://lore.kernel.org/oe-lkp/"), None);
        assert_eq!(url_message_id("https://lwn.net/Articles/381955/ [0]"), None);
        assert_eq!(
            url_message_id("https://example.org/r/202401221624.cb53a8ca-lkp@intel.com"),
            None
        );
    }

    #[test]
    fn only_unquoted_trailers_link() {
        let doc = mail(
            "[PATCH] mm: fix",
            "Fix it.\n\
             \n\
             > Closes: https://lore.kernel.org/oe-lkp/202401010000.aaaaaaaa-lkp@intel.com\n\
             | Closes: https://lore.kernel.org/oe-lkp/202401010000.bbbbbbbb-lkp@intel.com\n\
             >> | Closes: https://lore.kernel.org/oe-lkp/202401010000.cccccccc-lkp@intel.com\n\
             > Fixes: 0123456789ab (\"quoted\")\n\
             Link: https://lore.kernel.org/r/20240101.1-1-a@example.org/ [1]\n\
             closes: https://lore.kernel.org/oe-lkp/202401010000.dddddddd-lkp@intel.com\n\
             Fixes: ABCDEF012345 \"unparenthesized title\"\n\
             Signed-off-by: A <a@example.org>\n",
        );
        assert_eq!(
            targets(&doc),
            vec![
                "closes <20240101.1-1-a@example.org>",
                "closes <202401010000.dddddddd-lkp@intel.com>",
                "fixes abcdef012345",
            ]
        );
    }

    #[test]
    fn a_trailer_in_a_diff_or_naming_the_mail_itself_is_no_link() {
        let doc = mail(
            "[PATCH] docs: trailers",
            "Document Closes:.\n\
             \n\
             Closes: https://lore.kernel.org/oe-lkp/x@example.org\n\
             ---\n\
             diff --git a/Documentation/process/submitting-patches.rst b/x\n\
             +Closes: https://lore.kernel.org/r/example-1@example.org\n\
             \x20Closes: https://lore.kernel.org/r/example-2@example.org\n",
        );
        assert_eq!(targets(&doc), Vec::<String>::new());
    }

    #[test]
    fn a_url_wrapped_onto_the_next_line_or_a_soft_break_is_read_whole() {
        let doc = mail(
            "[PATCH] mm: fix",
            "Closes:\n  https://lore.kernel.org/oe-lkp/202401221624.cb53a8ca-oliver.sang@intel.com\n",
        );
        assert_eq!(
            targets(&doc),
            vec!["closes <202401221624.cb53a8ca-oliver.sang@intel.com>"]
        );
        // Quoted-printable: `=` soft breaks and `=40` decode before the trailer is read.
        let raw = "From: A <a@example.org>\n\
                   Subject: [PATCH] mm: fix\n\
                   Message-ID: <p@example.org>\n\
                   Date: Tue, 12 Sep 2023 21:52:39 +0800\n\
                   MIME-Version: 1.0\n\
                   Content-Type: text/plain; charset=UTF-8\n\
                   Content-Transfer-Encoding: quoted-printable\n\
                   \n\
                   Closes: https://lore.kernel.org/oe-lkp/202401221624.cb53a8ca-oliver.san=\n\
                   g=40intel.com\n\
                   Signed-off-by: A <a@example.org>\n";
        assert!(may_link(raw.as_bytes()));
        assert_eq!(
            targets(&decode(raw.as_bytes())),
            vec!["closes <202401221624.cb53a8ca-oliver.sang@intel.com>"]
        );
    }

    #[test]
    fn applied_sentences_name_the_commit() {
        let mut doc = mail(
            "Re: [PATCH v2 1/3] block: fix a race",
            "On Tue, A wrote:\n> Fix it.\n\nApplied to\nblock/for-6.9 as commit 0123abcd4567, thanks.\n",
        );
        assert_eq!(targets(&doc), vec!["applied 0123abcd4567"]);
        let found = links(&doc, &Source::file("t", 0));
        assert_eq!(found[0].patch_title.as_deref(), Some("block: fix a race"));
        // Not a reply: a commit message telling history is no notice.
        doc.subject = Some("[PATCH] block: fix a race".into());
        assert_eq!(targets(&doc), Vec::<String>::new());
        // Quoted, or with no hash: nothing.
        let quoted = mail(
            "Re: [PATCH] x",
            "> Applied as 0123abcd4567.\n\nApplied to cgroup/for-6.8.\n",
        );
        assert_eq!(targets(&quoted), Vec::<String>::new());
    }

    #[test]
    fn the_raw_test_passes_only_mail_with_a_marker() {
        assert!(may_link(
            b"Subject: x\n\nCLOSES: https://lore.kernel.org/r/a@b\n"
        ));
        assert!(may_link(
            b"Content-Transfer-Encoding: BASE64\n\nQ2xvc2VzOg==\n"
        ));
        assert!(!may_link(
            b"From: A <a@b>\nSubject: [PATCH] mm: x\n\nSigned-off-by: A <a@b>\n"
        ));
    }

    #[test]
    fn subjects_lose_reply_prefixes_and_patch_tags() {
        let s = Subject::read("Re: RE: [PATCH v3 -next] mm/hugetlb_cgroup: register key");
        assert_eq!(
            s,
            Subject {
                title: "mm/hugetlb_cgroup: register key",
                reply: true,
                patch: true
            }
        );
        let s = Subject::read("[linus:master] [mm]  8d59d2214c:  vm-scalability.throughput");
        assert!(!s.patch && !s.reply);
        assert_eq!(s.title, "8d59d2214c:  vm-scalability.throughput");
    }
}
