//! The `Link` model: a later mail that names a report, its culprit or its fix (issue 37, "Links
//! from later mail to a report").
//!
//! The robot's reports say what went wrong; what happened next is in other mail of the same
//! archives: a patch whose `Closes:` or `Link:` trailer names the report, a `Fixes:` trailer
//! naming the culprit commit, a patch reverting the culprit, a maintainer's note that a patch
//! was applied as some commit. Each such statement is one link. A link names its target as the
//! mail prints it (a Message-ID, a commit hash or title); which report it belongs to is decided
//! later, by joining with `reports`, so a link to a mail that is no report costs one row.

use crate::key::{hash_mail, hex_key};
use crate::report::Source;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a link says about its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LinkKind {
    /// A `Closes:` or `Link:` trailer whose URL holds a Message-ID (a lore or lkml path): the
    /// patch says it answers that mail.
    Closes,
    /// A `Fixes: <hash> ("title")` trailer: the patch fixes that commit.
    Fixes,
    /// A patch `Revert "<title>"`: the commit of that title is backed out.
    Revert,
    /// A maintainer's reply saying a patch was applied, naming the commit it became.
    Applied,
}

impl LinkKind {
    /// The kind as stored (`closes`, `fixes`, `revert`, `applied`).
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Closes => "closes",
            LinkKind::Fixes => "fixes",
            LinkKind::Revert => "revert",
            LinkKind::Applied => "applied",
        }
    }
}

/// One statement of a mail about a report, a culprit commit or a fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Link {
    /// Wire format version, [`crate::SCHEMA_VERSION`] when produced by this code (links exist
    /// since version 3).
    pub schema_version: u32,
    /// Identifies the statement, so that a mail ingested twice links once (see [`link_key`]).
    pub link_key: String,
    /// What the mail says about the target.
    pub kind: LinkKind,
    /// What the link names, as the lake stores it. `closes`: the Message-ID with angle
    /// brackets (`<202605121641.b6a60cb0-lkp@intel.com>`), percent escapes decoded. `fixes`:
    /// the commit hash as printed, lowercase (usually 12 digits). `revert`: the title of the
    /// reverted commit, without the quotes. `applied`: the hash of the commit the patch was
    /// applied as, lowercase.
    pub target: String,
    /// Message-ID of the linking mail, with angle brackets, when known.
    pub message_id: Option<String>,
    /// When the linking mail was sent (UTC).
    pub date: Option<DateTime<Utc>>,
    /// The linking mail's `From:` header, decoded, e.g. `Yosry Ahmed <yosryahmed@google.com>`.
    pub sender: Option<String>,
    /// Subject of the linking mail, when known.
    pub subject: Option<String>,
    /// The patch's title: the subject without `Re:` and `[PATCH v2 1/3]`-style tags (or the
    /// `Subject:` line of a patch sent inside a reply); for `applied`, the title of the
    /// `[1/2] title` line (or the patch's) the notice names.
    pub patch_title: Option<String>,
    /// A commit id the mail gives for the patch, lowercase: for `applied`, the applied commit
    /// (the same as `target`); for `revert`, the reverted commit of `This reverts commit
    /// <hash>.`; for `closes` and `fixes`, the upstream commit a stable backport names (`[
    /// Upstream commit <hash> ]`, `commit <hash> upstream.`).
    pub commit: Option<String>,
    /// Where the linking mail was read from.
    pub source: Source,
}

/// The link key: the linking mail (its Message-ID, else its subject, date and source), the
/// kind and the target, as 32 hex digits. One mail can make several links, each its own key.
pub fn link_key(link: &Link) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"lkplake-link-key-v1\0");
    hash_mail(
        &mut hasher,
        link.message_id.as_deref(),
        link.subject.as_deref(),
        link.date,
        &link.source,
    );
    hasher.update(b"\0");
    hasher.update(link.kind.as_str().as_bytes());
    hasher.update(b"\0");
    hasher.update(link.target.as_bytes());
    hex_key(hasher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_serialize_as_their_lowercase_names() {
        for kind in [
            LinkKind::Closes,
            LinkKind::Fixes,
            LinkKind::Revert,
            LinkKind::Applied,
        ] {
            let json = serde_json::to_string(&kind).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
    }

    fn link() -> Link {
        Link {
            schema_version: crate::SCHEMA_VERSION,
            link_key: String::new(),
            kind: LinkKind::Closes,
            target: "<202605121641.b6a60cb0-lkp@intel.com>".into(),
            message_id: Some("<a@b>".into()),
            date: None,
            sender: Some("A <a@b>".into()),
            subject: Some("[PATCH] mm: x".into()),
            patch_title: Some("mm: x".into()),
            commit: None,
            source: Source::file("m.mbox", 3),
        }
    }

    #[test]
    fn a_link_round_trips_through_json() {
        let link = link();
        let json = serde_json::to_vec(&link).unwrap_or_default();
        assert_eq!(serde_json::from_slice::<Link>(&json).ok(), Some(link));
    }

    #[test]
    fn the_link_key_is_the_mail_kind_and_target_wherever_the_mail_was_read() {
        let a = link();
        let mut b = link();
        b.source = Source::file("other.mbox", 9);
        assert_eq!(link_key(&a), link_key(&b));
        b.kind = LinkKind::Fixes;
        assert_ne!(link_key(&a), link_key(&b), "one mail, two statements");
        let mut c = link();
        c.target = "<other@b>".into();
        assert_ne!(link_key(&a), link_key(&c));
    }
}
