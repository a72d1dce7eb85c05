//! Typed errors of the parse crate. Each carries what a user needs to find the input again
//! (file, message index) and says what was wrong with it.

use lkplake_schemas::ErrorKind;
use std::path::PathBuf;

/// Why one message could not be turned into reports. The message looked like a performance
/// report (it has the robot's comparison table or opening sentence) but could not be read.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("report has a comparison table but no `a/b/testcase:` parameter header before it")]
    MissingAxes,
    #[error(
        "parameter header names {names} axes but the value line has {values} values and no `parameters:` block repairs it"
    )]
    AxesMismatch { names: usize, values: usize },
    #[error("report has no `testcase` or `tbox_group` in its parameter header")]
    MissingTestIdentity,
    #[error("table has no `commit:` list naming its columns")]
    MissingCommits,
    #[error("comparison table has no data rows (truncated report?)")]
    EmptyTable,
    #[error("binary data, not a mail or a report (is this the right file?)")]
    Binary,
    #[error("neither a mail (no headers) nor a kernel test robot report")]
    Unrecognized,
    #[error(
        "the parser panicked on this message ({reason}); please report it with the message attached (`lkplake dlq`)"
    )]
    Panicked { reason: String },
    /// Where the message is, callers print beside every parse error; the value still names it.
    #[error(
        "larger than {} bytes, the most one message may be: not read whole, only its first {} bytes are kept; split it into smaller files if it really is mail",
        .0.limit,
        .0.kept
    )]
    TooLarge(TooLarge),
}

/// A message larger than the most one message may be (`source::MAX_MAIL_BYTES`): it was not
/// read whole, so that a huge file fed by mistake costs a bounded amount of memory; only its
/// first `kept` bytes were handed on (to the dead-letter topic, when ingesting).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{path}, message {index}: larger than {limit} bytes, the most one message may be; it was not read whole (its first {kept} bytes are kept); split it into smaller files if it really is mail"
)]
pub struct TooLarge {
    /// The input, as the source names it (`-` for stdin).
    pub path: String,
    /// The message's place in the input (0 for a single-message file).
    pub index: u64,
    /// The limit it exceeded, in bytes.
    pub limit: usize,
    /// How many of its first bytes were kept.
    pub kept: usize,
}

/// Why an input could not be read at all.
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{}: {source}; check that the path exists and is readable", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a valid gzip stream ({source}); is it really a .gz file?", path.display())]
    Gzip {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: git {what} failed: {reason}; is it a public-inbox epoch (a bare repository whose commits add the blob `m`)?", path.display())]
    Git {
        path: PathBuf,
        what: String,
        reason: String,
    },
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
}

impl SourceError {
    /// What kind of failure this is, for the exit status: an input that could not be read.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Input
    }
}
