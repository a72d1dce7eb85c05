//! `lkplake-ingest`: everything between a report source and the Kafka topic.
//!
//! Sources ([`source`]) yield raw messages from files, directories, mbox archives and stdin;
//! [`decode`] turns a message in any state of archive damage into headers and body text; the
//! [`parser`] reads kernel test robot performance reports from that text. The parser is a
//! pure function: bytes in, reports or a typed error out, never a panic.

#![warn(missing_docs)]

#[cfg(feature = "kafka")]
pub mod checkpoint;
pub mod decode;
pub mod error;
#[cfg(feature = "kafka")]
pub mod follow;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod parallel;
pub mod parser;
pub mod prefilter;
#[cfg(feature = "kafka")]
pub mod replay;
pub mod source;

pub use error::{ParseError, SourceError};
pub use parser::{Parsed, parse_message};
