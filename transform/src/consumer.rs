//! The transformer's Kafka side: a consumer in a group, whose messages and rebalances drive
//! the [`Ledger`] and whose seeks and offset commits carry out what the ledger decides.

use crate::TransformError;
use crate::bookkeeping::{Ledger, Seek, TransformSummary};
use crate::letters::KafkaPostbox;
use crate::tracker::{Check, Limits};
use lkplake_kafka::Topics;
use lkplake_lake::lease::Lease;
use lkplake_lake::{Format, Lake, LakeUrl};
use lkplake_schemas::metric::DirectionTable;
use rdkafka::TopicPartitionList;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How a transform run behaves.
#[derive(Debug, Clone)]
pub struct TransformConfig {
    /// The reports topic is read; messages of it that cannot be read go to
    /// `topics.transform_dlq`. Ingest's dead-letter topic is not used.
    pub topics: Topics,
    /// Create the dead-letter topic at the first letter when it is missing (off for
    /// librdkafka's mock cluster, which has no CreateTopics).
    pub create_dlq_topic: bool,
    /// The consumer group every transformer of one lake shares.
    pub group: String,
    /// The lake written.
    pub lake: LakeUrl,
    /// Which way is better for each metric: the defaults with the user's overrides.
    pub directions: DirectionTable,
    /// Flush when this many `metrics` rows are buffered.
    pub flush_rows: usize,
    /// Flush when the oldest buffered report is this old.
    pub flush_interval: Duration,
    /// Stop once every assigned partition is drained (instead of running until signalled).
    pub until_idle: bool,
    /// Static group membership (`group.instance.id`): a restarted instance with the same id
    /// takes its partitions back at once instead of waiting for the dead one's session to
    /// expire.
    pub instance_id: Option<String>,
    /// The longest a fetch request may wait at the broker (`fetch.wait.max.ms`). Tansu 0.6.0
    /// waits this long after *every* fetch, data or not (`tansu-storage`'s `fetch.rs` sleeps
    /// before it checks `min_bytes`), so librdkafka's 500 ms default capped a transformer on it
    /// at one fetch per 250 ms, about 22 MB/s; Kafka itself answers as soon as it has data, so
    /// a short wait there only makes an idle consumer ask more often (one request per wait).
    pub fetch_wait: Duration,
    /// The format of a lake this transformer creates; a lake that exists keeps its own.
    pub lake_format: Format,
}

impl TransformConfig {
    /// These topics, the dead-letter topic created when missing, group `lkplake-transform`,
    /// flush at 500,000 rows or 5 s, fetches wait at most 10 ms at the broker.
    pub fn new(topics: Topics, lake: LakeUrl) -> Self {
        Self {
            topics,
            create_dlq_topic: true,
            group: "lkplake-transform".into(),
            lake,
            directions: DirectionTable::default(),
            flush_rows: 500_000,
            flush_interval: Duration::from_secs(5),
            until_idle: false,
            instance_id: None,
            fetch_wait: Duration::from_millis(10),
            lake_format: Format::NEW_LAKES,
        }
    }
}

/// Flush when the letters waiting in the buffer reach this many bytes. Rows bound a buffer of
/// reports, but a topic of unreadable messages (a newer producer's, each up to 16 MiB) adds no
/// rows: without this, a flush interval's worth of them would wait in memory. The postbox
/// sends as much at a time, so one flush is one round of acknowledgements.
const FLUSH_LETTER_BYTES: usize = 64 << 20;

/// Notes rebalances so the main loop can reconcile its buffer with the new assignment.
struct RebalanceContext {
    changed: Arc<AtomicBool>,
}

impl ClientContext for RebalanceContext {
    fn error(&self, error: KafkaError, reason: &str) {
        // End of partition is how `--until-idle` learns the topic is drained, not an error.
        if !lkplake_kafka::is_partition_end(&error) {
            tracing::error!("librdkafka: {error}: {reason}");
        }
    }
}

impl ConsumerContext for RebalanceContext {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, _rebalance: &Rebalance<'_>) {
        self.changed.store(true, Ordering::SeqCst);
    }
}

