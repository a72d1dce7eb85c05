//! The offsets a topic's partitions hold, as ListOffsets answers (Tansu 0.6.0 answers "latest"
//! one record batch short: [`crate::ends`] gives the real end where that matters).

use crate::BrokerError;
use rdkafka::consumer::{Consumer, ConsumerContext};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);

/// One partition's low and high watermark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    /// The partition.
    pub partition: i32,
    /// Its first offset still held.
    pub low: i64,
    /// The offset its next message gets.
    pub high: i64,
}

/// Each partition's watermarks, by partition; empty when the topic does not exist. Blocks.
pub fn watermarks<X: ConsumerContext>(
    consumer: &impl Consumer<X>,
    brokers: &str,
    topic: &str,
) -> Result<Vec<Watermarks>, BrokerError> {
    let err = |source| BrokerError::Metadata {
        brokers: brokers.to_owned(),
        topic: topic.to_owned(),
        source: Box::new(source),
    };
    let metadata = consumer.fetch_metadata(Some(topic), TIMEOUT).map_err(err)?;
    let mut out = Vec::new();
    for t in metadata.topics().iter().filter(|t| t.error().is_none()) {
        for p in t.partitions() {
            let (low, high) = consumer
                .fetch_watermarks(topic, p.id(), TIMEOUT)
                .map_err(err)?;
            out.push(Watermarks {
                partition: p.id(),
                low,
                high,
            });
        }
    }
    out.sort_unstable_by_key(|w| w.partition);
    Ok(out)
}
