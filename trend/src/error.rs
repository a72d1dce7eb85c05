//! Errors of trend analysis, each naming what failed.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use lkplake_lake::LakeError;
use lkplake_query::QueryError;
use lkplake_schemas::ErrorKind;
use std::path::PathBuf;

/// Why a trend run failed; each variant's message is its documentation (and what the user reads).
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum TrendError {
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Lake(#[from] LakeError),
    #[error("reading the lake's observations: {0}")]
    DataFusion(Box<DataFusionError>),
    #[error("building the {0}")]
    Arrow(#[from] ArrowError),
    #[error(
        "the lake's {table} table lacks column {column}; it was written by another lkplake version: delete the table and run `lkplake trend --full`"
    )]
    MissingColumn { table: &'static str, column: String },
    #[error("a change-point worker failed: {0}")]
    Worker(#[source] tokio::task::JoinError),
    #[error("drawing {path}: {reason}")]
    Plot { path: PathBuf, reason: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl From<DataFusionError> for TrendError {
    fn from(e: DataFusionError) -> Self {
        Self::DataFusion(Box::new(e))
    }
}

impl TrendError {
    /// What kind of failure this is, for the exit status.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Query(e) => e.kind(),
            Self::Lake(_) => ErrorKind::Lake,
            Self::DataFusion(_)
            | Self::Arrow(_)
            | Self::MissingColumn { .. }
            | Self::Worker(_)
            | Self::Plot { .. }
            | Self::Io { .. } => ErrorKind::Failed,
        }
    }
}