/// Runs the transformer until `shutdown` resolves (then flushes and returns) or, with
/// `until_idle`, until every partition's messages are in the lake.
pub async fn run(
    config: TransformConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<TransformSummary, TransformError> {
    // Both fail fast and say why, before a consumer would wait for a broker for ever.
    lkplake_kafka::reachable(&config.topics.brokers).await?;
    let lake = Lake::open_in(&config.lake, config.lake_format).await?;
    let limits = Limits::for_flush_interval(config.flush_interval, config.until_idle);
    let ledger = Ledger::open(
        lake,
        &config.topics.reports,
        config.directions.clone(),
        limits,
        Instant::now(),
    )
    .await?;

    let changed = Arc::new(AtomicBool::new(false));
    let mut client = lkplake_kafka::clients::client(&config.topics.brokers);
    if let Some(id) = &config.instance_id {
        client.set("group.instance.id", id);
    }
    let consumer: StreamConsumer<RebalanceContext> = client
        .set("group.id", &config.group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "true")
        .set("session.timeout.ms", "6000")
        .set("fetch.message.max.bytes", "16777216")
        .set(
            "fetch.wait.max.ms",
            config.fetch_wait.as_millis().to_string(),
        )
        .create_with_context(RebalanceContext {
            changed: changed.clone(),
        })
        .map_err(|source| TransformError::Client {
            brokers: config.topics.brokers.clone(),
            source,
        })?;
    consumer
        .subscribe(&[&config.topics.reports])
        .map_err(|source| TransformError::Subscribe {
            topic: config.topics.reports.clone(),
            source,
        })?;
    let postbox = KafkaPostbox::new(
        &config.topics.brokers,
        &config.topics.reports,
        &config.topics.transform_dlq,
        config.create_dlq_topic,
    );
    // Held while this transformer writes, so that `lkplake upgrade` knows; taken last, so
    // that a failure to start leaves none behind.
    let lease = Lease::take(&config.lake).await?;
    let mut member = Member {
        config,
        consumer,
        ledger,
        postbox,
    };
    let outcome = member.run(&changed, shutdown).await;
    let Member {
        consumer, ledger, ..
    } = member;
    close(consumer).await;
    if let Err(e) = lease.release().await {
        tracing::warn!("{e}");
    }
    outcome.map(|()| ledger.into_summary())
}

/// What `recv` returned, owned.
enum Received {
    End(i32),
    Error(KafkaError),
    Message(i32, i64, Option<Vec<u8>>),
}

/// One member of the consumer group and the bookkeeping it drives.
struct Member {
    config: TransformConfig,
    consumer: StreamConsumer<RebalanceContext>,
    ledger: Ledger,
    /// Where the ledger's letters go before their offsets are committed.
    postbox: KafkaPostbox,
}

impl Member {
    async fn run(
        &mut self,
        changed: &AtomicBool,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), TransformError> {
        // A long-running transformer also looks for stalled partitions, less often.
        let check_every = Duration::from_secs(if self.config.until_idle { 1 } else { 10 });
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut last_check = Instant::now();
        tokio::pin!(shutdown);
        loop {
            // Rebalances happen inside `recv`, so checking here, before any flush, means a flush
            // never commits data of a partition this instance no longer owns.
            if changed.swap(false, Ordering::SeqCst) {
                self.reconcile().await?;
            }
            tokio::select! {
                () = &mut shutdown => {
                    tracing::info!("shutdown requested: flushing");
                    return self.flush().await;
                }
                _ = tick.tick() => {
                    if self.ledger.oldest().is_some_and(|o| o.elapsed() >= self.config.flush_interval) {
                        self.flush().await?;
                    }
                    if last_check.elapsed() >= check_every
                        && self.ledger.quiet(Instant::now(), Duration::from_secs(1))
                    {
                        last_check = Instant::now();
                        // "Drained" means in the lake, so `--until-idle` commits what it holds
                        // first; a long-running transformer keeps its flush triggers.
                        if self.config.until_idle {
                            self.flush().await?;
                        }
                        if self.check().await? {
                            return Ok(());
                        }
                    }
                }
                message = self.consumer.recv() => {
                    // Owned first: the message borrows the consumer, which a reconcile needs.
                    let received = match message {
                        Err(KafkaError::PartitionEOF(partition)) => Received::End(partition),
                        Err(e) => Received::Error(e),
                        Ok(m) => Received::Message(m.partition(), m.offset(), m.payload().map(<[u8]>::to_vec)),
                    };
                    if changed.swap(false, Ordering::SeqCst) {
                        self.reconcile().await?;
                    }
                    match received {
                        Received::End(partition) => {
                            tracing::debug!(
                                partition,
                                buffered = self.ledger.buffered_messages(),
                                "partition read to its end"
                            );
                            self.ledger.partition_end(partition, Instant::now());
                        }
                        Received::Error(e) => {
                            // Transient broker trouble is retried by librdkafka; say so and go on.
                            tracing::warn!(error = %e, "consumer error");
                        }
                        Received::Message(partition, offset, payload) => {
                            if let Some(seek) = self
                                .ledger
                                .accept(partition, offset, payload.as_deref(), Instant::now())
                                .await?
                            {
                                self.seek(seek);
                            }
                            if self.ledger.buffered_rows() >= self.config.flush_rows
                                || self.ledger.buffered_letter_bytes() >= FLUSH_LETTER_BYTES
                            {
                                self.flush().await?;
                            }
                        }
                    }
                }
            }
        }
    }

    async fn reconcile(&mut self) -> Result<(), TransformError> {
        let assigned = current_assignment(&self.consumer);
        self.ledger.reconcile(assigned, Instant::now()).await
    }

    /// Posts the buffer's dead letters, commits the buffer to the lake, then the offsets it
    /// covers to Kafka: each step only once the one before it is done.
    async fn flush(&mut self) -> Result<(), TransformError> {
        let committed = self.ledger.flush(&mut self.postbox).await?;
        if committed.is_empty() {
            return Ok(());
        }
        lkplake_faults::point(lkplake_faults::AFTER_LAKE_COMMIT);
        // Nothing was received while the commit ran: that time is not the partitions' silence.
        self.ledger.listening(Instant::now());
        let mut tpl = TopicPartitionList::new();
        for (&partition, &next) in &committed {
            if let Err(e) = tpl.add_partition_offset(
                &self.config.topics.reports,
                partition,
                rdkafka::Offset::Offset(next),
            ) {
                tracing::warn!(partition, error = %e, "cannot list the offset to commit");
            }
        }
        // The lake is the truth; the group offset only shortens the next replay, so a failed
        // commit is worth a warning, not a stop.
        if let Err(e) = self.consumer.commit(&tpl, CommitMode::Async) {
            tracing::warn!(error = %e, "committing Kafka offsets failed (the lake has the data)");
        }
        Ok(())
    }

    /// Seeks a partition so the broker returns its missing messages again; a partition that
    /// cannot be sought now (revoked meanwhile) is left to the next check.
    fn seek(&mut self, Seek { partition, to }: Seek) {
        self.ledger.rewound();
        if let Err(e) = self.consumer.seek(
            &self.config.topics.reports,
            partition,
            to,
            Duration::from_secs(10),
        ) {
            tracing::warn!(partition, error = %e, "seeking failed");
        }
    }

    /// Compares every partition's real end with the lake and acts on what the tracker makes
    /// of it; returns whether `--until-idle` may stop. Partitions held by another member (or by
    /// a killed one whose session has not expired yet) count too, so `--until-idle` never stops
    /// with data left behind.
    async fn check(&mut self) -> Result<bool, TransformError> {
        let topic = self.config.topics.reports.clone();
        let ends: BTreeMap<i32, i64> = lkplake_kafka::partition_ends_within(
            &self.config.topics.brokers,
            &topic,
            Duration::from_secs(30),
        )
        .await?;
        if ends.is_empty() {
            return Ok(false);
        }
        let (check, lake) = self.ledger.check(&ends, Instant::now()).await?;
        tracing::debug!(
            ?ends,
            ?lake,
            ?check,
            "checked the partitions against the lake"
        );
        match check {
            Check::Drained => Ok(self.config.until_idle),
            Check::Wait => Ok(false),
            Check::Rewind(seeks) => {
                for (partition, to) in seeks {
                    tracing::warn!(
                        partition,
                        ?to,
                        end = ends.get(&partition),
                        next_in_lake = lake.get(&partition),
                        "partition silent short of its end: rewinding"
                    );
                    self.seek(Seek { partition, to });
                }
                Ok(false)
            }
            Check::Rejoin(missing) => {
                tracing::warn!(
                    ?missing,
                    "partitions owned elsewhere are not advancing: rejoining the group"
                );
                self.consumer.unsubscribe();
                tracing::debug!("left the group; joining again");
                self.consumer
                    .subscribe(&[&topic])
                    .map_err(|source| TransformError::Subscribe {
                        topic: topic.clone(),
                        source,
                    })?;
                self.ledger.unassigned(Instant::now());
                Ok(false)
            }
            Check::Fail(missing) => Err(TransformError::Incomplete { topic, missing }),
        }
    }
}

/// How long closing the consumer may take before the transformer exits without it.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Leaves the group and closes the consumer, within [`CLOSE_TIMEOUT`]. librdkafka's close
/// serves the rebalance of leaving the group, and on Tansu that once blocked for good (an
/// `assign` inside the close whose answer never came, seen with gdb in a transformer that had
/// drained the topic). The lake already holds everything committed, so a consumer that does
/// not close in time is left to the process exit instead of hanging it; the group only waits
/// for its session to time out.
async fn close(consumer: StreamConsumer<RebalanceContext>) {
    let (done, closed) = tokio::sync::oneshot::channel();
    // A thread of its own, not `spawn_blocking`: the runtime waits for blocking tasks when it
    // shuts down, so a stuck close there would hang the exit all the same.
    let spawned = std::thread::Builder::new()
        .name("kafka-close".into())
        .spawn(move || {
            consumer.unsubscribe();
            drop(consumer);
            let _ = done.send(());
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start a thread to close the Kafka consumer");
        return;
    }
    if tokio::time::timeout(CLOSE_TIMEOUT, closed).await.is_err() {
        tracing::warn!(
            "the Kafka consumer did not close within {CLOSE_TIMEOUT:?}; exiting without it \
             (the lake holds every committed message; the group waits for its session to expire)"
        );
    }
}

/// The partitions assigned to this member, `None` while a rebalance has revoked everything.
fn current_assignment(consumer: &StreamConsumer<RebalanceContext>) -> Option<HashSet<i32>> {
    let assigned: HashSet<i32> = consumer
        .assignment()
        .ok()?
        .elements()
        .iter()
        .map(|e| e.partition())
        .collect();
    (!assigned.is_empty()).then_some(assigned)
}
