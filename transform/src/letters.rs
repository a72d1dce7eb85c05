//! The transformer's dead letters: messages of the reports topic that are neither a report nor
//! a mention this version reads (not that JSON at all, or a newer `schema_version`). They go
//! to a dead-letter topic of the transformer's own (`lkp.reports.transform.dlq`), in the format
//! ingest's letters have (`lkplake_kafka::letter`): the message's bytes as the value, the
//! reason, and the topic, partition and offset it was consumed at.
//!
//! Exactly once, as far as a letter can be: [`crate::Ledger::flush`] hands the letters of its
//! buffer to a [`Postbox`] and records no offset in the lake until the postbox says the broker
//! acknowledged every one. A crash in between loses nothing; the rerun reads those messages
//! again and posts them a second time, so a letter may be in the topic twice (at two offsets
//! of the dead-letter topic, naming the same consumed offset), never zero times.
//!
//! The postbox sends as ingest does: a letter the broker refuses for its own state (Tansu's
//! `UNKNOWN_SERVER_ERROR` while it stops) is sent again for up to a minute, and one librdkafka
//! cannot deliver within a minute fails the flush. At most 1024 letters or 64 MiB of them wait
//! for their acknowledgements at a time, and a full librdkafka queue is waited out.

use crate::DeadLetterError;
use lkplake_kafka::letter::Consumed;
use lkplake_kafka::{RESEND_FOR, worth_resending};
use lkplake_schemas::{Message, SCHEMA_VERSION};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use std::future::Future;
use std::time::{Duration, Instant};

/// Why a message of the reports topic cannot be read; the text is the letter's reason.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    #[error("an empty message: no report, mention or link JSON")]
    Empty,
    #[error(
        "schema_version {found} is newer than this lkplake reads (up to {known}): a newer lkplake produced it; upgrade the transformer"
    )]
    Newer { found: u64, known: u32 },
    #[error("not a report, mention or link JSON: {0}")]
    Json(serde_json::Error),
}

/// Decodes one message of the reports topic. A message of a newer wire format is refused even
/// when it fits today's types: its fields may mean something else by now, and a lake row
/// written from a misread report is worse than a letter.
pub fn decode(payload: Option<&[u8]>) -> Result<Message, Unreadable> {
    let bytes = payload.ok_or(Unreadable::Empty)?;
    match Message::decode(bytes) {
        Ok(message) => {
            let found = message.schema_version();
            if found > SCHEMA_VERSION {
                return Err(Unreadable::Newer {
                    found: found.into(),
                    known: SCHEMA_VERSION,
                });
            }
            Ok(message)
        }
        // Only on this rare path is the JSON read a second time: a newer format that no longer
        // fits today's types is named as such, not by the field it lacks.
        Err(e) => match newer_version(bytes) {
            Some(found) => Err(Unreadable::Newer {
                found,
                known: SCHEMA_VERSION,
            }),
            None => Err(Unreadable::Json(e)),
        },
    }
}

/// The `schema_version` of a JSON object when it is newer than this version reads.
fn newer_version(bytes: &[u8]) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let found = value.get("schema_version")?.as_u64()?;
    (found > u64::from(SCHEMA_VERSION)).then_some(found)
}

/// A message of the reports topic the transformer cannot read, on its way to the dead-letter
/// topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    /// The message's partition in the reports topic.
    pub partition: i32,
    /// Its offset there.
    pub offset: i64,
    /// The message's bytes, exactly as consumed (empty for a message without a value).
    pub raw: Vec<u8>,
    /// Why it cannot be read.
    pub reason: String,
}

/// Where [`crate::Ledger::flush`] sends its letters before it records their offsets.
pub trait Postbox {
    /// Stores every letter and returns once the broker acknowledged each of them; an error
    /// leaves the offsets they stand at uncommitted.
    fn post(
        &mut self,
        letters: &[Letter],
    ) -> impl Future<Output = Result<(), DeadLetterError>> + Send;
}

/// The largest letter: what ingest's topics take (16 MiB of payload and 16 KiB for key and
/// headers), so any message of the reports topic fits with the letter's own headers.
const LARGEST_MESSAGE: usize = (16 << 20) + (16 << 10);

/// Letters handed to librdkafka before their acknowledgements are awaited: one round trip per
/// batch, and a bound below its queue (`queue.buffering.max.messages`, 100,000).
const IN_FLIGHT: usize = 1024;

