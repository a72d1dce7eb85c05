//! `lkplake-faults`: named crash points, for proving exactly-once delivery across crashes.
//!
//! The writer, the transformer and the producer call [`point`] at the moments where a crash
//! is the most dangerous (between two table commits, after a lake commit and before the Kafka
//! offset commit, inside compaction, between a send and its checkpoint). With the `enabled`
//! feature, `LKPLAKE_CRASH_AT=NAME` makes the process abort at the first time it reaches the
//! point of that name (`NAME:N` at the N-th time), the way `kill -9` or a power cut would
//! stop it: no destructor, no flush. Without the feature every point compiles to nothing.
//!
//! [`meet`] is the other kind of point: it makes several processes arrive at the same moment
//! (`LKPLAKE_MEET`), so that a race the tests must prove harmless, two writers putting the same
//! Delta version, happens on every run instead of once in a while.

#![warn(missing_docs)]

/// The variable that names the point to crash at.
pub const CRASH_AT: &str = "LKPLAKE_CRASH_AT";

/// Between the `metrics` commit and the next table's commit.
pub const BETWEEN_TABLE_COMMITS: &str = "lake.between-table-commits";
/// After the lake commit of a flush, before its offsets are committed to Kafka.
pub const AFTER_LAKE_COMMIT: &str = "transform.after-lake-commit";
/// Inside compaction, with the rewritten partition computed but not committed.
pub const COMPACT_BEFORE_COMMIT: &str = "lake.compact-before-commit";
/// In `lkplake upgrade`, with the format-2 files written and the commit that adopts them not made.
pub const UPGRADE_BEFORE_COMMIT: &str = "lake.upgrade-before-commit";
/// In the producer, after messages were acknowledged and before their checkpoint is saved.
pub const BEFORE_CHECKPOINT: &str = "ingest.before-checkpoint";

/// The variable that makes processes wait for each other at a point:
/// `NAME:PEERS:TIMES:DIR`. Each of the first TIMES passages of point NAME waits until PEERS
/// processes (this one included) are waiting there at once, seen by their files in DIR.
pub const MEET: &str = "LKPLAKE_MEET";

/// Before the put of each commit to a table of the lake, once its version is chosen; the
/// table's name follows (`lake.before-put.metrics`).
pub const BEFORE_PUT: &str = "lake.before-put";

/// Aborts the process here when `LKPLAKE_CRASH_AT` names this point (and, with `NAME:N`, this
/// is its N-th passage).
#[cfg(feature = "enabled")]
pub fn point(name: &str) {
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static TARGET: LazyLock<Option<(String, u64)>> = LazyLock::new(|| {
        let value = std::env::var(CRASH_AT).ok()?;
        Some(match value.rsplit_once(':') {
            Some((name, n)) if n.parse::<u64>().is_ok() => {
                (name.to_owned(), n.parse().unwrap_or(1))
            }
            _ => (value, 1),
        })
    });
    static PASSED: AtomicU64 = AtomicU64::new(0);
    if let Some((target, at)) = TARGET.as_ref()
        && target == name
        && PASSED.fetch_add(1, Ordering::SeqCst) + 1 == *at
    {
        eprintln!("lkplake: crashing at {name} ({CRASH_AT})");
        std::process::abort();
    }
}

/// Without the `enabled` feature: nothing.
#[cfg(not(feature = "enabled"))]
#[inline(always)]
pub fn point(_name: &str) {}

/// How long one passage waits for its peers: a peer may have nothing to commit, or be held in
/// a consumer-group rebalance that waits for this process to poll again, so a passage that
/// meets nobody goes on rather than hanging, and the next passage tries again.
#[cfg(feature = "enabled")]
const MEET_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits here, when `LKPLAKE_MEET` names this point, until PEERS processes are waiting here
/// at once (at most [`MEET_PATIENCE`]), for each of the point's first TIMES passages.
///
/// A process that leaves because it saw its peers' files knows each of them has reached the
/// point and not yet left it, so whatever every one of them did before the point happened
/// before anything any of them does after it: for two writers met before their put, both
/// listed the log before either put.
#[cfg(feature = "enabled")]
pub async fn meet(name: &str) {
    use std::path::PathBuf;
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    struct Meeting {
        point: String,
        peers: usize,
        times: u64,
        dir: PathBuf,
    }
    static MEETING: LazyLock<Option<Meeting>> = LazyLock::new(|| {
        let value = std::env::var(MEET).ok()?;
        let mut parts = value.splitn(4, ':');
        Some(Meeting {
            point: parts.next()?.to_owned(),
            peers: parts.next()?.parse().ok()?,
            times: parts.next()?.parse().ok()?,
            dir: PathBuf::from(parts.next()?),
        })
    });
    static PASSED: AtomicU64 = AtomicU64::new(0);
    let Some(meeting) = MEETING.as_ref().filter(|m| m.point == name) else {
        return;
    };
    let passage = PASSED.fetch_add(1, Ordering::SeqCst) + 1;
    if passage > meeting.times {
        return;
    }
    let mark = meeting.dir.join(format!("waiting.{}", std::process::id()));
    if let Err(e) = tokio::fs::write(&mark, b"").await {
        eprintln!("lkplake: cannot meet at {name}: {}: {e}", mark.display());
        return;
    }
    let since = std::time::Instant::now();
    loop {
        let mut waiting = 0;
        if let Ok(mut entries) = tokio::fs::read_dir(&meeting.dir).await {
            while let Ok(Some(entry)) = entries.next_entry().await {
                waiting += usize::from(entry.file_name().to_string_lossy().starts_with("waiting."));
            }
        }
        if waiting >= meeting.peers {
            eprintln!("lkplake: {waiting} peers met at {name} (passage {passage})");
            // Still here while the peers, polling every millisecond, see this file too:
            // removed at once, a peer could miss it and wait out its patience alone.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            break;
        }
        if since.elapsed() > MEET_PATIENCE {
            eprintln!(
                "lkplake: {waiting} of {} peers at {name} (passage {passage}); going on alone",
                meeting.peers
            );
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    if let Err(e) = tokio::fs::remove_file(&mark).await {
        eprintln!(
            "lkplake: cannot leave the meeting at {name}: {}: {e}",
            mark.display()
        );
    }
}

/// Without the `enabled` feature: nothing.
#[cfg(not(feature = "enabled"))]
#[inline(always)]
pub async fn meet(_name: &str) {}
