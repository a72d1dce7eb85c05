//! What the embedded cluster dropped: librdkafka's mock cluster keeps about 5 MB per partition
//! and drops the oldest record batches beyond that, before the transformer has read them.
//! Comparing what ingest produced with what the transformer read, kind by kind, finds it.

use lkplake_ingest::kafka::IngestSummary;
use lkplake_transform::TransformSummary;

/// Messages ingest produced that the transformer did not read as what they are, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    /// Reports produced and not read as reports.
    pub reports: u64,
    /// Mentions produced and not read as mentions.
    pub mentions: u64,
    /// Links produced and not read as links.
    pub links: u64,
    /// Of those, messages the transformer read but could not decode and dead-lettered: they
    /// reached it, so the cluster did not drop them.
    pub dead_lettered: u64,
}

impl Dropped {
    /// Messages the cluster dropped.
    pub fn lost(&self) -> u64 {
        (self.reports + self.mentions + self.links).saturating_sub(self.dead_lettered)
    }

    /// What `run` says of the drop, out of what ingest produced.
    pub fn explain(&self, ingested: &IngestSummary) -> String {
        let dead_lettered = if self.dead_lettered > 0 {
            format!(
                ", {} of them read but dead-lettered (see above)",
                self.dead_lettered
            )
        } else {
            String::new()
        };
        format!(
            "the embedded Kafka cluster dropped {} messages before they reached the lake ({} of {} reports, {} of {} mentions and {} of {} links were not read{dead_lettered}): it keeps only about 5 MB per partition. \
             What it kept is in the lake; for inputs this large, run against a broker with `lkplake run --brokers HOST:PORT` \
             (for example ./infra/tansu.sh start) and the rest is added",
            self.lost(),
            self.reports,
            ingested.reports,
            self.mentions,
            ingested.mentions,
            self.links,
            ingested.links
        )
    }
}

/// What the embedded cluster dropped before the transformer read it, if anything. Reports are
/// compared with reports, mentions with mentions and links with links, each counted once per offset: against a
/// count of every message read, a lost report could hide behind the mentions (and behind
/// messages read again after a rewind). A message the transformer dead-lettered is in neither
/// count, and it cannot say which kind it was: that many of the messages not read as either
/// reached it all the same.
pub fn dropped(ingested: &IngestSummary, transformed: &TransformSummary) -> Option<Dropped> {
    let reports = ingested.reports.saturating_sub(transformed.report_messages);
    let mentions = ingested
        .mentions
        .saturating_sub(transformed.mention_messages);
    let links = ingested.links.saturating_sub(transformed.link_messages);
    let dropped = Dropped {
        reports,
        mentions,
        links,
        dead_lettered: transformed.dead_lettered.min(reports + mentions + links),
    };
    (dropped.lost() > 0).then_some(dropped)
}

/// A drop, with what ingest produced: the run's error.
#[derive(Debug)]
pub struct Lost {
    /// What was not read.
    pub dropped: Dropped,
    /// What ingest produced.
    pub ingested: IngestSummary,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.dropped.explain(&self.ingested))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What ingest produced: 5 reports, 3 mentions and 2 links.
    fn produced() -> IngestSummary {
        IngestSummary {
            reports: 5,
            mentions: 3,
            links: 2,
            ..IngestSummary::default()
        }
    }

    #[test]
    fn a_report_lost_behind_mentions_and_rereads_is_a_drop() {
        // Three of the five reports reached the transformer, the three mentions did, and two
        // messages were read again after a rewind: eight messages read, more than the five
        // reports produced, which the comparison of every message read with the reports
        // produced took for no loss.
        let transformed = TransformSummary {
            messages: 8,
            already_in_lake: 2,
            report_messages: 3,
            mention_messages: 3,
            link_messages: 2,
            ..TransformSummary::default()
        };
        assert!(transformed.messages >= produced().reports);
        let lost = dropped(&produced(), &transformed);
        assert_eq!(
            lost,
            Some(Dropped {
                reports: 2,
                mentions: 0,
                links: 0,
                dead_lettered: 0
            })
        );
        assert_eq!(lost.map(|l| l.lost()), Some(2));
    }

    #[test]
    fn a_lost_mention_is_a_drop_even_when_every_report_arrived() {
        let transformed = TransformSummary {
            messages: 7,
            report_messages: 5,
            mention_messages: 2,
            link_messages: 2,
            ..TransformSummary::default()
        };
        assert_eq!(
            dropped(&produced(), &transformed),
            Some(Dropped {
                reports: 0,
                mentions: 1,
                links: 0,
                dead_lettered: 0
            })
        );
    }

    #[test]
    fn a_lost_link_is_a_drop_even_when_every_report_and_mention_arrived() {
        let transformed = TransformSummary {
            report_messages: 5,
            mention_messages: 3,
            link_messages: 1,
            ..TransformSummary::default()
        };
        assert_eq!(
            dropped(&produced(), &transformed).map(|d| (d.links, d.lost())),
            Some((1, 1))
        );
    }

    #[test]
    fn every_report_and_mention_read_is_no_drop_whatever_was_written() {
        // Duplicates and quoted copies are read, not written: still no loss.
        let transformed = TransformSummary {
            messages: 8,
            reports: 3,
            mentions: 2,
            duplicates: 3,
            report_messages: 5,
            mention_messages: 3,
            link_messages: 2,
            ..TransformSummary::default()
        };
        assert_eq!(dropped(&produced(), &transformed), None);
    }

    #[test]
    fn a_dead_lettered_message_reached_the_transformer_and_is_no_drop() {
        // Eight messages read: four reports, three mentions and one the transformer could
        // not decode (a report, as it happens; it cannot tell).
        let transformed = TransformSummary {
            messages: 8,
            report_messages: 4,
            mention_messages: 3,
            link_messages: 2,
            dead_lettered: 1,
            ..TransformSummary::default()
        };
        assert_eq!(dropped(&produced(), &transformed), None);
    }

    #[test]
    fn a_drop_beside_a_dead_lettered_message_is_still_a_drop() {
        // Seven messages read, one of them dead-lettered: one of the eight produced is lost.
        let transformed = TransformSummary {
            messages: 7,
            report_messages: 3,
            mention_messages: 3,
            link_messages: 2,
            dead_lettered: 1,
            ..TransformSummary::default()
        };
        let lost = dropped(&produced(), &transformed);
        assert_eq!(
            lost,
            Some(Dropped {
                reports: 2,
                mentions: 0,
                links: 0,
                dead_lettered: 1
            })
        );
        assert_eq!(lost.map(|l| l.lost()), Some(1));
        assert_eq!(
            lost.map(|l| l.explain(&produced()))
                .as_deref()
                .and_then(|e| e.split(':').next()),
            Some(
                "the embedded Kafka cluster dropped 1 messages before they reached the lake (2 of 5 reports, 0 of 3 mentions and 0 of 2 links were not read, 1 of them read but dead-lettered (see above))"
            )
        );
    }
}
