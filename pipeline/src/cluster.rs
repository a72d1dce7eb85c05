//! Where a run's messages go: a broker the user runs, or the embedded default, librdkafka's
//! in-process mock cluster, which lives as long as the run.

use crate::PipelineError;
use lkplake_ingest::kafka::KafkaTarget;
use lkplake_kafka::Topics;
use lkplake_lake::LakeUrl;
use lkplake_schemas::metric::DirectionTable;
use lkplake_transform::TransformConfig;
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

/// The cluster of one run and its topics.
pub struct Cluster {
    topics: Topics,
    /// The embedded cluster. It must outlive every client of the run, so the run holds it to
    /// the end. Its broker has no CreateTopics: the topics are made on this object instead.
    embedded: Option<MockCluster<'static, DefaultProducerContext>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("topics", &self.topics)
            .field("embedded", &self.embedded.is_some())
            .finish()
    }
}

impl Cluster {
    /// The default topics on the user's brokers, created by the clients when missing.
    pub fn brokers(brokers: impl Into<String>) -> Self {
        Self {
            topics: Topics::new(brokers),
            embedded: None,
        }
    }

    /// A new embedded cluster with this run's topics, sized for `input_bytes` of input, and
    /// `sources_topic` when following. The topics live as long as this run while the lake
    /// outlives it: names of their own keep this run's offsets from being read as an older
    /// run's progress in the lake.
    pub fn embedded(input_bytes: u64, sources_topic: Option<&str>) -> Result<Self, PipelineError> {
        let mock = MockCluster::new(1).map_err(|source| PipelineError::Embedded {
            what: "starting the embedded Kafka cluster".to_owned(),
            source,
        })?;
        let run_id = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or_default();
        let topics = Topics::suffixed(mock.bootstrap_servers(), &format!("run-{run_id}"));
        let mut create = vec![
            (topics.reports.as_str(), embedded_partitions(input_bytes)),
            (topics.dlq.as_str(), 1),
            (topics.transform_dlq.as_str(), 1),
        ];
        create.extend(sources_topic.map(|topic| (topic, 1)));
        for (topic, partitions) in create {
            mock.create_topic(topic, partitions, 1)
                .map_err(|source| PipelineError::Embedded {
                    what: format!("creating topic {topic} on the embedded Kafka cluster"),
                    source,
                })?;
        }
        Ok(Self {
            topics,
            embedded: Some(mock),
        })
    }

    /// The run's topics.
    pub fn topics(&self) -> &Topics {
        &self.topics
    }

    /// Whether the cluster is the embedded one, which ends with the run (and its topics, dead
    /// letters included, with it).
    pub fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// Where ingest sends, at most `max_message_bytes` a message.
    pub fn target(&self, max_message_bytes: usize) -> KafkaTarget {
        let mut target = KafkaTarget::new(self.topics.clone());
        target.create_topics = !self.is_embedded();
        target.max_message_bytes = max_message_bytes;
        target
    }

    /// The transformer of this run's topics into `lake`.
    pub fn transform(&self, lake: LakeUrl, directions: DirectionTable) -> TransformConfig {
        let mut config = TransformConfig::new(self.topics.clone(), lake);
        config.directions = directions;
        config.create_dlq_topic = !self.is_embedded();
        config
    }
}

/// Partitions of the embedded cluster's report topic. librdkafka's mock cluster keeps about 5 MB
/// per partition and silently drops older record batches beyond that, before the transformer
/// reads them; a report's JSON is about 1.4 times its mail. One partition per 2 MB of input
/// keeps large uncompressed inputs whole; what still overflows is caught after the transform.
fn embedded_partitions(input_bytes: u64) -> i32 {
    let partitions = input_bytes.div_ceil(2 << 20).clamp(6, 128);
    i32::try_from(partitions).unwrap_or(128)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_report_topic_has_a_partition_per_two_megabytes_between_6_and_128() {
        assert_eq!(embedded_partitions(0), 6);
        assert_eq!(embedded_partitions(13 << 20), 7);
        assert_eq!(embedded_partitions(1 << 30), 128);
    }

    #[test]
    fn an_embedded_run_has_topics_of_its_own_made_on_the_cluster() {
        let cluster = Cluster::embedded(0, Some("lkp.sources")).unwrap_or_else(|e| panic!("{e}"));
        let topics = cluster.topics();
        assert!(topics.reports.starts_with("lkp.reports.run-"), "{topics:?}");
        assert!(topics.dlq.starts_with("lkp.reports.dlq.run-"), "{topics:?}");
        let target = cluster.target(1 << 20);
        assert!(!target.create_topics);
        assert_eq!(target.max_message_bytes, 1 << 20);
        assert!(
            !cluster
                .transform(
                    LakeUrl::local(std::path::Path::new("lake")).unwrap_or_else(|e| panic!("{e}")),
                    DirectionTable::default()
                )
                .create_dlq_topic
        );
    }
}
