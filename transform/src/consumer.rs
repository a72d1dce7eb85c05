//! The transformer: consumes `lkp.reports`, deduplicates by report key, and commits batches
//! to the lake together with the offsets they cover.
//!
//! Exactly once, without Kafka transactions: every lake commit records, per topic partition,
//! the last offset it covers (Delta `txn`); a message at or below that offset is already in
//! the lake and is skipped. Kafka's committed offsets only shorten the replay after a restart.

use crate::lake::{Lake, LakeError, Progress, app_id};
use crate::normalize::{Batches, Normalizer, Tables};
use crate::tracker::{Check, Limits, Missing, Tracker, Verdict};
use deltalake::kernel::Transaction;
use futures::FutureExt;
use lkplake_schemas::Report;
use lkplake_schemas::metric::DirectionTable;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Errors of a transform run.
#[derive(Debug, thiserror::Error)]
pub enum TransformError {
    #[error(
        "cannot create a Kafka consumer for {brokers}: {source}; check --brokers / LKPLAKE_BROKERS"
    )]
    Client { brokers: String, source: KafkaError },
    #[error(
        "cannot subscribe to {topic}: {source}; does the topic exist? (`lkplake ingest` creates it)"
    )]
    Subscribe { topic: String, source: KafkaError },
    #[error("Kafka consumer failed: {0}")]
    Consume(KafkaError),
    #[error(
        "the broker did not answer a fetch for partitions {partitions:?} of {topic}, so their ends are unknown; is the broker up?"
    )]
    EndsUnknown { topic: String, partitions: Vec<i32> },
    #[error(
        "messages of {topic} cannot be read: {}; the lake holds everything before them (rerunning resumes there)",
        missing.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    Incomplete {
        topic: String,
        missing: Vec<Missing>,
    },
    #[error("the partition-end probe failed: {0}")]
    Probe(String),
    #[error(transparent)]
    Lake(#[from] LakeError),
    #[error("normalizing a batch failed: {0}")]
    Normalize(String),
}

/// How a transform run behaves.
#[derive(Debug, Clone)]
pub struct TransformConfig {
    pub brokers: String,
    pub topic: String,
    pub group: String,
    pub lake: PathBuf,
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
}

impl TransformConfig {
    pub fn new(brokers: impl Into<String>, lake: impl Into<PathBuf>) -> Self {
        Self {
            brokers: brokers.into(),
            topic: "lkp.reports".into(),
            group: "lkplake-transform".into(),
            lake: lake.into(),
            flush_rows: 500_000,
            flush_interval: Duration::from_secs(5),
            until_idle: false,
            instance_id: None,
        }
    }
}

/// What a transform run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TransformSummary {
    /// Messages read from Kafka.
    pub messages: u64,
    /// Messages skipped because the lake already covers their offset (a replay).
    pub already_in_lake: u64,
    /// Reports written.
    pub reports: u64,
    /// Copies of a report already in the lake (re-sent or quoted), skipped.
    pub duplicates: u64,
    /// Quoted copies in the lake replaced by their original.
    pub replaced_quoted: u64,
    /// Messages that were not a valid report JSON (kept in Kafka, logged).
    pub undecodable: u64,
    /// Times the consumer was rewound over a gap in a partition's offsets.
    pub rewinds: u64,
    /// `metrics` rows written.
    pub metric_rows: u64,
    /// Lake commits (each covering both tables).
    pub commits: u64,
}

/// Notes rebalances so the main loop can reconcile its buffer with the new assignment.
struct RebalanceContext {
    changed: Arc<AtomicBool>,
}

impl ClientContext for RebalanceContext {
    fn error(&self, error: KafkaError, reason: &str) {
        // End of partition is how `--until-idle` learns the topic is drained, not an error.
        if error.rdkafka_error_code() != Some(rdkafka::types::RDKafkaErrorCode::PartitionEOF) {
            tracing::error!("librdkafka: {error}: {reason}");
        }
    }
}

impl ConsumerContext for RebalanceContext {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, _rebalance: &Rebalance<'_>) {
        self.changed.store(true, Ordering::SeqCst);
    }
}

/// A consumed report waiting for the next lake commit.
struct Pending {
    partition: i32,
    offset: i64,
    report: Option<Report>,
    tables: Tables,
}

