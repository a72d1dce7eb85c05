//! The transformer's exactly-once bookkeeping, with no Kafka in it: which messages are new,
//! which copies of a report are duplicates, what a commit covers, and what to drop when
//! partitions move to another member. The consumer loop ([`crate::consumer`]) feeds it
//! messages and rebalances and carries out what it answers (seek a partition, commit offsets),
//! so every rule here is unit-tested against a local Delta table, the way kafka-delta-ingest
//! tests its `offsets.rs`.
//!
//! Exactly once without Kafka transactions: every lake commit records, per topic partition,
//! the last offset it covers (Delta `txn`); a message at or below that offset is already in
//! the lake and is skipped. Kafka's committed offsets only shorten the replay after a restart.
//! A message that cannot be read is recorded the same way, once the dead-letter topic holds it
//! ([`crate::letters`]): a flush posts the buffer's letters before it commits their offsets.

use crate::TransformError;
use crate::letters::{self, Letter, Postbox};
use crate::normalize::{Normalizer, Tables};
use crate::tracker::{Check, Limits, Tracker, Verdict};
use lkplake_lake::{Batches, Format, Lake, Progress, StoredTest, Table, Transaction, app_id};
use lkplake_schemas::key::canonical_params;
use lkplake_schemas::metric::DirectionTable;
use lkplake_schemas::{Message, Report, Test};
use rdkafka::Offset;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

/// What a transform run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TransformSummary {
    /// Messages read from Kafka.
    pub messages: u64,
    /// Messages skipped because the lake already covers their offset (a replay).
    pub already_in_lake: u64,
    /// Reports written.
    pub reports: u64,
    /// Mentions written (replies that cite a report).
    pub mentions: u64,
    /// Links written (statements of later mail about a report, its culprit or its fix).
    pub links: u64,
    /// Copies of a report already in the lake (re-sent or quoted), skipped: every test they
    /// carry is in the lake or the buffer already.
    pub duplicates: u64,
    /// Tests written from a later mail of a report key the lake already held (a re-test of
    /// the same commits on other tests, or a report sent again with tests added).
    pub tests_added: u64,
    /// Quoted copies in the lake replaced by their original.
    pub replaced_quoted: u64,
    /// Messages that were no report, mention or link this version reads (not that JSON,
    /// or a newer `schema_version`), stored in the dead-letter topic before their offsets were
    /// recorded.
    pub dead_lettered: u64,
    /// Report messages whose offsets this run recorded in the lake: reports written,
    /// duplicates and quoted copies alike, each offset once however often it was read.
    pub report_messages: u64,
    /// Mention messages whose offsets this run recorded in the lake, duplicates included.
    pub mention_messages: u64,
    /// Link messages whose offsets this run recorded in the lake, duplicates included.
    pub link_messages: u64,
    /// Times the consumer was rewound over a gap in a partition's offsets.
    pub rewinds: u64,
    /// `metrics` rows written.
    pub metric_rows: u64,
    /// Lake commits (each covering every table).
    pub commits: u64,
    /// Commits Delta refused because another writer committed first, read again and retried.
    pub conflicts_retried: u64,
}

/// Commits refused in a row because another writer committed first: a member that recorded
/// progress for the same partitions (the retry has less to write), or a compaction that
/// rewrote files meanwhile. More means something else is wrong, and the error is returned.
const MAX_COMMIT_CONFLICTS: u32 = 10;

/// What a consumed message was, kept when its content is dropped as a duplicate: the counts
/// compare what was consumed with what was produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Report,
    Mention,
    Link,
    Unreadable,
}

/// A consumed message waiting for the next lake commit.
#[derive(Debug)]
struct Pending {
    partition: i32,
    offset: i64,
    read: Read,
    message: Option<Message>,
    tables: Tables,
    /// For a message that cannot be read: its letter, until the dead-letter topic holds it.
    letter: Option<Letter>,
    /// For a report whose key the lake or the buffer already holds: the `test_index` its
    /// first test gets (it carries only the tests that are new). `None` for a whole report.
    adds_from: Option<u32>,
}

/// Whether every stored copy of a report key is a quoted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Original,
    Quoted,
}

impl Seen {
    fn quoted(quoted: bool) -> Self {
        if quoted { Seen::Quoted } else { Seen::Original }
    }

    fn of(report: &Report) -> Self {
        Seen::quoted(report.quoted)
    }

    /// Two sets of copies together: quoted only if both are (the lake's `bool_and(quoted)`).
    fn and(self, other: Seen) -> Seen {
        if self == Seen::Quoted && other == Seen::Quoted {
            Seen::Quoted
        } else {
            Seen::Original
        }
    }
}

/// A test's identity within its report: testcase, machine and parameters. The report key
/// covers the commits and only the first test, so two mails of one key can carry different
/// tests after it; this tells them apart. A 64-bit hash: a collision matters only between
/// tests of one report, a handful.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct TestId(u64);

impl TestId {
    fn new(testcase: &str, machine: &str, params: &str) -> Self {
        let mut hasher = DefaultHasher::new();
        (testcase, machine, params).hash(&mut hasher);
        TestId(hasher.finish())
    }

    fn of(test: &Test) -> Self {
        TestId::new(
            &test.testcase,
            &test.tbox_group,
            &canonical_params(&test.params),
        )
    }
}

/// What the lake (or the lake and the buffer) holds of one report key.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    seen: Seen,
    tests: HashSet<TestId>,
    /// The `test_index` a test added to the key gets.
    next_index: u32,
}

impl Held {
    /// Adds a report's tests, the first at `first_index`.
    fn add(&mut self, report: &Report, first_index: u32) {
        self.seen = self.seen.and(Seen::of(report));
        self.tests.extend(report.tests.iter().map(TestId::of));
        let count = u32::try_from(report.tests.len()).unwrap_or(u32::MAX);
        self.next_index = self.next_index.max(first_index.saturating_add(count));
    }

    /// Nothing held yet, of copies that are `seen`.
    fn empty(seen: Seen) -> Self {
        Held {
            seen,
            tests: HashSet::new(),
            next_index: 0,
        }
    }

    fn new(report: &Report, first_index: u32) -> Self {
        let mut held = Held::empty(Seen::of(report));
        held.add(report, first_index);
        held
    }

    /// Whether `report` carries every test held here.
    fn covered_by(&self, report: &Report) -> bool {
        let carried: HashSet<TestId> = report.tests.iter().map(TestId::of).collect();
        self.tests.is_subset(&carried)
    }
}

/// A seek the consumer must make so the broker sends a partition's missing messages again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seek {
    /// The partition to seek.
    pub partition: i32,
    /// Where its next fetch starts.
    pub to: Offset,
}

/// The bookkeeping of one transformer over one lake and one topic.
#[derive(Debug)]
pub struct Ledger {
    topic: String,
    directions: DirectionTable,
    lake: Lake,
    /// Keys committed to the lake, with their tests.
    lake_keys: HashMap<String, Held>,
    /// Mention and link keys committed to the lake or buffered (the two are digests of
    /// different inputs, so one set holds both).
    mail_keys: HashSet<String>,
    /// Lake progress of the partitions seen since the last rebalance.
    progress: HashMap<i32, Progress>,
    /// Next offset per assigned partition, gaps, stalls and the drained decision.
    tracker: Tracker,
    buffer: Vec<Pending>,
    /// Keys in the buffer, with the indexes of their entries (a whole report, or tests
    /// added to a key, in buffer order).
    buffered_keys: HashMap<String, Vec<usize>>,
    /// Last buffered offset per partition.
    buffered_to: HashMap<i32, i64>,
    /// Keys in the lake to delete before the next commit (quoted copies being replaced).
    replace: HashSet<String>,
    buffered_rows: usize,
    /// Bytes of the buffer's letters not posted yet.
    buffered_letter_bytes: usize,
    oldest: Option<Instant>,
    summary: TransformSummary,
}

