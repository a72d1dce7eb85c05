//! `lkplake-faults`: named crash points, for proving exactly-once delivery across crashes.
//!
//! The writer, the transformer and the producer call [`point`] at the moments where a crash
//! is the most dangerous (between two table commits, after a lake commit and before the Kafka
//! offset commit, inside compaction, between a send and its checkpoint). With the `enabled`
//! feature, `LKPLAKE_CRASH_AT=NAME` makes the process abort at the first time it reaches the
//! point of that name (`NAME:N` at the N-th time), the way `kill -9` or a power cut would
//! stop it: no destructor, no flush. Without the feature every point compiles to nothing.

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
