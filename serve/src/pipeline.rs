//! How far the pipeline has got, read from Kafka and the lake: what producers have written to
//! the reports and dead-letter topics, what the transformer dead-lettered, and how much of each
//! reports partition the lake already covers. `lkplake serve --http --brokers …` exposes it as the `lkp_pipeline_*` families; it
//! needs no cooperation from running ingest or transform processes.

use crate::ServeError;
use crate::exporter::{Exporter, Family};
use lkplake_kafka::{BrokerError, Topics, watermarks};
use lkplake_lake::{LakeTables, LakeUrl};
use rdkafka::consumer::BaseConsumer;
use std::sync::Arc;

/// One partition of the reports topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionHealth {
    /// The partition's number.
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
    /// The topics read.
    pub topics: Topics,
    /// Each partition of the reports topic.
    pub partitions: Vec<PartitionHealth>,
    /// Messages ever written to ingest's dead-letter topic (absent when it does not exist yet).
    pub dead_letters: Option<i64>,
    /// Messages of the reports topic the transformer ever dead-lettered; 0 while its topic
    /// does not exist, since the transformer creates it at its first letter.
    pub transform_dead_letters: i64,
}

impl PipelineHealth {
    /// Messages ever written to the reports topic.
    pub fn produced(&self) -> i64 {
        self.partitions.iter().map(|p| p.high_watermark).sum()
    }
}

/// Reads the pipeline's health again and again with one Kafka client and the lake's tables.
pub struct PipelineProbe {
    consumer: BaseConsumer,
    topics: Topics,
    lake: LakeTables,
}

impl std::fmt::Debug for PipelineProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineProbe")
            .field("topics", &self.topics)
            .finish_non_exhaustive()
    }
}

impl PipelineProbe {
    /// A probe with its own Kafka client; fails when the lake cannot be opened.
    pub async fn new(topics: Topics, lake: &LakeUrl) -> Result<Self, ServeError> {
        let consumer = lkplake_kafka::clients::reader(&topics.brokers, "lkplake-health")
            .create()
            .map_err(|source| BrokerError::Client {
                brokers: topics.brokers.clone(),
                source: Box::new(source),
            })?;
        Ok(Self {
            consumer,
            topics,
            lake: LakeTables::open(lake).await?,
        })
    }

    /// The topics' high watermarks and the lake's recorded progress, after loading the lake's
    /// commits since the last call. Needs a multi-threaded runtime: rdkafka's calls block.
    pub async fn read(&mut self) -> Result<PipelineHealth, ServeError> {
        let Topics {
            brokers,
            reports: topic,
            dlq: dlq_topic,
            transform_dlq: transform_dlq_topic,
        } = &self.topics;
        let (reports, dlq, transform_dlq) = tokio::task::block_in_place(|| {
            Ok::<_, BrokerError>((
                watermarks(&self.consumer, brokers, topic)?,
                watermarks(&self.consumer, brokers, dlq_topic)?,
                watermarks(&self.consumer, brokers, transform_dlq_topic)?,
            ))
        })?;
        self.lake.refresh().await?;
        let ids: Vec<i32> = reports.iter().map(|w| w.partition).collect();
        let progress = self.lake.progress(topic, &ids).await?;
        let partitions = reports
            .into_iter()
            .map(|w| PartitionHealth {
                partition: w.partition,
                high_watermark: w.high,
                next_in_lake: progress.get(&w.partition).map_or(0, |p| p.resume_at()),
            })
            .collect();
        Ok(PipelineHealth {
            topics: self.topics.clone(),
            partitions,
            dead_letters: (!dlq.is_empty()).then(|| dlq.iter().map(|w| w.high).sum()),
            transform_dead_letters: transform_dlq.iter().map(|w| w.high).sum(),
        })
    }

    /// Reads the health into the exporter's pipeline families; while Kafka cannot be reached,
    /// `lkp_pipeline_up` is 0 and the other pipeline families are absent.
    pub async fn publish(&mut self, exporter: &Arc<Exporter>) {
        exporter.set_pipeline(match self.read().await {
            Ok(health) => families(&health),
            Err(e) => {
                tracing::warn!("exporter: reading the pipeline's health failed: {e}");
                vec![up(0.0)]
            }
        });
    }
}

fn up(value: f64) -> Family {
    Family::gauge(
        "lkp_pipeline_up",
        "1 when Kafka and the lake's progress could be read at the last refresh.",
    )
    .with(vec![], value)
}

fn families(health: &PipelineHealth) -> Vec<Family> {
    let mut produced = Family::counter(
        "lkp_ingest_messages",
        "Messages producers wrote to the topic: parsed reports, or dead letters.",
    )
    .with(
        vec![("topic", health.topics.reports.clone())],
        health.produced() as f64,
    );
    if let Some(dead) = health.dead_letters {
        produced = produced.with(vec![("topic", health.topics.dlq.clone())], dead as f64);
    }
    // Always present, 0 before the first letter, so an alert on its increase needs no
    // `absent()` twin.
    let transform_dead = Family::counter(
        "lkp_transform_dead_letters",
        "Messages of the reports topic the transformer could not read, written to its dead-letter topic.",
    )
    .with(
        vec![("topic", health.topics.transform_dlq.clone())],
        health.transform_dead_letters as f64,
    );
    let mut next = Family::gauge(
        "lkp_transform_next_offset",
        "First offset of each reports partition not yet in the lake.",
    );
    let mut lag = Family::gauge(
        "lkp_transform_lag_messages",
        "Messages of each reports partition produced but not yet in the lake.",
    );
    for p in &health.partitions {
        let labels = vec![
            ("topic", health.topics.reports.clone()),
            ("partition", p.partition.to_string()),
        ];
        next = next.with(labels.clone(), p.next_in_lake as f64);
        lag = lag.with(labels, p.lag() as f64);
    }
    vec![up(1.0), produced, transform_dead, next, lag]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exporter::Format;
    use crate::exporter::exposition::render;

    fn health(transform_dead_letters: i64) -> PipelineHealth {
        PipelineHealth {
            topics: Topics::new("127.0.0.1:9092"),
            partitions: vec![PartitionHealth {
                partition: 0,
                high_watermark: 5,
                next_in_lake: 5,
            }],
            dead_letters: Some(1),
            transform_dead_letters,
        }
    }

    #[test]
    fn the_transformers_dead_letters_are_a_series_of_their_own_and_zero_before_the_first() {
        let text = render(&families(&health(2)), Format::Prometheus);
        assert!(
            text.contains(
                "lkp_transform_dead_letters_total{topic=\"lkp.reports.transform.dlq\"} 2\n"
            ),
            "{text}"
        );
        // Ingest's letters stay where they were: a producer's count on the ingest family.
        assert!(
            text.contains("lkp_ingest_messages_total{topic=\"lkp.reports.dlq\"} 1\n"),
            "{text}"
        );
        let text = render(&families(&health(0)), Format::Prometheus);
        assert!(
            text.contains(
                "lkp_transform_dead_letters_total{topic=\"lkp.reports.transform.dlq\"} 0\n"
            ),
            "{text}"
        );
    }
}
