//! `lkplake-transform`: consumes `lkp.reports`, normalizes each report into rows of the
//! `metrics` and `reports` tables, and commits them to the lake with the Kafka offsets they
//! cover, so a restarted transformer resumes exactly where the lake ends.
//!
//! [`consumer`] is the Kafka side (the group member, seeks, offset commits); [`bookkeeping`]
//! decides what is new, what is a duplicate and what a commit covers, without Kafka;
//! [`tracker`] decides when partitions are drained or stuck; [`normalize`] turns reports into
//! Arrow batches; [`letters`] decodes each message and sends those it cannot read to the
//! transformer's dead-letter topic before their offsets are committed. Writing the lake is
//! `lkplake-lake`'s.

#![warn(missing_docs)]

pub mod bookkeeping;
pub mod consumer;
mod error;
pub mod letters;
pub mod normalize;
pub mod tracker;

pub use bookkeeping::{Ledger, TransformSummary};
pub use consumer::{TransformConfig, run};
pub use error::{DeadLetterError, TransformError};
