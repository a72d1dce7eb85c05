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
/// In the producer, after messages were acknowledged and before their checkpoint is saved.
pub const BEFORE_CHECKPOINT: &str = "ingest.before-checkpoint";

/// The variable that makes processes wait for each other at a point:
/// `NAME:PEERS:TIMES:DIR`. Each of the first TIMES passages of point NAME waits until PEERS
/// processes (this one included) have reached the same passage, counted by files in DIR.
pub const MEET: &str = "LKPLAKE_MEET";

/// Before each table's append of a lake commit.
pub const BEFORE_APPEND: &str = "lake.before-append";

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

/// How long a process waits for its peers at one passage before it gives up meeting: a peer
/// that has nothing to commit never arrives, and the test then fails on its own assertion
/// rather than hanging.
#[cfg(feature = "enabled")]
const MEET_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits here, when `LKPLAKE_MEET` names this point, until every peer has reached the same
/// passage (at most [`MEET_PATIENCE`]; after one wait that long it no longer waits).
#[cfg(feature = "enabled")]
pub async fn meet(name: &str) {
    use std::path::PathBuf;
    use std::sync::LazyLock;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    static GAVE_UP: AtomicBool = AtomicBool::new(false);
    let Some(meeting) = MEETING.as_ref().filter(|m| m.point == name) else {
        return;
    };
    let passage = PASSED.fetch_add(1, Ordering::SeqCst) + 1;
    if passage > meeting.times || GAVE_UP.load(Ordering::SeqCst) {
        return;
    }
    let prefix = format!("{passage}.");
    let mark = meeting.dir.join(format!("{prefix}{}", std::process::id()));
    if let Err(e) = tokio::fs::write(&mark, b"").await {
        eprintln!("lkplake: cannot meet at {name}: {}: {e}", mark.display());
        return;
    }
    let since = std::time::Instant::now();
    loop {
        let mut arrived = 0;
        if let Ok(mut entries) = tokio::fs::read_dir(&meeting.dir).await {
            while let Ok(Some(entry)) = entries.next_entry().await {
                arrived += usize::from(entry.file_name().to_string_lossy().starts_with(&prefix));
            }
        }
        if arrived >= meeting.peers {
            return;
        }
        if since.elapsed() > MEET_PATIENCE {
            eprintln!(
                "lkplake: {arrived} of {} peers met at {name} (passage {passage}); no longer waiting",
                meeting.peers
            );
            GAVE_UP.store(true, Ordering::SeqCst);
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// Without the `enabled` feature: nothing.
#[cfg(not(feature = "enabled"))]
#[inline(always)]
pub async fn meet(_name: &str) {}
