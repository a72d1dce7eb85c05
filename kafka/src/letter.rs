//! The dead-letter format, defined once for the two stages that write letters (ingest, the
//! transformer) and the one command that reads them (`lkplake dlq`).
//!
//! A dead letter is the refused bytes exactly as they came, as the message value, with why and
//! where in headers. Ingest's letters name the input (path, message index, archive epoch and
//! commit); the transformer's name the message of the reports topic it could not read (topic,
//! partition, offset). Both carry the reason in [`ERROR`].

use rdkafka::message::{Header, OwnedHeaders};

/// Header: why the letter was refused (both stages).
pub const ERROR: &str = "lkplake-error";
/// Header of ingest's letters: the input's path.
pub const PATH: &str = "lkplake-path";
/// Header of ingest's letters: the message's index within the input.
pub const INDEX: &str = "lkplake-index";
/// Header of ingest's letters from an archive: the epoch.
pub const EPOCH: &str = "lkplake-epoch";
/// Header of ingest's letters from an archive: the commit that added the mail.
pub const COMMIT: &str = "lkplake-commit";
/// Header of a letter cut to its first bytes: the whole input's size.
pub const SIZE: &str = "lkplake-size";
/// Header of a letter cut to its first bytes: the whole input's SHA-256.
pub const SHA256: &str = "lkplake-sha256";
/// Header of ingest's letter for a message larger than the most one message may be: the
/// message was not read past its first bytes, which are all the letter holds, so neither its
/// size nor its checksum is known. The value is that limit, in bytes.
pub const TRUNCATED: &str = "lkplake-truncated";
/// Header of the transformer's letters: the topic the message was consumed from.
pub const TOPIC: &str = "lkplake-topic";
/// Header of the transformer's letters: its partition there.
pub const PARTITION: &str = "lkplake-partition";
/// Header of the transformer's letters: its offset in that partition.
pub const OFFSET: &str = "lkplake-offset";

/// Where the transformer consumed a message it dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consumed {
    /// The reports topic.
    pub topic: String,
    /// The message's partition.
    pub partition: i32,
    /// The message's offset in that partition.
    pub offset: i64,
}

impl std::fmt::Display for Consumed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} partition {} offset {}",
            self.topic, self.partition, self.offset
        )
    }
}

impl Consumed {
    /// The headers of the transformer's letter for this message, refused for `reason`.
    pub fn headers(&self, reason: &str) -> OwnedHeaders {
        let partition = self.partition.to_string();
        let offset = self.offset.to_string();
        OwnedHeaders::new()
            .insert(Header {
                key: ERROR,
                value: Some(reason),
            })
            .insert(Header {
                key: TOPIC,
                value: Some(self.topic.as_str()),
            })
            .insert(Header {
                key: PARTITION,
                value: Some(partition.as_str()),
            })
            .insert(Header {
                key: OFFSET,
                value: Some(offset.as_str()),
            })
    }

    /// Reads back the values of the [`TOPIC`], [`PARTITION`] and [`OFFSET`] headers (empty
    /// when absent); `None` for a letter without them, which is one of ingest's.
    pub fn parse(topic: &str, partition: &str, offset: &str) -> Option<Self> {
        if topic.is_empty() {
            return None;
        }
        Some(Self {
            topic: topic.to_owned(),
            partition: partition.parse().ok()?,
            offset: offset.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::message::Headers;

    #[test]
    fn the_transformers_letter_headers_read_back_as_where_the_message_was_consumed() {
        let consumed = Consumed {
            topic: "lkp.reports".to_owned(),
            partition: 4,
            offset: 1207,
        };
        let headers = consumed.headers("not a report or mention JSON");
        let value = |name: &str| {
            headers
                .iter()
                .find(|h| h.key == name)
                .and_then(|h| h.value)
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default()
        };
        assert_eq!(value(ERROR), "not a report or mention JSON");
        assert_eq!(
            Consumed::parse(&value(TOPIC), &value(PARTITION), &value(OFFSET)),
            Some(consumed.clone())
        );
        assert_eq!(consumed.to_string(), "lkp.reports partition 4 offset 1207");
    }

    #[test]
    fn a_letter_without_a_topic_header_is_ingests() {
        assert_eq!(Consumed::parse("", "", ""), None);
        assert_eq!(Consumed::parse("lkp.reports", "x", "3"), None);
    }
}
