//! Follow-ups: the robot operator's replies that measure more commits than the report did (a
//! fix-up, a later version of a patch, a tag). The report's `commit` is the commit the mail is
//! about and the headline is the change the robot stated for it; every column keeps its own
//! commit. Expected values read off the corpus mails
//! (`parse/tests/fixtures/failures-and-mentions.md`, section 3).

use crate::failures::corpus_message;
use lkplake_parse::Parsed;
use lkplake_schemas::Report;

fn report(index: u64) -> Report {
    match corpus_message(index) {
        Parsed::Reports(mut reports) if reports.len() == 1 => reports.remove(0),
        other => panic!("message {index}: expected one report, got {other:?}"),
    }
}

#[test]
fn a_follow_up_whose_last_column_is_a_fix_up_names_the_reported_commit() {
    // 98: `commit:` list `8285917d6f`, `01b9da291c`, `8da1b1ea43 ... <---- v2`; the subject
    // names 01b9da291c; `38288993 -67.7% 12355813 ± 3% -0.8% 37987427 stress-ng.switch.ops_per_sec`.
    let r = report(98);
    assert_eq!(r.commit.id, "01b9da291c");
    assert_eq!(
        r.commit.title.as_deref(),
        Some("mm: memcontrol: convert objcg to be per-memcg per-node type")
    );
    assert_eq!(r.base_commit.id, "8285917d6f");
    let headline = r.headline.map(|h| (h.metric, h.change_pct));
    assert_eq!(
        headline,
        Some(("stress-ng.switch.ops_per_sec".to_owned(), -67.7))
    );
    assert_eq!(
        r.tests[0].commits,
        vec!["8285917d6f", "01b9da291c", "8da1b1ea43"],
        "every column keeps its commit"
    );
}

#[test]
fn a_follow_up_whose_subject_lost_the_commit_takes_the_quoted_commit_line() {
    // 692: subject `[mm]  :  aim7.jobs-per-min -29.4% regression`; `commit:
    // 98c9daf5ae6be008f78c07b744bcff7bcc6e98da (...)` quoted at depth 6; the last column is
    // `981204d280 <--- your v2 "_pad2_" patch`, whose change is +0.2%.
    let r = report(692);
    assert_eq!(r.commit.id, "98c9daf5ae6be008f78c07b744bcff7bcc6e98da");
    assert_eq!(r.base_commit.id, "94b7e5bf09");
    let headline = r.headline.map(|h| (h.metric, h.change_pct));
    assert_eq!(headline, Some(("aim7.jobs-per-min".to_owned(), -29.4)));
    assert_eq!(r.tests[0].commits.len(), 4);
    assert_eq!(r.tests[0].commits[3], "981204d280");
}

#[test]
fn a_follow_up_with_a_tag_as_base_keeps_the_tag() {
    // 1946: `commit:` list `v5.6-rc4` / `f71ed0f653e9dbd57347f6321e36556004a17b52`.
    let r = report(1946);
    assert_eq!(r.base_commit.id, "v5.6-rc4");
    assert_eq!(r.commit.id, "f71ed0f653e9dbd57347f6321e36556004a17b52");
}