/// Bytes of letters handed to librdkafka before their acknowledgements are awaited. librdkafka
/// copies each payload into its queue, so [`IN_FLIGHT`] letters of up to 16 MiB alone could
/// hold 16 GiB there; this keeps it to 64 MiB (or one letter, however large).
const IN_FLIGHT_BYTES: usize = 64 << 20;

/// How long a send librdkafka refuses with a full queue while none of our letters is in flight
/// is tried again: acknowledged letters leave its queue just after their delivery reports, so
/// that queue empties in a moment; one that stays full is someone else's and an error.
const FULL_QUEUE_WAIT: Duration = Duration::from_secs(10);
const FULL_QUEUE_PAUSE: Duration = Duration::from_millis(10);

/// How long librdkafka tries to deliver a letter (`message.timeout.ms`) before it fails it:
/// a dead broker fails the flush, and says so, within a minute rather than its default 5.
const MESSAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Whether one more letter of `size` bytes may join `letters` in flight holding `bytes`:
/// bounded by count and by bytes, and a letter always goes when nothing is in flight.
fn has_room(letters: usize, bytes: usize, size: usize) -> bool {
    letters == 0 || (letters < IN_FLIGHT && bytes.saturating_add(size) <= IN_FLIGHT_BYTES)
}

/// Letters handed to librdkafka whose acknowledgements are still awaited: each by its index in
/// what [`Postbox::post`] was given, with the message it stands for (to name in an error).
#[derive(Default)]
struct InFlight {
    deliveries: Vec<(usize, Consumed, DeliveryFuture)>,
    bytes: usize,
}

/// The transformer's dead-letter topic on a Kafka broker. The producer, and the topic when it
/// is missing, are made at the first letter: a run that reads everything touches neither.
pub struct KafkaPostbox {
    brokers: String,
    /// The reports topic the letters were consumed from.
    source_topic: String,
    topic: String,
    create_topic: bool,
    /// librdkafka's `queue.buffering.max.messages` when not its default (tests fill the queue).
    queue_messages: Option<usize>,
    producer: Option<FutureProducer>,
}

