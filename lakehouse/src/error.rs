//! Errors of the lake, each naming the table or path and what to check.

use deltalake::DeltaTableError;
use deltalake::kernel::transaction::{CommitConflictError, TransactionError};
use lkplake_schemas::ErrorKind;

use deltalake::datafusion::error::DataFusionError;
use std::path::PathBuf;

/// Why a call failed; each variant's message is its documentation (and what the user reads).
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    #[error("lake at {path}: {source}; check that the directory is writable")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{url} is not a lake location: {reason}")]
    Url { url: String, reason: String },
    #[error(
        "no lake table at {table}: run `lkplake run` or `lkplake transform --lake {lake}` first"
    )]
    NoLake { lake: String, table: String },
    #[error(
        "cannot read the lake at {lake} (table {table}): {reason}; check the location, and for S3 the bucket, AWS_ENDPOINT_URL, AWS_REGION and the credentials"
    )]
    Unreachable {
        lake: String,
        table: &'static str,
        reason: String,
    },
    #[error(
        "the lake at {lake} is in format {found:?} (table {table}, {key}), and this lkplake reads formats 1 to {known}: use the lkplake that wrote it, or a newer one",
        key = crate::format::FORMAT_KEY,
        known = crate::format::Format::LATEST
    )]
    Format {
        lake: String,
        table: &'static str,
        found: String,
    },
    #[error(
        "the lake at {lake} was rewritten from format {opened} to format {now} while this lkplake had it open: start it again to write the new format"
    )]
    FormatChanged {
        lake: String,
        opened: crate::format::Format,
        now: crate::format::Format,
    },
    #[error("the writer lease {path}: {reason}; check that the lake is writable")]
    Lease { path: String, reason: String },
    #[error(
        "the upgrade of the lake at {lake} was not committed, and the lake is as it was: {reason}; another writer (a transformer or a compaction) may have committed to metrics meanwhile: run the upgrade again"
    )]
    UpgradeNotCommitted { lake: String, reason: String },
    #[error(
        "the lake at {lake} is held by {holders}: stop the transformers writing it and run the upgrade again (a lease renewed more than {live_for:?} ago holds nothing: a transformer killed without releasing its lease holds the lake no longer than that)",
        live_for = crate::lease::LIVE_FOR
    )]
    Held { lake: String, holders: String },
    // delta-kernel's errors end their text with a backtrace: it is left out.
    #[error("lake table {table}: {}", crate::damage::explain(source))]
    Delta {
        table: &'static str,
        source: DeltaTableError,
    },
    #[error("lake table {table}: query failed: {source}")]
    Query {
        table: &'static str,
        source: Box<DataFusionError>,
    },
}

impl LakeError {
    /// What kind of failure this is, for the exit status: always the lake's.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Lake
    }

    /// Whether the store could not be read at all (no such bucket, refused credentials, no
    /// answer), as opposed to a table whose files are damaged: delta-kernel reports both as
    /// its errors, the first with this text (it keeps the object store's error only as text).
    pub(crate) fn is_store_failure(&self) -> bool {
        match self {
            Self::Delta {
                source: DeltaTableError::ObjectStore { .. },
                ..
            } => true,
            Self::Delta {
                source: DeltaTableError::KernelError(e),
                ..
            } => e
                .to_string()
                .contains("Error interacting with object store"),
            _ => false,
        }
    }

    /// Whether a commit was refused because another writer recorded progress (a `txn` of the
    /// same application id, i.e. the same topic partition) since this writer read the table:
    /// two transformers briefly holding one partition across a rebalance. Nothing of the
    /// refused commit was written; re-read the progress and commit what is still missing.
    pub fn is_progress_conflict(&self) -> bool {
        matches!(
            self,
            Self::Delta {
                source: DeltaTableError::Transaction {
                    source: TransactionError::CommitConflict(
                        CommitConflictError::ConcurrentTransaction
                    ),
                },
                ..
            }
        )
    }

    /// Whether Delta refused a commit because a concurrent commit removed files as a data
    /// change, as a compaction's rewrite of a partition does.
    pub fn is_concurrent_rewrite(&self) -> bool {
        matches!(
            self,
            Self::Delta {
                source: DeltaTableError::Transaction {
                    source: TransactionError::CommitConflict(
                        CommitConflictError::ConcurrentDeleteRead
                    ),
                },
                ..
            }
        )
    }

    /// Whether Delta refused a commit because another writer committed first in a way that
    /// overlaps it: nothing of the refused commit was written. A transformer's append refused
    /// because a compaction rewrote files meanwhile read none of them, so it is safe to
    /// re-read the table and commit again; a compaction refused because rows were appended to
    /// the partition it rewrote leaves that partition for the next one.
    pub fn is_commit_conflict(&self) -> bool {
        matches!(
            self,
            Self::Delta {
                source: DeltaTableError::Transaction {
                    source: TransactionError::CommitConflict(_),
                },
                ..
            }
        )
    }

    pub(crate) fn delta(table: &'static str) -> impl Fn(DeltaTableError) -> Self + Copy {
        move |source| Self::Delta { table, source }
    }

    pub(crate) fn query(table: &'static str) -> impl Fn(DataFusionError) -> Self + Copy {
        move |source| Self::Query {
            table,
            source: Box::new(source),
        }
    }
}
