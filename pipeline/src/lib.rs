//! `lkplake-pipeline`: the whole pipeline in one process, as `lkplake run` runs it. Ingest reads
//! the sources into a cluster's reports topic and the transformer reads that topic into the
//! lake: one after the other, the transformer stopping once it has read everything, or side by
//! side until stopped when following the sources.
//!
//! The cluster is a broker the user runs or, by default, librdkafka's in-process mock cluster
//! ([`Cluster`]), which ends with the run and keeps only about 5 MB per partition: a run on it
//! compares what ingest produced with what the transformer read and fails when the cluster
//! dropped messages ([`dropped`]), so nothing given is lost in silence.
//!
//! The caller sees the run through an [`Observer`]; the binary prints with it.

mod cluster;
pub mod dropped;
mod error;

pub use cluster::Cluster;
pub use error::PipelineError;

use lkplake_ingest::KafkaIngestError;
use lkplake_ingest::follow::{FollowConfig, follow};
use lkplake_ingest::kafka::{IngestSummary, KafkaTarget, ingest};
use lkplake_kafka::Topics;
use lkplake_lake::{Format, Lake, LakeUrl};
use lkplake_parse::source::Inputs;
use lkplake_schemas::metric::DirectionTable;
use lkplake_transform::TransformSummary;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// What one run does.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The lake written.
    pub lake: LakeUrl,
    /// The report sources.
    pub paths: Vec<PathBuf>,
    /// The user's brokers; the embedded cluster when `None`.
    pub brokers: Option<String>,
    /// Which way is better for each metric.
    pub directions: DirectionTable,
    /// The format of a lake the run creates; a lake that exists keeps its own.
    pub lake_format: Format,
    /// The largest message ingest sends.
    pub max_message_bytes: usize,
    /// Follow the sources until stopped; its paths are the same as `paths`, which are also
    /// walked once before the cluster starts to size the embedded one.
    pub follow: Option<FollowConfig>,
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Ingest's summary (every round's, when following).
    pub ingested: IngestSummary,
    /// The transformer's.
    pub transformed: TransformSummary,
}

/// What the caller hears of a run while it goes on. Every method does nothing by default.
pub trait Observer: Sync {
    /// The embedded cluster is up at `bootstrap`.
    fn embedded(&self, _bootstrap: &str) {}
    /// Ingest is about to read `bytes` of input.
    fn ingesting(&self, _bytes: u64) {}
    /// Ingest has read this many bytes of its input.
    fn ingest_progress(&self, _bytes: u64) {}
    /// Following starts.
    fn following(&self, _config: &FollowConfig) {}
    /// Ingest finished, or a follow round found something new.
    fn ingested(&self, _summary: &IngestSummary) {}
    /// The transformer finished; its letters went to `topics.transform_dlq` on a cluster
    /// that is `embedded` or not.
    fn transformed(&self, _summary: &TransformSummary, _topics: &Topics, _embedded: bool) {}
}

/// Walks and sizes the inputs once, off the async runtime.
pub async fn inputs(paths: &[PathBuf]) -> Result<Inputs, PipelineError> {
    let paths = paths.to_vec();
    tokio::task::spawn_blocking(move || lkplake_parse::source::inputs(&paths))
        .await
        .map_err(PipelineError::Walk)?
        .map_err(PipelineError::from)
}

/// Ingest of `inputs` to `target`, heard by `observer`.
pub async fn ingest_observed(
    inputs: Inputs,
    target: &KafkaTarget,
    observer: &dyn Observer,
    stop: CancellationToken,
) -> Result<IngestSummary, KafkaIngestError> {
    observer.ingesting(inputs.bytes);
    let progress = |bytes| observer.ingest_progress(bytes);
    let ingested = ingest(inputs, target, progress, stop, None).await?;
    observer.ingested(&ingested);
    Ok(ingested)
}

/// Follows the sources to `target` until `stop`, each round heard by `observer`.
pub async fn follow_observed(
    config: FollowConfig,
    target: &KafkaTarget,
    observer: &dyn Observer,
    stop: CancellationToken,
) -> Result<IngestSummary, KafkaIngestError> {
    observer.following(&config);
    follow(config, target, stop, |s| observer.ingested(s)).await
}

/// Runs the pipeline until everything given is in the lake or, when following, until `stop`.
pub async fn run(
    mut config: RunConfig,
    observer: &dyn Observer,
    stop: CancellationToken,
) -> Result<Outcome, PipelineError> {
    // A lake that cannot be written fails the run before anything is read.
    drop(Lake::open_in(&config.lake, config.lake_format).await?);
    let inputs = inputs(&config.paths).await?;
    let cluster = match &config.brokers {
        Some(brokers) => Cluster::brokers(brokers.as_str()),
        None => {
            let sources = config.follow.as_ref().map(|f| f.sources_topic.as_str());
            let cluster = Cluster::embedded(inputs.bytes, sources)?;
            observer.embedded(&cluster.topics().brokers);
            cluster
        }
    };
    match config.follow.take() {
        Some(follow) => run_following(&cluster, config, follow, observer, stop).await,
        None => run_once(&cluster, config, inputs, observer, stop).await,
    }
}

/// Ingest, then the transformer until it has read everything ingest produced.
async fn run_once(
    cluster: &Cluster,
    config: RunConfig,
    inputs: Inputs,
    observer: &dyn Observer,
    stop: CancellationToken,
) -> Result<Outcome, PipelineError> {
    let target = cluster.target(config.max_message_bytes);
    let ingested = ingest_observed(inputs, &target, observer, stop.clone()).await?;
    let mut transform = cluster.transform(config.lake, config.directions);
    transform.until_idle = true;
    transform.lake_format = config.lake_format;
    let transformed = lkplake_transform::run(transform, stop.clone().cancelled_owned()).await?;
    observer.transformed(&transformed, cluster.topics(), cluster.is_embedded());
    // A transformer stopped by a signal read less than was produced; that is no drop.
    if cluster.is_embedded()
        && !stop.is_cancelled()
        && let Some(dropped) = dropped::dropped(&ingested, &transformed)
    {
        return Err(PipelineError::Dropped(Box::new(dropped::Lost {
            dropped,
            ingested,
        })));
    }
    Ok(Outcome {
        ingested,
        transformed,
    })
}

/// Ingest and the transformer side by side until stopped. On the embedded cluster the
/// checkpoints end with the run: a restart reads the sources again, and the transformer skips
/// what the lake already holds.
async fn run_following(
    cluster: &Cluster,
    config: RunConfig,
    mut follow_config: FollowConfig,
    observer: &dyn Observer,
    stop: CancellationToken,
) -> Result<Outcome, PipelineError> {
    let target = cluster.target(config.max_message_bytes);
    follow_config.create_topic = !cluster.is_embedded();
    let mut transform = cluster.transform(config.lake, config.directions);
    transform.lake_format = config.lake_format;
    let (ingested, transformed) = tokio::join!(
        follow_observed(follow_config, &target, observer, stop.clone()),
        lkplake_transform::run(transform, stop.clone().cancelled_owned())
    );
    let transformed = transformed?;
    observer.transformed(&transformed, cluster.topics(), cluster.is_embedded());
    Ok(Outcome {
        ingested: ingested?,
        transformed,
    })
}
