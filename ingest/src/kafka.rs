//! The Kafka side of ingest: topic setup, the report producer, the dead-letter
//! topic, and the ingest run that feeds parsed reports into them.

use crate::KafkaIngestError;
use crate::checkpoint::{self, Checkpointer, Position};
use crate::letter::{self, Cut};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use lkplake_parse::error::{ParseError, SourceError};
use lkplake_parse::parallel::{Outcome, default_threads, panic_reason, parse_input};
use lkplake_parse::parser::Parsed;
use lkplake_parse::source::{Input, InputRead, Inputs, TOO_LARGE_HEAD};
use lkplake_schemas::{Message as WireMessage, Source};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::OwnedHeaders;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use lkplake_kafka::Topics;

/// The largest message the producer sends by default, and the most `--max-message-bytes`
/// may be: the producer's own `message.max.bytes`.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

/// What a dead letter keeps of an input too large for one message: its first bytes, enough to
/// see what it is; its path, size and checksum find the rest. As much as a reader keeps of a
/// message too large to read whole, so every letter that holds only a part holds as much.
pub const LETTER_HEAD: usize = TOO_LARGE_HEAD;

/// Room a message needs beside its payload: its key and headers (a dead letter's reason, path
/// and checksum) and the record batch's framing. A topic's `max.message.bytes` bounds the
/// whole batch, so a payload may be at most this much smaller.
pub const MESSAGE_OVERHEAD: usize = 16 << 10;

/// The topic configuration that bounds a message (a record batch) on the broker.
const TOPIC_MAX_MESSAGE_BYTES: &str = "max.message.bytes";

/// Reports in flight at once: enough to keep the broker pipeline full, bounded so memory is.
const MAX_IN_FLIGHT: usize = 4096;

/// How often a follower saves where it stands within a long input (an archive's first
/// reading): a crash costs at most this much re-reading.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(10);

/// Where to send, and how.
#[derive(Debug, Clone)]
pub struct KafkaTarget {
    /// Parsed reports go to `topics.reports`, messages that look like reports but cannot be
    /// parsed to `topics.dlq`.
    pub topics: Topics,
    /// Partitions of topics this run creates.
    pub partitions: i32,
    /// Create missing topics first (off for librdkafka's mock cluster, which has no
    /// CreateTopics: its topics are made on the cluster object).
    pub create_topics: bool,
    /// The largest message to send (the broker's `message.max.bytes`): a report larger is
    /// dead-lettered with the reason, an input larger leaves a letter of its first bytes.
    pub max_message_bytes: usize,
}

impl KafkaTarget {
    /// These topics, six partitions, topics created when missing.
    pub fn new(topics: Topics) -> Self {
        Self {
            topics,
            partitions: 6,
            create_topics: true,
            max_message_bytes: MAX_MESSAGE_BYTES,
        }
    }
}

/// Creates the report and dead-letter topics unless they exist, each taking messages of
/// [`MAX_MESSAGE_BYTES`] (a broker's default, 1 MB on Kafka, would refuse the largest reports).
pub async fn ensure_topics(target: &KafkaTarget) -> Result<(), KafkaIngestError> {
    let largest = (MAX_MESSAGE_BYTES + MESSAGE_OVERHEAD).to_string();
    create_topics(
        &target.topics.brokers,
        &[
            NewTopic::new(
                &target.topics.reports,
                target.partitions,
                TopicReplication::Fixed(1),
            )
            .set(TOPIC_MAX_MESSAGE_BYTES, &largest),
            NewTopic::new(&target.topics.dlq, 1, TopicReplication::Fixed(1))
                .set(TOPIC_MAX_MESSAGE_BYTES, &largest),
        ],
    )
    .await
}

