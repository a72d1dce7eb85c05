//! Errors of the read side, each naming what failed and what to do about it.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use deltalake::DeltaTableError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error(
        "no lake table at {path}: run `lkplake run` or `lkplake transform --lake {lake}` first",
        lake = .lake.display(),
        path = .path.display()
    )]
    NoLake { lake: PathBuf, path: PathBuf },
    #[error("lake table {table}: {source}")]
    Delta {
        table: &'static str,
        source: DeltaTableError,
    },
    #[error("lake table {table}: {source}")]
    Table {
        table: &'static str,
        source: Box<DataFusionError>,
    },
    #[error("view {view}: {source}")]
    View {
        view: String,
        source: Box<DataFusionError>,
    },
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Refused(#[from] crate::policy::Refused),
    #[error("{0}")]
    DataFusion(Box<DataFusionError>),
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
