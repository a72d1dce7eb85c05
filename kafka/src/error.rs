//! Errors of talking to a broker, each naming the broker or topic and what to check.

use lkplake_schemas::ErrorKind;
use rdkafka::error::KafkaError;

/// Why a call failed; each variant's message is its documentation (and what the user reads).
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error(
        "cannot create a Kafka client for {brokers}: {source}; check --brokers / LKPLAKE_BROKERS"
    )]
    Client {
        brokers: String,
        source: Box<KafkaError>,
    },
    #[error(
        "no Kafka broker answers at {brokers} ({reason}); start one (./infra/tansu.sh start) or fix --brokers / LKPLAKE_BROKERS"
    )]
    Unreachable { brokers: String, reason: String },
    #[error("reading the metadata of {topic} from {brokers}: {source}")]
    Metadata {
        brokers: String,
        topic: String,
        source: Box<KafkaError>,
    },
    #[error(
        "the broker did not answer a fetch for partitions {partitions:?} of {topic}, so their ends are unknown; is the broker up?"
    )]
    EndsUnknown { topic: String, partitions: Vec<i32> },
    #[error("{what}: {reason}")]
    Thread { what: String, reason: String },
    #[error("reading {topic}: {source}")]
    Consume {
        topic: String,
        source: Box<KafkaError>,
    },
}

impl BrokerError {
    /// What kind of failure this is, for the exit status: always the broker's.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Broker
    }
}