/// The largest payload this run may send: `--max-message-bytes`, or less where the broker
/// says a topic takes less (its `max.message.bytes`, which on Kafka falls back to the broker's
/// `message.max.bytes`). Sending more would fail the run at the first large report; with the
/// lower limit that report is dead-lettered with the reason instead. A broker that does not
/// describe its topics leaves the flag's limit.
pub async fn message_limit(target: &KafkaTarget) -> Result<usize, KafkaIngestError> {
    use rdkafka::admin::ResourceSpecifier;
    let admin: AdminClient<DefaultClientContext> =
        lkplake_kafka::clients::client(&target.topics.brokers)
            .create()
            .map_err(|source| KafkaIngestError::Client {
                brokers: target.topics.brokers.clone(),
                source,
            })?;
    let topics = [
        ResourceSpecifier::Topic(&target.topics.reports),
        ResourceSpecifier::Topic(&target.topics.dlq),
    ];
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let described = match admin.describe_configs(&topics, &options).await {
        Ok(described) => described,
        Err(e) => {
            tracing::debug!(error = %e, "the broker did not describe the topics' configuration");
            return Ok(target.max_message_bytes);
        }
    };
    let mut limit = target.max_message_bytes;
    for (topic, resource) in [&target.topics.reports, &target.topics.dlq]
        .into_iter()
        .zip(described)
    {
        let Some(bytes) = resource.ok().and_then(|r| {
            r.get(TOPIC_MAX_MESSAGE_BYTES)
                .and_then(|e| e.value.as_deref()?.parse::<usize>().ok())
        }) else {
            continue;
        };
        let fits = bytes.saturating_sub(MESSAGE_OVERHEAD);
        if fits < 1024 {
            return Err(KafkaIngestError::TopicLimit {
                topic: topic.clone(),
                bytes,
                wanted: MAX_MESSAGE_BYTES + MESSAGE_OVERHEAD,
            });
        }
        if fits < limit {
            tracing::warn!(
                topic = %topic,
                max_message_bytes = bytes,
                "the topic takes smaller messages than --max-message-bytes: reports larger than {fits} bytes of JSON are dead-lettered; raise its max.message.bytes to {} to keep them",
                MAX_MESSAGE_BYTES + MESSAGE_OVERHEAD
            );
            limit = fits;
        }
    }
    Ok(limit)
}

/// Creates topics; one that exists already is fine.
pub(crate) async fn create_topics(
    brokers: &str,
    topics: &[NewTopic<'_>],
) -> Result<(), KafkaIngestError> {
    let admin: AdminClient<DefaultClientContext> = lkplake_kafka::clients::client(brokers)
        .create()
        .map_err(|source| KafkaIngestError::Client {
            brokers: brokers.to_owned(),
            source,
        })?;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    let results = admin
        .create_topics(topics, &options)
        .await
        .map_err(|source| KafkaIngestError::CreateTopic {
            topic: topics
                .first()
                .map(|t| t.name.to_owned())
                .unwrap_or_default(),
            source,
        })?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => {
                return Err(KafkaIngestError::CreateTopic {
                    topic,
                    source: KafkaError::AdminOp(code),
                });
            }
        }
    }
    Ok(())
}

/// The report producer ([`lkplake_kafka::clients::producer`]: `acks=all`, not idempotent).
pub fn producer(brokers: &str) -> Result<FutureProducer, KafkaIngestError> {
    producer_for(brokers, MAX_MESSAGE_BYTES)
}

/// A [`producer`] whose record batches stay within what a topic taking payloads of `limit`
/// bytes accepts: librdkafka fills a batch up to its `message.max.bytes`, and the broker
/// refuses a batch larger than the topic's.
fn producer_for(brokers: &str, limit: usize) -> Result<FutureProducer, KafkaIngestError> {
    lkplake_kafka::clients::producer(brokers, limit + MESSAGE_OVERHEAD)
        .set("linger.ms", "20")
        .set("queue.buffering.max.messages", "100000")
        .create()
        .map_err(|source| KafkaIngestError::Client {
            brokers: brokers.to_owned(),
            source,
        })
}

