//! `lkplake ingest`, `transform`, `run`, `dlq` and `compact`: wiring of the ingest and
//! transform crates, the embedded broker, signals and progress output.

use crate::UsageError;
use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lkplake_ingest::checkpoint::SOURCES_TOPIC;
use lkplake_ingest::follow::{FollowConfig, follow};
use lkplake_ingest::kafka::{
    DLQ_TOPIC, IngestSummary, KafkaTarget, MAX_MESSAGE_BYTES, REPORTS_TOPIC, ingest,
    read_dead_letters,
};

use lkplake_ingest::source::Inputs;
use lkplake_lake::{Lake, LakeUrl};
use lkplake_query::{Engine, EngineConfig};
use lkplake_schemas::metric::DirectionTable;
use lkplake_shutdown::Shutdown;
use lkplake_transform::{TransformConfig, TransformSummary, run as transform};
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
    fn brokers(&self) -> Result<&str, UsageError> {
        self.brokers.as_deref().ok_or(UsageError::from(
            "no broker given: pass --brokers HOST:PORT or set LKPLAKE_BROKERS (`lkplake run` starts an embedded one)",
        ))
    }
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Partitions of the report topic when it has to be created.
    #[arg(long, env = "LKPLAKE_PARTITIONS", default_value_t = 6)]
    pub partitions: i32,
    /// The largest message to produce, in bytes; less when the broker describes a topic's
    /// `max.message.bytes` as smaller. A report larger is dead-lettered with the reason; a
    /// dead letter for an input larger keeps its first 64 KiB, with the input's path, size and
    /// SHA-256.
    #[arg(long, env = "LKPLAKE_MAX_MESSAGE_BYTES", default_value_t = MAX_MESSAGE_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1024..=MAX_MESSAGE_BYTES as u64))]
    pub max_message_bytes: u64,
    #[command(flatten)]
    pub follow: FollowArgs,
    /// Files, directories, .mbox / .mbox.gz archives, Maildir folders, public-inbox archives
    /// (a v2 inbox directory or a lore mirror's repository), `-` for stdin.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct FollowArgs {
    /// Keep running: look at the sources again every --poll and produce what is new, until
    /// SIGINT/SIGTERM. Where each source stands is saved in --sources-topic.
    #[arg(long, env = "LKPLAKE_FOLLOW")]
    pub follow: bool,
    /// With --follow: time between two looks at the sources.
    #[arg(long, env = "LKPLAKE_POLL", default_value = "30s", value_parser = crate::units::duration, requires = "follow")]
    pub poll: Duration,
    /// With --follow: `git fetch` each archive epoch from its remote before each look.
    #[arg(long, env = "LKPLAKE_FETCH", requires = "follow")]
    pub fetch: bool,
    /// With --follow: the compacted topic where each source's position is kept.
    #[arg(long, env = "LKPLAKE_SOURCES_TOPIC", default_value = SOURCES_TOPIC)]
    pub sources_topic: String,
}

impl FollowArgs {
    fn config(&self, paths: &[PathBuf]) -> Result<FollowConfig, UsageError> {
        if paths.iter().any(|p| p.as_os_str() == "-") {
            return Err(UsageError::from(
                "--follow cannot follow stdin: name files, directories or archives",
            ));
        }
        Ok(FollowConfig {
            paths: paths.to_vec(),
            poll: self.poll,
            fetch: self.fetch,
            sources_topic: self.sources_topic.clone(),
            create_topic: true,
        })
    }
}

