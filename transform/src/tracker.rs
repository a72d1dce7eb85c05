//! Where each partition of the reports topic stands for one transformer, and what to do about
//! it: which offset comes next, whether a message reveals a gap to rewind over, whether an
//! assigned partition has stalled short of its end, whether this member should rejoin its
//! group, and whether the whole topic is in the lake (`--until-idle`).
//!
//! Pure bookkeeping with no broker: the consumer loop feeds it what happened (assignments,
//! messages, end-of-partition events, the partitions' real ends and the lake's progress) with
//! the time it happened, and carries out its verdicts. Every decision is therefore
//! unit-testable with scripted events; the tests below are its specification.
//!
//! Why a transformer needs this much care: Tansu 0.6.0 (and, in other ways, any broker during
//! rebalances) breaks assumptions a plain consumer loop makes.
//! - A fetch from an offset inside a record batch is answered with the *next* batch, so the
//!   rest of the current one is skipped. Mid-partition, the next message reveals the gap; at
//!   the end of a partition nothing does, and librdkafka never reports the end either (its
//!   position is below the high watermark), so the member waits for ever.
//! - Its ListOffsets "latest" answers the last batch's base offset plus one, not the high
//!   watermark, so "the lake has reached the watermark" can be true with messages unread.
//!   The ends fed in here come from fetch responses instead (see `lkplake_kafka::ends`).
//! - A group sometimes never assigns a partition again after a rebalance.

use rdkafka::Offset;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::time::{Duration, Instant};

/// Bounds on waiting, after which the tracker stops trusting the broker to make progress.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// An assigned partition short of its end that yields no message for this long is
    /// rewound (the tail of a batch the broker skipped).
    pub stall_after: Duration,
    /// Partitions not assigned here that are short of their end while the lake has not
    /// advanced for this long make this member rejoin its group.
    pub orphan_after: Duration,
    /// Rewinds over the same first missing offset that go further back each time; later ones
    /// go to the start of the partition.
    pub max_rewinds: u32,
    /// The missing offsets count as unreadable only once the rewinds are used up *and* this
    /// long has passed since the first: a broker or consumer slowed down by a loaded machine
    /// can stay silent for seconds without having skipped anything.
    pub give_up_after: Duration,
    /// Rejoins without the lake advancing before the missing messages are an error.
    pub max_rejoins: u32,
    /// Whether missing messages of partitions owned elsewhere are an error (`--until-idle`,
    /// which must not exit 0 with data unread) or only worth rejoining for (a long-running
    /// transformer, which waits for the group to sort itself out).
    pub fail_when_orphaned: bool,
}

impl Limits {
    /// The bounds for a transformer that commits at least every `flush_interval`: a member
    /// that holds no partition waits several of the others' commits before it rejoins.
    pub fn for_flush_interval(flush_interval: Duration, until_idle: bool) -> Self {
        Self {
            stall_after: Duration::from_secs(3),
            orphan_after: (flush_interval * 4).max(Duration::from_secs(20)),
            max_rewinds: 3,
            give_up_after: Duration::from_secs(60),
            max_rejoins: 3,
            fail_when_orphaned: until_idle,
        }
    }
}

/// Offsets of one partition that the transformer could not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missing {
    /// The partition.
    pub partition: i32,
    /// First offset not in the lake.
    pub from: i64,
    /// First offset past the missing ones (the partition's end, or the message after a gap).
    pub to: i64,
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "partition {}: offsets {}..{} ({} messages)",
            self.partition,
            self.from,
            self.to,
            self.to - self.from
        )
    }
}

/// What to do with a consumed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The next message of its partition: buffer it.
    Take,
    /// Already in the lake or the buffer (a replay after a rewind or rebalance): skip it.
    Skip,
    /// Offsets before it were skipped by the broker: seek the partition here and skip it.
    Rewind(Offset),
    /// The broker did not return these offsets after every rewind.
    Fail(Missing),
}