/// What an ingest run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct IngestSummary {
    /// Inputs (files, archives, stdin) opened.
    pub inputs: u64,
    /// Bytes of those inputs, as stored (compressed archives count compressed).
    pub bytes: u64,
    /// Messages read from them.
    pub messages: u64,
    /// Reports produced to the reports topic.
    pub reports: u64,
    /// Of those, reports recognised as copies of one already produced in this run (a reply
    /// quoting the whole report); produced anyway, the transformer drops them by key.
    pub quoted: u64,
    /// Replies that cite a report (its opening or rows), produced as mentions.
    pub mentions: u64,
    /// Statements of later mail about a report, its culprit or its fix (a `Closes:` or
    /// `Fixes:` trailer, a revert, an applied notice), produced as links.
    pub links: u64,
    /// Messages that are neither reports nor mentions and make no link (skipped, nothing
    /// produced).
    pub not_reports: u64,
    /// Messages that look like reports but could not be parsed, produced to the dead-letter topic.
    pub dead_lettered: u64,
    /// Inputs that could not be read at all (missing file, broken gzip), reported on stderr.
    pub unreadable: u64,
    /// Messages of public-inbox archives that their repository lacks (a partial clone without
    /// the blob), so they were not read; a warning names the first. A follower's checkpoint
    /// stays before the first, and every poll tries it again: its total counts what each
    /// epoch lacked at its latest reading (see [`IngestSummary::absorb`]).
    pub missing: u64,
    /// `missing` by epoch (its name, as [`Input::name`] gives it), for every epoch read,
    /// those that lacked nothing included: what lets [`IngestSummary::absorb`] count a
    /// message that every poll finds missing once, and not at all once a poll read it.
    pub missing_in: std::collections::BTreeMap<String, u64>,
    /// Where reading stopped when a stop was asked for before the end of the input.
    pub stopped: Option<Stopped>,
}

impl IngestSummary {
    /// Adds another run's counts to these (a follower's rounds); the later stop wins. Missing
    /// messages are not added up: a follower reads an epoch that lacks one again at every
    /// poll (its checkpoint stays before it), so the later reading of an epoch replaces what
    /// an earlier one found, and one blob missing for an hour of polls counts once.
    pub fn absorb(&mut self, other: IngestSummary) {
        self.inputs += other.inputs;
        self.bytes += other.bytes;
        self.messages += other.messages;
        self.reports += other.reports;
        self.quoted += other.quoted;
        self.mentions += other.mentions;
        self.links += other.links;
        self.not_reports += other.not_reports;
        self.dead_lettered += other.dead_lettered;
        self.unreadable += other.unreadable;
        // Any not named by epoch (none, as `ingest` counts them) are added as before.
        let named: u64 = other.missing_in.values().sum();
        self.missing += other.missing.saturating_sub(named);
        for (epoch, missing) in other.missing_in {
            // An epoch that now lacks nothing is forgotten: the total keeps only the others.
            let before = if missing == 0 {
                self.missing_in.remove(&epoch)
            } else {
                self.missing_in.insert(epoch, missing)
            };
            self.missing = self.missing.saturating_sub(before.unwrap_or(0)) + missing;
        }
        self.stopped = other.stopped.or(self.stopped.take());
    }

    /// Whether every input could be read, and every message of it: nothing unreadable, no
    /// archive message missing from its repository.
    pub fn all_read(&self) -> bool {
        self.unreadable == 0 && self.missing == 0
    }

    /// Counts a message sent to the reports topic.
    fn count(&mut self, sent: Sent) {
        match sent {
            Sent::Report => self.reports += 1,
            Sent::Quoted => {
                self.reports += 1;
                self.quoted += 1;
            }
            Sent::Mention => self.mentions += 1,
            Sent::Link => self.links += 1,
        }
    }

    /// Counts the input `name`, read to its end: `size` bytes as stored.
    fn read(&mut self, name: &str, read: &InputRead, size: u64) {
        self.inputs += 1;
        self.messages += read.messages;
        self.missing += read.missing;
        // Every epoch read (only an epoch has a head, or can lack a message), to count a
        // follower's missing messages once across polls (see `absorb`).
        if read.head.is_some() || read.missing > 0 {
            self.missing_in.insert(name.to_owned(), read.missing);
        }
        self.bytes += size;
    }
}

