//! Errors of the read side, each naming what failed and what to do about it.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use lkplake_lake::LakeError;

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

impl From<DataFusionError> for QueryError {
    fn from(e: DataFusionError) -> Self {
        QueryError::DataFusion(Box::new(e))
    }
}