#[derive(Debug, Args)]
pub struct TransformArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Where the lake is: a directory, a file:// URL, or s3://bucket/prefix (AWS_* variables).
    #[arg(long, env = "LKPLAKE_LAKE", default_value = "./lake")]
    pub lake: LakeUrl,
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
    /// Which way is better for metrics the built-in tables get wrong or do not know: lines of
    /// `PATTERN higher|lower`, the pattern a regex over whole metric names (`#` comments).
    #[arg(long, env = "LKPLAKE_DIRECTIONS")]
    pub directions: Option<PathBuf>,
    /// The longest a fetch waits at the broker for data, in milliseconds. Tansu waits this
    /// long after every fetch, so it bounds how fast a transformer reads from it; against
    /// Kafka it is how often an idle transformer asks for more.
    #[arg(long, env = "LKPLAKE_FETCH_WAIT_MS", default_value_t = 10)]
    pub fetch_wait_ms: u64,
}

/// The built-in directions with the overrides of `file`, if any.
fn directions(file: Option<&PathBuf>) -> anyhow::Result<DirectionTable> {
    let Some(file) = file else {
        return Ok(DirectionTable::default());
    };
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading the directions file {}", file.display()))?;
    DirectionTable::default()
        .with_overrides_text(&text)
        .map_err(|e| UsageError::owned(format!("directions file {}: {e}", file.display())).into())
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the lake is: a directory, a file:// URL, or s3://bucket/prefix (AWS_* variables).
    #[arg(long, env = "LKPLAKE_LAKE", default_value = "./lake")]
    pub lake: LakeUrl,
    /// Use these brokers instead of the embedded in-process cluster.
    #[arg(long, env = "LKPLAKE_BROKERS")]
    pub brokers: Option<String>,
    /// Metric directions file, as for `transform`.
    #[arg(long, env = "LKPLAKE_DIRECTIONS")]
    pub directions: Option<PathBuf>,
    /// The largest message to produce, in bytes; less when the broker describes a topic's
    /// `max.message.bytes` as smaller. A report larger is dead-lettered with the reason; a
    /// dead letter for an input larger keeps its first 64 KiB, with the input's path, size and
    /// SHA-256.
    #[arg(long, env = "LKPLAKE_MAX_MESSAGE_BYTES", default_value_t = MAX_MESSAGE_BYTES as u64,
          value_parser = clap::value_parser!(u64).range(1024..=MAX_MESSAGE_BYTES as u64))]
    pub max_message_bytes: u64,
    #[command(flatten)]
    pub follow: FollowArgs,
    /// Report sources, as for `ingest`.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DlqArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(subcommand)]
    pub command: Option<DlqCommand>,
}