fn rows_of(message: &Message) -> usize {
    match message {
        Message::Report(report) => report
            .tests
            .iter()
            .map(|t| t.rows.len() * t.commits.len())
            .sum(),
        Message::Mention(_) | Message::Link(_) => 0,
    }
}

/// Decodes one message of `topic`; one that cannot be read becomes a letter for the
/// dead-letter topic. Its reason is logged here, where and why, so that it is never lost in
/// silence even where the dead-letter topic does not outlive the run (`run`'s embedded cluster).
fn read_message(
    topic: &str,
    partition: i32,
    offset: i64,
    payload: Option<&[u8]>,
) -> (Option<Message>, Read, Option<Letter>) {
    match letters::decode(payload) {
        Ok(message) => {
            let read = match &message {
                Message::Report(_) => Read::Report,
                Message::Mention(_) => Read::Mention,
                Message::Link(_) => Read::Link,
            };
            (Some(message), read, None)
        }
        Err(unreadable) => {
            tracing::warn!(%topic, partition, offset, reason = %unreadable, "cannot read this message: dead-lettering it");
            let letter = Letter {
                partition,
                offset,
                raw: payload.map(<[u8]>::to_vec).unwrap_or_default(),
                reason: unreadable.to_string(),
            };
            (None, Read::Unreadable, Some(letter))
        }
    }
}

async fn load_keys(lake: &Lake) -> Result<HashMap<String, Held>, TransformError> {
    Ok(held_keys(lake.report_tests().await?))
}

/// The mention and link keys the lake holds.
async fn load_mail_keys(lake: &Lake) -> Result<HashSet<String>, TransformError> {
    let mut keys = lake.mention_keys().await?;
    keys.extend(lake.link_keys().await?);
    Ok(keys)
}

/// Groups the lake's test rows by report key.
fn held_keys(rows: Vec<StoredTest>) -> HashMap<String, Held> {
    let mut keys: HashMap<String, Held> = HashMap::new();
    for row in rows {
        let seen = Seen::quoted(row.quoted);
        let held = keys.entry(row.report_key).or_insert(Held::empty(seen));
        held.seen = held.seen.and(seen);
        held.tests
            .insert(TestId::new(&row.testcase, &row.machine, &row.params));
        held.next_index = held.next_index.max(row.test_index.saturating_add(1));
    }
    keys
}

impl Ledger {
    /// Bookkeeping for `topic` over `lake`, knowing every report key the lake holds.
    pub async fn open(
        lake: Lake,
        topic: &str,
        directions: DirectionTable,
        limits: Limits,
        now: Instant,
    ) -> Result<Self, TransformError> {
        let lake_keys = load_keys(&lake).await?;
        let mail_keys = load_mail_keys(&lake).await?;
        Ok(Self {
            topic: topic.to_owned(),
            directions,
            lake,
            lake_keys,
            mail_keys,
            progress: HashMap::new(),
            tracker: Tracker::new(limits, now),
            buffer: Vec::new(),
            buffered_keys: HashMap::new(),
            buffered_to: HashMap::new(),
            replace: HashSet::new(),
            buffered_rows: 0,
            buffered_letter_bytes: 0,
            oldest: None,
            summary: TransformSummary::default(),
        })
    }

    /// Messages waiting for the next lake commit.
    pub fn buffered_messages(&self) -> usize {
        self.buffer.len()
    }

    /// What the run did so far.
    pub fn summary(&self) -> &TransformSummary {
        &self.summary
    }

    /// What the run did, at its end.
    pub fn into_summary(self) -> TransformSummary {
        self.summary
    }

    /// `metrics` rows waiting for the next commit.
    pub fn buffered_rows(&self) -> usize {
        self.buffered_rows
    }

    /// Bytes of the letters waiting for the next flush (each up to a whole message of the
    /// reports topic): the consumer flushes past a bound, as for rows, so letters do not pile
    /// up in memory behind a flush interval.
    pub fn buffered_letter_bytes(&self) -> usize {
        self.buffered_letter_bytes
    }

    /// When the oldest message waiting for the next commit was buffered.
    pub fn oldest(&self) -> Option<Instant> {
        self.oldest
    }

    /// `partition` was read to its end at `now`.
    pub fn partition_end(&mut self, partition: i32, now: Instant) {
        self.tracker.on_eof(partition, now);
    }

    /// Whether every assigned partition is at its end, or was silent for `quiet_for`, at `now`.
    pub fn quiet(&self, now: Instant, quiet_for: Duration) -> bool {
        self.tracker.quiet(now, quiet_for)
    }

    /// The consumer listens again from `now`: the time it did not (a commit) is not the
    /// partitions' silence.
    pub fn listening(&mut self, now: Instant) {
        self.tracker.listening(now);
    }

    /// The consumer holds no partition any more (it subscribed again), as of `now`.
    pub fn unassigned(&mut self, now: Instant) {
        self.tracker.assign([], now);
    }

    /// Counts a seek the consumer made.
    pub fn rewound(&mut self) {
        self.summary.rewinds += 1;
    }

    async fn progress_of(&mut self, partition: i32) -> Result<Progress, TransformError> {
        if let Some(p) = self.progress.get(&partition) {
            return Ok(*p);
        }
        let loaded = self.lake.progress(&self.topic, &[partition]).await?;
        let p = loaded.get(&partition).copied().unwrap_or_default();
        self.progress.insert(partition, p);
        Ok(p)
    }

    /// Takes one message. Returns the seek to make when the message reveals a gap before it.
    pub async fn accept(
        &mut self,
        partition: i32,
        offset: i64,
        payload: Option<&[u8]>,
        now: Instant,
    ) -> Result<Option<Seek>, TransformError> {
        self.summary.messages += 1;
        let progress = self.progress_of(partition).await?;
        if self.tracker.next(partition).is_none() {
            let buffered = self.buffered_to.get(&partition).map(|b| b + 1);
            let next = buffered.map_or(progress.resume_at(), |b| b.max(progress.resume_at()));
            self.tracker.resume(partition, next);
        }
        match self.tracker.on_message(partition, offset, now) {
            Verdict::Take => {}
            Verdict::Skip => {
                self.summary.already_in_lake += 1;
                return Ok(None);
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
                return Ok(Some(Seek { partition, to }));
            }
            Verdict::Fail(missing) => {
                return Err(TransformError::Incomplete {
                    topic: self.topic.clone(),
                    missing: vec![missing],
                });
            }
        }
        let mut tables = Tables::ALL;
        tables.remove_covered(progress, offset);
        let (message, read, letter) = read_message(&self.topic, partition, offset, payload);
        let mut adds_from = None;
        let message = match message {
            Some(Message::Report(r)) => {
                let kept = self.deduplicate(*r, tables);
                kept.map(|(r, from)| {
                    adds_from = from;
                    Message::Report(Box::new(r))
                })
            }
            Some(message @ (Message::Mention(_) | Message::Link(_))) => {
                if self.mail_keys.insert(message.key().to_owned()) {
                    Some(message)
                } else {
                    self.summary.duplicates += 1;
                    None
                }
            }
            None => None,
        };
        // Every message is buffered, report or not, so its offset is recorded in the lake.
        self.buffer_message(
            Pending {
                partition,
                offset,
                read,
                message,
                tables,
                letter,
                adds_from,
            },
            now,
        );
        Ok(None)
    }

