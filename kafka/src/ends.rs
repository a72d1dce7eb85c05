//! The real end of every partition of a topic, as the broker states it in fetch responses.
//!
//! The usual way to ask (ListOffsets "latest", librdkafka's `query_watermark_offsets`) is not
//! trustworthy on Tansu 0.6.0: it answers the base offset of the partition's last record batch
//! plus one, which can be dozens of messages short of the end. A Fetch response carries the
//! partition's high watermark from the broker's own bookkeeping, and librdkafka reports the
//! last one it saw in its statistics (`hi_offset`). So the probe assigns every partition at its
//! end to a throwaway consumer outside any group, lets it fetch once, and reads the statistics.

use crate::{BrokerError, on_own_thread};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::statistics::Statistics;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the probe waits for the broker to answer a fetch for every partition.
const TIMEOUT: Duration = Duration::from_secs(15);

struct HighWatermarks {
    topic: String,
    seen: Mutex<BTreeMap<i32, i64>>,
}

impl ClientContext for HighWatermarks {
    fn stats(&self, statistics: Statistics) {
        let Some(topic) = statistics.topics.get(&self.topic) else {
            return;
        };
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        // librdkafka lists an internal partition -1, and -1001 until a fetch answered.
        for (&partition, p) in &topic.partitions {
            if partition >= 0 && p.hi_offset >= 0 {
                seen.insert(partition, p.hi_offset);
            }
        }
    }
}

impl ConsumerContext for HighWatermarks {}

/// [`partition_ends`] on a thread of its own, given up after `limit`.
pub async fn partition_ends_within(
    brokers: &str,
    topic: &str,
    limit: Duration,
) -> Result<BTreeMap<i32, i64>, BrokerError> {
    let (brokers, topic) = (brokers.to_owned(), topic.to_owned());
    on_own_thread("partition-ends", limit, move || {
        partition_ends(&brokers, &topic)
    })
    .await
}

/// Each partition's high watermark (the offset the next produced message gets), by partition;
/// empty when the topic does not exist. Blocks for one metadata request and one fetch.
pub fn partition_ends(brokers: &str, topic: &str) -> Result<BTreeMap<i32, i64>, BrokerError> {
    // librdkafka assigns partitions only to a consumer with a group; this one never joins it.
    let consumer: BaseConsumer<HighWatermarks> =
        crate::clients::reader(brokers, "lkplake-partition-ends")
            .set("statistics.interval.ms", "50")
            .set("fetch.wait.max.ms", "10")
            .create_with_context(HighWatermarks {
                topic: topic.to_owned(),
                seen: Mutex::new(BTreeMap::new()),
            })
            .map_err(|source| BrokerError::Client {
                brokers: brokers.to_owned(),
                source: Box::new(source),
            })?;
    let failed = |source| BrokerError::Metadata {
        brokers: brokers.to_owned(),
        topic: topic.to_owned(),
        source: Box::new(source),
    };
    let metadata = consumer
        .fetch_metadata(Some(topic), TIMEOUT)
        .map_err(failed)?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Ok(BTreeMap::new());
    }
    let mut tpl = TopicPartitionList::new();
    for &p in &partitions {
        tpl.add_partition_offset(topic, p, Offset::End)
            .map_err(failed)?;
    }
    consumer.assign(&tpl).map_err(failed)?;
    let deadline = Instant::now() + TIMEOUT;
    loop {
        // Messages fetched on the way (the position "end" resolves to can be short of the
        // end on Tansu) are dropped: only the watermarks matter here.
        if let Some(Err(e)) = consumer.poll(Duration::from_millis(20)) {
            tracing::debug!(error = %e, "partition-end probe");
        }
        let seen = consumer
            .context()
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        if partitions.iter().all(|p| seen.contains_key(p)) {
            return Ok(seen);
        }
        if Instant::now() >= deadline {
            let unanswered = partitions
                .iter()
                .filter(|p| !seen.contains_key(p))
                .copied()
                .collect();
            return Err(BrokerError::EndsUnknown {
                topic: topic.to_owned(),
                partitions: unanswered,
            });
        }
    }
}