#[derive(Debug, clap::Subcommand)]
pub enum DlqCommand {
    /// List the dead letters (the default).
    List,
    /// Parse every dead letter again with this version's parser; produce those that now parse
    /// to the reports topic (once: replayed letters are recorded in --sources-topic) and leave
    /// the rest.
    Replay {
        /// The compacted topic where replayed letters are recorded.
        #[arg(long, env = "LKPLAKE_SOURCES_TOPIC", default_value = SOURCES_TOPIC)]
        sources_topic: String,
    },
    /// Write one dead letter's raw bytes to stdout (to attach to a bug report).
    Show {
        /// The letter's offset, as `dlq` lists it; `PARTITION:OFFSET` when the topic has more
        /// than one partition.
        letter: String,
    },
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// Where the lake is: a directory, a file:// URL, or s3://bucket/prefix (AWS_* variables).
    #[arg(long, env = "LKPLAKE_LAKE", default_value = "./lake")]
    pub lake: LakeUrl,
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

/// Walks and sizes the inputs once, off the async runtime.
async fn inputs(paths: &[PathBuf]) -> anyhow::Result<Inputs> {
    let paths = paths.to_vec();
    Ok(tokio::task::spawn_blocking(move || lkplake_ingest::source::inputs(&paths)).await??)
}

async fn ingest_into(
    target: &KafkaTarget,
    inputs: Inputs,
    shutdown: &Shutdown,
) -> anyhow::Result<IngestSummary> {
    let bar = progress_bar(inputs.bytes);
    let progress = bar.clone();
    let summary = ingest(
        inputs,
        target,
        move |bytes| progress.set_position(bytes),
        shutdown.token(),
        None,
    )
    .await?;
    bar.finish_and_clear();
    print_ingest(&summary);
    Ok(summary)
}

fn print_ingest(summary: &IngestSummary) {
    eprintln!(
        "lkplake ingest: {} inputs, {} messages: {} reports ({} quoted copies), {} mentions, {} not reports skipped, {} dead-lettered{}",
        summary.inputs,
        summary.messages,
        summary.reports,
        summary.quoted,
        summary.mentions,
        summary.not_reports,
        summary.dead_lettered,
        if summary.unreadable > 0 {
            format!(", {} inputs unreadable", summary.unreadable)
        } else {
            String::new()
        },
    );
    if let Some(stopped) = &summary.stopped {
        eprintln!(
            "lkplake ingest: stopped before the end: {} from message {} on and {} more inputs were not read; \
             everything read before was delivered (run again: copies already in the lake are skipped)",
            stopped.path, stopped.next_message, stopped.inputs_not_read
        );
    }
}

/// `--follow`: rounds until stopped, one summary line per round that found something new.
async fn follow_into(
    target: &KafkaTarget,
    config: FollowConfig,
    shutdown: &Shutdown,
) -> anyhow::Result<IngestSummary> {
    eprintln!(
        "lkplake ingest: following {} path(s), looking every {:?}{}; SIGTERM stops",
        config.paths.len(),
        config.poll,
        if config.fetch { ", fetching first" } else { "" }
    );
    let summary = follow(config, target, shutdown.token(), print_ingest).await?;
    Ok(summary)
}

/// Whether everything the user gave was ingested.
fn complete(summary: &IngestSummary) -> bool {
    summary.unreadable == 0 && summary.stopped.is_none()
}

pub async fn run_ingest(args: &IngestArgs, shutdown: &Shutdown) -> anyhow::Result<bool> {
    let mut target = KafkaTarget::new(args.kafka.brokers()?);
    target.reports_topic = args.kafka.topic.clone();
    target.dlq_topic = args.kafka.dlq_topic.clone();
    target.partitions = args.partitions;
    target.max_message_bytes = usize::try_from(args.max_message_bytes).unwrap_or(MAX_MESSAGE_BYTES);
    shutdown.on_signals("ingest");
    if args.follow.follow {
        let config = args.follow.config(&args.paths)?;
        let summary = follow_into(&target, config, shutdown).await?;
        // Stopped on purpose: a follower's normal end.
        return Ok(summary.unreadable == 0);
    }
    let summary = ingest_into(&target, inputs(&args.paths).await?, shutdown).await?;
    Ok(complete(&summary))
}

fn print_transform(summary: &TransformSummary) {
    eprintln!(
        "lkplake transform: {} messages: {} reports written ({} metric rows, {} commits), {} mentions written, {} duplicates skipped, {} quoted copies replaced by their original, {} already in the lake, {} undecodable, {} commits retried after a conflict",
        summary.messages,
        summary.reports,
        summary.metric_rows,
        summary.commits,
        summary.mentions,
        summary.duplicates,
        summary.replaced_quoted,
        summary.already_in_lake,
        summary.undecodable,
        summary.conflicts_retried,
    );
}

pub async fn run_transform(args: &TransformArgs, shutdown: &Shutdown) -> anyhow::Result<()> {
    let mut config = TransformConfig::new(args.kafka.brokers()?, args.lake.clone());
    config.directions = directions(args.directions.as_ref())?;
    config.topic = args.kafka.topic.clone();
    config.group = args.group.clone();
    config.flush_rows = args.flush_rows;
    config.flush_interval = Duration::from_millis(args.flush_ms);
    config.until_idle = args.until_idle;
    config.instance_id = args.instance_id.clone();
    config.fetch_wait = Duration::from_millis(args.fetch_wait_ms);
    shutdown.on_signals("transform");
    let summary = transform(config, shutdown.cancelled()).await?;
    print_transform(&summary);
    Ok(())
}

/// Partitions of the embedded cluster's report topic. librdkafka's mock cluster keeps about 5 MB
/// per partition and silently drops older record batches beyond that, before the transformer
/// reads them; a report's JSON is about 1.4 times its mail. One partition per 2 MB of input
/// keeps large uncompressed inputs whole; what still overflows is caught after the transform.
fn embedded_partitions(inputs: &Inputs) -> i32 {
    let partitions = inputs.bytes.div_ceil(2 << 20).clamp(6, 128);
    i32::try_from(partitions).unwrap_or(128)
}

pub async fn run_all(args: &RunArgs, shutdown: &Shutdown) -> anyhow::Result<bool> {
    // A lake that cannot be written fails the run before anything is read.
    drop(Lake::open(&args.lake).await?);
    let inputs = inputs(&args.paths).await?;
    // The embedded default: librdkafka's in-process mock cluster. It must outlive every
    // client, so it lives on this stack frame until the end. Its broker has no CreateTopics,
    // so the topics are made on the cluster directly.
    let mock;
    let mut target = match &args.brokers {
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
            mock.create_topic(&target.reports_topic, embedded_partitions(&inputs), 1)
                .context("creating the report topic")?;
            mock.create_topic(&target.dlq_topic, 1, 1)
                .context("creating the dead-letter topic")?;
            if args.follow.follow {
                mock.create_topic(&args.follow.sources_topic, 1, 1)
                    .context("creating the checkpoint topic")?;
            }
            eprintln!(
                "lkplake run: embedded Kafka cluster at {}",
                mock.bootstrap_servers()
            );
            target
        }
    };
    target.max_message_bytes = usize::try_from(args.max_message_bytes).unwrap_or(MAX_MESSAGE_BYTES);
    shutdown.on_signals("run");
    if args.follow.follow {
        // Ingest and transform side by side until stopped. On the embedded cluster the
        // checkpoints end with the run: a restart reads the sources again, and the transformer
        // skips what the lake already holds.
        let mut follow_config = args.follow.config(&args.paths)?;
        follow_config.create_topic = args.brokers.is_some();
        let mut config = TransformConfig::new(&target.brokers, args.lake.clone());
        config.directions = directions(args.directions.as_ref())?;
        config.topic = target.reports_topic.clone();
        let (ingested, transformed) = tokio::join!(
            follow_into(&target, follow_config, shutdown),
            transform(config, shutdown.cancelled())
        );
        print_transform(&transformed?);
        return Ok(ingested?.unreadable == 0);
    }
    let ingested = ingest_into(&target, inputs, shutdown).await?;
    let mut config = TransformConfig::new(&target.brokers, args.lake.clone());
    config.directions = directions(args.directions.as_ref())?;
    config.topic = target.reports_topic.clone();
    config.until_idle = true;
    let summary = transform(config, shutdown.cancelled()).await?;
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