    /// Adds a taken message to the buffer and to what is derived from it.
    fn buffer_message(&mut self, pending: Pending, now: Instant) {
        if let Some(m) = &pending.message {
            if pending.tables.contains(Table::Metrics) {
                self.buffered_rows += rows_of(m);
            }
            if let Message::Report(r) = m {
                self.buffered_keys
                    .entry(r.report_key.clone())
                    .or_default()
                    .push(self.buffer.len());
            }
        }
        if let Some(letter) = &pending.letter {
            self.buffered_letter_bytes += letter.raw.len();
        }
        // Offsets only grow past `buffered_to` here (smaller ones were skipped by `accept`).
        self.buffered_to.insert(pending.partition, pending.offset);
        self.buffer.push(pending);
        self.oldest.get_or_insert(now);
    }

    /// Keeps what a report adds to the lake and the buffer: the whole report when its key is
    /// new, or when it is the original of a quoted copy held and carries every test held;
    /// otherwise only the tests not held yet, numbered after the held ones (the second value).
    /// A report that adds nothing is a duplicate. `tables` are the tables still to be written
    /// for its offset.
    fn deduplicate(&mut self, mut report: Report, tables: Tables) -> Option<(Report, Option<u32>)> {
        let Some(held) = self.held(&report.report_key) else {
            return Some((report, None));
        };
        if self.replace_quoted(&report, &held, tables) {
            return Some((report, None));
        }
        self.rewrite_if_in_metrics(&report.report_key, tables);
        let before = report.tests.len();
        report
            .tests
            .retain(|t| !held.tests.contains(&TestId::of(t)));
        if report.tests.is_empty() {
            tracing::debug!(key = %report.report_key, source = %report.source, "duplicate: every test of this report is already held");
            self.summary.duplicates += 1;
            return None;
        }
        let added: Vec<&str> = report.tests.iter().map(|t| t.testcase.as_str()).collect();
        tracing::info!(
            key = %report.report_key,
            source = %report.source,
            ?added,
            of = before,
            "a report already in the lake comes again with tests it did not have: adding them"
        );
        self.summary.tests_added += report.tests.len() as u64;
        Some((report, Some(held.next_index)))
    }

    /// What the lake and the buffer hold of `key`, together.
    fn held(&self, key: &str) -> Option<Held> {
        let mut held = self.lake_keys.get(key).cloned();
        for &i in self.buffered_keys.get(key).into_iter().flatten() {
            let Some(p) = self.buffer.get(i) else {
                continue;
            };
            let Some(Message::Report(r)) = &p.message else {
                continue;
            };
            let from = p.adds_from.unwrap_or(0);
            match &mut held {
                Some(h) => h.add(r, from),
                None => held = Some(Held::new(r, from)),
            }
        }
        held
    }

    /// Whether `report` replaces the copies held of its key: it is their original, they are
    /// all quoted, and it carries every test they hold. It is then kept whole.
    ///
    /// Two messages of one key in the buffer may stand differently in the lake: after a crash
    /// between table commits, `metrics` may cover one of them (its rows are in the lake) and
    /// not the other, while `reports` covers neither, so the key is not among the lake's
    /// keys. The one kept is written to the tables its own offset still needs, and when
    /// `metrics` covers the other one but not it, the lake holds the other one's rows: they
    /// are deleted first, as for a quoted copy the lake holds.
    fn replace_quoted(&mut self, report: &Report, held: &Held, tables: Tables) -> bool {
        if report.quoted || held.seen != Seen::Quoted || !held.covered_by(report) {
            return false;
        }
        let key = &report.report_key;
        let entries = self.buffered_keys.get(key).map_or(&[][..], Vec::as_slice);
        match (self.lake_keys.contains_key(key), entries) {
            (true, []) => {
                self.summary.replaced_quoted += 1;
                self.replace.insert(key.clone());
                true
            }
            (false, &[i]) => {
                let Some(held) = self.buffer.get_mut(i) else {
                    return false;
                };
                // Tables commit in order with the same offsets, so a table that does not cover
                // an offset is followed by none that does: `metrics` decides for all of them.
                if tables.contains(Table::Metrics) && !held.tables.contains(Table::Metrics) {
                    self.replace.insert(key.clone());
                }
                // Buffered at its own offset, whose progress decides its tables at the flush.
                self.summary.replaced_quoted += 1;
                held.message = None;
                true
            }
            // Quoted copies both in the lake and in the buffer: the original adds its tests.
            _ => false,
        }
    }

    /// A copy whose offset `metrics` already covers (a crash between table commits) has rows
    /// in the lake that no `reports` row names yet. When a buffered copy of its key writes
    /// `metrics` too, those rows would be there twice: the lake's rows of the key are deleted
    /// first and every buffered copy of the key writes every table ([`Self::rewrite_replaced`]).
    fn rewrite_if_in_metrics(&mut self, key: &str, tables: Tables) {
        if tables.contains(Table::Metrics) || self.lake_keys.contains_key(key) {
            return;
        }
        let entries = self.buffered_keys.get(key).into_iter().flatten();
        let buffered_writes_metrics = entries
            .filter_map(|&i| self.buffer.get(i))
            .any(|p| p.message.is_some() && p.tables.contains(Table::Metrics));
        if buffered_writes_metrics {
            self.replace.insert(key.to_owned());
        }
    }

    /// Every buffered copy of a key whose lake rows are deleted before the commit writes all
    /// its tables again, whatever its offset's progress says.
    fn rewrite_replaced(&mut self) {
        for key in &self.replace {
            for &i in self.buffered_keys.get(key).into_iter().flatten() {
                if let Some(p) = self.buffer.get_mut(i) {
                    p.tables = Tables::ALL;
                }
            }
        }
    }

    /// After a rebalance: drop what belongs to partitions another member now owns (it replays
    /// them from the lake's progress) and forget cached progress, which that member may move.
    /// `None` is the moment between revocation and the new assignment (eager protocol):
    /// nothing is dropped then, since partitions we get back continue where they were.
    pub async fn reconcile(
        &mut self,
        assigned: Option<HashSet<i32>>,
        now: Instant,
    ) -> Result<(), TransformError> {
        let Some(assigned) = assigned else {
            tracing::info!("rebalance: no partition assigned here");
            self.tracker.assign([], now);
            return Ok(());
        };
        tracing::info!(?assigned, "rebalance: partitions assigned here");
        self.tracker.assign(assigned.iter().copied(), now);
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
        self.mail_keys = load_mail_keys(&self.lake).await?;
        self.mail_keys
            .extend(self.buffer.iter().filter_map(|p| match &p.message {
                Some(m @ (Message::Mention(_) | Message::Link(_))) => Some(m.key().to_owned()),
                _ => None,
            }));
        Ok(())
    }

    /// Compares every partition's real end with the lake; the tracker decides what to do.
    /// Returns the decision and the lake's next offset per partition, for the log.
    pub async fn check(
        &mut self,
        ends: &BTreeMap<i32, i64>,
        now: Instant,
    ) -> Result<(Check, BTreeMap<i32, i64>), TransformError> {
        self.lake.refresh().await?;
        let partitions: Vec<i32> = ends.keys().copied().collect();
        let lake: BTreeMap<i32, i64> = self
            .lake
            .progress(&self.topic, &partitions)
            .await?
            .into_iter()
            .map(|(p, progress)| (p, progress.resume_at()))
            .collect();
        Ok((self.tracker.check(ends, &lake, now), lake))
    }

