//! `lkplake ingest`, `transform`, `run`, `dlq` and `compact`: wiring of the ingest and
//! transform crates, the embedded broker, signals and progress output.

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lkplake_ingest::kafka::{
    DLQ_TOPIC, IngestSummary, KafkaTarget, REPORTS_TOPIC, ingest, read_dead_letters,
};
use lkplake_transform::consumer::{TransformConfig, TransformSummary, run as transform};
use lkplake_transform::lake::{Lake, session};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args, Clone)]
pub struct KafkaArgs {
    /// Kafka bootstrap servers, e.g. 127.0.0.1:9092.
    #[arg(long, env = "LKPLAKE_BROKERS")]
    pub brokers: Option<String>,
    /// Topic of parsed reports.
    #[arg(long, env = "LKPLAKE_TOPIC", default_value = REPORTS_TOPIC)]
    pub topic: String,
    /// Dead-letter topic for inputs that could not be parsed.
    #[arg(long, env = "LKPLAKE_DLQ_TOPIC", default_value = DLQ_TOPIC)]
    pub dlq_topic: String,
}

impl KafkaArgs {
    fn brokers(&self) -> anyhow::Result<&str> {
        self.brokers
            .as_deref()
            .context("no broker given: pass --brokers HOST:PORT or set LKPLAKE_BROKERS (`lkplake run` starts an embedded one)")
    }
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Partitions of the report topic when it has to be created.
    #[arg(long, env = "LKPLAKE_PARTITIONS", default_value_t = 6)]
    pub partitions: i32,
    /// Files, directories, .mbox / .mbox.gz archives, Maildir folders, `-` for stdin.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TransformArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Root directory of the lake (Delta tables `metrics` and `reports`).
    #[arg(long, env = "LKPLAKE_LAKE", default_value = "./lake")]
    pub lake: PathBuf,
    /// Consumer group; transformers in one group share the partitions.
    #[arg(long, env = "LKPLAKE_GROUP", default_value = "lkplake-transform")]
    pub group: String,
    /// Flush to the lake when this many metric rows are buffered.
    #[arg(long, env = "LKPLAKE_FLUSH_ROWS", default_value_t = 500_000)]
    pub flush_rows: usize,
    /// Flush to the lake when the oldest buffered report is this many milliseconds old.
    #[arg(long, env = "LKPLAKE_FLUSH_MS", default_value_t = 5_000)]
    pub flush_ms: u64,
    /// Exit once the topic is drained instead of running until SIGINT/SIGTERM.
    #[arg(long, env = "LKPLAKE_UNTIL_IDLE")]
    pub until_idle: bool,
    /// Static group membership id (unique per running instance, stable across its restarts):
    /// a restarted instance takes its partitions back at once.
    #[arg(long, env = "LKPLAKE_INSTANCE_ID")]
    pub instance_id: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Root directory of the lake.
    #[arg(long, env = "LKPLAKE_LAKE", default_value = "./lake")]
    pub lake: PathBuf,
    /// Use these brokers instead of the embedded in-process cluster.
    #[arg(long, env = "LKPLAKE_BROKERS")]
    pub brokers: Option<String>,
    /// Report sources, as for `ingest`.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DlqArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Root directory of the lake.
    #[arg(long, env = "LKPLAKE_LAKE", default_value = "./lake")]
    pub lake: PathBuf,
    /// Rewrite every `metrics` partition sorted, also those already in one file (a lake
    /// compacted before compaction sorted).
    #[arg(long)]
    pub resort: bool,
}