/// What the periodic check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Every partition of the topic is in the lake up to its end.
    Drained,
    /// Messages remain, and someone is (or may yet be) reading them.
    Wait,
    /// These assigned partitions stalled short of their end: seek each to its offset.
    Rewind(Vec<(i32, Offset)>),
    /// Partitions owned elsewhere are short of their end and nobody has committed for a
    /// while: leave the group and join again.
    Rejoin(Vec<Missing>),
    /// Messages that cannot be read, by partition.
    Fail(Vec<Missing>),
}

#[derive(Debug, Clone, Copy)]
struct Part {
    /// The next offset this member needs; `None` until the lake's progress is loaded.
    next: Option<i64>,
    /// The last message, end-of-partition event, assignment or rewind.
    active_at: Instant,
    eof: bool,
}

/// One transformer's view of the partitions of its topic.
#[derive(Debug)]
pub struct Tracker {
    limits: Limits,
    parts: BTreeMap<i32, Part>,
    /// Rewinds per (partition, first missing offset): how many, and when the first was.
    rewinds: HashMap<(i32, i64), (u32, Instant)>,
    /// The lake's progress at the last check, and when it last changed.
    lake_seen: Option<BTreeMap<i32, i64>>,
    lake_advanced_at: Instant,
    rejoins: u32,
    last_rejoin: Option<Instant>,
}

impl Tracker {
    /// A tracker with nothing assigned yet.
    pub fn new(limits: Limits, now: Instant) -> Self {
        Self {
            limits,
            parts: BTreeMap::new(),
            rewinds: HashMap::new(),
            lake_seen: None,
            lake_advanced_at: now,
            rejoins: 0,
            last_rejoin: None,
        }
    }

    /// A rebalance ended with these partitions assigned here (none: everything revoked).
    /// Another member may have moved any partition's progress meanwhile, so every next
    /// offset is reloaded from the lake.
    pub fn assign(&mut self, partitions: impl IntoIterator<Item = i32>, now: Instant) {
        self.parts = partitions
            .into_iter()
            .map(|p| {
                (
                    p,
                    Part {
                        next: None,
                        active_at: now,
                        eof: false,
                    },
                )
            })
            .collect();
        self.rewinds.clear();
    }

    /// The partitions assigned here now.
    pub fn assigned(&self) -> BTreeSet<i32> {
        self.parts.keys().copied().collect()
    }

    /// The next offset needed from `partition`, if known since the last assignment.
    pub fn next(&self, partition: i32) -> Option<i64> {
        self.parts.get(&partition).and_then(|p| p.next)
    }

    /// Sets where `partition` continues: the first offset neither in the lake nor buffered.
    pub fn resume(&mut self, partition: i32, next: i64) {
        if let Some(p) = self.parts.get_mut(&partition) {
            p.next = Some(next);
        }
    }

    /// A message arrived. Call `resume` for its partition first if `next` is unknown.
    pub fn on_message(&mut self, partition: i32, offset: i64, now: Instant) -> Verdict {
        let Some(part) = self.parts.get_mut(&partition) else {
            // A message of a partition revoked a moment ago: another member replays it.
            return Verdict::Skip;
        };
        part.active_at = now;
        part.eof = false;
        let next = part.next.unwrap_or(0);
        if offset < next {
            return Verdict::Skip;
        }
        if offset == next {
            part.next = Some(offset + 1);
            return Verdict::Take;
        }
        // Offsets of a topic without transactions are contiguous, so a message past the
        // next one means the broker skipped some. Taking it would record them as read.
        match self.rewind_to(partition, next, now) {
            Some(to) => Verdict::Rewind(to),
            None => Verdict::Fail(Missing {
                partition,
                from: next,
                to: offset,
            }),
        }
    }

    /// The end of `partition` was reached (librdkafka's end-of-partition event).
    pub fn on_eof(&mut self, partition: i32, now: Instant) {
        if let Some(p) = self.parts.get_mut(&partition) {
            p.eof = true;
            p.active_at = now;
        }
    }

    /// The member is listening again after work during which it received nothing (a lake
    /// commit, a check). That time is not the partitions' silence: a flush of half a million
    /// rows takes seconds on a loaded machine, and counting it made every partition look
    /// stalled, rewound, and finally given up while the broker had been sending all along.
    pub fn listening(&mut self, now: Instant) {
        for part in self.parts.values_mut() {
            part.active_at = part.active_at.max(now);
        }
    }

