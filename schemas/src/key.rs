//! Canonical keys.
//!
//! A report key must be identical for the robot's original mail, a web archive copy, and a
//! reply that quotes it, so it is built only from what every copy carries intact: the commit
//! ids of the comparison columns and the identity of the main test. Everything a copy may
//! damage or cut (prose, dates, addresses, the tail of the table) stays out.

use crate::report::{Report, Source};
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Commit ids are compared on this many leading hex digits: the table's `commit:` list prints
/// 10, the header line 40.
const COMMIT_PREFIX_LEN: usize = 10;

fn commit_prefix(id: &str) -> String {
    id.chars()
        .take(COMMIT_PREFIX_LEN)
        .collect::<String>()
        .to_ascii_lowercase()
}

/// The report key of a report with these column commits and main test, as 32 hex digits.
pub fn report_key_of(
    commits: &[String],
    testcase: &str,
    tbox_group: &str,
    params: &BTreeMap<String, String>,
) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"lkplake-report-key-v1\0");
    for commit in commits {
        hasher.update(commit_prefix(commit).as_bytes());
        hasher.update(b"\0");
    }
    hasher.update(b"\x01");
    for part in [testcase, tbox_group] {
        hasher.update(part.as_bytes());
        hasher.update(b"\0");
    }
    for (k, v) in params {
        hasher.update(k.as_bytes());
        hasher.update(b"=");
        hasher.update(v.as_bytes());
        hasher.update(b"\0");
    }
    let digest = hasher.finalize();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The report key of a parsed report (see [`report_key_of`]); empty tests give a key over the
/// commits alone.
pub fn report_key(report: &Report) -> String {
    match report.tests.first() {
        Some(test) => report_key_of(
            &test.commits,
            &test.testcase,
            &test.tbox_group,
            &test.params,
        ),
        None => report_key_of(
            &[report.base_commit.id.clone(), report.commit.id.clone()],
            "",
            "",
            &BTreeMap::new(),
        ),
    }
}

/// Canonical `k=v` form of a parameter map, sorted by key, joined by `,`: the `params` column
/// of the lake and part of a series key.
pub fn canonical_params(params: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for (i, (k, v)) in params.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push('=');
        out.push_str(v);
    }
    out
}

/// Feeds what identifies a mail to `hasher`: its Message-ID, else its subject, date and source.
pub(crate) fn hash_mail(
    hasher: &mut Sha256,
    message_id: Option<&str>,
    subject: Option<&str>,
    date: Option<DateTime<Utc>>,
    source: &Source,
) {
    match message_id {
        Some(id) => hasher.update(id.as_bytes()),
        None => {
            hasher.update(subject.unwrap_or("").as_bytes());
            hasher.update(b"\0");
            hasher.update(date.map(|d| d.to_rfc3339()).unwrap_or_default());
            hasher.update(b"\0");
            hasher.update(source.to_string().as_bytes());
        }
    }
}

/// The first 16 bytes of the digest as 32 hex digits.
pub(crate) fn hex_key(hasher: Sha256) -> String {
    let digest = hasher.finalize();
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> BTreeMap<String, String> {
        [("mode", "process"), ("nr_task", "16")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    #[test]
    fn key_compares_commits_on_ten_hex_digits_case_insensitively() {
        let short = report_key_of(
            &["edb4f1ceb1".into(), "c0af5203b9".into()],
            "will-it-scale",
            "lkp-csl-2sp9",
            &params(),
        );
        let long = report_key_of(
            &[
                "EDB4F1CEB161C083".into(),
                "c0af5203b9dbf4cd8b424298b1c".into(),
            ],
            "will-it-scale",
            "lkp-csl-2sp9",
            &params(),
        );
        assert_eq!(short, long);
        assert_eq!(short.len(), 32);
    }

    #[test]
    fn key_differs_when_the_test_differs() {
        let commits = ["edb4f1ceb1".to_owned(), "c0af5203b9".to_owned()];
        let a = report_key_of(&commits, "will-it-scale", "lkp-csl-2sp9", &params());
        let b = report_key_of(&commits, "will-it-scale", "lkp-csl-2sp7", &params());
        let mut other = params();
        other.insert("mode".into(), "thread".into());
        let c = report_key_of(&commits, "will-it-scale", "lkp-csl-2sp9", &other);
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn canonical_params_are_sorted_key_value_pairs() {
        assert_eq!(canonical_params(&params()), "mode=process,nr_task=16");
    }
}
