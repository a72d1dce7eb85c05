//! How far the pipeline has got, read from Kafka and the lake: what producers have written to
//! the reports and dead-letter topics, and how much of each reports partition the lake already
//! covers. This is what `lkplake serve --http --brokers …` exposes as pipeline health; it needs
//! no cooperation from running ingest or transform processes.

use crate::consumer::TransformError;
use crate::lake::Lake;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
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

/// Reads the pipeline's health again and again with one Kafka client and one open lake.
pub struct PipelineProbe {
    consumer: BaseConsumer,
    topic: String,
    dlq_topic: String,
    lake: Lake,
}

impl std::fmt::Debug for PipelineProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineProbe")
            .field("topic", &self.topic)
            .field("dlq_topic", &self.dlq_topic)
            .finish_non_exhaustive()
    }
}

impl PipelineProbe {
    pub fn new(
        brokers: &str,
        topic: &str,
        dlq_topic: &str,
        lake: Lake,
    ) -> Result<Self, TransformError> {
        let consumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", "lkplake-health")
            .create()
            .map_err(|source| TransformError::Client {
                brokers: brokers.to_owned(),
                source,
            })?;
        Ok(Self {
            consumer,
            topic: topic.to_owned(),
            dlq_topic: dlq_topic.to_owned(),
            lake,
        })
    }

    /// The topics' high watermarks and the lake's recorded progress, after loading the lake's
    /// commits since the last call. Needs a multi-threaded runtime: rdkafka's calls block.
    pub async fn read(&mut self) -> Result<PipelineHealth, TransformError> {
        let (watermarks, dlq) = tokio::task::block_in_place(|| {
            Ok::<_, TransformError>((
                high_watermarks(&self.consumer, &self.topic)?,
                high_watermarks(&self.consumer, &self.dlq_topic)?,
            ))
        })?;
        self.lake.refresh().await?;
        let ids: Vec<i32> = watermarks.iter().map(|(p, _)| *p).collect();
        let progress = self.lake.progress(&self.topic, &ids).await?;
        let partitions = watermarks
            .into_iter()
            .map(|(partition, high_watermark)| PartitionHealth {
                partition,
                high_watermark,
                next_in_lake: progress.get(&partition).map_or(0, |p| p.resume_at()),
            })
            .collect();
        Ok(PipelineHealth {
            topic: self.topic.clone(),
            partitions,
            dlq_topic: self.dlq_topic.clone(),
            dead_letters: (!dlq.is_empty()).then(|| dlq.iter().map(|(_, h)| h).sum()),
        })
    }
}

const TIMEOUT: Duration = Duration::from_secs(10);

/// Each partition's high watermark, by partition; empty when the topic does not exist. Blocks.
pub(crate) fn high_watermarks<X: ConsumerContext>(
    consumer: &impl Consumer<X>,
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
