//! Ingest's dead letters, both ways: the headers written beside the refused bytes, and the
//! [`DeadLetter`] that `lkplake dlq` and `dlq replay` read back. The header names are the
//! pipeline's (`lkplake_kafka::letter`): the transformer's letters use them too, so one reader
//! reads both topics.

use crate::KafkaIngestError;
use lkplake_kafka::letter::{
    COMMIT, Consumed, EPOCH, ERROR, INDEX, OFFSET, PARTITION, PATH, SHA256, SIZE, TOPIC, TRUNCATED,
};
use lkplake_kafka::read_topic;
use lkplake_schemas::Source;
use rdkafka::message::{Header, Headers as _, Message as _, OwnedHeaders};

/// What a dead letter cut to its first bytes records of the whole input.
pub(crate) struct Cut {
    pub(crate) size: u64,
    pub(crate) sha256: String,
}

/// The headers of ingest's letter for the message at `source`: why it was refused, where it
/// was read, and for a letter holding only the first bytes of its input, the whole input's size
/// and SHA-256 (`cut`) or the limit that kept it from being read whole (`truncated`).
pub(crate) fn headers(
    source: &Source,
    error: &str,
    cut: Option<&Cut>,
    truncated: Option<usize>,
) -> OwnedHeaders {
    let index = source.index.to_string();
    let epoch = source.epoch.map(|e| e.to_string());
    let size = cut.map(|c| c.size.to_string());
    let truncated = truncated.map(|bytes| bytes.to_string());
    let mut fields = vec![
        (ERROR, Some(error)),
        (PATH, Some(source.path.as_str())),
        (INDEX, Some(index.as_str())),
    ];
    // The archive's epoch and commit come together, or not at all.
    if let (Some(epoch), Some(commit)) = (&epoch, &source.commit) {
        fields.extend([
            (EPOCH, Some(epoch.as_str())),
            (COMMIT, Some(commit.as_str())),
        ]);
    }
    if let (Some(size), Some(cut)) = (&size, cut) {
        fields.extend([
            (SIZE, Some(size.as_str())),
            (SHA256, Some(cut.sha256.as_str())),
        ]);
    }
    if let Some(bytes) = &truncated {
        fields.push((TRUNCATED, Some(bytes.as_str())));
    }
    fields
        .into_iter()
        .fold(OwnedHeaders::new(), |headers, (key, value)| {
            headers.insert(Header { key, value })
        })
}

/// One entry of a dead-letter topic: ingest's, or the transformer's (then `consumed` says
/// which message of the reports topic it is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Where the letter is on the dead-letter topic.
    pub partition: i32,
    /// Its offset in that partition.
    pub offset: i64,
    /// Where the message was read (empty for the transformer's letters).
    pub source: Source,
    /// For the transformer's letters: the message of the reports topic it could not read.
    pub consumed: Option<Consumed>,
    /// Why the parser (or the transformer) refused it.
    pub error: String,
    /// The message exactly as read, or its first [`crate::kafka::LETTER_HEAD`] bytes when it was larger
    /// than a message holds (then `whole` says so) or too large to read whole (then
    /// `truncated` does).
    pub raw: Vec<u8>,
    /// For a letter cut to its first bytes: the whole input's size and SHA-256.
    pub whole: Option<(u64, String)>,
    /// For a message larger than the most one message may be, not read past the first bytes
    /// the letter holds: that limit, in bytes.
    pub truncated: Option<u64>,
}

impl DeadLetter {
    /// The size of the input the letter stands for (of a truncated letter, only the bytes it
    /// holds are known).
    pub fn size(&self) -> u64 {
        self.whole
            .as_ref()
            .map_or(self.raw.len() as u64, |(size, _)| *size)
    }
}

/// Reads a whole dead-letter topic (ingest's or the transformer's: one format) from the
/// beginning to its current end.
pub fn read_dead_letters(brokers: &str, topic: &str) -> Result<Vec<DeadLetter>, KafkaIngestError> {
    let mut out = Vec::new();
    read_topic(brokers, topic, |message| {
        let header = |name: &str| {
            message
                .headers()
                .and_then(|h| h.iter().find(|h| h.key == name))
                .and_then(|h| h.value)
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default()
        };
        let commit = header(COMMIT);
        out.push(DeadLetter {
            partition: message.partition(),
            offset: message.offset(),
            source: Source {
                path: header(PATH),
                index: header(INDEX).parse().unwrap_or_default(),
                epoch: header(EPOCH).parse().ok(),
                commit: (!commit.is_empty()).then_some(commit),
            },
            consumed: Consumed::parse(&header(TOPIC), &header(PARTITION), &header(OFFSET)),
            error: header(ERROR),
            raw: message.payload().map(<[u8]>::to_vec).unwrap_or_default(),
            whole: header(SIZE).parse().ok().map(|size| (size, header(SHA256))),
            truncated: header(TRUNCATED).parse().ok(),
        });
    })?;
    Ok(out)
}