    /// Keeps the buffered messages `keep` accepts and rebuilds what is derived from the
    /// buffer; returns how many were dropped.
    fn retain_buffer(&mut self, keep: impl Fn(&Pending) -> bool) -> usize {
        let before = self.buffer.len();
        // A mention or link dropped here is not in the lake: when it comes again, it is new.
        for p in self.buffer.iter().filter(|p| !keep(p)) {
            if let Some(m @ (Message::Mention(_) | Message::Link(_))) = &p.message {
                self.mail_keys.remove(m.key());
            }
        }
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
        self.buffered_keys.clear();
        for (i, p) in self.buffer.iter().enumerate() {
            if let Some(Message::Report(r)) = &p.message {
                self.buffered_keys
                    .entry(r.report_key.clone())
                    .or_default()
                    .push(i);
            }
        }
        self.buffered_rows = self
            .buffer
            .iter()
            .filter(|p| p.tables.contains(Table::Metrics))
            .filter_map(|p| p.message.as_ref())
            .map(rows_of)
            .sum();
        self.buffered_letter_bytes = self
            .buffer
            .iter()
            .filter_map(|p| p.letter.as_ref())
            .map(|l| l.raw.len())
            .sum();
        self.replace.retain(|k| self.buffered_keys.contains_key(k));
    }

    /// Posts the letters of the buffer not posted yet and waits for the broker to hold them.
    /// Called before every commit of the buffer's offsets, so no offset is recorded whose
    /// letter could still be lost; a letter posted before a commit that is then retried is
    /// not posted again.
    async fn post_letters(&mut self, postbox: &mut impl Postbox) -> Result<(), TransformError> {
        // Taken out of the buffer, not copied (a letter may be a 16 MiB message), and put back
        // where each was when the post fails, so the next flush posts them again. A flush
        // dropped mid-post (the process ending) loses them only from memory: their offsets
        // are not recorded, so a rerun reads those messages and posts them again.
        let (at, letters): (Vec<usize>, Vec<Letter>) = self
            .buffer
            .iter_mut()
            .enumerate()
            .filter_map(|(i, p)| p.letter.take().map(|l| (i, l)))
            .unzip();
        if letters.is_empty() {
            return Ok(());
        }
        let posted = postbox.post(&letters).await;
        if let Err(e) = posted {
            for (i, letter) in at.into_iter().zip(letters) {
                if let Some(p) = self.buffer.get_mut(i) {
                    p.letter = Some(letter);
                }
            }
            return Err(e.into());
        }
        self.summary.dead_lettered += letters.len() as u64;
        self.buffered_letter_bytes = 0;
        Ok(())
    }

    /// Re-reads the lake's progress for the buffer's partitions and drops what another writer
    /// committed meanwhile; what is left is marked with the tables still behind. Returns
    /// whether anything is left to commit.
    async fn drop_committed_elsewhere(&mut self) -> Result<bool, TransformError> {
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
        let fresh = self.lake.progress(&self.topic, &partitions).await?;
        let dropped = self.retain_buffer(|p| {
            p.offset
                >= fresh
                    .get(&p.partition)
                    .copied()
                    .unwrap_or_default()
                    .resume_at()
        });
        if dropped > 0 {
            tracing::warn!(dropped, "another transformer committed these offsets first");
        }
        // What is left may already be in some of the tables (the other writer's commit
        // of `metrics` landed, its `reports` not yet): write only the tables behind.
        for p in &mut self.buffer {
            let progress = fresh.get(&p.partition).copied().unwrap_or_default();
            p.tables.remove_covered(progress, p.offset);
        }
        if self.buffer.is_empty() {
            self.rebuild_buffer_index();
            self.oldest = None;
            return Ok(false);
        }
        Ok(true)
    }

    /// Commits the buffer to the lake, after posting its letters to `postbox`. Returns, per
    /// partition, the next offset to consume, for the consumer to commit to Kafka (empty when
    /// there was nothing to commit).
    pub async fn flush(
        &mut self,
        postbox: &mut impl Postbox,
    ) -> Result<BTreeMap<i32, i64>, TransformError> {
        if self.buffer.is_empty() {
            return Ok(BTreeMap::new());
        }
        let mut conflicts = 0;
        let (last, pending, metric_rows) = loop {
            if !self.drop_committed_elsewhere().await? {
                return Ok(BTreeMap::new());
            }
            self.rewrite_replaced();
            // The letters first: an error here leaves every offset of the buffer unrecorded.
            self.post_letters(postbox).await?;

            let last = self.buffered_to.clone();
            let txns: Vec<Transaction> = last
                .iter()
                .map(|(&partition, &offset)| {
                    Transaction::new(app_id(&self.topic, partition), offset)
                })
                .collect();
            let pending = std::mem::take(&mut self.buffer);
            let (batches, metric_rows, pending) =
                normalize(self.directions.clone(), self.lake.format(), pending).await?;

            // Kept until the commit lands: a retried commit deletes them again.
            let replace: Vec<String> = self.replace.iter().cloned().collect();
            let committed = match self.lake.delete_reports(&replace).await {
                Ok(()) => self.lake.commit(batches, &txns).await,
                Err(e) => Err(e),
            };
            match committed {
                Ok(()) => {
                    self.replace.clear();
                    break (last, pending, metric_rows);
                }
                // Two members held a partition at once across a rebalance and the other one
                // committed first (that is what the `txn` is for), or a compaction rewrote
                // files of the table. Delta refused this commit; the buffer goes round again
                // against the lake as it is now.
                Err(e) if e.is_commit_conflict() && conflicts < MAX_COMMIT_CONFLICTS => {
                    conflicts += 1;
                    self.summary.conflicts_retried += 1;
                    let who = if e.is_progress_conflict() {
                        "another transformer committed progress for these partitions at the same time"
                    } else {
                        "another writer (a compaction) changed the table at the same time"
                    };
                    tracing::warn!(conflicts, "{who}: re-reading the lake and committing again");
                    self.buffer = pending;
                    self.rebuild_buffer_index();
                }
                Err(e) => return Err(e.into()),
            }
        };
        Ok(self.committed(&last, pending, metric_rows))
    }

    /// Records a commit of `pending`, which covered the offsets up to `last` per partition
    /// and wrote `metric_rows`: the counts, the keys the lake now holds, and each partition's
    /// progress. Returns the next offset to consume per partition.
    fn committed(
        &mut self,
        last: &HashMap<i32, i64>,
        pending: Vec<Pending>,
        metric_rows: u64,
    ) -> BTreeMap<i32, i64> {
        self.buffered_to.clear();
        self.summary.commits += 1;
        self.summary.metric_rows += metric_rows;
        for p in pending {
            match p.read {
                Read::Report => self.summary.report_messages += 1,
                Read::Mention => self.summary.mention_messages += 1,
                Read::Link => self.summary.link_messages += 1,
                Read::Unreadable => {}
            }
            match p.message {
                Some(Message::Report(report)) => {
                    match p.adds_from {
                        Some(from) => {
                            let held = self.lake_keys.entry(report.report_key.clone());
                            held.and_modify(|h| h.add(&report, from))
                                .or_insert_with(|| Held::new(&report, from));
                        }
                        None => {
                            self.summary.reports += 1;
                            // New to the lake, or replacing quoted copies that are gone from it.
                            let held = Held::new(&report, 0);
                            self.lake_keys.insert(report.report_key.clone(), held);
                        }
                    }
                }
                Some(Message::Mention(_)) => self.summary.mentions += 1,
                Some(Message::Link(_)) => self.summary.links += 1,
                None => {}
            }
        }
        let mut committed = BTreeMap::new();
        for (&partition, &offset) in last {
            self.progress.insert(partition, Progress::up_to(offset));
            committed.insert(partition, offset + 1);
        }
        self.buffered_keys.clear();
        self.buffered_rows = 0;
        self.buffered_letter_bytes = 0;
        self.oldest = None;
        tracing::info!(
            metric_rows,
            partitions = last.len(),
            "committed to the lake"
        );
        committed
    }
}