/// Where an ingest stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// The input being read.
    pub path: String,
    /// The index of its first message not read.
    pub next_message: u64,
    /// Inputs after it, not read at all.
    pub inputs_not_read: u64,
}

/// What a message on the report topic is, for the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    Report,
    /// A copy of a report quoted in a reply.
    Quoted,
    Mention,
    Link,
}

/// Why something is too large, naming both limits that may have set `limit`.
fn more_than_a_message(limit: usize) -> String {
    format!(
        "more than a message holds ({limit} bytes: the least of --max-message-bytes and the topics' max.message.bytes less {MESSAGE_OVERHEAD} for key and headers)"
    )
}

/// A dead letter for `raw`, cut to its first [`LETTER_HEAD`] bytes when it is larger than a
/// message may be (`limit`): a 30 MB file fed by mistake costs one letter, not the run.
/// `truncated` is set (to the limit it exceeded) for a message too large to be read whole,
/// whose `raw` is only its first bytes ([`ParseError::TooLarge`]).
pub(crate) fn dead_letter(
    source: Source,
    mut raw: Vec<u8>,
    error: String,
    limit: usize,
    truncated: Option<usize>,
) -> Item {
    if raw.len() <= limit {
        return Item::Dead {
            source,
            raw,
            error,
            cut: None,
            truncated,
        };
    }
    let head = LETTER_HEAD.min(limit);
    if truncated.is_some() {
        // The message was never read whole: a size and checksum of the part read would pass
        // for the input's, so the letter is marked truncated and carries neither.
        raw.truncate(head);
        let error = format!(
            "{error}; {}: this letter keeps its first {head} bytes",
            more_than_a_message(limit)
        );
        return Item::Dead {
            source,
            raw,
            error,
            cut: None,
            truncated,
        };
    }
    use sha2::{Digest, Sha256};
    let sha256: String = Sha256::digest(&raw)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let error = format!(
        "{error}; the input is {} bytes (sha256 {sha256}), {}: this letter keeps its first {head} bytes",
        raw.len(),
        more_than_a_message(limit)
    );
    Item::Dead {
        source,
        cut: Some(Cut {
            size: raw.len() as u64,
            sha256,
        }),
        raw: raw[..head].to_vec(),
        error,
        truncated: None,
    }
}

/// What the parser thread hands to the producer.
pub(crate) enum Item {
    /// A report, mention or link already encoded as JSON on the parser thread, so the async side
    /// only sends.
    Report {
        key: String,
        sent: Sent,
        source: Source,
        payload: Vec<u8>,
    },
    Dead {
        source: Source,
        raw: Vec<u8>,
        error: String,
        /// Set when `raw` holds only the first bytes of an input read whole.
        cut: Option<Cut>,
        /// Set, to the limit it exceeded, when the message was larger than the most one
        /// message may be and was not read past the first bytes `raw` holds.
        truncated: Option<usize>,
    },
    NotAReport,
    Unreadable(SourceError),
    /// The parser starts reading an input.
    Begin {
        name: String,
        /// Its checkpoint key, when checkpointing.
        key: Option<String>,
    },
    /// Everything of one message was sent: its index, and its commit in an archive.
    Done {
        index: u64,
        commit: Option<String>,
    },
    /// The parser read an input to its end: what it found, its size as stored, and when
    /// checkpointing, where it now stands.
    Input {
        read: InputRead,
        size: u64,
        end: Option<Position>,
    },
}