    let engine = Engine::open(&args.lake, &EngineConfig::default()).await?;
    let sql = "SELECT testcase, machine, count(DISTINCT report_key) AS reports, count(*) AS observations \
               FROM metrics GROUP BY testcase, machine ORDER BY testcase, machine";
    let batches = engine.sql(sql).await?.collect().await?;
    println!("{sql}");
    println!(
        "{}",
        datafusion::arrow::util::pretty::pretty_format_batches(&batches)?
    );
    Ok(complete(&ingested))
}

/// `dlq`, `dlq list`, `dlq replay`, `dlq show`; false when letters are left failing.
pub async fn run_dlq(args: &DlqArgs) -> anyhow::Result<bool> {
    let brokers = args.kafka.brokers()?.to_owned();
    match &args.command {
        None | Some(DlqCommand::List) => {
            let letters = dead_letters(&brokers, &args.kafka.dlq_topic).await?;
            list_dead_letters(&letters, &args.kafka.dlq_topic);
            Ok(true)
        }
        Some(DlqCommand::Show { letter }) => {
            let (partition, offset) = match letter.split_once(':') {
                Some((p, o)) => (p.parse::<i32>().ok(), o.parse::<i64>().ok()),
                None => (Some(0), letter.parse::<i64>().ok()),
            };
            let (Some(partition), Some(offset)) = (partition, offset) else {
                return Err(UsageError::owned(format!(
                    "dlq show {letter}: name a letter by its offset, or PARTITION:OFFSET, as `lkplake dlq` lists them"
                ))
                .into());
            };
            let letters = dead_letters(&brokers, &args.kafka.dlq_topic).await?;
            let Some(found) = letters
                .iter()
                .find(|l| l.partition == partition && l.offset == offset)
            else {
                return Err(UsageError::owned(format!(
                    "{} holds no letter {partition}:{offset} ({} letters; `lkplake dlq` lists them)",
                    args.kafka.dlq_topic,
                    letters.len()
                ))
                .into());
            };
            let mut out = std::io::stdout().lock();
            std::io::Write::write_all(&mut out, &found.raw).context("writing to stdout")?;
            std::io::Write::flush(&mut out).context("writing to stdout")?;
            Ok(true)
        }
        Some(DlqCommand::Replay { sources_topic }) => {
            let mut target = KafkaTarget::new(brokers);
            target.reports_topic = args.kafka.topic.clone();
            target.dlq_topic = args.kafka.dlq_topic.clone();
            let summary = lkplake_ingest::replay::replay(&target, sources_topic).await?;
            for (letter, reason) in &summary.still_failing {
                eprintln!(
                    "lkplake dlq replay: {}:{} ({}) still fails: {reason}",
                    letter.partition, letter.offset, letter.source
                );
            }
            eprintln!(
                "lkplake dlq replay: {} letters: {} replayed now ({} reports and {} mentions produced to {}), {} replayed before, {} now not reports, {} still failing (left in {})",
                summary.letters,
                summary.replayed,
                summary.reports,
                summary.mentions,
                target.reports_topic,
                summary.already_replayed,
                summary.not_reports,
                summary.still_failing.len(),
                target.dlq_topic
            );
            Ok(summary.still_failing.is_empty())
        }
    }
}

