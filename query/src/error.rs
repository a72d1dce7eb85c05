//! Errors of the read side, each naming what failed and what to do about it.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use lkplake_lake::LakeError;
use lkplake_schemas::ErrorKind;

/// Why a query or the engine failed; each variant's message is its documentation (and what the user reads).
#[allow(missing_docs)]
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error(transparent)]
    Lake(#[from] LakeError),
    #[error("view {view}: {source}")]
    View {
        view: String,
        source: Box<DataFusionError>,
    },
    #[error("{flag} {pattern:?} is not a valid regex: {source}")]
    InvalidRegex {
        flag: String,
        pattern: String,
        source: regex::Error,
    },
    #[error("{0}")]
    Refused(#[from] crate::policy::Refused),
    #[error("{0}")]
    DataFusion(Box<DataFusionError>),
    #[error("the query executor: {0}")]
    Executor(#[from] crate::executor::ExecutorError),
    #[error("writing results: {0}")]
    Output(#[from] ArrowError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl QueryError {
    /// What kind of failure this is, for the exit status: the lake's own files failing a
    /// query are the lake's (status 4), not the query's.
    pub fn kind(&self) -> ErrorKind {
        match self {
            _ if self.is_unreadable_lake() => ErrorKind::Lake,
            Self::InvalidRegex { .. } | Self::Refused(_) => ErrorKind::Usage,
            _ => ErrorKind::Failed,
        }
    }

    /// Whether the lake's own files failed the query: a damaged table, or a data file its log
    /// lists that is missing or cut short.
    fn is_unreadable_lake(&self) -> bool {
        match self {
            QueryError::Lake(_) => true,
            QueryError::DataFusion(e) => match e.find_root() {
                DataFusionError::External(inner) => inner.is::<crate::damaged::Damage>(),
                DataFusionError::ObjectStore(_) | DataFusionError::ParquetError(_) => true,
                _ => false,
            },
            _ => false,
        }
    }
}

impl From<DataFusionError> for QueryError {
    fn from(e: DataFusionError) -> Self {
        QueryError::DataFusion(Box::new(e))
    }
}