fn progress_bar(total: u64) -> ProgressBar {
    // indicatif draws nothing when stderr is not a terminal.
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} ingest [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

fn input_bytes(paths: &[PathBuf]) -> u64 {
    lkplake_ingest::source::expand_paths(paths)
        .map(|files| {
            files
                .iter()
                .filter_map(|f| std::fs::metadata(f).ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

async fn ingest_into(target: &KafkaTarget, paths: &[PathBuf]) -> anyhow::Result<IngestSummary> {
    let bar = progress_bar(input_bytes(paths));
    let progress = bar.clone();
    let summary = ingest(paths, target, move |bytes| progress.set_position(bytes)).await?;
    bar.finish_and_clear();
    eprintln!(
        "lkplake ingest: {} inputs, {} messages: {} reports ({} quoted copies), {} not reports skipped, {} dead-lettered{}",
        summary.inputs,
        summary.messages,
        summary.reports,
        summary.quoted,
        summary.not_reports,
        summary.dead_lettered,
        if summary.unreadable > 0 {
            format!(", {} inputs unreadable", summary.unreadable)
        } else {
            String::new()
        },
    );
    Ok(summary)
}

pub async fn run_ingest(args: &IngestArgs) -> anyhow::Result<bool> {
    let mut target = KafkaTarget::new(args.kafka.brokers()?);
    target.reports_topic = args.kafka.topic.clone();
    target.dlq_topic = args.kafka.dlq_topic.clone();
    target.partitions = args.partitions;
    let summary = ingest_into(&target, &args.paths).await?;
    Ok(summary.unreadable == 0)
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

fn print_transform(summary: &TransformSummary) {
    eprintln!(
        "lkplake transform: {} messages: {} reports written ({} metric rows, {} commits), {} duplicates skipped, {} quoted copies replaced by their original, {} already in the lake, {} undecodable",
        summary.messages,
        summary.reports,
        summary.metric_rows,
        summary.commits,
        summary.duplicates,
        summary.replaced_quoted,
        summary.already_in_lake,
        summary.undecodable,
    );
}

pub async fn run_transform(args: &TransformArgs) -> anyhow::Result<()> {
    let mut config = TransformConfig::new(args.kafka.brokers()?, &args.lake);
    config.topic = args.kafka.topic.clone();
    config.group = args.group.clone();
    config.flush_rows = args.flush_rows;
    config.flush_interval = Duration::from_millis(args.flush_ms);
    config.until_idle = args.until_idle;
    config.instance_id = args.instance_id.clone();
    let summary = transform(config, shutdown_signal()).await?;
    print_transform(&summary);
    Ok(())
}

/// Partitions of the embedded cluster's report topic. librdkafka's mock cluster keeps about 5 MB
/// per partition and silently drops older record batches beyond that, before the transformer
/// reads them; a report's JSON is about 1.4 times its mail. One partition per 2 MB of input
/// keeps large uncompressed inputs whole; what still overflows is caught after the transform.
fn embedded_partitions(paths: &[PathBuf]) -> i32 {
    let partitions = input_bytes(paths).div_ceil(2 << 20).clamp(6, 128);
    i32::try_from(partitions).unwrap_or(128)
}

pub async fn run_all(args: &RunArgs) -> anyhow::Result<bool> {
    // The embedded default: librdkafka's in-process mock cluster. It must outlive every
    // client, so it lives on this stack frame until the end. Its broker has no CreateTopics,
    // so the topics are made on the cluster directly.
    let mock;
    let target = match &args.brokers {
        Some(brokers) => KafkaTarget::new(brokers),
        None => {
            mock = rdkafka::mocking::MockCluster::new(1)
                .context("starting the embedded Kafka cluster")?;
            let mut target = KafkaTarget::new(mock.bootstrap_servers());
            // The embedded topic lives as long as this run while the lake outlives it: a topic
            // name of its own keeps this run's offsets from being read as an older run's
            // progress in the lake.
            let run_id = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros())
                .unwrap_or_default();
            target.reports_topic = format!("{REPORTS_TOPIC}.run-{run_id}");
            target.dlq_topic = format!("{DLQ_TOPIC}.run-{run_id}");
            target.create_topics = false;
            mock.create_topic(&target.reports_topic, embedded_partitions(&args.paths), 1)
                .context("creating the report topic")?;
            mock.create_topic(&target.dlq_topic, 1, 1)
                .context("creating the dead-letter topic")?;
            eprintln!(
                "lkplake run: embedded Kafka cluster at {}",
                mock.bootstrap_servers()
            );
            target
        }
    };
    let ingested = ingest_into(&target, &args.paths).await?;
    let mut config = TransformConfig::new(&target.brokers, &args.lake);
    config.topic = target.reports_topic.clone();
    config.until_idle = true;
    let summary = transform(config, shutdown_signal()).await?;
    print_transform(&summary);
    if args.brokers.is_none() && summary.messages < ingested.reports {
        // librdkafka's mock cluster keeps about 5 MB per partition and drops the oldest
        // record batches beyond that, before the transformer has read them.
        anyhow::bail!(
            "the embedded Kafka cluster dropped {} of {} reports before they reached the lake: it keeps only about 5 MB per partition. \
             What it kept is in the lake; for inputs this large, run against a broker with `lkplake run --brokers HOST:PORT` \
             (for example ./infra/tansu.sh start) and the rest is added",
            ingested.reports - summary.messages,
            ingested.reports
        );
    }

    let lake = Lake::open(&args.lake).await?;
    let ctx = session(&lake).await?;
    let sql = "SELECT testcase, machine, count(DISTINCT report_key) AS reports, count(*) AS observations \
               FROM metrics GROUP BY testcase, machine ORDER BY testcase, machine";
    let batches = ctx.sql(sql).await?.collect().await?;
    println!("{sql}");
    println!(
        "{}",
        deltalake::arrow::util::pretty::pretty_format_batches(&batches)?
    );
    Ok(ingested.unreadable == 0)
}

pub fn run_dlq(args: &DlqArgs) -> anyhow::Result<()> {
    let letters = read_dead_letters(args.kafka.brokers()?, &args.kafka.dlq_topic)?;
    println!(
        "{:>9}  {:>8}  {:>8}  {:<40}  reason",
        "partition", "offset", "bytes", "source"
    );
    for l in &letters {
        println!(
            "{:>9}  {:>8}  {:>8}  {:<40}  {}",
            l.partition,
            l.offset,
            l.raw.len(),
            format!("{}#{}", l.path, l.index),
            l.error
        );
    }
    eprintln!(
        "lkplake dlq: {} dead letters in {}",
        letters.len(),
        args.kafka.dlq_topic
    );
    Ok(())
}

pub async fn run_compact(args: &CompactArgs) -> anyhow::Result<()> {
    let mut lake = Lake::open(&args.lake).await?;
    let summary = lake.compact(args.resort).await?;
    eprintln!(
        "lkplake compact: {} files rewritten into {} ({} metrics partitions sorted by series), {} unreferenced files removed",
        summary.files_removed,
        summary.files_added,
        summary.partitions_sorted,
        summary.files_vacuumed
    );
    Ok(())
}
