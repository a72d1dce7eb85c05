//! Whether a broker answers, asked once before a command starts its work: librdkafka itself
//! retries an unreachable broker for ever and reports only timeouts of whatever operation
//! waited on it ("Admin operation error: OperationTimedOut" after a minute), never that nothing
//! listens at the address.

use crate::BrokerError;
use crate::on_own_thread;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use std::sync::Mutex;
use std::time::Duration;

/// How long a broker has to answer a metadata request before it counts as unreachable.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(10);

/// Keeps the first reason librdkafka gives for a failing connection ("Connect to
/// ipv4#127.0.0.1:1 failed: Connection refused"), which its metadata timeout does not carry.
#[derive(Default)]
struct Reasons {
    first: Mutex<Option<String>>,
}

impl ClientContext for Reasons {
    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!(%error, reason, "broker probe");
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert_with(|| reason.to_owned());
        }
    }
}

impl ConsumerContext for Reasons {}

/// Asks `brokers` for the cluster metadata; an error names the address and why it failed
/// within about [`REACH_TIMEOUT`].
pub async fn reachable(brokers: &str) -> Result<(), BrokerError> {
    let owned = brokers.to_owned();
    on_own_thread(
        "broker-probe",
        REACH_TIMEOUT + Duration::from_secs(3),
        move || probe(&owned),
    )
    .await
    .map_err(|e| match e {
        BrokerError::Thread { reason, .. } => BrokerError::Unreachable {
            brokers: brokers.to_owned(),
            reason,
        },
        other => other,
    })
}

fn probe(brokers: &str) -> Result<(), BrokerError> {
    let consumer: BaseConsumer<Reasons> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "lkplake-broker-probe")
        .set("log_level", "0")
        .create_with_context(Reasons::default())
        .map_err(|source| BrokerError::Client {
            brokers: brokers.to_owned(),
            source: Box::new(source),
        })?;
    match consumer.fetch_metadata(None, REACH_TIMEOUT) {
        Ok(_) => Ok(()),
        Err(e) => {
            let seen = consumer.context().first.lock().ok().and_then(|f| f.clone());
            Err(BrokerError::Unreachable {
                brokers: brokers.to_owned(),
                reason: seen.unwrap_or_else(|| {
                    format!("no answer to a metadata request within {REACH_TIMEOUT:?}: {e}")
                }),
            })
        }
    }
}
