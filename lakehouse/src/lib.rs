//! `lkplake-lake`: the lake and the only code that writes it.
//!
//! A lake is a root addressed by URL ([`LakeUrl`]; a plain path is a `file://` URL) holding one
//! Delta table per name in [`lkplake_schemas::tables`]. [`Lake`] is the writer's view: it
//! creates the tables, appends batches in Delta commits that record the Kafka offsets they cover
//! (`txn` actions, the pattern of kafka-delta-ingest), reads that progress back, and compacts.
//! [`LakeTables`] is the reader's view: it never creates a table and follows new commits.
//! [`derived::overwrite`] replaces the small tables the read side derives (`lkplake trend`'s);
//! [`derived::append`] adds to `lkplake triage`'s. Every table records the lake's [`format`](mod@format),
//! and both views refuse a format this binary does not know.
//!
//! Keeping every write here means one place decides file layout, writer properties and commit
//! order, and the read side cannot change what the exactly-once bookkeeping relies on.

#![warn(missing_docs)]

mod damage;
pub mod derived;
mod error;
pub mod format;
mod indexed;
pub mod lease;
mod location;
#[cfg(feature = "fault-injection")]
mod meeting;
mod object_store;
mod reader;
pub mod report_rows;
#[cfg(test)]
mod testing;
mod upgrade;
mod writer;

pub use damage::without_backtrace;
pub use error::LakeError;
pub use format::Format;
pub use indexed::IndexedTable;
pub use location::LakeUrl;
pub use reader::{Damaged, LakeTables, TableHealth};
pub use upgrade::UpgradeSummary;
pub use writer::{Batches, CompactSummary, Lake, Progress, StoredTest, Table, app_id};

/// Re-exported for callers that build commits: the Kafka offsets a commit covers.
pub use deltalake::kernel::Transaction;
