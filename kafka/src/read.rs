//! Reading a topic to its end, outside any consumer group (the checkpoints and the dead letters
//! are read this way), and the consumer context that keeps the end of a partition out of the
//! log.

use crate::BrokerError;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::{Offset, TopicPartitionList};
use std::time::Duration;

/// Whether librdkafka's global error is the end of a partition: a consumer with
/// `enable.partition.eof` learns a partition is drained that way, which is no error to log.
pub fn is_partition_end(error: &KafkaError) -> bool {
    matches!(error, KafkaError::PartitionEOF(_))
        || error.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::PartitionEOF)
}

/// A consumer context for reading to the end: logs librdkafka's errors but the end of a
/// partition ([`is_partition_end`]).
#[derive(Debug)]
pub struct QuietAtEnd;

impl ClientContext for QuietAtEnd {
    fn error(&self, error: KafkaError, reason: &str) {
        if !is_partition_end(&error) {
            tracing::warn!("librdkafka: {error}: {reason}");
        }
    }
}

impl ConsumerContext for QuietAtEnd {}

/// Reads a whole topic, every partition from its beginning to its current end, outside any
/// consumer group. A topic that does not exist yet reads as empty. Blocks.
pub fn read_topic(
    brokers: &str,
    topic: &str,
    mut each: impl FnMut(&BorrowedMessage<'_>),
) -> Result<(), BrokerError> {
    let err = |source| BrokerError::Consume {
        topic: topic.to_owned(),
        source: Box::new(source),
    };
    let consumer: BaseConsumer<QuietAtEnd> =
        crate::clients::reader(brokers, "lkplake-topic-reader")
            .set("enable.partition.eof", "true")
            .create_with_context(QuietAtEnd)
            .map_err(|source| BrokerError::Client {
                brokers: brokers.to_owned(),
                source: Box::new(source),
            })?;
    let mut assignment = TopicPartitionList::new();
    let mut remaining = 0;
    for w in crate::watermarks(&consumer, brokers, topic)? {
        if w.high > w.low {
            assignment
                .add_partition_offset(topic, w.partition, Offset::Beginning)
                .map_err(err)?;
            remaining += 1;
        }
    }
    if remaining == 0 {
        return Ok(());
    }
    consumer.assign(&assignment).map_err(err)?;
    // End of partition is signalled when the fetch position reaches the high watermark that
    // fetch responses state: the real end, even on Tansu (see `crate::ends`).
    while remaining > 0 {
        match consumer.poll(Duration::from_secs(10)) {
            None => break,
            Some(Err(e)) if is_partition_end(&e) => remaining -= 1,
            Some(Err(e)) => return Err(err(e)),
            Some(Ok(message)) => each(&message),
        }
    }
    Ok(())
}
