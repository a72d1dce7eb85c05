//! How far the pipeline has got, read from Kafka and the lake: what producers have written to
//! the reports and dead-letter topics, and how much of each reports partition the lake already
//! covers. This is what `lkplake serve --http --brokers …` exposes as pipeline health; it needs
//! no cooperation from running ingest or transform processes.

use crate::consumer::TransformError;
use crate::lake::Lake;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use std::time::Duration;

/// One partition of the reports topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionHealth {
    pub partition: i32,
    /// Offset the next produced message will get.
    pub high_watermark: i64,
    /// First offset not yet in the lake.
    pub next_in_lake: i64,
}

impl PartitionHealth {
    /// Messages produced but not yet in the lake.
    pub fn lag(&self) -> i64 {
        (self.high_watermark - self.next_in_lake).max(0)
    }
}

/// The pipeline as Kafka and the lake see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineHealth {
    pub topic: String,
    pub partitions: Vec<PartitionHealth>,
    pub dlq_topic: String,
    /// Messages ever written to the dead-letter topic (absent when it does not exist yet).
    pub dead_letters: Option<i64>,
}

impl PipelineHealth {
    /// Messages ever written to the reports topic.
    pub fn produced(&self) -> i64 {
        self.partitions.iter().map(|p| p.high_watermark).sum()
    }
}

/// Reads the topics' high watermarks and the lake's recorded progress (loading the lake's
/// commits since the last call first).
pub async fn read(
    brokers: &str,
    topic: &str,
    dlq_topic: &str,
    lake: &mut Lake,
) -> Result<PipelineHealth, TransformError> {
    let (brokers_, topic_, dlq_) = (brokers.to_owned(), topic.to_owned(), dlq_topic.to_owned());
    // rdkafka's metadata and watermark calls block.
    let (watermarks, dead_letters) = tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &brokers_)
            .set("group.id", "lkplake-health")
            .create()
            .map_err(|source| TransformError::Client {
                brokers: brokers_.clone(),
                source,
            })?;
        let watermarks = high_watermarks(&consumer, &topic_)?;
        let dead_letters = if watermarks_exist(&consumer, &dlq_)? {
            Some(
                high_watermarks(&consumer, &dlq_)?
                    .iter()
                    .map(|(_, h)| h)
                    .sum(),
            )
        } else {
            None
        };
        Ok::<_, TransformError>((watermarks, dead_letters))
    })
    .await
    .map_err(|e| TransformError::Normalize(format!("reading Kafka watermarks: {e}")))??;
    lake.refresh().await?;
    let ids: Vec<i32> = watermarks.iter().map(|(p, _)| *p).collect();
    let progress = lake.progress(topic, &ids).await?;
    let partitions = watermarks
        .into_iter()
        .map(|(partition, high_watermark)| PartitionHealth {
            partition,
            high_watermark,
            next_in_lake: progress.get(&partition).map_or(0, |p| p.resume_at()),
        })
        .collect();
    Ok(PipelineHealth {
        topic: topic.to_owned(),
        partitions,
        dlq_topic: dlq_topic.to_owned(),
        dead_letters,
    })
}

const TIMEOUT: Duration = Duration::from_secs(10);

fn watermarks_exist(consumer: &BaseConsumer, topic: &str) -> Result<bool, TransformError> {
    let metadata = consumer
        .fetch_metadata(Some(topic), TIMEOUT)
        .map_err(TransformError::Consume)?;
    Ok(metadata
        .topics()
        .iter()
        .any(|t| t.error().is_none() && !t.partitions().is_empty()))
}

fn high_watermarks(
    consumer: &BaseConsumer,
    topic: &str,
) -> Result<Vec<(i32, i64)>, TransformError> {
    let metadata = consumer
        .fetch_metadata(Some(topic), TIMEOUT)
        .map_err(TransformError::Consume)?;
    let mut out = Vec::new();
    for t in metadata.topics().iter().filter(|t| t.error().is_none()) {
        for p in t.partitions() {
            let (_, high) = consumer
                .fetch_watermarks(topic, p.id(), TIMEOUT)
                .map_err(TransformError::Consume)?;
            out.push((p.id(), high));
        }
    }
    out.sort_unstable();
    Ok(out)
}
