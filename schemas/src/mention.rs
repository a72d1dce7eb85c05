//! The `Mention` model: a mail that cites a report without carrying its full table (a reply
//! that quotes the robot's opening sentence and a few rows, an excerpt cut before the table),
//! and the [`Message`] that travels on `lkp.reports`: a report, a mention or a link.
//!
//! On a list archive such replies outnumber the reports; they are where regressions get
//! triaged ("this is noise", "fixed by ..."), so they are kept, apart from the measurements:
//! nothing a mention quotes becomes a `metrics` row.

use crate::key::{hash_mail, hex_key};
use crate::link::Link;
use crate::report::{Kind, Report, Source};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One mail that cites a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Mention {
    /// Wire format version, [`crate::SCHEMA_VERSION`] when produced by this code (mentions
    /// exist since version 2).
    pub schema_version: u32,
    /// Identifies the mail, so that a mail ingested twice is kept once (see [`mention_key`]).
    pub mention_key: String,
    /// Message-ID of the mail, with angle brackets, when known.
    pub message_id: Option<String>,
    /// The `In-Reply-To:` Message-ID, when present.
    pub in_reply_to: Option<String>,
    /// Every Message-ID of `References:` and `In-Reply-To:`, oldest first: the thread the mail
    /// answers (lists truncate long chains, so the cited report may be missing from it).
    pub references: Vec<String>,
    /// When the mail was sent (UTC).
    pub date: Option<DateTime<Utc>>,
    /// The `From:` header, decoded, e.g. `Shakeel Butt <shakeel.butt@linux.dev>`.
    pub sender: Option<String>,
    /// Subject of the mail, when known.
    pub subject: Option<String>,
    /// The cited commit as quoted: from a quoted `commit:` line, else the subject (`[mm]
    /// 01b9da291c: ...`). A prefix of the report's commit id, or all 40 digits.
    pub commit: Option<String>,
    /// The test suite, when a quoted `in testcase:` line or parameter header names it.
    pub testcase: Option<String>,
    /// The test box group, when a quoted parameter header names it.
    pub machine: Option<String>,
    /// The robot's verdict as quoted: `regression` or `improvement` from a performance
    /// report's opening, `failure` from a functional report's (`noticed "..." on:`).
    pub kind: Option<Kind>,
    /// The headline metric as quoted (the opening sentence, else the subject); for a
    /// functional report, the failure it names.
    pub metric: Option<String>,
    /// The headline change in percent as quoted, signed as printed (`-29.4`; `67.7` where the
    /// sentence prints no sign).
    pub change_pct: Option<f64>,
    /// The table rows the mail quotes, quote marks removed and blanks collapsed, in order.
    pub rows: Vec<String>,
    /// Where the mail was read from.
    pub source: Source,
}

/// The mention key: the Message-ID when the mail has one (archives and re-deliveries keep it),
/// else the subject, date and source, as 32 hex digits.
pub fn mention_key(mention: &Mention) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"lkplake-mention-key-v1\0");
    hash_mail(
        &mut hasher,
        mention.message_id.as_deref(),
        mention.subject.as_deref(),
        mention.date,
        &mention.source,
    );
    hex_key(hasher)
}

/// One message of `lkp.reports`.
///
/// Serialized as the bare [`Report`], [`Mention`] or [`Link`] object (no envelope), so every
/// version 1 message, which is a bare report, is read unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Message {
    /// A performance or functional report.
    Report(Box<Report>),
    /// A mail that cites a report.
    Mention(Box<Mention>),
    /// One statement of a later mail about a report, its culprit or its fix.
    Link(Box<Link>),
}

impl Message {
    /// Decodes one message. A report is tried first and decoded once (reports are nearly all
    /// of the traffic); when no shape fits, the report's error is returned, since that is
    /// what a producer most likely meant to send.
    pub fn decode(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        match serde_json::from_slice::<Report>(bytes) {
            Ok(report) => Ok(Message::Report(Box::new(report))),
            Err(report_error) => serde_json::from_slice::<Mention>(bytes)
                .map(|m| Message::Mention(Box::new(m)))
                .or_else(|_| {
                    serde_json::from_slice::<Link>(bytes).map(|l| Message::Link(Box::new(l)))
                })
                .map_err(|_| report_error),
        }
    }

    /// The key the message is sent under: the report key, the mention key or the link key.
    pub fn key(&self) -> &str {
        match self {
            Message::Report(r) => &r.report_key,
            Message::Mention(m) => &m.mention_key,
            Message::Link(l) => &l.link_key,
        }
    }

    /// The wire format version the producer wrote.
    pub fn schema_version(&self) -> u32 {
        match self {
            Message::Report(r) => r.schema_version,
            Message::Mention(m) => m.schema_version,
            Message::Link(l) => l.schema_version,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mention() -> Mention {
        Mention {
            schema_version: crate::SCHEMA_VERSION,
            mention_key: String::new(),
            message_id: Some("<a@b>".into()),
            in_reply_to: None,
            references: vec![],
            date: None,
            sender: None,
            subject: Some("Re: x".into()),
            commit: Some("01b9da291c".into()),
            testcase: None,
            machine: None,
            kind: Some(Kind::Regression),
            metric: None,
            change_pct: None,
            rows: vec![],
            source: Source::file("m.mbox", 3),
        }
    }

    #[test]
    fn a_mention_decodes_as_a_mention_and_a_report_as_a_report() {
        let m = mention();
        let bytes = serde_json::to_vec(&m).unwrap_or_default();
        assert_eq!(
            Message::decode(&bytes).ok(),
            Some(Message::Mention(Box::new(m)))
        );
    }

    #[test]
    fn a_link_decodes_as_a_link_not_as_a_mention_or_a_report() {
        let link = Link {
            schema_version: crate::SCHEMA_VERSION,
            link_key: "k".into(),
            kind: crate::LinkKind::Fixes,
            target: "1e8017bb4265".into(),
            message_id: Some("<a@b>".into()),
            date: None,
            sender: None,
            subject: Some("[PATCH] mm: x".into()),
            patch_title: Some("mm: x".into()),
            commit: None,
            source: Source::file("m.mbox", 3),
        };
        let bytes = serde_json::to_vec(&link).unwrap_or_default();
        let decoded = Message::decode(&bytes).ok();
        assert_eq!(decoded, Some(Message::Link(Box::new(link))));
        assert_eq!(decoded.map(|m| m.key().to_owned()), Some("k".to_owned()));
    }

    #[test]
    fn json_that_is_neither_reports_what_a_report_lacks() {
        let err = Message::decode(br#"{"schema_version":2}"#).err();
        assert!(
            err.is_some_and(|e| e.to_string().contains("missing field `report_key`")),
            "the report's error names its first missing field"
        );
    }

    #[test]
    fn the_mention_key_is_the_message_id_wherever_the_mail_was_read() {
        let a = mention();
        let mut b = mention();
        b.source = Source::file("other.mbox", 9);
        assert_eq!(mention_key(&a), mention_key(&b));
        b.message_id = None;
        assert_ne!(mention_key(&a), mention_key(&b));
    }
}