/// Sends what one message holds to the producer; false once the channel closed.
fn send_outcome(outcome: Outcome, tx: &tokio::sync::mpsc::Sender<Item>, limit: usize) -> bool {
    let Outcome {
        source,
        raw,
        parsed,
        ..
    } = outcome;
    let index = source.index;
    // Most mail is not a report: its source moves into `Done`, nothing is copied.
    let (sent, commit) = match parsed {
        Ok(Parsed::NotAReport) => (tx.blocking_send(Item::NotAReport).is_ok(), source.commit),
        Ok(parsed) => {
            let items = parsed.into_messages().into_iter().map(encode);
            let sent = items
                .map(|item| match item {
                    // One report too large for a message: the mail is kept instead, with why.
                    Item::Report { key, payload, .. } if payload.len() > limit => {
                        let error = format!(
                            "its report {key} is {} bytes of JSON, {}",
                            payload.len(),
                            more_than_a_message(limit)
                        );
                        dead_letter(
                            source.clone(),
                            raw.clone().unwrap_or_default(),
                            error,
                            limit,
                            None,
                        )
                    }
                    item => item,
                })
                .all(|item| tx.blocking_send(item).is_ok());
            (sent, source.commit)
        }
        Err(e) => {
            let commit = source.commit.clone();
            // `raw` of a message too large to read is its first bytes only: the letter says so,
            // and `dlq replay` refuses it rather than parse a part as the whole mail.
            let truncated = match &e {
                ParseError::TooLarge(too_large) => Some(too_large.limit),
                _ => None,
            };
            let dead = dead_letter(
                source,
                raw.unwrap_or_default(),
                e.to_string(),
                limit,
                truncated,
            );
            (tx.blocking_send(dead).is_ok(), commit)
        }
    };
    sent && tx.blocking_send(Item::Done { index, commit }).is_ok()
}

/// Reads, parses and produces every input file. Parsing runs on its own thread (it is CPU
/// work) and feeds the producer through a bounded channel. `progress` is called with the input
/// bytes read so far. Once `stop` is cancelled no further message is read; what was read is
/// delivered, and the summary says where reading stopped.
///
/// With `checkpoints`, where each input stands is saved once everything read before it was
/// acknowledged: when an input was read to its end, every [`CHECKPOINT_EVERY`] within one, and
/// when stopped.
pub async fn ingest(
    inputs: Inputs,
    target: &KafkaTarget,
    progress: impl Fn(u64) + Send,
    stop: CancellationToken,
    mut checkpoints: Option<&mut Checkpointer>,
) -> Result<IngestSummary, KafkaIngestError> {
    // librdkafka would wait for an unreachable broker for ever; say so within seconds.
    lkplake_kafka::reachable(&target.topics.brokers).await?;
    // librdkafka's mock cluster (`create_topics` off) has neither CreateTopics nor
    // DescribeConfigs, and takes any size.
    let limit = if target.create_topics {
        ensure_topics(target).await?;
        message_limit(target).await?
    } else {
        target.max_message_bytes
    };
    let producer = producer_for(&target.topics.brokers, limit)?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Item>(1024);
    let files = inputs.inputs.len() as u64;
    let parser = spawn_parser(inputs, checkpoints.is_some(), limit, stop.clone(), tx);
    let mut run = Run::default();
    let mut in_flight = FuturesUnordered::new();
    loop {
        // A stop does not wait for the parser: it may be blocked reading a pipe.
        let item = tokio::select! {
            biased;
            () = stop.cancelled() => {
                run.stopped(files);
                break;
            }
            item = rx.recv() => match item {
                Some(item) => item,
                None => break,
            },
        };
        while in_flight.len() >= MAX_IN_FLIGHT {
            if let Some(result) = in_flight.next().await {
                result?;
            }
        }
        let input_read = matches!(item, Item::Input { .. });
        if let Some(send) = run.take(item, &producer, target) {
            in_flight.push(send);
        }
        if input_read {
            progress(run.summary.bytes);
        }
        if let Some(checkpoints) = checkpoints.as_deref_mut()
            && run.checkpoint_due()
        {
            // Everything read before the position must be acknowledged before it is saved.
            acknowledged(&mut in_flight).await?;
            run.save(checkpoints).await?;
        }
    }
    acknowledged(&mut in_flight).await?;
    if let Some(checkpoints) = checkpoints {
        run.save(checkpoints).await?;
    }
    if run.summary.stopped.is_some() {
        // Not joined: the parser may be blocked reading a pipe. Closing the channel ends it
        // at its next message; the process exit ends it otherwise.
        drop(rx);
        return Ok(run.summary);
    }
    // The channel closed: the thread has ended. A panic outside the per-message guard (in
    // decompression or splitting an archive) ended it early, with input left unread.
    parser
        .join()
        .map_err(|panic| KafkaIngestError::ParserFailed {
            input: run.reading,
            reason: panic_reason(panic.as_ref()),
        })?;
    Ok(run.summary)
}

