//! Why a run stops, and what kind of failure that is for the exit status.

use crate::dropped::Lost;
use lkplake_ingest::KafkaIngestError;
use lkplake_lake::LakeError;
use lkplake_parse::SourceError;
use lkplake_schemas::ErrorKind;
use lkplake_transform::TransformError;
use rdkafka::error::KafkaError;

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// The lake cannot be opened or written.
    #[error(transparent)]
    Lake(#[from] LakeError),
    /// The inputs cannot be walked.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// Ingest stopped.
    #[error(transparent)]
    Ingest(#[from] KafkaIngestError),
    /// The transformer stopped (boxed: its error is large, and every result here carries it).
    #[error(transparent)]
    Transform(Box<TransformError>),
    /// librdkafka could not start the embedded cluster or make a topic on it.
    #[error("{what}: {source}")]
    Embedded {
        /// What was being done.
        what: String,
        /// librdkafka's error.
        source: KafkaError,
    },
    /// The blocking task that walks the inputs ended without an answer.
    #[error("walking the inputs: {0}")]
    Walk(tokio::task::JoinError),
    /// The embedded cluster dropped messages before the transformer read them.
    #[error("{0}")]
    Dropped(Box<Lost>),
}

impl From<TransformError> for PipelineError {
    fn from(e: TransformError) -> Self {
        Self::Transform(Box::new(e))
    }
}

impl PipelineError {
    /// What kind of failure this is, for the exit status.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Lake(e) => e.kind(),
            Self::Source(e) => e.kind(),
            Self::Ingest(e) => e.kind(),
            Self::Transform(e) => e.kind(),
            // Not the user's broker: nothing a `--brokers` fix would mend.
            Self::Embedded { .. } | Self::Walk(_) | Self::Dropped(_) => ErrorKind::Failed,
        }
    }
}
