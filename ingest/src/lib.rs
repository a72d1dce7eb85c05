//! `lkplake-ingest`: reports to Kafka.
//!
//! Mail is read and parsed by `lkplake-parse`; this crate sends what it yields to the reports
//! topic and what it cannot read to the dead-letter topic ([`kafka`], in the format of
//! [`letter`]), follows growing sources with checkpoints kept in Kafka ([`follow`],
//! [`checkpoint`]), and parses dead letters again after a parser fix ([`replay`]).

#![warn(missing_docs)]

pub mod checkpoint;
mod error;
pub mod follow;
pub mod kafka;
pub mod letter;
pub mod replay;

pub use error::KafkaIngestError;