/// Waits for every send in flight to be acknowledged.
async fn acknowledged(in_flight: &mut FuturesUnordered<Pending>) -> Result<(), KafkaIngestError> {
    while let Some(result) = in_flight.next().await {
        result?;
    }
    Ok(())
}

/// Reads and parses `inputs` on a thread of its own, handing what it finds to `tx`: each
/// input's [`Item::Begin`], what each message holds ([`send_outcome`]), and the input's end or
/// why it could not be read. Stops at the first message after `stop`, or once `tx` closes.
fn spawn_parser(
    inputs: Inputs,
    checkpointing: bool,
    limit: usize,
    stop: CancellationToken,
    tx: tokio::sync::mpsc::Sender<Item>,
) -> std::thread::JoinHandle<()> {
    let threads = default_threads();
    std::thread::spawn(move || {
        for (mut input, size) in inputs.inputs {
            let key = checkpointing.then(|| checkpoint::key_of(&input)).flatten();
            // A checkpoint says "everything up to here was delivered": an epoch read on past
            // a message its repository lacks would carry the checkpoint past that message, so
            // a followed epoch stops there, and the next poll tries it again.
            if let (Input::Epoch(epoch), Some(_)) = (&mut input, &key) {
                epoch.stop_at_missing = true;
            }
            // A file is fingerprinted before it is read: rewritten while it is read, it then
            // differs from its checkpoint, and the next poll reads it again.
            let file_position = match (&input, &key) {
                (Input::File(path), Some(_)) => checkpoint::file_position(path).ok(),
                _ => None,
            };
            let begin = Item::Begin {
                name: input.name(),
                key: key.clone(),
            };
            if tx.blocking_send(begin).is_err() {
                return;
            }
            let mut closed = false;
            let read = parse_input(&input, threads, &mut |outcome| {
                // The async side has recorded where reading stopped.
                if stop.is_cancelled() {
                    return ControlFlow::Break(());
                }
                let sent = send_outcome(outcome, &tx, limit);
                closed = !sent;
                if sent {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                }
            });
            let item = match read {
                Ok(read) if read.stopped => return,
                Ok(read) => {
                    let end = key.and_then(|_| match &input {
                        Input::Epoch(_) => read.checkpoint().map(|commit| Position::Epoch {
                            commit: commit.to_owned(),
                        }),
                        Input::File(_) => file_position,
                        Input::Stdin => None,
                    });
                    Item::Input { read, size, end }
                }
                Err(e) => Item::Unreadable(e),
            };
            if closed || tx.blocking_send(item).is_err() {
                return;
            }
        }
    })
}

/// The producing side of an ingest run: what the parser handed over so far, and where
/// reading stands for the summary and the checkpoints.
struct Run {
    summary: IngestSummary,
    /// The input being read.
    reading: String,
    /// Inputs begun.
    begun: u64,
    /// The index of the last message seen of the input being read.
    last_index: Option<u64>,
    /// The input being read's checkpoint key ...
    key: Option<String>,
    /// ... and its position not yet saved.
    position: Option<Position>,
    /// Whether the last item ended an input whose position is now due.
    input_done: bool,
    saved_at: Instant,
}

impl Default for Run {
    fn default() -> Self {
        Self {
            summary: IngestSummary::default(),
            reading: String::new(),
            begun: 0,
            last_index: None,
            key: None,
            position: None,
            input_done: false,
            saved_at: Instant::now(),
        }
    }
}

impl Run {
    /// Records where reading stopped, for a stop asked for while reading `files` inputs.
    fn stopped(&mut self, files: u64) {
        self.summary.stopped.get_or_insert(Stopped {
            path: self.reading.clone(),
            // The last message seen may have had more reports than were taken.
            next_message: self.last_index.unwrap_or(0),
            inputs_not_read: files.saturating_sub(self.begun),
        });
    }

