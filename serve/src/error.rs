//! Errors of the server, each naming what failed and what to do about it.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use lkplake_kafka::BrokerError;
use lkplake_lake::LakeError;
use lkplake_query::QueryError;
use lkplake_schemas::ErrorKind;
use std::net::SocketAddr;

/// Why serving stopped or could not start; each variant's message is its documentation (and what the user reads).
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Query(#[from] QueryError),
    #[error(transparent)]
    Lake(#[from] LakeError),
    #[error(transparent)]
    Broker(#[from] BrokerError),
    #[error(
        "listening on {listen} needs a password: pass --password (or LKPLAKE_PG_PASSWORD), or listen on 127.0.0.1"
    )]
    NeedsPassword { listen: SocketAddr },
    #[error("cannot listen on {listen} for {what}: {source}; is another server using the port?")]
    Bind {
        what: &'static str,
        listen: SocketAddr,
        source: std::io::Error,
    },
    #[error("{what} failed: {source}")]
    Worker {
        what: &'static str,
        source: tokio::task::JoinError,
    },
    #[error("{0}")]
    DataFusion(Box<DataFusionError>),
    #[error("encoding results: {0}")]
    Arrow(#[from] ArrowError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl From<DataFusionError> for ServeError {
    fn from(e: DataFusionError) -> Self {
        Self::DataFusion(Box::new(e))
    }
}

impl ServeError {
    /// What kind of failure this is, for the exit status.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Query(e) => e.kind(),
            Self::Lake(_) => ErrorKind::Lake,
            Self::Broker(_) => ErrorKind::Broker,
            Self::NeedsPassword { .. } => ErrorKind::Usage,
            Self::Bind { .. }
            | Self::Worker { .. }
            | Self::DataFusion(_)
            | Self::Arrow(_)
            | Self::Io { .. } => ErrorKind::Failed,
        }
    }
}