async fn dead_letters(
    brokers: &str,
    topic: &str,
) -> anyhow::Result<Vec<lkplake_ingest::kafka::DeadLetter>> {
    lkplake_kafka::reachable(brokers).await?;
    let (brokers, topic) = (brokers.to_owned(), topic.to_owned());
    Ok(tokio::task::spawn_blocking(move || read_dead_letters(&brokers, &topic)).await??)
}

fn list_dead_letters(letters: &[lkplake_ingest::kafka::DeadLetter], topic: &str) {
    println!(
        "{:>9}  {:>8}  {:>8}  {:<40}  reason",
        "partition", "offset", "bytes", "source"
    );
    for l in letters {
        println!(
            "{:>9}  {:>8}  {:>8}  {:<40}  {}",
            l.partition,
            l.offset,
            l.size(),
            l.source.to_string(),
            l.error
        );
    }
    eprintln!("lkplake dlq: {} dead letters in {topic}", letters.len());
}

pub async fn run_compact(args: &CompactArgs) -> anyhow::Result<()> {
    let mut lake = Lake::open(&args.lake).await?;
    let summary = lake.compact(args.resort).await?;
    eprintln!(
        "lkplake compact: {} files rewritten into {} ({} metrics partitions sorted by series, {} left for the next compaction: written to meanwhile), {} unreferenced files removed",
        summary.files_removed,
        summary.files_added,
        summary.partitions_sorted,
        summary.partitions_skipped,
        summary.files_vacuumed
    );
    Ok(())
}