    /// Counts `item` and returns its send, if it is one.
    fn take(
        &mut self,
        item: Item,
        producer: &FutureProducer,
        target: &KafkaTarget,
    ) -> Option<Pending> {
        self.input_done = false;
        match item {
            Item::Report {
                key,
                sent,
                source,
                payload,
            } => {
                self.last_index = Some(source.index);
                self.summary.count(sent);
                Some(deliver(
                    producer,
                    &target.topics.reports,
                    key,
                    payload,
                    None,
                    source,
                ))
            }
            Item::Dead {
                source,
                raw,
                error,
                cut,
                truncated,
            } => {
                self.last_index = Some(source.index);
                tracing::warn!(path = %source.path, index = source.index, %error, "dead-lettered");
                self.summary.dead_lettered += 1;
                let headers = letter::headers(&source, &error, cut.as_ref(), truncated);
                let key = source.to_string();
                Some(deliver(
                    producer,
                    &target.topics.dlq,
                    key,
                    raw,
                    Some(headers),
                    source,
                ))
            }
            Item::NotAReport => {
                self.summary.not_reports += 1;
                None
            }
            Item::Unreadable(e) => {
                eprintln!("lkplake ingest: {e}");
                self.summary.unreadable += 1;
                None
            }
            Item::Begin { name, key } => {
                tracing::debug!(input = %name, "reading an input");
                self.begun += 1;
                self.last_index = None;
                self.reading = name;
                self.key = key;
                // What was not saved of an input that ended unreadable is read again.
                self.position = None;
                None
            }
            Item::Done { index, commit } => {
                self.last_index = Some(index);
                if let (Some(_), Some(commit)) = (&self.key, commit) {
                    self.position = Some(Position::Epoch { commit });
                }
                None
            }
            Item::Input { read, size, end } => {
                if end.is_some() {
                    self.position = end;
                    self.input_done = true;
                }
                self.summary.read(&self.reading, &read, size);
                None
            }
        }
    }

    /// Whether a position waits to be saved and is due: its input was read to its end, or
    /// the last save is [`CHECKPOINT_EVERY`] old.
    fn checkpoint_due(&self) -> bool {
        self.position.is_some() && (self.input_done || self.saved_at.elapsed() >= CHECKPOINT_EVERY)
    }

    /// Saves the position not yet saved, if any; everything read before it must have been
    /// acknowledged.
    async fn save(&mut self, checkpoints: &mut Checkpointer) -> Result<(), KafkaIngestError> {
        if let (Some(key), Some(position)) = (&self.key, self.position.take()) {
            lkplake_faults::point(lkplake_faults::BEFORE_CHECKPOINT);
            checkpoints.save(key.clone(), position).await?;
        }
        self.saved_at = Instant::now();
        Ok(())
    }
}

/// A send that resolves once the broker acknowledged it (`acks=all`).
type Pending = std::pin::Pin<Box<dyn Future<Output = Result<(), KafkaIngestError>> + Send>>;

/// Encodes a report, mention or link for the report topic; one that cannot be encoded (it cannot
/// happen with these types, but the bytes are kept either way) becomes a dead letter.
pub(crate) fn encode(message: WireMessage) -> Item {
    let (sent, source) = match &message {
        WireMessage::Report(r) if r.quoted => (Sent::Quoted, &r.source),
        WireMessage::Report(r) => (Sent::Report, &r.source),
        WireMessage::Mention(m) => (Sent::Mention, &m.source),
        WireMessage::Link(l) => (Sent::Link, &l.source),
    };
    let source = source.clone();
    let key = message.key().to_owned();
    match serde_json::to_vec(&message) {
        Ok(payload) => Item::Report {
            key,
            sent,
            source,
            payload,
        },
        Err(e) => Item::Dead {
            error: format!("cannot encode {key} as JSON: {e}"),
            raw: Vec::new(),
            source,
            cut: None,
            truncated: None,
        },
    }
}

// Which failed sends are worth sending again, and for how long: shared with the transformer's
// dead letters.
use lkplake_kafka::{RESEND_FOR, worth_resending};