/// What the lake and the buffer know about one report key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    Original,
    Quoted,
}

struct Transformer {
    config: TransformConfig,
    lake: Lake,
    /// Keys committed to the lake.
    lake_keys: HashMap<String, Seen>,
    /// Lake progress of the partitions we have seen since the last rebalance.
    progress: HashMap<i32, Progress>,
    /// Next offset per assigned partition, gaps, stalls and the drained decision.
    tracker: Tracker,
    buffer: Vec<Pending>,
    /// Keys in the buffer, with the index of their entry.
    buffered_keys: HashMap<String, usize>,
    /// Last buffered offset per partition.
    buffered_to: HashMap<i32, i64>,
    /// Keys in the lake to delete before the next commit (quoted copies being replaced).
    replace: HashSet<String>,
    buffered_rows: usize,
    oldest: Option<Instant>,
    summary: TransformSummary,
}

/// Runs the transformer until `shutdown` resolves (then flushes and returns) or, with
/// `until_idle`, until every assigned partition is drained.
pub async fn run(
    config: TransformConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<TransformSummary, TransformError> {
    let changed = Arc::new(AtomicBool::new(false));
    let mut client = ClientConfig::new();
    if let Some(id) = &config.instance_id {
        client.set("group.instance.id", id);
    }
    let consumer: StreamConsumer<RebalanceContext> = client
        .set("bootstrap.servers", &config.brokers)
        .set("group.id", &config.group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "true")
        .set("session.timeout.ms", "6000")
        .set("fetch.message.max.bytes", "16777216")
        .create_with_context(RebalanceContext {
            changed: changed.clone(),
        })
        .map_err(|source| TransformError::Client {
            brokers: config.brokers.clone(),
            source,
        })?;
    consumer
        .subscribe(&[&config.topic])
        .map_err(|source| TransformError::Subscribe {
            topic: config.topic.clone(),
            source,
        })?;

    let lake = Lake::open(&config.lake).await?;
    let lake_keys = load_keys(&lake).await?;
    let limits = Limits::for_flush_interval(config.flush_interval, config.until_idle);
    // A long-running transformer also looks for stalled partitions, less often.
    let check_every = Duration::from_secs(if config.until_idle { 1 } else { 10 });
    let mut t = Transformer {
        config,
        lake,
        lake_keys,
        progress: HashMap::new(),
        tracker: Tracker::new(limits, Instant::now()),
        buffer: Vec::new(),
        buffered_keys: HashMap::new(),
        buffered_to: HashMap::new(),
        replace: HashSet::new(),
        buffered_rows: 0,
        oldest: None,
        summary: TransformSummary::default(),
    };
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_check = Instant::now();
    let shutdown = shutdown.fuse();
    tokio::pin!(shutdown);
    let outcome: Result<(), TransformError> = async {
        loop {
            // Rebalances happen inside `recv`, so checking here, before any flush, means a flush
            // never commits data of a partition this instance no longer owns.
            if changed.swap(false, Ordering::SeqCst) {
                t.reconcile(&consumer).await?;
            }
            tokio::select! {
                () = &mut shutdown => {
                    tracing::info!("shutdown requested: flushing");
                    t.flush(&consumer).await?;
                    break;
                }
                _ = tick.tick() => {
                    if t.oldest.is_some_and(|o| o.elapsed() >= t.config.flush_interval) {
                        t.flush(&consumer).await?;
                    }
                    if last_check.elapsed() >= check_every
                        && t.tracker.quiet(Instant::now(), Duration::from_secs(1))
                    {
                        last_check = Instant::now();
                        // "Drained" means in the lake, so `--until-idle` commits what it holds
                        // first; a long-running transformer keeps its flush triggers.
                        if t.config.until_idle {
                            t.flush(&consumer).await?;
                        }
                        if t.check(&consumer).await? {
                            break;
                        }
                    }
                }
                message = consumer.recv() => {
                    if changed.load(Ordering::SeqCst) {
                        t.reconcile(&consumer).await?;
                        changed.store(false, Ordering::SeqCst);
                    }
                    match message {
                        Err(KafkaError::PartitionEOF(partition)) => {
                            t.tracker.on_eof(partition, Instant::now());
                        }
                        Err(e) => {
                            // Transient broker trouble is retried by librdkafka; say so and go on.
                            tracing::warn!(error = %e, "consumer error");
                        }
                        Ok(message) => {
                            let payload = message.payload().map(<[u8]>::to_vec);
                            t.accept(&consumer, message.partition(), message.offset(), payload.as_deref()).await?;
                            if t.buffered_rows >= t.config.flush_rows {
                                t.flush(&consumer).await?;
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }
    .await;
    close(consumer).await;
    outcome.map(|()| t.summary)
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

async fn load_keys(lake: &Lake) -> Result<HashMap<String, Seen>, TransformError> {
    Ok(lake
        .report_keys()
        .await?
        .into_iter()
        .map(|(k, quoted)| (k, if quoted { Seen::Quoted } else { Seen::Original }))
        .collect())
}

impl Transformer {
    /// Compares every partition's real end with the lake and acts on what the tracker makes
    /// of it; returns whether `--until-idle` may stop. Partitions held by another member (or by
    /// a killed one whose session has not expired yet) count too, so `--until-idle` never stops
    /// with data left behind.
    async fn check(
        &mut self,
        consumer: &StreamConsumer<RebalanceContext>,
    ) -> Result<bool, TransformError> {
        let topic = self.config.topic.clone();
        let ends = crate::ends::partition_ends_within(
            &self.config.brokers,
            &topic,
            Duration::from_secs(30),
        )
        .await?;
        if ends.is_empty() {
            return Ok(false);
        }
        self.lake.refresh().await?;
        let partitions: Vec<i32> = ends.keys().copied().collect();
        let lake: BTreeMap<i32, i64> = self
            .lake
            .progress(&topic, &partitions)
            .await?
            .into_iter()
            .map(|(p, progress)| (p, progress.resume_at()))
            .collect();
        let check = self.tracker.check(&ends, &lake, Instant::now());
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
                    self.seek(consumer, partition, to);
                }
                Ok(false)
            }
            Check::Rejoin(missing) => {
                tracing::warn!(
                    ?missing,
                    "partitions owned elsewhere are not advancing: rejoining the group"
                );
                consumer.unsubscribe();
                tracing::debug!("left the group; joining again");
                consumer
                    .subscribe(&[&topic])
                    .map_err(|source| TransformError::Subscribe {
                        topic: topic.clone(),
                        source,
                    })?;
                self.tracker.assign([], Instant::now());
                Ok(false)
            }
            Check::Fail(missing) => Err(TransformError::Incomplete { topic, missing }),
        }
    }

    /// Seeks a partition so the broker returns its missing messages again; a partition that
    /// cannot be sought now (revoked meanwhile) is left to the next check.
    fn seek(&mut self, consumer: &StreamConsumer<RebalanceContext>, partition: i32, to: Offset) {
        self.summary.rewinds += 1;
        if let Err(e) = consumer.seek(&self.config.topic, partition, to, Duration::from_secs(10)) {
            tracing::warn!(partition, error = %e, "seeking failed");
        }
    }

    async fn progress_of(&mut self, partition: i32) -> Result<Progress, TransformError> {
        if let Some(p) = self.progress.get(&partition) {
            return Ok(*p);
        }
        let loaded = self.lake.progress(&self.config.topic, &[partition]).await?;
        let p = loaded.get(&partition).copied().unwrap_or_default();
        self.progress.insert(partition, p);
        Ok(p)
    }

    async fn accept(
        &mut self,
        consumer: &StreamConsumer<RebalanceContext>,
        partition: i32,
        offset: i64,
        payload: Option<&[u8]>,
    ) -> Result<(), TransformError> {
        self.summary.messages += 1;
        let progress = self.progress_of(partition).await?;
        if self.tracker.next(partition).is_none() {
            let buffered = self.buffered_to.get(&partition).map(|b| b + 1);
            let next = buffered.map_or(progress.resume_at(), |b| b.max(progress.resume_at()));
            self.tracker.resume(partition, next);
        }
        match self.tracker.on_message(partition, offset, Instant::now()) {
            Verdict::Take => {}
            Verdict::Skip => {
                self.summary.already_in_lake += 1;
                return Ok(());
            }
            Verdict::Rewind(to) => {
                // Tansu 0.6.0 answers a fetch from the middle of a record batch with the next
                // batch; after the seek, the tracker skips what the lake or buffer holds.
                tracing::warn!(
                    partition,
                    offset,
                    expected = self.tracker.next(partition),
                    ?to,
                    "gap in the partition: rewinding before the first missing offset"
                );
                self.seek(consumer, partition, to);
                return Ok(());
            }
            Verdict::Fail(missing) => {
                return Err(TransformError::Incomplete {
                    topic: self.config.topic.clone(),
                    missing: vec![missing],
                });
            }
        }
        let tables = Tables {
            metrics: progress.metrics.is_none_or(|m| offset > m),
            reports: progress.reports.is_none_or(|r| offset > r),
        };
        let report = match payload.map(serde_json::from_slice::<Report>) {
            Some(Ok(report)) => Some(report),
            other => {
                let reason = match other {
                    Some(Err(e)) => e.to_string(),
                    _ => "empty message".to_owned(),
                };
                tracing::error!(partition, offset, %reason, "not a report JSON; left in Kafka, skipped");
                self.summary.undecodable += 1;
                None
            }
        };
        let report = report.and_then(|r| self.deduplicate(r));
        if let Some(r) = &report {
            if tables.metrics {
                self.buffered_rows += r
                    .tests
                    .iter()
                    .map(|t| t.rows.len() * t.commits.len())
                    .sum::<usize>();
            }
            self.buffered_keys
                .insert(r.report_key.clone(), self.buffer.len());
        }
        // Every message is buffered, report or not, so its offset is recorded in the lake.
        // Offsets only grow past `buffered_to` here (smaller ones were skipped above).
        self.buffered_to.insert(partition, offset);
        self.buffer.push(Pending {
            partition,
            offset,
            report,
            tables,
        });
        self.oldest.get_or_insert_with(Instant::now);
        Ok(())
    }

    /// Keeps a report unless the lake or the buffer already has it; an original replaces a
    /// quoted copy.
    fn deduplicate(&mut self, report: Report) -> Option<Report> {
        let incoming = if report.quoted {
            Seen::Quoted
        } else {
            Seen::Original
        };
        if let Some(&i) = self.buffered_keys.get(&report.report_key) {
            let held = self.buffer.get_mut(i).and_then(|p| p.report.as_mut());
            match held {
                Some(held) if held.quoted && incoming == Seen::Original => {
                    self.summary.replaced_quoted += 1;
                    *held = report;
                }
                _ => self.summary.duplicates += 1,
            }
            return None;
        }
        match self.lake_keys.get(&report.report_key) {
            None => Some(report),
            Some(Seen::Quoted) if incoming == Seen::Original => {
                self.summary.replaced_quoted += 1;
                self.replace.insert(report.report_key.clone());
                Some(report)
            }
            Some(_) => {
                self.summary.duplicates += 1;
                None
            }
        }
    }

    /// After a rebalance: drop what belongs to partitions another member now owns (it replays
    /// them from the lake's progress) and forget cached progress, which that member may move.
    /// Between the revocation and the new assignment (eager protocol) the assignment is empty:
    /// nothing is dropped then, since partitions we get back continue where they were.
    async fn reconcile(
        &mut self,
        consumer: &StreamConsumer<RebalanceContext>,
    ) -> Result<(), TransformError> {
        let Some(assigned) = current_assignment(consumer) else {
            tracing::info!("rebalance: no partition assigned here");
            self.tracker.assign([], Instant::now());
            return Ok(());
        };
        tracing::info!(?assigned, "rebalance: partitions assigned here");
        self.tracker
            .assign(assigned.iter().copied(), Instant::now());
        let dropped = self.retain_buffer(|p| assigned.contains(&p.partition));
        if dropped > 0 {
            tracing::info!(
                dropped,
                "partitions moved to another member: dropped their buffered messages"
            );
        }
        self.progress.clear();
        self.lake.refresh().await?;
        self.lake_keys = load_keys(&self.lake).await?;
        Ok(())
    }

    /// Keeps the buffered messages `keep` accepts and rebuilds what is derived from the
    /// buffer; returns how many were dropped.
    fn retain_buffer(&mut self, keep: impl Fn(&Pending) -> bool) -> usize {
        let before = self.buffer.len();
        self.buffer.retain(|p| keep(p));
        let dropped = before - self.buffer.len();
        if dropped > 0 {
            self.rebuild_buffer_index();
        }
        dropped
    }

    fn rebuild_buffer_index(&mut self) {
        self.buffered_to.clear();
        for p in &self.buffer {
            let last = self.buffered_to.entry(p.partition).or_insert(p.offset);
            *last = (*last).max(p.offset);
        }
        self.buffered_keys = self
            .buffer
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.report.as_ref().map(|r| (r.report_key.clone(), i)))
            .collect();
        self.buffered_rows = self
            .buffer
            .iter()
            .filter(|p| p.tables.metrics)
            .filter_map(|p| p.report.as_ref())
            .map(|r| {
                r.tests
                    .iter()
                    .map(|t| t.rows.len() * t.commits.len())
                    .sum::<usize>()
            })
            .sum();
        self.replace.retain(|k| self.buffered_keys.contains_key(k));
    }

    async fn flush(
        &mut self,
        consumer: &StreamConsumer<RebalanceContext>,
    ) -> Result<(), TransformError> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        // Someone else may have committed these partitions since we read their progress
        // (a rebalance we have not seen yet): re-read and drop what the lake already has.
        self.lake.refresh().await?;
        let partitions: Vec<i32> = self
            .buffer
            .iter()
            .map(|p| p.partition)
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let fresh = self.lake.progress(&self.config.topic, &partitions).await?;
        let before = self.buffer.len();
        self.buffer.retain(|p| {
            p.offset
                >= fresh
                    .get(&p.partition)
                    .copied()
                    .unwrap_or_default()
                    .resume_at()
        });
        if self.buffer.len() != before {
            tracing::warn!(
                dropped = before - self.buffer.len(),
                "another transformer committed these offsets first"
            );
            self.rebuild_buffer_index();
        }

        let last = std::mem::take(&mut self.buffered_to);
        let txns: Vec<Transaction> = last
            .iter()
            .map(|(&partition, &offset)| {
                Transaction::new(app_id(&self.config.topic, partition), offset)
            })
            .collect();
        let pending = std::mem::take(&mut self.buffer);
        let (batches, pending) = tokio::task::spawn_blocking(move || {
            let mut normalizer = Normalizer::new(DirectionTable::default());
            for p in &pending {
                if let Some(report) = &p.report {
                    normalizer.push_into(report, p.tables);
                }
            }
            (normalizer.finish(), pending)
        })
        .await
        .map_err(|e| TransformError::Normalize(e.to_string()))?;
        let batches: Batches = batches.map_err(|e| TransformError::Normalize(e.to_string()))?;
        let metric_rows = batches.metrics.num_rows() as u64;

        let replace: Vec<String> = self.replace.drain().collect();
        self.lake.delete_reports(&replace).await?;
        self.lake.commit(batches, &txns).await?;

        self.summary.commits += 1;
        self.summary.metric_rows += metric_rows;
        for p in pending {
            if let Some(report) = p.report {
                self.summary.reports += 1;
                let seen = if report.quoted {
                    Seen::Quoted
                } else {
                    Seen::Original
                };
                self.lake_keys.insert(report.report_key, seen);
            }
        }
        let mut tpl = TopicPartitionList::new();
        for (&partition, &offset) in &last {
            self.progress.insert(
                partition,
                Progress {
                    metrics: Some(offset),
                    reports: Some(offset),
                },
            );
            if tpl
                .add_partition_offset(&self.config.topic, partition, Offset::Offset(offset + 1))
                .is_err()
            {
                continue;
            }
        }
        // The lake is the truth; the group offset only shortens the next replay, so a failed
        // commit is worth a warning, not a stop.
        if let Err(e) = consumer.commit(&tpl, CommitMode::Async) {
            tracing::warn!(error = %e, "committing Kafka offsets failed (the lake has the data)");
        }
        self.buffered_keys.clear();
        self.buffered_rows = 0;
        self.oldest = None;
        tracing::info!(
            metric_rows,
            partitions = last.len(),
            "committed to the lake"
        );
        Ok(())
    }
}
