//! Errors of ingest's Kafka side, each naming what failed and what to check.

use lkplake_parse::SourceError;
use lkplake_schemas::ErrorKind;
use rdkafka::error::KafkaError;

/// Errors of the Kafka side of ingest; each variant's message is its documentation.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum KafkaIngestError {
    #[error(
        "cannot create a Kafka client for {brokers}: {source}; check --brokers / LKPLAKE_BROKERS"
    )]
    Client { brokers: String, source: KafkaError },
    #[error("cannot create topic {topic}: {source}")]
    CreateTopic { topic: String, source: KafkaError },
    #[error(
        "delivery to {topic} failed for {path}, message {index}: {source}; is the broker reachable?"
    )]
    Delivery {
        topic: String,
        path: String,
        index: u64,
        source: Box<KafkaError>,
    },
    #[error(transparent)]
    Broker(#[from] lkplake_kafka::BrokerError),
    #[error(
        "the parser thread failed while reading {input}: {reason}; what it read before is delivered, the rest of the input is not"
    )]
    ParserFailed { input: String, reason: String },
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("{what} failed: {source}")]
    Task {
        what: &'static str,
        source: tokio::task::JoinError,
    },
    #[error(
        "topic {topic} takes messages of at most {bytes} bytes (its max.message.bytes): too small for a report; raise it to {wanted} (what `lkplake ingest` gives the topics it creates)"
    )]
    TopicLimit {
        topic: String,
        bytes: usize,
        wanted: usize,
    },
    #[error("cannot save the checkpoint {key} to {topic}: {reason}; is the broker reachable?")]
    Checkpoint {
        topic: String,
        key: String,
        reason: String,
    },
}

impl KafkaIngestError {
    /// What kind of failure this is, for the exit status.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Source(e) => e.kind(),
            Self::ParserFailed { .. } | Self::Task { .. } => ErrorKind::Failed,
            Self::Client { .. }
            | Self::CreateTopic { .. }
            | Self::Delivery { .. }
            | Self::Broker(_)
            | Self::TopicLimit { .. }
            | Self::Checkpoint { .. } => ErrorKind::Broker,
        }
    }
}