/// Normalizes the buffer into the tables' batches, off the async runtime (it is CPU work):
/// the batches and how many `metrics` rows (observations) they hold, whatever the lake's format
/// lays out; gives the buffer back for the bookkeeping after the commit, or for a retry.
async fn normalize(
    directions: DirectionTable,
    format: Format,
    pending: Vec<Pending>,
) -> Result<(Batches, u64, Vec<Pending>), TransformError> {
    let (batches, metric_rows, pending) = tokio::task::spawn_blocking(move || {
        let mut normalizer = Normalizer::new(directions, format);
        for p in &pending {
            match &p.message {
                Some(Message::Report(report)) => {
                    normalizer.push_into(report, p.tables, p.adds_from.unwrap_or(0));
                }
                Some(Message::Mention(mention)) => {
                    normalizer.push_mention(mention, p.tables);
                }
                Some(Message::Link(link)) => normalizer.push_link(link, p.tables),
                None => {}
            }
        }
        let metric_rows = normalizer.metric_rows() as u64;
        (normalizer.finish(), metric_rows, pending)
    })
    .await
    .map_err(TransformError::Worker)?;
    Ok((
        batches.map_err(TransformError::Normalize)?,
        metric_rows,
        pending,
    ))
}

#[cfg(test)]
// The fixtures are read before any runtime work starts.
#[allow(clippy::disallowed_methods)]
mod tests {
    //! The rules of the bookkeeping against a real Delta lake in a temporary directory, with no
    //! broker: messages are handed in as the consumer would hand them.

    use super::*;
    use crate::DeadLetterError;
    use deltalake::arrow::array::AsArray;
    use deltalake::arrow::datatypes::Int64Type;
    use deltalake::datafusion::prelude::SessionContext;
    use lkplake_lake::LakeUrl;
    use lkplake_parse::{Parsed, parse_message};
    use lkplake_schemas::Source;
    use std::path::Path;
    use std::time::Duration;

    const TOPIC: &str = "lkp.reports";