    /// Nothing more is coming from the assigned partitions for now: each has reported its end
    /// or been silent for `quiet_for`. A member with no partition is quiet.
    pub fn quiet(&self, now: Instant, quiet_for: Duration) -> bool {
        self.parts
            .values()
            .all(|p| p.eof || now.duration_since(p.active_at) >= quiet_for)
    }

    /// Decides, from every partition's real end (`ends`) and the lake's first offset not yet
    /// committed (`lake`), whether the topic is drained and what to do if it is not.
    pub fn check(
        &mut self,
        ends: &BTreeMap<i32, i64>,
        lake: &BTreeMap<i32, i64>,
        now: Instant,
    ) -> Check {
        match &self.lake_seen {
            None => self.lake_seen = Some(lake.clone()),
            Some(seen) if seen != lake => {
                self.lake_seen = Some(lake.clone());
                self.lake_advanced_at = now;
                self.rejoins = 0;
            }
            Some(_) => {}
        }
        let missing: Vec<Missing> = ends
            .iter()
            .filter_map(|(&partition, &end)| {
                let from = lake.get(&partition).copied().unwrap_or(0);
                (from < end).then_some(Missing {
                    partition,
                    from,
                    to: end,
                })
            })
            .collect();
        if missing.is_empty() {
            return Check::Drained;
        }

        let mut rewinds = Vec::new();
        for m in &missing {
            let Some(part) = self.parts.get(&m.partition).copied() else {
                continue;
            };
            let next = part.next.unwrap_or(m.from).max(m.from);
            if next >= m.to || now.duration_since(part.active_at) < self.limits.stall_after {
                continue;
            }
            match self.rewind_to(m.partition, next, now) {
                Some(to) => {
                    if let Some(p) = self.parts.get_mut(&m.partition) {
                        p.active_at = now;
                    }
                    rewinds.push((m.partition, to));
                }
                None => {
                    return Check::Fail(vec![Missing {
                        partition: m.partition,
                        from: next,
                        to: m.to,
                    }]);
                }
            }
        }
        if !rewinds.is_empty() {
            return Check::Rewind(rewinds);
        }

        let orphaned: Vec<Missing> = missing
            .into_iter()
            .filter(|m| !self.parts.contains_key(&m.partition))
            .collect();
        let still = |since: Instant| now.duration_since(since) >= self.limits.orphan_after;
        if orphaned.is_empty()
            || !still(self.lake_advanced_at)
            || self.last_rejoin.is_some_and(|at| !still(at))
        {
            return Check::Wait;
        }
        if self.rejoins >= self.limits.max_rejoins && self.limits.fail_when_orphaned {
            return Check::Fail(orphaned);
        }
        self.rejoins += 1;
        self.last_rejoin = Some(now);
        Check::Rejoin(orphaned)
    }

