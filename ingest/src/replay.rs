//! `lkplake dlq replay`: dead letters parsed again with this version's parser.
//!
//! A letter that now parses has its reports produced to the reports topic (with the source
//! of the original mail) and is then recorded as replayed in the checkpoint topic, so no later
//! replay sends it again; a letter that still fails stays eligible for the next parser. A crash
//! between the two sends its reports again on the next replay, and the transformer skips them by
//! report key.

use crate::KafkaIngestError;
use crate::checkpoint::{Checkpointer, Checkpoints, Position, dead_letter_key};
use crate::follow::{blocking, ensure_sources_topic};
use crate::kafka::{Item, KafkaTarget, Sent, deliver, encode, producer};
use crate::letter::{DeadLetter, read_dead_letters};
use lkplake_parse::parallel::panic_reason;
use lkplake_parse::parser::{Parsed, parse_message};
use std::panic::AssertUnwindSafe;

/// What a replay did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Letters in the dead-letter topic.
    pub letters: u64,
    /// Of those, replayed by an earlier run (not sent again).
    pub already_replayed: u64,
    /// Replayed now: they parse, and their reports were delivered.
    pub replayed: u64,
    /// Reports those held.
    pub reports: u64,
    /// Mentions those held (replies that cite a report).
    pub mentions: u64,
    /// Links those made (statements about a report, its culprit or its fix).
    pub links: u64,
    /// Letters the parser now reads as not a report at all (settled, nothing sent).
    pub not_reports: u64,
    /// Letters that still do not parse, left for a later parser; each with its reason.
    pub still_failing: Vec<(DeadLetter, String)>,
}

/// Replays every dead letter not replayed before.
pub async fn replay(
    target: &KafkaTarget,
    sources_topic: &str,
) -> Result<ReplaySummary, KafkaIngestError> {
    lkplake_kafka::reachable(&target.topics.brokers).await?;
    ensure_sources_topic(&target.topics.brokers, sources_topic).await?;
    let (brokers, dlq, topic) = (
        target.topics.brokers.clone(),
        target.topics.dlq.clone(),
        sources_topic.to_owned(),
    );
    let (letters, saved) = blocking("reading the dead letters", move || {
        Ok((
            read_dead_letters(&brokers, &dlq)?,
            Checkpoints::load(&brokers, &topic)?,
        ))
    })
    .await?;
    let producer = producer(&target.topics.brokers)?;
    let mut checkpoints = Checkpointer::new(producer.clone(), sources_topic, saved);
    let mut summary = ReplaySummary {
        letters: letters.len() as u64,
        ..ReplaySummary::default()
    };
    for letter in letters {
        let key = dead_letter_key(&target.topics.dlq, letter.partition, letter.offset);
        if checkpoints.saved.get(&key) == Some(&Position::Replayed) {
            summary.already_replayed += 1;
            continue;
        }
        if let Some(reason) = not_whole(&letter) {
            summary.still_failing.push((letter, reason));
            continue;
        }
        let parsed = std::panic::catch_unwind(AssertUnwindSafe(|| {
            parse_message(&letter.raw, &letter.source)
        }))
        .unwrap_or_else(|panic| {
            Err(lkplake_parse::ParseError::Panicked {
                reason: panic_reason(panic.as_ref()),
            })
        });
        let messages = match parsed {
            Ok(Parsed::NotAReport) => {
                summary.not_reports += 1;
                checkpoints.save(key, Position::Replayed).await?;
                continue;
            }
            Ok(parsed) => parsed.into_messages(),
            Err(e) => {
                let reason = e.to_string();
                summary.still_failing.push((letter, reason));
                continue;
            }
        };
        // Every message acknowledged before the letter is recorded as replayed.
        for message in messages {
            match encode(message) {
                Item::Report {
                    key,
                    sent,
                    source,
                    payload,
                } => {
                    deliver(
                        &producer,
                        &target.topics.reports,
                        key,
                        payload,
                        None,
                        source,
                    )
                    .await?;
                    match sent {
                        Sent::Mention => summary.mentions += 1,
                        Sent::Link => summary.links += 1,
                        Sent::Report | Sent::Quoted => summary.reports += 1,
                    }
                }
                _ => {
                    summary
                        .still_failing
                        .push((letter.clone(), "cannot encode it as JSON".to_owned()));
                }
            }
        }
        checkpoints.save(key, Position::Replayed).await?;
        summary.replayed += 1;
    }
    Ok(summary)
}

/// Why a letter cannot be parsed again, when it holds only the first bytes of its message:
/// parsed, that part would pass for the whole mail, a report cut short or a "not a report"
/// recorded as replayed for good. `None` for a letter that holds its message whole.
fn not_whole(letter: &DeadLetter) -> Option<String> {
    if let Some(limit) = letter.truncated {
        return Some(format!(
            "it holds only the first {} bytes of a message larger than {limit} bytes, the most one message may be, which ingest did not read further: split the input into smaller files and ingest those",
            letter.raw.len()
        ));
    }
    letter.whole.as_ref().map(|(size, sha256)| {
        format!(
            "it holds only the first {} of {size} bytes (sha256 {sha256}): ingest the input itself again",
            letter.raw.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lkplake_schemas::Source;

    /// A letter of ingest's for message 3 of `big.mbox`, holding `raw`.
    fn letter(raw: &[u8]) -> DeadLetter {
        DeadLetter {
            partition: 0,
            offset: 7,
            source: Source::file("big.mbox", 3),
            consumed: None,
            error: "a reason".to_owned(),
            raw: raw.to_vec(),
            whole: None,
            truncated: None,
        }
    }

    #[test]
    fn a_truncated_letter_is_refused_naming_the_limit_and_what_it_holds() {
        // What ingest keeps of a message over 64 MiB: its first 64 KiB, and the limit.
        let truncated = DeadLetter {
            truncated: Some(64 << 20),
            ..letter(&vec![b'x'; 64 << 10])
        };
        assert_eq!(
            not_whole(&truncated).as_deref(),
            Some(
                "it holds only the first 65536 bytes of a message larger than 67108864 bytes, the most one message may be, which ingest did not read further: split the input into smaller files and ingest those"
            )
        );
    }

    #[test]
    fn a_letter_cut_to_the_topics_limit_is_not_replayed_and_a_whole_one_is() {
        let cut = DeadLetter {
            whole: Some((30_000_000, "ab".repeat(32))),
            ..letter(&[b'x'; 1024])
        };
        assert_eq!(
            not_whole(&cut),
            Some(format!(
                "it holds only the first 1024 of 30000000 bytes (sha256 {}): ingest the input itself again",
                "ab".repeat(32)
            ))
        );
        assert_eq!(not_whole(&letter(b"Subject: x\n\nbody\n")), None);
    }
}
