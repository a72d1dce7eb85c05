//! The pipeline's topic names, and [`Topics`], the one type every stage and the server's
//! pipeline probe take them in.
//!
//! Ingest writes reports and its dead letters; the transformer reads the reports and writes
//! the messages it cannot read to its own dead-letter topic; `lkplake dlq` and the probe read
//! all three. Naming them in one value keeps a stage from being pointed at one topic of one
//! pipeline and another of another.

/// Parsed reports, one JSON message each, keyed by report key.
pub const REPORTS_TOPIC: &str = "lkp.reports";
/// Ingest's dead letters: inputs that could not be parsed, with the reason and origin in headers.
pub const DLQ_TOPIC: &str = "lkp.reports.dlq";
/// The transformer's dead letters: messages of the reports topic that are not a report, mention
/// or link this version reads (not that JSON, or a newer `schema_version`).
pub const TRANSFORM_DLQ_TOPIC: &str = "lkp.reports.transform.dlq";
/// Where a follower keeps each source's position and `dlq replay` the letters it replayed
/// (compacted, keyed by source).
pub const SOURCES_TOPIC: &str = "lkp.sources";

/// One pipeline's topics on one set of brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics {
    /// Bootstrap addresses, comma-separated.
    pub brokers: String,
    /// Where ingest sends parsed reports and the transformer reads them.
    pub reports: String,
    /// Ingest's dead letters.
    pub dlq: String,
    /// The transformer's dead letters.
    pub transform_dlq: String,
}

impl Topics {
    /// The default names on `brokers`.
    pub fn new(brokers: impl Into<String>) -> Self {
        Self {
            brokers: brokers.into(),
            reports: REPORTS_TOPIC.to_owned(),
            dlq: DLQ_TOPIC.to_owned(),
            transform_dlq: TRANSFORM_DLQ_TOPIC.to_owned(),
        }
    }

    /// The default names with `.{suffix}` added to each: topics of their own, say for one run
    /// on a cluster that ends with it.
    pub fn suffixed(brokers: impl Into<String>, suffix: &str) -> Self {
        let mut topics = Self::new(brokers);
        for name in [
            &mut topics.reports,
            &mut topics.dlq,
            &mut topics.transform_dlq,
        ] {
            name.push('.');
            name.push_str(suffix);
        }
        topics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixed_topics_add_the_suffix_to_every_default_name() {
        let topics = Topics::suffixed("127.0.0.1:9092", "run-7");
        assert_eq!(topics.brokers, "127.0.0.1:9092");
        assert_eq!(topics.reports, "lkp.reports.run-7");
        assert_eq!(topics.dlq, "lkp.reports.dlq.run-7");
        assert_eq!(topics.transform_dlq, "lkp.reports.transform.dlq.run-7");
    }
}
