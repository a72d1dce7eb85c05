//! Errors of a transform run, each naming what failed and what to check.

use crate::tracker::Missing;
use lkplake_kafka::BrokerError;
use lkplake_lake::LakeError;
use lkplake_schemas::ErrorKind;
use rdkafka::error::KafkaError;

/// Why the transformer stopped; each variant's message is its documentation (and what the user reads).
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    #[error(transparent)]
    Broker(#[from] BrokerError),
    #[error(
        "cannot create a Kafka consumer for {brokers}: {source}; check --brokers / LKPLAKE_BROKERS"
    )]
    Client { brokers: String, source: KafkaError },
    #[error(
        "cannot subscribe to {topic}: {source}; does the topic exist? (`lkplake ingest` creates it)"
    )]
    Subscribe { topic: String, source: KafkaError },
    #[error(
        "messages of {topic} cannot be read: {}; the lake holds everything before them (rerunning resumes there)",
        missing.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    Incomplete {
        topic: String,
        missing: Vec<Missing>,
    },
    #[error(transparent)]
    Lake(#[from] LakeError),
    #[error("normalizing a batch failed: {0}")]
    Normalize(#[source] arrow::error::ArrowError),
    #[error("the normalizing worker failed: {0}")]
    Worker(#[source] tokio::task::JoinError),
    #[error(transparent)]
    DeadLetter(#[from] DeadLetterError),
}

impl TransformError {
    /// What kind of failure this is, for the exit status.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Broker(_)
            | Self::Client { .. }
            | Self::Subscribe { .. }
            | Self::DeadLetter(_) => ErrorKind::Broker,
            Self::Lake(_) => ErrorKind::Lake,
            Self::Incomplete { .. } | Self::Normalize(_) | Self::Worker(_) => ErrorKind::Failed,
        }
    }
}

/// Why a message the transformer cannot read was not stored in its dead-letter topic. Nothing
/// at or after that message's offset was committed, so a rerun reads it and dead-letters it
/// again; each variant's message is its documentation.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum DeadLetterError {
    #[error(
        "cannot create a Kafka producer for the dead-letter topic on {brokers}: {source}; check --brokers / LKPLAKE_BROKERS"
    )]
    Client { brokers: String, source: KafkaError },
    #[error(
        "cannot create the dead-letter topic {topic}: {source}; create it (one partition) or fix --transform-dlq-topic"
    )]
    CreateTopic { topic: String, source: KafkaError },
    #[error(
        "dead-lettering {consumed} to {topic} failed: {source}; its offset was not committed (rerunning reads it again); is the broker reachable?"
    )]
    Delivery {
        topic: String,
        consumed: String,
        source: KafkaError,
    },
}