/// Sends one message and resolves once the broker acknowledged it (`acks=all`); sends it
/// again, for up to [`RESEND_FOR`], while the broker refuses it for its own state.
pub(crate) fn deliver(
    producer: &FutureProducer,
    topic: &str,
    key: String,
    payload: Vec<u8>,
    headers: Option<OwnedHeaders>,
    source: Source,
) -> Pending {
    let producer = producer.clone();
    let topic = topic.to_owned();
    Box::pin(async move {
        let started = Instant::now();
        let mut pause = Duration::from_millis(250);
        loop {
            let mut record = FutureRecord::to(&topic).key(&key).payload(&payload);
            if let Some(headers) = &headers {
                record = record.headers(headers.clone());
            }
            let error = match producer.send(record, Timeout::Never).await {
                Ok(_) => return Ok(()),
                Err((error, _)) => error,
            };
            if !worth_resending(&error) || started.elapsed() + pause > RESEND_FOR {
                return Err(KafkaIngestError::Delivery {
                    topic,
                    path: source.path,
                    index: source.index,
                    source: Box::new(error),
                });
            }
            tracing::warn!(
                %topic, path = %source.path, index = source.index, %error,
                "the broker refused a message for its own state: sending it again in {pause:?}"
            );
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lkplake_parse::error::TooLarge;

    /// What `send_outcome` hands the producer for `outcome`, messages holding `limit` bytes.
    fn sent(outcome: Outcome, limit: usize) -> Vec<Item> {
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        assert!(send_outcome(outcome, &tx, limit));
        drop(tx);
        let mut items = Vec::new();
        while let Ok(item) = rx.try_recv() {
            items.push(item);
        }
        items
    }

    /// The outcome of a message over 64 MiB, message 2 of `big.mbox`: its first 64 KiB.
    fn too_large() -> Outcome {
        let error = TooLarge {
            path: "big.mbox".to_owned(),
            index: 2,
            limit: 64 << 20,
            kept: 64 << 10,
        };
        Outcome {
            source: Source::file("big.mbox", 2),
            size: 64 << 10,
            raw: Some(vec![b'x'; 64 << 10]),
            parsed: Err(ParseError::TooLarge(error)),
        }
    }

    const TOO_LARGE: &str = "larger than 67108864 bytes, the most one message may be: not read whole, only its first 65536 bytes are kept; split it into smaller files if it really is mail";

    #[test]
    fn a_message_too_large_to_read_becomes_a_letter_marked_truncated_without_a_checksum() {
        let items = sent(too_large(), MAX_MESSAGE_BYTES);
        let [
            Item::Dead {
                source,
                raw,
                error,
                cut,
                truncated,
            },
            Item::Done {
                index: 2,
                commit: None,
            },
        ] = items.as_slice()
        else {
            panic!(
                "expected a letter and the message done, got {} items",
                items.len()
            );
        };
        assert_eq!(source, &Source::file("big.mbox", 2));
        assert_eq!(raw.len(), 65536);
        assert_eq!(error, TOO_LARGE);
        // A size and checksum of the first 64 KiB would pass for the whole message's.
        assert!(cut.is_none());
        assert_eq!(*truncated, Some(67_108_864));
    }

    #[test]
    fn a_truncated_letter_larger_than_the_topic_takes_is_cut_and_stays_truncated() {
        let items = sent(too_large(), 1024);
        let [
            Item::Dead {
                raw,
                error,
                cut,
                truncated,
                ..
            },
            Item::Done { index: 2, .. },
        ] = items.as_slice()
        else {
            panic!(
                "expected a letter and the message done, got {} items",
                items.len()
            );
        };
        assert_eq!(raw.len(), 1024);
        assert_eq!(
            error,
            &format!(
                "{TOO_LARGE}; more than a message holds (1024 bytes: the least of --max-message-bytes and the topics' max.message.bytes less 16384 for key and headers): this letter keeps its first 1024 bytes"
            )
        );
        assert!(cut.is_none());
        assert_eq!(*truncated, Some(67_108_864));
    }
}
