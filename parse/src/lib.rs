//! `lkplake-parse`: bytes to reports, mentions or a typed error.
//!
//! Sources ([`source`]) yield raw messages from files, directories, mbox archives, public-inbox
//! archives and stdin; [`decode`] turns a message in any state of archive damage into headers
//! and body text; [`prefilter`] skips mail that cannot be a report before it is decoded; the
//! [`parser`] reads kernel test robot performance reports from that text; [`parallel`] spreads
//! the work over the machine's cores. The parser is a pure function: bytes in, reports or a
//! typed error out, never a panic. Nothing here knows of Kafka: `lkplake parse`, the fuzz
//! targets and the producer (`lkplake-ingest`) all read mail through this crate.

#![warn(missing_docs)]
#![allow(
    clippy::disallowed_methods,
    reason = "synchronous: the parser runs on threads of its own (`parallel`) or on a caller's blocking thread, never on a runtime worker"
)]

pub mod decode;
pub mod error;
pub mod parallel;
pub mod parser;
pub mod prefilter;
pub mod source;

pub use error::{ParseError, SourceError};
pub use parser::{Parsed, parse_message};
