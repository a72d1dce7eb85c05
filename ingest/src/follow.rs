//! `ingest --follow`: keeps producing what arrives in the sources until stopped.
//!
//! Every poll it walks the user's paths again (a new epoch of an inbox, a new file in a
//! Maildir's `new/` or `cur/` is found like the first time), skips what the checkpoints say
//! was delivered, and ingests the rest; with `fetch`, each epoch first fetches from its remote.
//! Checkpoints live in Kafka ([`crate::checkpoint`]), so a follower restarted anywhere resumes
//! where the last one stopped.

use crate::KafkaIngestError;
use crate::checkpoint::{Checkpointer, Checkpoints};
use crate::kafka::{IngestSummary, KafkaTarget, create_topics, ingest, producer};
use lkplake_parse::source::{self, Input};
use rdkafka::admin::{NewTopic, TopicReplication};
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What to follow and how.
#[derive(Debug, Clone)]
pub struct FollowConfig {
    /// The user's paths, walked again every poll.
    pub paths: Vec<PathBuf>,
    /// Time between two looks at the sources.
    pub poll: Duration,
    /// `git fetch` every epoch from its remote before looking.
    pub fetch: bool,
    /// The compacted topic of checkpoints.
    pub sources_topic: String,
    /// Create the checkpoint topic when missing (off for librdkafka's mock cluster).
    pub create_topic: bool,
}

/// Follows the sources until `stop`; `each_round` is called with what every round that found
/// something new did. Returns the sum of all rounds.
pub async fn follow(
    config: FollowConfig,
    target: &KafkaTarget,
    stop: CancellationToken,
    each_round: impl Fn(&IngestSummary),
) -> Result<IngestSummary, KafkaIngestError> {
    lkplake_kafka::reachable(&target.topics.brokers).await?;
    if config.create_topic {
        ensure_sources_topic(&target.topics.brokers, &config.sources_topic).await?;
    }
    let (brokers, topic) = (target.topics.brokers.clone(), config.sources_topic.clone());
    let saved = blocking("reading the checkpoints", move || {
        Checkpoints::load(&brokers, &topic)
    })
    .await?;
    let mut checkpoints = Checkpointer::new(
        producer(&target.topics.brokers)?,
        config.sources_topic.clone(),
        saved,
    );
    let mut total = IngestSummary::default();
    loop {
        let (paths, fetch) = (config.paths.clone(), config.fetch);
        let saved = checkpoints.saved.clone();
        let inputs = blocking(
            "listing the sources",
            move || -> Result<_, KafkaIngestError> {
                let inputs = source::expand_paths(&paths)?;
                if fetch {
                    fetch_epochs(&inputs);
                }
                Ok(source::sized(saved.pending(inputs)))
            },
        )
        .await?;
        if !inputs.inputs.is_empty() {
            let round =
                ingest(inputs, target, |_| {}, stop.clone(), Some(&mut checkpoints)).await?;
            each_round(&round);
            let stopped = round.stopped.is_some();
            // Not a sum of the rounds' missing messages: an epoch that lacks one is read again
            // at every poll, and `absorb` counts what it lacks once (each round's own summary,
            // above, still warns of it).
            total.absorb(round);
            if stopped {
                break;
            }
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(config.poll) => {}
        }
    }
    Ok(total)
}

/// Fetches every epoch that has a remote. A failed fetch (the network, the remote) is a
/// warning: what is already here is still followed, and the next poll tries again.
fn fetch_epochs(inputs: &[Input]) {
    for input in inputs {
        if let Input::Epoch(epoch) = input {
            match epoch.fetch() {
                Ok(Some(remote)) => tracing::debug!(epoch = %input.name(), %remote, "fetched"),
                Ok(None) => {}
                Err(e) => tracing::warn!("{e}; will try again at the next poll"),
            }
        }
    }
}

/// Runs blocking work (walking paths, git, reading a topic to its end) off the runtime;
/// `what` names it if the task fails.
pub(crate) async fn blocking<T: Send + 'static>(
    what: &'static str,
    work: impl FnOnce() -> Result<T, KafkaIngestError> + Send + 'static,
) -> Result<T, KafkaIngestError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|source| KafkaIngestError::Task { what, source })?
}

/// Creates the checkpoint topic, compacted (only each source's last position matters),
/// unless it exists.
pub async fn ensure_sources_topic(brokers: &str, topic: &str) -> Result<(), KafkaIngestError> {
    let compacted =
        NewTopic::new(topic, 1, TopicReplication::Fixed(1)).set("cleanup.policy", "compact");
    create_topics(brokers, &[compacted]).await
}

#[cfg(test)]
mod tests {
    use crate::kafka::IngestSummary;

    /// What one poll's `ingest` reports of the epochs it read, each with the messages it
    /// lacked (`ingest` names an epoch by its input's name).
    fn poll(epochs: &[(&str, u64)]) -> IngestSummary {
        IngestSummary {
            inputs: epochs.len() as u64,
            missing: epochs.iter().map(|(_, missing)| missing).sum(),
            missing_in: epochs
                .iter()
                .map(|(epoch, missing)| ((*epoch).to_owned(), *missing))
                .collect(),
            ..IngestSummary::default()
        }
    }

    #[test]
    fn a_message_missing_at_every_poll_is_counted_once() {
        let mut total = IngestSummary::default();
        // The follower stops at the missing message and reads from it again at every poll.
        for _ in 0..120 {
            total.absorb(poll(&[("lore/linux-block epoch 2", 1)]));
        }
        assert_eq!(total.missing, 1);
        assert_eq!(total.inputs, 120);
        assert!(!total.all_read());
    }

    #[test]
    fn messages_missing_from_two_epochs_are_counted_apart() {
        let mut total = IngestSummary::default();
        total.absorb(poll(&[("lore/linux-block epoch 2", 1)]));
        total.absorb(poll(&[
            ("lore/linux-block epoch 2", 1),
            ("lore/lkml epoch 17", 1),
        ]));
        total.absorb(poll(&[("lore/lkml epoch 17", 1)]));
        assert_eq!(total.missing, 2);
    }

    #[test]
    fn a_missing_message_a_later_poll_read_is_no_longer_counted() {
        let mut total = IngestSummary::default();
        total.absorb(poll(&[("lore/linux-block epoch 2", 1)]));
        // `git fetch` brought the blob: the next poll reads past it, to the epoch's head.
        total.absorb(poll(&[("lore/linux-block epoch 2", 0)]));
        assert_eq!(total.missing, 0);
        assert!(total.all_read());
        // A later message of the epoch is missing: the first was read, this one was not.
        total.absorb(poll(&[("lore/linux-block epoch 2", 1)]));
        assert_eq!(total.missing, 1);
    }

    #[test]
    fn a_poll_that_does_not_read_an_epoch_keeps_what_it_lacked() {
        let mut total = IngestSummary::default();
        total.absorb(poll(&[("lore/linux-block epoch 2", 1)]));
        // A poll that read only a new file (or could not read the epoch this time).
        total.absorb(poll(&[]));
        assert_eq!(total.missing, 1);
    }
}