    /// The five seed reports of `examples/reports`, parsed.
    fn seeds() -> Vec<Report> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/reports");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        files.sort();
        files
            .iter()
            .flat_map(|path| {
                let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{e}"));
                let source = Source::file(path.display().to_string(), 0);
                match parse_message(&bytes, &source) {
                    Ok(Parsed::Reports(reports)) => reports,
                    other => panic!("{}: {other:?}", path.display()),
                }
            })
            .collect()
    }

    fn json(report: &Report) -> Vec<u8> {
        serde_json::to_vec(report).unwrap_or_else(|e| panic!("{e}"))
    }

    async fn ledger(lake: &Path) -> Ledger {
        let url = LakeUrl::local(lake).unwrap_or_else(|e| panic!("{e}"));
        let lake = Lake::open(&url).await.unwrap_or_else(|e| panic!("{e}"));
        let limits = Limits::for_flush_interval(Duration::from_secs(1), true);
        let mut ledger = Ledger::open(
            lake,
            TOPIC,
            DirectionTable::default(),
            limits,
            Instant::now(),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assign(&mut ledger, &[0, 1, 2]).await;
        ledger
    }

    async fn assign(ledger: &mut Ledger, partitions: &[i32]) {
        ledger
            .reconcile(Some(partitions.iter().copied().collect()), Instant::now())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    async fn accept(
        ledger: &mut Ledger,
        partition: i32,
        offset: i64,
        payload: &[u8],
    ) -> Option<Seek> {
        ledger
            .accept(partition, offset, Some(payload), Instant::now())
            .await
            .unwrap_or_else(|e| panic!("offset {offset}: {e}"))
    }

    /// A postbox that keeps what it is given: a broker that acknowledges every letter.
    #[derive(Debug, Default)]
    struct Kept(Vec<Letter>);

    impl Postbox for Kept {
        async fn post(&mut self, letters: &[Letter]) -> Result<(), DeadLetterError> {
            self.0.extend_from_slice(letters);
            Ok(())
        }
    }

    /// A postbox whose broker refuses every letter.
    #[derive(Debug)]
    struct Refused;

    impl Postbox for Refused {
        async fn post(&mut self, letters: &[Letter]) -> Result<(), DeadLetterError> {
            Err(DeadLetterError::Delivery {
                topic: "dlq".to_owned(),
                consumed: format!("{} letters", letters.len()),
                source: rdkafka::error::KafkaError::MessageProduction(
                    rdkafka::error::RDKafkaErrorCode::BrokerNotAvailable,
                ),
            })
        }
    }

    async fn flush(ledger: &mut Ledger) -> BTreeMap<i32, i64> {
        ledger
            .flush(&mut Kept::default())
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs SQL over the lake's tables, read with delta-rs directly.
    async fn scalar(lake: &Path, sql: &str) -> i64 {
        let ctx = SessionContext::new();
        for name in ["metrics", "reports", "failures", "mentions", "links"] {
            let url = deltalake::ensure_table_uri(lake.join(name).to_string_lossy())
                .unwrap_or_else(|e| panic!("{e}"));
            let table = deltalake::open_table(url)
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let provider = table
                .table_provider()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            ctx.register_table(name, provider)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let batches = ctx
            .sql(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        batches[0].column(0).as_primitive::<Int64Type>().value(0)
    }

    async fn progress(ledger: &Ledger, partition: i32) -> Progress {
        let all = ledger
            .lake
            .progress(TOPIC, &[partition])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        all.get(&partition).copied().unwrap_or_default()
    }

    fn rows(report: &Report) -> i64 {
        i64::try_from(rows_of(&Message::Report(Box::new(report.clone())))).unwrap_or(i64::MAX)
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_flush_commits_every_row_with_the_offsets_it_covers() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut ledger = ledger(dir.path()).await;
        for (offset, report) in (0..).zip(seeds()) {
            assert_eq!(accept(&mut ledger, 0, offset, &json(&report)).await, None);
        }
        assert_eq!(flush(&mut ledger).await, BTreeMap::from([(0, 5)]));
        assert_eq!(
            progress(&ledger, 0).await,
            Progress::up_to(4),
            "every table records the last offset"
        );
        // The five seeds hold 560 observations (the pipeline test reads the same number).
        assert_eq!(
            scalar(dir.path(), "SELECT count(*) FROM metrics").await,
            560
        );
        assert_eq!(
            scalar(dir.path(), "SELECT count(DISTINCT report_key) FROM reports").await,
            5
        );
        assert_eq!(ledger.summary().reports, 5);
        assert_eq!(ledger.summary().commits, 1);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_restarted_transformer_skips_every_offset_the_lake_covers() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let seeds = seeds();
        let mut first = ledger(dir.path()).await;
        for (offset, report) in (0..).zip(&seeds) {
            accept(&mut first, 0, offset, &json(report)).await;
        }
        flush(&mut first).await;
        drop(first);

        // Kafka's committed offset was lost: the whole partition is delivered again.
        let mut second = ledger(dir.path()).await;
        for (offset, report) in (0..).zip(&seeds) {
            accept(&mut second, 0, offset, &json(report)).await;
        }
        assert_eq!(second.summary().already_in_lake, 5);
        assert_eq!(
            flush(&mut second).await,
            BTreeMap::new(),
            "nothing to commit"
        );
        assert_eq!(
            scalar(dir.path(), "SELECT count(*) FROM metrics").await,
            560
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_report_sent_again_at_a_new_offset_is_a_duplicate_whose_offset_is_still_recorded() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let report = seeds().remove(2);
        let mut ledger = ledger(dir.path()).await;
        accept(&mut ledger, 1, 0, &json(&report)).await;
        flush(&mut ledger).await;
        accept(&mut ledger, 1, 1, &json(&report)).await;
        assert_eq!(ledger.summary().duplicates, 1);
        assert_eq!(flush(&mut ledger).await, BTreeMap::from([(1, 2)]));
        assert_eq!(progress(&ledger, 1).await.resume_at(), 2);
        assert_eq!(
            scalar(dir.path(), "SELECT count(*) FROM metrics").await,
            rows(&report)
        );
    }

    /// The two mails of `tests/fixtures/same-key`: one report key, the second with the
    /// lmbench3 `test=TCP` run added (22 table rows over two commits).
    fn same_key_mails() -> (Report, Report) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/same-key");
        let read = |name: &str| {
            let path = dir.join(name);
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let source = Source::file(path.display().to_string(), 0);
            match parse_message(&bytes, &source) {
                Ok(Parsed::Reports(mut reports)) if reports.len() == 1 => reports.remove(0),
                other => panic!("{}: {other:?}", path.display()),
            }
        };
        let two = read("netperf-two-tests.eml");
        let three = read("netperf-three-tests.eml");
        assert_eq!(two.report_key, three.report_key, "one key for both mails");
        assert_eq!((two.tests.len(), three.tests.len()), (2, 3));
        (two, three)
    }

    const TCP_TEST: &str = "testcase = 'lmbench3' AND params LIKE '%test=TCP%'";

    /// What the lake must hold once both mails are in, in whichever order and commits.
    async fn assert_holds_every_test_once(lake: &Path, two: &Report) {
        assert_eq!(scalar(lake, "SELECT count(*) FROM reports").await, 3);
        assert_eq!(
            scalar(lake, "SELECT count(DISTINCT test_index) FROM reports").await,
            3,
            "each test has an index of its own"
        );
        let tcp_reports = format!("SELECT count(*) FROM reports WHERE {TCP_TEST}");
        assert_eq!(scalar(lake, &tcp_reports).await, 1);
        let tcp_rows = format!("SELECT count(*) FROM metrics WHERE {TCP_TEST}");
        assert_eq!(scalar(lake, &tcp_rows).await, 44, "22 rows, two commits");
        let printed = "SELECT count(*) FROM metrics WHERE metric = 'lmbench3.TCP.socket.bandwidth.64B.MB/sec' \
                       AND role = 'head' AND value = 10519";
        assert_eq!(scalar(lake, printed).await, 1);
        assert_eq!(
            scalar(lake, "SELECT count(*) FROM metrics").await,
            rows(two) + 44,
            "the tests both mails carry are written once"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_later_mail_of_a_report_key_adds_the_tests_the_lake_lacks() {
        let (two, three) = same_key_mails();
        for commit_between in [true, false] {
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let mut ledger = ledger(dir.path()).await;
            accept(&mut ledger, 0, 0, &json(&two)).await;
            if commit_between {
                flush(&mut ledger).await;
            }
            accept(&mut ledger, 0, 1, &json(&three)).await;
            flush(&mut ledger).await;
            assert_eq!(ledger.summary().tests_added, 1, "between: {commit_between}");
            assert_eq!(ledger.summary().duplicates, 0);
            assert_eq!(ledger.summary().reports, 1);
            assert_holds_every_test_once(dir.path(), &two).await;
            let added = format!(
                "SELECT count(*) FROM reports WHERE {TCP_TEST} AND test_index = 2 \
                 AND message_id LIKE '%202607090957.6713a660-lkp@intel.com%'"
            );
            assert_eq!(
                scalar(dir.path(), &added).await,
                1,
                "the added test is the third, from the mail that carried it"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_restarted_transformer_knows_the_tests_the_lake_holds() {
        let (two, three) = same_key_mails();
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut first = ledger(dir.path()).await;
        accept(&mut first, 0, 0, &json(&two)).await;
        flush(&mut first).await;
        drop(first);

        let mut second = ledger(dir.path()).await;
        accept(&mut second, 0, 1, &json(&three)).await;
        accept(&mut second, 0, 2, &json(&two)).await;
        accept(&mut second, 0, 3, &json(&three)).await;
        flush(&mut second).await;
        assert_eq!(second.summary().tests_added, 1);
        assert_eq!(second.summary().duplicates, 2);
        assert_holds_every_test_once(dir.path(), &two).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_mail_whose_tests_are_all_held_is_a_duplicate() {
        let (two, three) = same_key_mails();
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut ledger = ledger(dir.path()).await;
        accept(&mut ledger, 0, 0, &json(&three)).await;
        accept(&mut ledger, 0, 1, &json(&two)).await;
        flush(&mut ledger).await;
        assert_eq!(ledger.summary().tests_added, 0);
        assert_eq!(ledger.summary().duplicates, 1);
        assert_eq!(ledger.summary().report_messages, 2);
        assert_holds_every_test_once(dir.path(), &two).await;
    }

    /// The lake as a crash between the `metrics` commit and the next leaves it: the newest
    /// commit of every later table is gone.
    fn crash_after_the_metrics_commit(lake: &Path) {
        for table in ["failures", "mentions", "links", "reports"] {
            let log = lake.join(table).join("_delta_log");
            let mut entries: Vec<_> = std::fs::read_dir(&log)
                .unwrap_or_else(|e| panic!("{e}"))
                .filter_map(|e| Some(e.ok()?.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            entries.sort();
            let newest = entries
                .pop()
                .unwrap_or_else(|| panic!("{table} has no commit"));
            std::fs::remove_file(newest).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// A quoted copy whose rows reached `metrics` before a crash, and its original at an offset
    /// no table covers, delivered again in either order: the original's rows, once.
    #[tokio::test(flavor = "multi_thread")]
    async fn after_a_crash_between_table_commits_an_original_replaces_the_quoted_rows_in_metrics() {
        let original = seeds().remove(0);
        let mut quoted = original.clone();
        quoted.quoted = true;
        quoted.tests.iter_mut().for_each(|t| t.rows.truncate(3));
        for original_first in [true, false] {
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let mut first = ledger(dir.path()).await;
            accept(&mut first, 0, 0, &json(&quoted)).await;
            flush(&mut first).await;
            drop(first);
            crash_after_the_metrics_commit(dir.path());
            assert_eq!(
                scalar(dir.path(), "SELECT count(*) FROM metrics").await,
                rows(&quoted)
            );
            assert_eq!(scalar(dir.path(), "SELECT count(*) FROM reports").await, 0);

            let mut second = ledger(dir.path()).await;
            if original_first {
                accept(&mut second, 1, 0, &json(&original)).await;
                accept(&mut second, 0, 0, &json(&quoted)).await;
            } else {
                accept(&mut second, 0, 0, &json(&quoted)).await;
                accept(&mut second, 1, 0, &json(&original)).await;
            }
            flush(&mut second).await;
            assert_eq!(
                scalar(dir.path(), "SELECT count(*) FROM metrics").await,
                rows(&original),
                "original first: {original_first}"
            );
            assert_eq!(
                scalar(dir.path(), "SELECT count(*) FROM reports WHERE NOT quoted").await,
                i64::try_from(original.tests.len()).unwrap_or_default(),
                "original first: {original_first}"
            );
            assert_eq!(
                scalar(dir.path(), "SELECT count(*) FROM reports").await,
                i64::try_from(original.tests.len()).unwrap_or_default()
            );
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_original_replaces_the_quoted_copy_the_lake_holds() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let original = seeds().remove(0);
        let mut quoted = original.clone();
        quoted.quoted = true;
        quoted.tests.iter_mut().for_each(|t| t.rows.truncate(3));
        let mut ledger = ledger(dir.path()).await;
        accept(&mut ledger, 0, 0, &json(&quoted)).await;
        flush(&mut ledger).await;
        assert_eq!(
            scalar(dir.path(), "SELECT count(*) FROM metrics").await,
            rows(&quoted)
        );

        accept(&mut ledger, 0, 1, &json(&original)).await;
        flush(&mut ledger).await;
        assert_eq!(ledger.summary().replaced_quoted, 1);
        assert_eq!(
            scalar(dir.path(), "SELECT count(*) FROM metrics").await,
            rows(&original)
        );
        assert_eq!(
            scalar(dir.path(), "SELECT count(*) FROM reports WHERE quoted").await,
            0
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn partitions_moved_to_another_member_leave_the_buffer_uncommitted() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let seeds = seeds();
        let mut ledger = ledger(dir.path()).await;
        accept(&mut ledger, 0, 0, &json(&seeds[0])).await;
        accept(&mut ledger, 1, 0, &json(&seeds[1])).await;
        assign(&mut ledger, &[1]).await;
        assert_eq!(flush(&mut ledger).await, BTreeMap::from([(1, 1)]));
        assert_eq!(progress(&ledger, 0).await, Progress::default());
        assert_eq!(
            scalar(dir.path(), "SELECT count(*) FROM metrics").await,
            rows(&seeds[1])
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn offsets_another_writer_committed_first_are_not_written_twice() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let report = seeds().remove(3);
        // 003's table, counted off the mail: 18 metrics, 10 call traces, 14 children and 7
        // self entries of perf-profile, each with a base and a head value.
        assert_eq!(rows(&report), 98);
        // Two members that both believe they own partition 2 (a rebalance one has not seen).
        let mut first = ledger(dir.path()).await;
        let mut second = ledger(dir.path()).await;
        accept(&mut first, 2, 0, &json(&report)).await;
        accept(&mut second, 2, 0, &json(&report)).await;
        assert_eq!(flush(&mut first).await, BTreeMap::from([(2, 1)]));
        assert_eq!(flush(&mut second).await, BTreeMap::new());
        assert_eq!(
            scalar(dir.path(), "SELECT count(*) FROM metrics").await,
            rows(&report)
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_gap_asks_for_a_seek_and_nothing_past_it_is_committed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut ledger = ledger(dir.path()).await;
        for offset in 0..70 {
            accept(&mut ledger, 0, offset, b"not a report").await;
        }
        assert_eq!(
            accept(&mut ledger, 0, 75, b"not a report").await,
            Some(Seek {
                partition: 0,
                to: Offset::Offset(6)
            }),
            "the first rewind goes 64 back from the first missing offset, 70"
        );
        assert_eq!(flush(&mut ledger).await, BTreeMap::from([(0, 70)]));
        assert_eq!(ledger.summary().dead_lettered, 70);
    }

    /// Seed `index` as a producer of a far newer wire format would send it.
    fn newer(index: usize) -> Vec<u8> {
        let mut report = serde_json::to_value(&seeds()[index]).unwrap_or_else(|e| panic!("{e}"));
        report["schema_version"] = 1000.into();
        serde_json::to_vec(&report).unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn messages_that_cannot_be_read_are_posted_before_their_offsets_are_recorded() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let seeds = seeds();
        let mut ledger = ledger(dir.path()).await;
        accept(&mut ledger, 0, 0, &json(&seeds[3])).await;
        accept(&mut ledger, 0, 1, br#"{"x":1}"#).await;
        accept(&mut ledger, 0, 2, &newer(2)).await;
        assert_eq!(
            ledger.summary().dead_lettered,
            0,
            "counted once the broker holds them"
        );

        let mut postbox = Kept::default();
        let committed = ledger
            .flush(&mut postbox)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(committed, BTreeMap::from([(0, 3)]));
        let [first, second] = postbox.0.as_slice() else {
            panic!("two letters: {:?}", postbox.0);
        };
        assert_eq!((first.partition, first.offset), (0, 1));
        assert_eq!(first.raw, br#"{"x":1}"#);
        assert!(
            first
                .reason
                .starts_with("not a report, mention or link JSON: missing field `schema_version`"),
            "{}",
            first.reason
        );
        assert_eq!((second.partition, second.offset), (0, 2));
        assert_eq!(second.raw, newer(2));
        assert_eq!(
            second.reason,
            format!(
                "schema_version 1000 is newer than this lkplake reads (up to {}): a newer lkplake produced it; upgrade the transformer",
                lkplake_schemas::SCHEMA_VERSION
            )
        );
        assert_eq!(ledger.summary().dead_lettered, 2);
        assert_eq!(ledger.summary().reports, 1);
        assert_eq!(progress(&ledger, 0).await.resume_at(), 3);
        assert_eq!(
            scalar(dir.path(), "SELECT count(DISTINCT report_key) FROM reports").await,
            1,
            "seed 003 alone: the newer seed 002 is not written"
        );
        // Posted once: a later flush has nothing to post.
        accept(&mut ledger, 0, 3, &json(&seeds[4])).await;
        let mut later = Kept::default();
        ledger
            .flush(&mut later)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(later.0, Vec::new());
        assert_eq!(ledger.summary().dead_lettered, 2);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_letter_the_broker_refuses_leaves_its_offset_and_everything_with_it_unrecorded() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut ledger = ledger(dir.path()).await;
        accept(&mut ledger, 0, 0, &json(&seeds()[3])).await;
        accept(&mut ledger, 0, 1, b"not a report").await;
        assert_eq!(ledger.buffered_letter_bytes(), 12);
        let refused = ledger.flush(&mut Refused).await;
        assert!(
            matches!(refused, Err(TransformError::DeadLetter(_))),
            "{refused:?}"
        );
        assert_eq!(progress(&ledger, 0).await, Progress::default());
        assert_eq!(scalar(dir.path(), "SELECT count(*) FROM reports").await, 0);
        assert_eq!(ledger.summary().dead_lettered, 0);
        assert_eq!(
            ledger.buffered_letter_bytes(),
            12,
            "the refused letter is back in the buffer"
        );

        // The broker back: the same buffer is posted and committed.
        let mut postbox = Kept::default();
        assert_eq!(
            ledger
                .flush(&mut postbox)
                .await
                .unwrap_or_else(|e| panic!("{e}")),
            BTreeMap::from([(0, 2)])
        );
        let [letter] = postbox.0.as_slice() else {
            panic!("one letter: {:?}", postbox.0);
        };
        assert_eq!(
            (letter.offset, letter.raw.as_slice()),
            (1, &b"not a report"[..])
        );
        assert_eq!(ledger.summary().dead_lettered, 1);
        assert_eq!(ledger.buffered_letter_bytes(), 0);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn letter_bytes_wait_in_the_buffer_until_their_flush() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut ledger = ledger(dir.path()).await;
        accept(&mut ledger, 0, 0, br#"{"x":1}"#).await;
        accept(&mut ledger, 1, 0, b"not a report").await;
        accept(&mut ledger, 1, 1, &json(&seeds()[3])).await;
        assert_eq!(
            ledger.buffered_letter_bytes(),
            7 + 12,
            "reports are rows, not letters"
        );
        // Partition 1 moves to another member: its letter is no longer this one's to post.
        assign(&mut ledger, &[0]).await;
        assert_eq!(ledger.buffered_letter_bytes(), 7);
        flush(&mut ledger).await;
        assert_eq!(ledger.buffered_letter_bytes(), 0);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn report_and_mention_messages_are_counted_apart_duplicates_included() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let report = json(&seeds()[1]);
        let mention = wire(&corpus(506)[0]);
        let mut ledger = ledger(dir.path()).await;
        accept(&mut ledger, 0, 0, &report).await;
        accept(&mut ledger, 0, 1, &report).await;
        accept(&mut ledger, 0, 2, &mention).await;
        accept(&mut ledger, 0, 3, br#"{"x":1}"#).await;
        flush(&mut ledger).await;
        // Delivered again from offset 0 (a rewind): nothing counts twice.
        for (offset, payload) in [(0, &report), (1, &report), (2, &mention)] {
            accept(&mut ledger, 0, offset, payload).await;
        }
        flush(&mut ledger).await;
        let summary = ledger.summary();
        assert_eq!((summary.report_messages, summary.mention_messages), (2, 1));
        assert_eq!((summary.reports, summary.mentions), (1, 1));
        assert_eq!(summary.duplicates, 1);
        assert_eq!(summary.dead_lettered, 1);
        assert_eq!(summary.already_in_lake, 3);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn links_are_kept_once_each_and_counted_apart_even_after_a_restart() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // Jens Axboe's b4 notice "Applied, thanks!" for a two-patch series: two commits.
        let messages = corpus(488);
        let [Message::Link(_), Message::Link(_)] = messages.as_slice() else {
            panic!("0488 is b4's applied notice for two patches: {messages:?}");
        };
        let payloads: Vec<Vec<u8>> = messages.iter().map(wire).collect();
        let mut first = ledger(dir.path()).await;
        accept(&mut first, 0, 0, &payloads[0]).await;
        accept(&mut first, 0, 1, &payloads[1]).await;
        accept(&mut first, 0, 2, &payloads[0]).await;
        flush(&mut first).await;
        let summary = first.summary();
        assert_eq!((summary.links, summary.link_messages), (2, 3));
        assert_eq!(summary.duplicates, 1);
        let mut restarted = ledger(dir.path()).await;
        accept(&mut restarted, 0, 3, &payloads[1]).await;
        flush(&mut restarted).await;
        assert_eq!(restarted.summary().duplicates, 1);
        assert_eq!(
            scalar(
                dir.path(),
                "SELECT count(*) FROM links WHERE kind = 'applied' AND target IN \
                 ('89ed5fa3b5419f04452051fbcb6d3e5b801cdb1b', '9730763f4756e32520cb86778331465e8d063a8f')"
            )
            .await,
            2
        );
        assert_eq!(scalar(dir.path(), "SELECT count(*) FROM links").await, 2);
        assert_eq!(scalar(dir.path(), "SELECT count(*) FROM metrics").await, 0);
    }

    /// The parsed messages of the corpus mail at `index`.
    fn corpus(index: u64) -> Vec<Message> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../parse/tests/fixtures/cgroups-lkp-cc.mbox.gz");
        let file = lkplake_parse::source::InputFile::read(&path).unwrap_or_else(|e| panic!("{e}"));
        let message = file
            .messages()
            .find(|m| m.index == index)
            .unwrap_or_else(|| panic!("no message {index}"));
        match parse_message(&message.bytes, &Source::file("corpus", index)) {
            Ok(parsed) => parsed.into_messages(),
            Err(e) => panic!("{index}: {e}"),
        }
    }

    fn wire(message: &Message) -> Vec<u8> {
        serde_json::to_vec(message).unwrap_or_else(|e| panic!("{e}"))
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_version_1_message_is_still_read() {
        // Produced by the version 1 parser from seed 000 (a 66-row, two-commit table).
        let v1 = include_bytes!("../tests/fixtures/report-v1.json");
        let decoded: serde_json::Value = serde_json::from_slice(v1).unwrap_or_default();
        assert_eq!(decoded["schema_version"], 1);
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut ledger = ledger(dir.path()).await;
        accept(&mut ledger, 0, 0, v1).await;
        flush(&mut ledger).await;
        assert_eq!(ledger.summary().dead_lettered, 0);
        assert_eq!(ledger.summary().reports, 1);
        assert_eq!(
            scalar(dir.path(), "SELECT count(*) FROM metrics").await,
            132
        );
        assert_eq!(
            scalar(
                dir.path(),
                "SELECT count(*) FROM reports WHERE kind = 'improvement'"
            )
            .await,
            1
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_functional_report_fills_failures_and_reports_but_not_metrics() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut ledger = ledger(dir.path()).await;
        // Corpus mail 187: two fail:runs rows over two commit columns.
        for (offset, message) in (0..).zip(corpus(187)) {
            accept(&mut ledger, 0, offset, &wire(&message)).await;
        }
        flush(&mut ledger).await;
        assert_eq!(scalar(dir.path(), "SELECT count(*) FROM failures").await, 4);
        assert_eq!(scalar(dir.path(), "SELECT count(*) FROM metrics").await, 0);
        assert_eq!(
            scalar(
                dir.path(),
                "SELECT count(*) FROM reports WHERE kind = 'failure' AND rows = 0"
            )
            .await,
            1
        );
        assert_eq!(
            scalar(
                dir.path(),
                "SELECT sum(fail) FROM failures WHERE role = 'head' AND reproduction_pct = 67 AND is_headline"
            )
            .await,
            6,
            "the headline failure failed 6 of 6 runs at the head commit"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_mention_is_kept_once_and_adds_no_metrics_even_after_a_restart() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let messages = corpus(506);
        // 0506 quotes two rows and the opening: one mention, no report; the patch it sends
        // inline closes the report and fixes its culprit: two links.
        let [Message::Mention(_), Message::Link(_), Message::Link(_)] = messages.as_slice() else {
            panic!("0506: one mention and two links, no report: {messages:?}");
        };
        let payload = wire(&messages[0]);
        let mut first = ledger(dir.path()).await;
        accept(&mut first, 0, 0, &payload).await;
        accept(&mut first, 0, 1, &payload).await;
        flush(&mut first).await;
        assert_eq!(first.summary().mentions, 1);
        assert_eq!(first.summary().duplicates, 1);
        let mut restarted = ledger(dir.path()).await;
        accept(&mut restarted, 0, 2, &payload).await;
        flush(&mut restarted).await;
        assert_eq!(restarted.summary().duplicates, 1);
        assert_eq!(scalar(dir.path(), "SELECT count(*) FROM mentions").await, 1);
        assert_eq!(scalar(dir.path(), "SELECT count(*) FROM metrics").await, 0);
        assert_eq!(
            scalar(
                dir.path(),
                "SELECT count(*) FROM mentions WHERE cardinality(rows) = 2"
            )
            .await,
            1
        );
    }
}