    /// Where to seek `partition` so that the broker returns `next` again, further back on each
    /// attempt over the same offset (the batch holding it may be long), then from the start;
    /// `None` once the attempts are used up and [`Limits::give_up_after`] has passed.
    fn rewind_to(&mut self, partition: i32, next: i64, now: Instant) -> Option<Offset> {
        let (attempts, since) = self.rewinds.entry((partition, next)).or_insert((0, now));
        *attempts += 1;
        match *attempts {
            1 => Some(Offset::Offset((next - 64).max(0))),
            2 => Some(Offset::Offset((next - 4096).max(0))),
            n if n <= self.limits.max_rewinds
                || now.duration_since(*since) < self.limits.give_up_after =>
            {
                Some(Offset::Beginning)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        stall_after: Duration::from_secs(3),
        orphan_after: Duration::from_secs(20),
        max_rewinds: 3,
        give_up_after: Duration::from_secs(10),
        max_rejoins: 2,
        fail_when_orphaned: true,
    };

    fn secs(t0: Instant, s: u64) -> Instant {
        t0 + Duration::from_secs(s)
    }

    fn map(pairs: &[(i32, i64)]) -> BTreeMap<i32, i64> {
        pairs.iter().copied().collect()
    }

    /// A tracker owning `partitions`, each resuming at 0.
    fn owning(partitions: &[i32], t0: Instant) -> Tracker {
        let mut t = Tracker::new(LIMITS, t0);
        t.assign(partitions.iter().copied(), t0);
        for &p in partitions {
            t.resume(p, 0);
        }
        t
    }

    #[test]
    fn contiguous_messages_are_taken_and_replays_skipped() {
        let t0 = Instant::now();
        let mut t = owning(&[0], t0);
        assert_eq!(t.on_message(0, 0, t0), Verdict::Take);
        assert_eq!(t.on_message(0, 1, t0), Verdict::Take);
        assert_eq!(t.on_message(0, 1, t0), Verdict::Skip);
        assert_eq!(t.on_message(0, 0, t0), Verdict::Skip);
        assert_eq!(t.next(0), Some(2));
    }

    #[test]
    fn a_gap_rewinds_further_back_each_time_then_fails_naming_the_offsets() {
        let t0 = Instant::now();
        let mut t = owning(&[2], t0);
        t.resume(2, 5000);
        assert_eq!(
            t.on_message(2, 5040, t0),
            Verdict::Rewind(Offset::Offset(4936))
        );
        assert_eq!(
            t.on_message(2, 5040, t0),
            Verdict::Rewind(Offset::Offset(904))
        );
        assert_eq!(
            t.on_message(2, 5040, t0),
            Verdict::Rewind(Offset::Beginning)
        );
        // Used up, but a slow broker gets its time: from the start again until the bound.
        assert_eq!(
            t.on_message(2, 5040, secs(t0, 9)),
            Verdict::Rewind(Offset::Beginning)
        );
        assert_eq!(
            t.on_message(2, 5040, secs(t0, 10)),
            Verdict::Fail(Missing {
                partition: 2,
                from: 5000,
                to: 5040
            })
        );
    }

    #[test]
    fn a_rewind_that_brings_the_missing_offset_back_resumes_normally() {
        let t0 = Instant::now();
        let mut t = owning(&[0], t0);
        t.resume(0, 100);
        assert_eq!(
            t.on_message(0, 120, t0),
            Verdict::Rewind(Offset::Offset(36))
        );
        // The broker answers the seek with batches from 80: old ones are skipped.
        assert_eq!(t.on_message(0, 80, t0), Verdict::Skip);
        assert_eq!(t.on_message(0, 99, t0), Verdict::Skip);
        assert_eq!(t.on_message(0, 100, t0), Verdict::Take);
        assert_eq!(t.on_message(0, 101, t0), Verdict::Take);
    }

    #[test]
    fn the_topic_is_drained_only_when_the_lake_reaches_every_partitions_real_end() {
        let t0 = Instant::now();
        let mut t = owning(&[0, 1], t0);
        // Partition 2 belongs to another member; its end counts all the same.
        let ends = map(&[(0, 197), (1, 200), (2, 203)]);
        assert_eq!(
            t.check(&ends, &map(&[(0, 197), (1, 200), (2, 190)]), t0),
            Check::Wait
        );
        assert_eq!(
            t.check(&ends, &map(&[(0, 197), (1, 200), (2, 203)]), secs(t0, 1)),
            Check::Drained
        );
    }

    #[test]
    fn a_partition_missing_from_the_lake_progress_counts_from_offset_zero() {
        let t0 = Instant::now();
        let mut t = Tracker::new(LIMITS, t0);
        assert_eq!(t.check(&map(&[(0, 0), (1, 3)]), &map(&[]), t0), Check::Wait);
        assert_eq!(
            t.check(&map(&[(0, 0), (1, 0)]), &map(&[]), t0),
            Check::Drained
        );
    }

    #[test]
    fn an_assigned_partition_silent_short_of_its_end_is_rewound_after_the_stall_bound() {
        // The lost-tail case: the consumer resumed inside the last batch, the broker returned
        // nothing and librdkafka reports no end because its position is below the watermark.
        let t0 = Instant::now();
        let mut t = owning(&[0], t0);
        t.resume(0, 190);
        let ends = map(&[(0, 197)]);
        let lake = map(&[(0, 190)]);
        assert_eq!(t.check(&ends, &lake, secs(t0, 2)), Check::Wait);
        assert_eq!(
            t.check(&ends, &lake, secs(t0, 3)),
            Check::Rewind(vec![(0, Offset::Offset(126))])
        );
        // The stall clock restarts with the rewind.
        assert_eq!(t.check(&ends, &lake, secs(t0, 5)), Check::Wait);
        assert_eq!(
            t.check(&ends, &lake, secs(t0, 6)),
            Check::Rewind(vec![(0, Offset::Offset(0))])
        );
        assert_eq!(
            t.check(&ends, &lake, secs(t0, 9)),
            Check::Rewind(vec![(0, Offset::Beginning)])
        );
        // The first rewind was at 3 s: until 13 s the partition is rewound again, not given up.
        assert_eq!(
            t.check(&ends, &lake, secs(t0, 12)),
            Check::Rewind(vec![(0, Offset::Beginning)])
        );
        assert_eq!(
            t.check(&ends, &lake, secs(t0, 15)),
            Check::Fail(vec![Missing {
                partition: 0,
                from: 190,
                to: 197
            }])
        );
    }

    #[test]
    fn a_partition_that_keeps_delivering_is_not_stalled() {
        let t0 = Instant::now();
        let mut t = owning(&[0], t0);
        let ends = map(&[(0, 1000)]);
        for s in 0..10 {
            assert_eq!(t.on_message(0, s, secs(t0, s as u64)), Verdict::Take);
            assert_eq!(
                t.check(&ends, &map(&[(0, 0)]), secs(t0, s as u64)),
                Check::Wait
            );
        }
    }

    #[test]
    fn buffered_messages_count_as_read_for_the_stall_decision() {
        let t0 = Instant::now();
        let mut t = owning(&[0], t0);
        for o in 0..10 {
            assert_eq!(t.on_message(0, o, t0), Verdict::Take);
        }
        // Everything is read but not yet committed: nothing to rewind, only a flush to wait for.
        assert_eq!(
            t.check(&map(&[(0, 10)]), &map(&[(0, 0)]), secs(t0, 30)),
            Check::Wait
        );
    }

    #[test]
    fn a_member_without_partitions_waits_while_the_others_commit() {
        let t0 = Instant::now();
        let mut t = Tracker::new(LIMITS, t0);
        t.assign([], t0);
        let ends = map(&[(0, 100), (1, 100)]);
        for s in (0..120).step_by(10) {
            let lake = map(&[(0, s), (1, s / 2)]);
            assert_eq!(t.check(&ends, &lake, secs(t0, s as u64)), Check::Wait);
        }
    }

    #[test]
    fn a_member_without_partitions_rejoins_when_nobody_commits_then_fails_naming_what_is_missing() {
        let t0 = Instant::now();
        let mut t = Tracker::new(LIMITS, t0);
        t.assign([], t0);
        let ends = map(&[(0, 197), (1, 164)]);
        let lake = map(&[(0, 190), (1, 164)]);
        let missing = vec![Missing {
            partition: 0,
            from: 190,
            to: 197,
        }];
        assert_eq!(t.check(&ends, &lake, secs(t0, 19)), Check::Wait);
        assert_eq!(
            t.check(&ends, &lake, secs(t0, 20)),
            Check::Rejoin(missing.clone())
        );
        // A rejoin gets its own bound before the next.
        assert_eq!(t.check(&ends, &lake, secs(t0, 30)), Check::Wait);
        assert_eq!(
            t.check(&ends, &lake, secs(t0, 40)),
            Check::Rejoin(missing.clone())
        );
        assert_eq!(t.check(&ends, &lake, secs(t0, 60)), Check::Fail(missing));
    }

    #[test]
    fn lake_progress_after_a_rejoin_resets_the_rejoin_budget() {
        let t0 = Instant::now();
        let mut t = Tracker::new(LIMITS, t0);
        let ends = map(&[(0, 300)]);
        assert!(matches!(
            t.check(&ends, &map(&[(0, 100)]), secs(t0, 20)),
            Check::Rejoin(_)
        ));
        assert!(matches!(
            t.check(&ends, &map(&[(0, 100)]), secs(t0, 40)),
            Check::Rejoin(_)
        ));
        // Someone committed: the group works again.
        assert_eq!(t.check(&ends, &map(&[(0, 200)]), secs(t0, 41)), Check::Wait);
        assert!(matches!(
            t.check(&ends, &map(&[(0, 200)]), secs(t0, 61)),
            Check::Rejoin(_)
        ));
        assert!(matches!(
            t.check(&ends, &map(&[(0, 200)]), secs(t0, 81)),
            Check::Rejoin(_)
        ));
        assert!(matches!(
            t.check(&ends, &map(&[(0, 200)]), secs(t0, 101)),
            Check::Fail(_)
        ));
    }

    #[test]
    fn a_long_running_member_keeps_rejoining_instead_of_failing_on_partitions_owned_elsewhere() {
        let t0 = Instant::now();
        let mut t = Tracker::new(
            Limits {
                fail_when_orphaned: false,
                ..LIMITS
            },
            t0,
        );
        let ends = map(&[(0, 300)]);
        let lake = map(&[(0, 100)]);
        for round in 1..=5 {
            assert!(matches!(
                t.check(&ends, &lake, secs(t0, 20 * round)),
                Check::Rejoin(_)
            ));
        }
    }

    #[test]
    fn a_rebalance_forgets_next_offsets_and_restarts_the_stall_clock() {
        let t0 = Instant::now();
        let mut t = owning(&[0, 1], t0);
        assert_eq!(t.on_message(0, 0, t0), Verdict::Take);
        t.assign([1, 2], secs(t0, 10));
        assert_eq!(t.assigned(), BTreeSet::from([1, 2]));
        assert_eq!(t.next(0), None);
        assert_eq!(t.next(1), None);
        // A late message of the revoked partition is left to its new owner.
        assert_eq!(t.on_message(0, 1, secs(t0, 10)), Verdict::Skip);
        t.resume(1, 50);
        t.resume(2, 60);
        let ends = map(&[(0, 1), (1, 80), (2, 60)]);
        let lake = map(&[(0, 1), (1, 50), (2, 60)]);
        assert_eq!(t.check(&ends, &lake, secs(t0, 12)), Check::Wait);
        assert_eq!(
            t.check(&ends, &lake, secs(t0, 13)),
            Check::Rewind(vec![(1, Offset::Offset(0))])
        );
    }

    #[test]
    fn end_of_partition_events_make_a_member_quiet_at_once() {
        let t0 = Instant::now();
        let mut t = owning(&[0, 1], t0);
        assert!(!t.quiet(t0, Duration::from_secs(1)));
        t.on_eof(0, t0);
        assert!(!t.quiet(t0, Duration::from_secs(1)));
        t.on_eof(1, t0);
        assert!(t.quiet(t0, Duration::from_secs(1)));
        assert_eq!(t.on_message(1, 0, t0), Verdict::Take);
        assert!(!t.quiet(t0, Duration::from_secs(1)));
        assert!(t.quiet(secs(t0, 1), Duration::from_secs(1)));
    }

    #[test]
    fn the_missing_offsets_read_as_a_range_with_a_count() {
        let m = Missing {
            partition: 2,
            from: 190,
            to: 197,
        };
        assert_eq!(m.to_string(), "partition 2: offsets 190..197 (7 messages)");
    }

    #[test]
    fn time_spent_committing_is_not_silence() {
        let t0 = Instant::now();
        let mut t = Tracker::new(LIMITS, t0);
        t.assign([0], t0);
        t.resume(0, 0);
        assert_eq!(t.on_message(0, 0, t0), Verdict::Take);
        // A commit from 0 s to 10 s: nothing was received meanwhile.
        t.listening(secs(t0, 10));
        let ends = BTreeMap::from([(0, 100)]);
        let lake = BTreeMap::from([(0, 1)]);
        assert!(!t.quiet(secs(t0, 10), Duration::from_secs(1)));
        assert_eq!(t.check(&ends, &lake, secs(t0, 11)), Check::Wait);
        // Silence after the commit counts as before.
        assert!(matches!(
            t.check(&ends, &lake, secs(t0, 14)),
            Check::Rewind(_)
        ));
    }
}
