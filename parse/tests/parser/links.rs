//! Links on the whole corpus against a count made without the parser:
//! `fixtures/links/cgroups-closes.tsv` is what `infra/bench/count_links.py` (Python's `email`
//! package and regular expressions over each mail's own text) finds there: for each Message-ID,
//! how many mails name it in their own `Closes:`/`Link:` trailer. The robot's suggestion box
//! (`| Closes:`), quoted trailers and diff lines count in neither.

use crate::fixtures::repo_root;
use lkplake_parse::decode::decode;
use lkplake_parse::parser::links::links;
use lkplake_parse::prefilter::may_link;
use lkplake_parse::source::InputFile;
use lkplake_schemas::Source;
use lkplake_schemas::link::LinkKind;
use std::collections::{BTreeMap, BTreeSet};

/// Mails per Message-ID, as the script counted them.
fn counted() -> BTreeMap<String, usize> {
    let path = repo_root().join("parse/tests/fixtures/links/cgroups-closes.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (count, id) = l.split_once('\t').unwrap_or_else(|| panic!("{l}"));
            (
                id.to_owned(),
                count.parse().unwrap_or_else(|e| panic!("{l}: {e}")),
            )
        })
        .collect()
}

#[test]
fn every_closes_trailer_of_the_corpus_is_a_link_and_no_quoted_suggestion_is() {
    let path = repo_root().join("parse/tests/fixtures/cgroups-lkp-cc.mbox.gz");
    let file = InputFile::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut linking: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for message in file.messages() {
        let doc = decode(&message.bytes);
        let source = Source::file(path.display().to_string(), message.index);
        let found = links(&doc, &source);
        let closes: Vec<_> = found
            .iter()
            .filter(|l| l.kind == LinkKind::Closes)
            .collect();
        if !closes.is_empty() {
            assert!(
                may_link(&message.bytes),
                "mail {} links but the raw test would skip it",
                message.index
            );
        }
        for link in closes {
            // A link names a Message-ID its mail prints (plain or percent-encoded).
            let bare = link.target.trim_start_matches('<').trim_end_matches('>');
            assert!(
                doc.body.contains(bare) || doc.body.contains(&bare.replace('@', "%40")),
                "mail {} links {} which its text does not name",
                message.index,
                link.target
            );
            linking
                .entry(link.target.clone())
                .or_default()
                .insert(message.index);
        }
    }
    let found: BTreeMap<String, usize> = linking
        .into_iter()
        .map(|(id, mails)| (id, mails.len()))
        .collect();
    assert_eq!(found, counted());
    // `grep`-countable too: ten mails of the corpus (the versions of one fix and their
    // resends) carry `Closes: https://lore.kernel.org/oe-lkp/202605121641.b6a60cb0-lkp@intel.com`
    // at the start of a line.
    assert_eq!(
        found.get("<202605121641.b6a60cb0-lkp@intel.com>"),
        Some(&10)
    );
}