impl std::fmt::Debug for KafkaPostbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaPostbox")
            .field("brokers", &self.brokers)
            .field("source_topic", &self.source_topic)
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl KafkaPostbox {
    /// Letters of messages consumed from `source_topic` go to `topic` on `brokers`, which is
    /// created when missing if `create_topic` (not on librdkafka's mock cluster, which has no
    /// CreateTopics: `run` makes its topics on the cluster object).
    pub fn new(brokers: &str, source_topic: &str, topic: &str, create_topic: bool) -> Self {
        Self {
            brokers: brokers.to_owned(),
            source_topic: source_topic.to_owned(),
            topic: topic.to_owned(),
            create_topic,
            queue_messages: None,
            producer: None,
        }
    }

    /// The producer, made (and the topic created) on first use.
    async fn producer(&mut self) -> Result<FutureProducer, DeadLetterError> {
        if let Some(producer) = &self.producer {
            return Ok(producer.clone());
        }
        if self.create_topic {
            create_topic(&self.brokers, &self.topic).await?;
        }
        let mut config = lkplake_kafka::clients::producer(&self.brokers, LARGEST_MESSAGE);
        if let Some(messages) = self.queue_messages {
            config.set("queue.buffering.max.messages", messages.to_string());
        }
        let producer: FutureProducer = config
            .set(
                "message.timeout.ms",
                MESSAGE_TIMEOUT.as_millis().to_string(),
            )
            .create()
            .map_err(|source| DeadLetterError::Client {
                brokers: self.brokers.clone(),
                source,
            })?;
        self.producer = Some(producer.clone());
        Ok(producer)
    }

    /// Where `letter`'s message was consumed.
    fn consumed(&self, letter: &Letter) -> Consumed {
        Consumed {
            topic: self.source_topic.clone(),
            partition: letter.partition,
            offset: letter.offset,
        }
    }

    fn failed(&self, consumed: &Consumed, source: KafkaError) -> DeadLetterError {
        DeadLetterError::Delivery {
            topic: self.topic.clone(),
            consumed: consumed.to_string(),
            source,
        }
    }

    /// Sends the letters at `indices` of `letters`, within [`IN_FLIGHT`] and
    /// [`IN_FLIGHT_BYTES`], and waits for every acknowledgement. Returns those the broker
    /// refused for its own state while [`RESEND_FOR`] since `started` has not passed, to send
    /// again; any other failure is the error.
    async fn send(
        &self,
        producer: &FutureProducer,
        letters: &[Letter],
        indices: &[usize],
        started: Instant,
    ) -> Result<Vec<usize>, DeadLetterError> {
        let mut in_flight = InFlight::default();
        let mut refused = Vec::new();
        for &index in indices {
            let Some(letter) = letters.get(index) else {
                continue;
            };
            let size = letter.raw.len();
            if !has_room(in_flight.deliveries.len(), in_flight.bytes, size) {
                self.settle(&mut in_flight, started, &mut refused).await?;
            }
            let consumed = self.consumed(letter);
            let key = consumed.to_string();
            let mut waited = Duration::ZERO;
            loop {
                let record = FutureRecord::to(&self.topic)
                    .key(key.as_str())
                    .payload(letter.raw.as_slice())
                    .headers(consumed.headers(&letter.reason));
                let source = match producer.send_result(record) {
                    Ok(delivery) => {
                        in_flight.deliveries.push((index, consumed, delivery));
                        in_flight.bytes += size;
                        break;
                    }
                    Err((source, _)) => source,
                };
                let full = matches!(
                    source,
                    KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)
                );
                if full && !in_flight.deliveries.is_empty() {
                    // librdkafka's queue is full: what is in flight is acknowledged first,
                    // which makes room, and this letter is sent again.
                    self.settle(&mut in_flight, started, &mut refused).await?;
                } else if full && waited < FULL_QUEUE_WAIT {
                    tokio::time::sleep(FULL_QUEUE_PAUSE).await;
                    waited += FULL_QUEUE_PAUSE;
                } else {
                    return Err(self.failed(&consumed, source));
                }
            }
        }
        self.settle(&mut in_flight, started, &mut refused).await?;
        Ok(refused)
    }

    /// Waits for the acknowledgement of every letter in flight. One the broker refused for its
    /// own state joins `refused` while [`RESEND_FOR`] since `started` has not passed; any other
    /// failure is the error.
    async fn settle(
        &self,
        in_flight: &mut InFlight,
        started: Instant,
        refused: &mut Vec<usize>,
    ) -> Result<(), DeadLetterError> {
        in_flight.bytes = 0;
        for (index, consumed, delivery) in std::mem::take(&mut in_flight.deliveries) {
            let source = match delivery.await {
                Ok(Ok(_)) => continue,
                Ok(Err((source, _))) => source,
                Err(_) => KafkaError::Canceled,
            };
            if worth_resending(&source) && started.elapsed() < RESEND_FOR {
                refused.push(index);
                continue;
            }
            return Err(self.failed(&consumed, source));
        }
        Ok(())
    }
}

impl Postbox for KafkaPostbox {
    async fn post(&mut self, letters: &[Letter]) -> Result<(), DeadLetterError> {
        if letters.is_empty() {
            return Ok(());
        }
        let producer = self.producer().await?;
        let started = Instant::now();
        let mut pause = Duration::from_millis(250);
        let mut unsent: Vec<usize> = (0..letters.len()).collect();
        loop {
            let refused = self.send(&producer, letters, &unsent, started).await?;
            if refused.is_empty() {
                break;
            }
            unsent = refused;
            // What ingest does with its reports: a Tansu being stopped answers the produces in
            // flight with UNKNOWN_SERVER_ERROR, and the same letter is stored once it is back.
            tracing::warn!(
                letters = unsent.len(),
                topic = %self.topic,
                "the broker refused dead letters for its own state: sending them again in {pause:?}"
            );
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
        tracing::info!(
            letters = letters.len(),
            topic = %self.topic,
            "dead letters stored"
        );
        Ok(())
    }
}

/// Creates the dead-letter topic (one partition, taking any message of the reports topic);
/// one that exists already is fine.
async fn create_topic(brokers: &str, topic: &str) -> Result<(), DeadLetterError> {
    let admin: AdminClient<DefaultClientContext> = lkplake_kafka::clients::client(brokers)
        .create()
        .map_err(|source| DeadLetterError::Client {
            brokers: brokers.to_owned(),
            source,
        })?;
    let largest = LARGEST_MESSAGE.to_string();
    let new =
        NewTopic::new(topic, 1, TopicReplication::Fixed(1)).set("max.message.bytes", &largest);
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin
        .create_topics([&new], &options)
        .await
        .map_err(|source| DeadLetterError::CreateTopic {
            topic: topic.to_owned(),
            source,
        })?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => {
                return Err(DeadLetterError::CreateTopic {
                    topic: topic.to_owned(),
                    source: KafkaError::AdminOp(code),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::config::ClientConfig;

    /// A version 1 report, as the version 1 parser produced it from seed 000.
    fn report_v1() -> serde_json::Value {
        serde_json::from_slice(include_bytes!("../tests/fixtures/report-v1.json"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn with_version(version: serde_json::Value) -> Vec<u8> {
        let mut report = report_v1();
        report["schema_version"] = version;
        serde_json::to_vec(&report).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_report_of_this_version_or_older_is_read() {
        for version in [1, SCHEMA_VERSION] {
            let decoded = decode(Some(with_version(version.into()).as_slice()));
            assert!(
                matches!(decoded, Ok(Message::Report(_))),
                "version {version}: {decoded:?}"
            );
        }
    }

    #[test]
    fn a_report_of_a_newer_version_is_refused_even_when_it_fits_todays_types() {
        let decoded = decode(Some(with_version(999.into()).as_slice()));
        let expected = format!(
            "schema_version 999 is newer than this lkplake reads (up to {SCHEMA_VERSION}): a newer lkplake produced it; upgrade the transformer"
        );
        assert_eq!(
            decoded.err().map(|e| e.to_string()).as_deref(),
            Some(expected.as_str())
        );
    }

    #[test]
    fn a_newer_version_that_no_longer_fits_is_named_as_newer_not_by_a_missing_field() {
        let mut report = report_v1();
        report["schema_version"] = 7.into();
        report["tests"] = "moved elsewhere in version 7".into();
        let bytes = serde_json::to_vec(&report).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            decode(Some(bytes.as_slice())),
            Err(Unreadable::Newer { found: 7, known }) if known == SCHEMA_VERSION
        ));
        // Beyond u32, which no report of today's types can hold.
        assert!(matches!(
            decode(Some(with_version(4_294_967_296u64.into()).as_slice())),
            Err(Unreadable::Newer {
                found: 4_294_967_296,
                known
            }) if known == SCHEMA_VERSION
        ));
    }

    #[test]
    fn json_that_is_no_report_or_mention_and_an_empty_message_are_unreadable() {
        let reason = decode(Some(&br#"{"x":1}"#[..]))
            .err()
            .map(|e| e.to_string());
        assert!(
            reason.as_deref().is_some_and(|r| r
                .starts_with("not a report, mention or link JSON: missing field `schema_version`")),
            "{reason:?}"
        );
        assert!(matches!(decode(None), Err(Unreadable::Empty)));
        assert!(matches!(
            decode(Some(&b"not json"[..])),
            Err(Unreadable::Json(_))
        ));
    }

    #[test]
    fn letters_in_flight_are_bounded_by_count_and_by_bytes() {
        const MIB: usize = 1 << 20;
        // Nothing in flight: even a letter past the byte bound goes, alone.
        assert!(has_room(0, 0, 80 * MIB));
        assert!(has_room(1023, MIB, 1));
        assert!(!has_room(1024, MIB, 1), "1024 letters in flight");
        assert!(has_room(3, 48 * MIB, 16 * MIB), "64 MiB exactly");
        assert!(!has_room(4, 48 * MIB, 16 * MIB + 1), "past 64 MiB");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn letters_refused_by_a_full_librdkafka_queue_are_sent_again_and_all_stored() {
        use rdkafka::consumer::{BaseConsumer, Consumer};

        let mock = rdkafka::mocking::MockCluster::new(1).unwrap_or_else(|e| panic!("{e}"));
        mock.create_topic("transform-dlq", 1, 1)
            .unwrap_or_else(|e| panic!("{e}"));
        let servers = mock.bootstrap_servers();
        let mut postbox = KafkaPostbox::new(&servers, "lkp.reports", "transform-dlq", false);
        // A queue of one message: a letter sent while the one before is in flight finds it full.
        postbox.queue_messages = Some(1);
        let letters: Vec<Letter> = (0..5)
            .map(|offset| Letter {
                partition: 3,
                offset,
                raw: format!("letter {offset}").into_bytes(),
                reason: "not a report, mention or link JSON".to_owned(),
            })
            .collect();
        postbox
            .post(&letters)
            .await
            .unwrap_or_else(|e| panic!("a full queue is no failure: {e}"));

        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &servers)
            .set("group.id", "letters-test")
            .create()
            .unwrap_or_else(|e| panic!("{e}"));
        let watermarks = consumer
            .fetch_watermarks("transform-dlq", 0, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(watermarks, (0, 5), "each of the five letters, once");
    }
}
