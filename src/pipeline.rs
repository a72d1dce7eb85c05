//! `lkplake ingest`, `transform`, `run`, `dlq` and `compact`: wiring of the ingest and
//! transform crates, the embedded broker, signals and progress output.

use crate::UsageError;
use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lkplake_ingest::checkpoint::{
    Checkpointer, Checkpoints, Position, SOURCES_TOPIC, dead_letter_key,
};
use lkplake_ingest::follow::{FollowConfig, follow};
use lkplake_ingest::kafka::{
    DLQ_TOPIC, IngestSummary, KafkaTarget, MAX_MESSAGE_BYTES, REPORTS_TOPIC, ingest,
};
use lkplake_ingest::letter::{DeadLetter, read_dead_letters};
use lkplake_kafka::TRANSFORM_DLQ_TOPIC;

use lkplake_lake::{Lake, LakeUrl};
use lkplake_parse::source::Inputs;
use lkplake_query::{Engine, EngineConfig};
use lkplake_schemas::metric::DirectionTable;
use lkplake_shutdown::Shutdown;
use lkplake_transform::{TransformConfig, TransformSummary, run as transform};
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
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
    /// The transformer's dead-letter topic: messages of the reports topic it cannot read (not
    /// report, mention or link JSON, or a newer schema_version). Created at the first letter.
    #[arg(long, env = "LKPLAKE_TRANSFORM_DLQ_TOPIC", default_value = TRANSFORM_DLQ_TOPIC)]
    pub transform_dlq_topic: String,
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
    /// SHA-256. A single message over 64 MiB is not read whole, and only its first 64 KiB are
    /// kept: it is dead-lettered with those, marked truncated, naming its path, message index
    /// and the limit, and `dlq replay` refuses it.
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
async fn directions(file: Option<&PathBuf>) -> anyhow::Result<DirectionTable> {
    let Some(file) = file else {
        return Ok(DirectionTable::default());
    };
    let text = tokio::fs::read_to_string(file)
        .await
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
    /// SHA-256. A single message over 64 MiB is not read whole, and only its first 64 KiB are
    /// kept: it is dead-lettered with those, marked truncated, naming its path, message index
    /// and the limit, and `dlq replay` refuses it.
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
    /// Parse every dead letter of ingest's again with this version's parser, and read every
    /// letter of the transformer's again with this version's transformer; produce those that
    /// now parse or read to the reports topic (once: replayed letters are recorded in
    /// --sources-topic) and leave the rest.
    Replay {
        /// The compacted topic where replayed letters are recorded.
        #[arg(long, env = "LKPLAKE_SOURCES_TOPIC", default_value = SOURCES_TOPIC)]
        sources_topic: String,
    },
    /// Write one dead letter's raw bytes to stdout (to attach to a bug report).
    Show {
        /// The letter, as `dlq` lists it: `TOPIC:PARTITION:OFFSET`; a bare `OFFSET` or
        /// `PARTITION:OFFSET` is one of ingest's letters (in --dlq-topic).
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
    Ok(tokio::task::spawn_blocking(move || lkplake_parse::source::inputs(&paths)).await??)
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
        "lkplake ingest: {} inputs, {} messages: {} reports ({} quoted copies), {} mentions, {} links, {} not reports skipped, {} dead-lettered{}{}",
        summary.inputs,
        summary.messages,
        summary.reports,
        summary.quoted,
        summary.mentions,
        summary.links,
        summary.not_reports,
        summary.dead_lettered,
        if summary.unreadable > 0 {
            format!(", {} inputs unreadable", summary.unreadable)
        } else {
            String::new()
        },
        missing_messages(summary.missing),
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
    summary.all_read() && summary.stopped.is_none()
}

/// The summary's words for archive messages their repository lacks (empty when none), shared
/// with `lkplake parse`.
pub fn missing_messages(missing: u64) -> String {
    if missing > 0 {
        format!(
            ", {missing} messages missing from their archive's repository (not read; the warning above names the first)"
        )
    } else {
        String::new()
    }
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
        return Ok(summary.all_read());
    }
    let summary = ingest_into(&target, inputs(&args.paths).await?, shutdown).await?;
    Ok(complete(&summary))
}

/// Whether the transformer's dead-letter topic outlives the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LetterTopic {
    /// On a broker: `lkplake dlq` lists the letters.
    Kept,
    /// In `run`'s embedded cluster, gone when the run ends: the warnings are all that is left.
    EndsWithRun,
}

/// The transformer's summary; `dlq_topic` is where its dead letters went.
fn print_transform(summary: &TransformSummary, dlq_topic: &str, letters: LetterTopic) {
    eprintln!(
        "lkplake transform: {} messages: {} reports written ({} metric rows, {} commits), {} mentions written, {} links written, {} tests added to reports already in the lake, {} duplicates skipped, {} quoted copies replaced by their original, {} already in the lake, {} dead-lettered to {dlq_topic}, {} commits retried after a conflict",
        summary.messages,
        summary.reports,
        summary.metric_rows,
        summary.commits,
        summary.mentions,
        summary.links,
        summary.tests_added,
        summary.duplicates,
        summary.replaced_quoted,
        summary.already_in_lake,
        summary.dead_lettered,
        summary.conflicts_retried,
    );
    if summary.dead_lettered == 0 {
        return;
    }
    match letters {
        LetterTopic::Kept => eprintln!(
            "lkplake transform: {} messages could not be read and are not in the lake: they are in {dlq_topic} with the reason (`lkplake dlq` lists them)",
            summary.dead_lettered
        ),
        LetterTopic::EndsWithRun => eprintln!(
            "lkplake transform: {} messages could not be read and are not in the lake; their letters were in the embedded cluster, which ends with this run, \
             so the warnings above (\"cannot read this message\") are what is left of them: each names the partition, offset and reason. \
             To keep the letters themselves, run against a broker: `lkplake run --brokers HOST:PORT` stores them in {TRANSFORM_DLQ_TOPIC} for `lkplake dlq`",
            summary.dead_lettered
        ),
    }
}

/// `transform`; false when messages were dead-lettered in this run: input the lake does not
/// have, which makes the exit status 1 as an unreadable input does for `ingest`.
pub async fn run_transform(args: &TransformArgs, shutdown: &Shutdown) -> anyhow::Result<bool> {
    let mut config = TransformConfig::new(args.kafka.brokers()?, args.lake.clone());
    config.directions = directions(args.directions.as_ref()).await?;
    config.topic = args.kafka.topic.clone();
    config.dlq_topic = args.kafka.transform_dlq_topic.clone();
    config.group = args.group.clone();
    config.flush_rows = args.flush_rows;
    config.flush_interval = Duration::from_millis(args.flush_ms);
    config.until_idle = args.until_idle;
    config.instance_id = args.instance_id.clone();
    config.fetch_wait = Duration::from_millis(args.fetch_wait_ms);
    shutdown.on_signals("transform");
    let summary = transform(config, shutdown.cancelled()).await?;
    print_transform(&summary, &args.kafka.transform_dlq_topic, LetterTopic::Kept);
    Ok(summary.dead_lettered == 0)
}

/// The transformer of `run` over this run's topics.
async fn run_transform_config(
    args: &RunArgs,
    target: &KafkaTarget,
    dlq_topic: &str,
) -> anyhow::Result<TransformConfig> {
    let mut config = TransformConfig::new(&target.brokers, args.lake.clone());
    config.directions = directions(args.directions.as_ref()).await?;
    config.topic = target.reports_topic.clone();
    config.dlq_topic = dlq_topic.to_owned();
    // The embedded cluster has no CreateTopics: `run` made the topic on the cluster object.
    config.create_dlq_topic = target.create_topics;
    Ok(config)
}

/// Messages ingest produced that the transformer did not read as what they are, by kind.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Dropped {
    /// Reports produced and not read as reports.
    reports: u64,
    /// Mentions produced and not read as mentions.
    mentions: u64,
    /// Links produced and not read as links.
    links: u64,
    /// Of those, messages the transformer read but could not decode and dead-lettered: they
    /// reached it, so the cluster did not drop them.
    dead_lettered: u64,
}

impl Dropped {
    /// Messages the cluster dropped.
    fn lost(&self) -> u64 {
        (self.reports + self.mentions + self.links).saturating_sub(self.dead_lettered)
    }

    /// What `run` says of the drop, out of what ingest produced.
    fn explain(&self, ingested: &IngestSummary) -> String {
        let dead_lettered = if self.dead_lettered > 0 {
            format!(
                ", {} of them read but dead-lettered (see above)",
                self.dead_lettered
            )
        } else {
            String::new()
        };
        format!(
            "the embedded Kafka cluster dropped {} messages before they reached the lake ({} of {} reports, {} of {} mentions and {} of {} links were not read{dead_lettered}): it keeps only about 5 MB per partition. \
             What it kept is in the lake; for inputs this large, run against a broker with `lkplake run --brokers HOST:PORT` \
             (for example ./infra/tansu.sh start) and the rest is added",
            self.lost(),
            self.reports,
            ingested.reports,
            self.mentions,
            ingested.mentions,
            self.links,
            ingested.links
        )
    }
}

/// What the embedded cluster dropped before the transformer read it, if anything. Reports are
/// compared with reports, mentions with mentions and links with links, each counted once per offset: against a
/// count of every message read, a lost report could hide behind the mentions (and behind
/// messages read again after a rewind). A message the transformer dead-lettered is in neither
/// count, and it cannot say which kind it was: that many of the messages not read as either
/// reached it all the same.
fn dropped(ingested: &IngestSummary, transformed: &TransformSummary) -> Option<Dropped> {
    let reports = ingested.reports.saturating_sub(transformed.report_messages);
    let mentions = ingested
        .mentions
        .saturating_sub(transformed.mention_messages);
    let links = ingested.links.saturating_sub(transformed.link_messages);
    let dropped = Dropped {
        reports,
        mentions,
        links,
        dead_lettered: transformed.dead_lettered.min(reports + mentions + links),
    };
    (dropped.lost() > 0).then_some(dropped)
}

/// Partitions of the embedded cluster's report topic. librdkafka's mock cluster keeps about 5 MB
/// per partition and silently drops older record batches beyond that, before the transformer
/// reads them; a report's JSON is about 1.4 times its mail. One partition per 2 MB of input
/// keeps large uncompressed inputs whole; what still overflows is caught after the transform.
fn embedded_partitions(inputs: &Inputs) -> i32 {
    let partitions = inputs.bytes.div_ceil(2 << 20).clamp(6, 128);
    i32::try_from(partitions).unwrap_or(128)
}

/// This run's topics on the embedded cluster, made on the cluster object (its broker has no
/// CreateTopics): where ingest sends, and the transformer's dead-letter topic. The topics live
/// as long as this run while the lake outlives it: names of their own keep this run's offsets
/// from being read as an older run's progress in the lake.
fn embedded_topics<C: rdkafka::client::ClientContext>(
    mock: &rdkafka::mocking::MockCluster<'_, C>,
    inputs: &Inputs,
    follow: &FollowArgs,
) -> anyhow::Result<(KafkaTarget, String)> {
    let mut target = KafkaTarget::new(mock.bootstrap_servers());
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or_default();
    target.reports_topic = format!("{REPORTS_TOPIC}.run-{run_id}");
    target.dlq_topic = format!("{DLQ_TOPIC}.run-{run_id}");
    target.create_topics = false;
    let transform_dlq = format!("{TRANSFORM_DLQ_TOPIC}.run-{run_id}");
    mock.create_topic(&target.reports_topic, embedded_partitions(inputs), 1)
        .context("creating the report topic")?;
    mock.create_topic(&target.dlq_topic, 1, 1)
        .context("creating the dead-letter topic")?;
    mock.create_topic(&transform_dlq, 1, 1)
        .context("creating the transformer's dead-letter topic")?;
    if follow.follow {
        mock.create_topic(&follow.sources_topic, 1, 1)
            .context("creating the checkpoint topic")?;
    }
    Ok((target, transform_dlq))
}

pub async fn run_all(args: &RunArgs, shutdown: &Shutdown) -> anyhow::Result<bool> {
    // A lake that cannot be written fails the run before anything is read.
    drop(Lake::open(&args.lake).await?);
    let inputs = inputs(&args.paths).await?;
    // The embedded default: librdkafka's in-process mock cluster. It must outlive every
    // client, so it lives on this stack frame until the end. Its broker has no CreateTopics,
    // so the topics are made on the cluster directly.
    let mock;
    let (mut target, transform_dlq) = match &args.brokers {
        Some(brokers) => (KafkaTarget::new(brokers), TRANSFORM_DLQ_TOPIC.to_owned()),
        None => {
            mock = rdkafka::mocking::MockCluster::new(1)
                .context("starting the embedded Kafka cluster")?;
            let topics = embedded_topics(&mock, &inputs, &args.follow)?;
            eprintln!(
                "lkplake run: embedded Kafka cluster at {}",
                mock.bootstrap_servers()
            );
            topics
        }
    };
    target.max_message_bytes = usize::try_from(args.max_message_bytes).unwrap_or(MAX_MESSAGE_BYTES);
    let letter_topic = if args.brokers.is_some() {
        LetterTopic::Kept
    } else {
        LetterTopic::EndsWithRun
    };
    shutdown.on_signals("run");
    if args.follow.follow {
        // Ingest and transform side by side until stopped. On the embedded cluster the
        // checkpoints end with the run: a restart reads the sources again, and the transformer
        // skips what the lake already holds.
        let mut follow_config = args.follow.config(&args.paths)?;
        follow_config.create_topic = args.brokers.is_some();
        let config = run_transform_config(args, &target, &transform_dlq).await?;
        let (ingested, transformed) = tokio::join!(
            follow_into(&target, follow_config, shutdown),
            transform(config, shutdown.cancelled())
        );
        let transformed = transformed?;
        print_transform(&transformed, &transform_dlq, letter_topic);
        return Ok(ingested?.all_read() && transformed.dead_lettered == 0);
    }
    let ingested = ingest_into(&target, inputs, shutdown).await?;
    let mut config = run_transform_config(args, &target, &transform_dlq).await?;
    config.until_idle = true;
    let summary = transform(config, shutdown.cancelled()).await?;
    print_transform(&summary, &transform_dlq, letter_topic);
    // A transformer stopped by a signal read less than was produced; that is no drop.
    if args.brokers.is_none()
        && !shutdown.token().is_cancelled()
        && let Some(lost) = dropped(&ingested, &summary)
    {
        // librdkafka's mock cluster keeps about 5 MB per partition and drops the oldest
        // record batches beyond that, before the transformer has read them.
        anyhow::bail!(lost.explain(&ingested));
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
    Ok(complete(&ingested) && summary.dead_lettered == 0)
}

/// `dlq`, `dlq list`, `dlq replay`, `dlq show`; false when letters are left failing.
pub async fn run_dlq(args: &DlqArgs) -> anyhow::Result<bool> {
    let brokers = args.kafka.brokers()?.to_owned();
    match &args.command {
        None | Some(DlqCommand::List) => {
            // Ingest's letters (inputs that could not be parsed), then the transformer's
            // (messages of the reports topic it could not read).
            let mut listed = Vec::new();
            for topic in [&args.kafka.dlq_topic, &args.kafka.transform_dlq_topic] {
                listed.push((topic.as_str(), dead_letters(&brokers, topic).await?));
            }
            list_dead_letters(&listed);
            Ok(true)
        }
        Some(DlqCommand::Show { letter }) => {
            show_dead_letter(&brokers, &args.kafka.dlq_topic, letter).await?;
            Ok(true)
        }
        Some(DlqCommand::Replay { sources_topic }) => {
            replay_dead_letters(&args.kafka, brokers, sources_topic).await
        }
    }
}

/// Where `dlq show` finds a letter: `TOPIC:PARTITION:OFFSET`, or `OFFSET` or
/// `PARTITION:OFFSET` of `ingest_topic`, which is what they meant before the transformer had
/// letters of its own. Kafka's topic names hold no `:`, so the last two fields are the numbers.
fn letter_address<'a>(letter: &'a str, ingest_topic: &'a str) -> Option<(&'a str, i32, i64)> {
    let mut fields = letter.rsplitn(3, ':');
    let offset: i64 = fields.next()?.parse().ok()?;
    let partition: i32 = match fields.next() {
        Some(partition) => partition.parse().ok()?,
        None => 0,
    };
    let topic = fields.next().unwrap_or(ingest_topic);
    (!topic.is_empty() && !topic.contains(':')).then_some((topic, partition, offset))
}

/// `dlq show`: one letter's raw bytes to stdout.
async fn show_dead_letter(brokers: &str, ingest_topic: &str, letter: &str) -> anyhow::Result<()> {
    let Some((topic, partition, offset)) = letter_address(letter, ingest_topic) else {
        return Err(UsageError::owned(format!(
            "dlq show {letter}: name a letter as `lkplake dlq` lists it, TOPIC:PARTITION:OFFSET \
             (a bare OFFSET or PARTITION:OFFSET is one of ingest's letters, in {ingest_topic})"
        ))
        .into());
    };
    let letters = dead_letters(brokers, topic).await?;
    let Some(found) = letters
        .iter()
        .find(|l| l.partition == partition && l.offset == offset)
    else {
        return Err(UsageError::owned(format!(
            "{topic} holds no letter {partition}:{offset} ({} letters; `lkplake dlq` lists the letters of both dead-letter topics)",
            letters.len()
        ))
        .into());
    };
    let mut out = std::io::stdout().lock();
    std::io::Write::write_all(&mut out, &found.raw).context("writing to stdout")?;
    std::io::Write::flush(&mut out).context("writing to stdout")?;
    Ok(())
}

/// `dlq replay`: ingest's letters, then the transformer's; false while some still fail.
async fn replay_dead_letters(
    kafka: &KafkaArgs,
    brokers: String,
    sources_topic: &str,
) -> anyhow::Result<bool> {
    let mut target = KafkaTarget::new(brokers);
    target.reports_topic = kafka.topic.clone();
    target.dlq_topic = kafka.dlq_topic.clone();
    let summary = lkplake_ingest::replay::replay(&target, sources_topic).await?;
    for (letter, reason) in &summary.still_failing {
        eprintln!(
            "lkplake dlq replay: {}:{} ({}) still fails: {reason}",
            letter.partition, letter.offset, letter.source
        );
    }
    eprintln!(
        "lkplake dlq replay: {} letters: {} replayed now ({} reports, {} mentions and {} links produced to {}), {} replayed before, {} now not reports, {} still failing (left in {})",
        summary.letters,
        summary.replayed,
        summary.reports,
        summary.mentions,
        summary.links,
        target.reports_topic,
        summary.already_replayed,
        summary.not_reports,
        summary.still_failing.len(),
        target.dlq_topic
    );
    let dlq = &kafka.transform_dlq_topic;
    let transformed = replay_transform_letters(&target, dlq, sources_topic).await?;
    for (letter, reason) in &transformed.still_failing {
        let consumed = letter
            .consumed
            .as_ref()
            .map_or_else(String::new, |c| format!(" ({c})"));
        eprintln!(
            "lkplake dlq replay: {dlq}:{}:{}{consumed} still fails: {reason}",
            letter.partition, letter.offset
        );
    }
    eprintln!(
        "lkplake dlq replay: {} transformer letters: {} replayed now (produced to {} as they were), {} replayed before, {} still failing (left in {dlq})",
        transformed.letters,
        transformed.replayed,
        target.reports_topic,
        transformed.already_replayed,
        transformed.still_failing.len(),
    );
    Ok(summary.still_failing.is_empty() && transformed.still_failing.is_empty())
}

/// What `dlq replay` did with the transformer's letters.
#[derive(Debug, Default)]
struct TransformReplay {
    letters: u64,
    already_replayed: u64,
    replayed: u64,
    /// Letters this version cannot read either, each with why.
    still_failing: Vec<(DeadLetter, String)>,
}

/// Sends each of the transformer's letters whose bytes this version reads (an older
/// transformer refused them: say a newer `schema_version`) back to the reports topic as they
/// were, keyed by the report (or mention) key as ingest keys them, and records it as replayed
/// in `sources_topic` as ingest's replay does, so no later replay sends it again. A crash
/// between the two sends it again; the transformer keeps one copy of a key.
async fn replay_transform_letters(
    target: &KafkaTarget,
    dlq_topic: &str,
    sources_topic: &str,
) -> anyhow::Result<TransformReplay> {
    let letters = dead_letters(&target.brokers, dlq_topic).await?;
    let (brokers, topic) = (target.brokers.clone(), sources_topic.to_owned());
    let saved = tokio::task::spawn_blocking(move || Checkpoints::load(&brokers, &topic)).await??;
    let producer = lkplake_ingest::kafka::producer(&target.brokers)?;
    let mut checkpoints = Checkpointer::new(producer.clone(), sources_topic, saved);
    let mut summary = TransformReplay {
        letters: letters.len() as u64,
        ..TransformReplay::default()
    };
    for letter in letters {
        let key = dead_letter_key(dlq_topic, letter.partition, letter.offset);
        if checkpoints.saved.get(&key) == Some(&Position::Replayed) {
            summary.already_replayed += 1;
            continue;
        }
        // A letter's value is empty for a message that had none.
        let payload = (!letter.raw.is_empty()).then_some(letter.raw.as_slice());
        let message = match lkplake_transform::letters::decode(payload) {
            Ok(message) => message,
            Err(unreadable) => {
                let reason = unreadable.to_string();
                summary.still_failing.push((letter, reason));
                continue;
            }
        };
        let record = FutureRecord::to(&target.reports_topic)
            .key(message.key())
            .payload(letter.raw.as_slice());
        producer
            .send(record, Timeout::Never)
            .await
            .map_err(|(e, _)| e)
            .with_context(|| {
                format!(
                    "sending letter {dlq_topic}:{}:{} back to {}",
                    letter.partition, letter.offset, target.reports_topic
                )
            })?;
        checkpoints.save(key, Position::Replayed).await?;
        summary.replayed += 1;
    }
    Ok(summary)
}

async fn dead_letters(brokers: &str, topic: &str) -> anyhow::Result<Vec<DeadLetter>> {
    lkplake_kafka::reachable(brokers).await?;
    let (brokers, topic) = (brokers.to_owned(), topic.to_owned());
    Ok(tokio::task::spawn_blocking(move || read_dead_letters(&brokers, &topic)).await??)
}

/// One table of the letters of every topic: the topic each is in, where it is there, its
/// size, what it stands for (ingest's: the input and message; the transformer's: the reports
/// topic's partition and offset) and why it was refused.
fn list_dead_letters(topics: &[(&str, Vec<DeadLetter>)]) {
    let width = topics
        .iter()
        .map(|(topic, _)| topic.len())
        .max()
        .unwrap_or(0)
        .max("topic".len());
    println!(
        "{:<width$}  {:>9}  {:>8}  {:>8}  {:<40}  reason",
        "topic", "partition", "offset", "bytes", "source"
    );
    for (topic, letters) in topics {
        for l in letters {
            let source = l
                .consumed
                .as_ref()
                .map_or_else(|| l.source.to_string(), ToString::to_string);
            println!(
                "{topic:<width$}  {:>9}  {:>8}  {:>8}  {source:<40}  {}",
                l.partition,
                l.offset,
                l.size(),
                l.error
            );
        }
    }
    let counts: Vec<String> = topics
        .iter()
        .map(|(topic, letters)| format!("{} in {topic}", letters.len()))
        .collect();
    eprintln!("lkplake dlq: dead letters: {}", counts.join(", "));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What ingest produced: 5 reports, 3 mentions and 2 links.
    fn produced() -> IngestSummary {
        IngestSummary {
            reports: 5,
            mentions: 3,
            links: 2,
            ..IngestSummary::default()
        }
    }

    #[test]
    fn a_report_lost_behind_mentions_and_rereads_is_a_drop() {
        // Three of the five reports reached the transformer, the three mentions did, and two
        // messages were read again after a rewind: eight messages read, more than the five
        // reports produced, which the comparison of every message read with the reports
        // produced took for no loss.
        let transformed = TransformSummary {
            messages: 8,
            already_in_lake: 2,
            report_messages: 3,
            mention_messages: 3,
            link_messages: 2,
            ..TransformSummary::default()
        };
        assert!(transformed.messages >= produced().reports);
        let lost = dropped(&produced(), &transformed);
        assert_eq!(
            lost,
            Some(Dropped {
                reports: 2,
                mentions: 0,
                links: 0,
                dead_lettered: 0
            })
        );
        assert_eq!(lost.map(|l| l.lost()), Some(2));
    }

    #[test]
    fn a_lost_mention_is_a_drop_even_when_every_report_arrived() {
        let transformed = TransformSummary {
            messages: 7,
            report_messages: 5,
            mention_messages: 2,
            link_messages: 2,
            ..TransformSummary::default()
        };
        assert_eq!(
            dropped(&produced(), &transformed),
            Some(Dropped {
                reports: 0,
                mentions: 1,
                links: 0,
                dead_lettered: 0
            })
        );
    }

    #[test]
    fn a_lost_link_is_a_drop_even_when_every_report_and_mention_arrived() {
        let transformed = TransformSummary {
            report_messages: 5,
            mention_messages: 3,
            link_messages: 1,
            ..TransformSummary::default()
        };
        assert_eq!(
            dropped(&produced(), &transformed).map(|d| (d.links, d.lost())),
            Some((1, 1))
        );
    }

    #[test]
    fn every_report_and_mention_read_is_no_drop_whatever_was_written() {
        // Duplicates and quoted copies are read, not written: still no loss.
        let transformed = TransformSummary {
            messages: 8,
            reports: 3,
            mentions: 2,
            duplicates: 3,
            report_messages: 5,
            mention_messages: 3,
            link_messages: 2,
            ..TransformSummary::default()
        };
        assert_eq!(dropped(&produced(), &transformed), None);
    }

    #[test]
    fn a_dead_lettered_message_reached_the_transformer_and_is_no_drop() {
        // Eight messages read: four reports, three mentions and one the transformer could
        // not decode (a report, as it happens; it cannot tell).
        let transformed = TransformSummary {
            messages: 8,
            report_messages: 4,
            mention_messages: 3,
            link_messages: 2,
            dead_lettered: 1,
            ..TransformSummary::default()
        };
        assert_eq!(dropped(&produced(), &transformed), None);
    }

    #[test]
    fn a_drop_beside_a_dead_lettered_message_is_still_a_drop() {
        // Seven messages read, one of them dead-lettered: one of the eight produced is lost.
        let transformed = TransformSummary {
            messages: 7,
            report_messages: 3,
            mention_messages: 3,
            link_messages: 2,
            dead_lettered: 1,
            ..TransformSummary::default()
        };
        let lost = dropped(&produced(), &transformed);
        assert_eq!(
            lost,
            Some(Dropped {
                reports: 2,
                mentions: 0,
                links: 0,
                dead_lettered: 1
            })
        );
        assert_eq!(lost.map(|l| l.lost()), Some(1));
        assert_eq!(
            lost.map(|l| l.explain(&produced()))
                .as_deref()
                .and_then(|e| e.split(':').next()),
            Some(
                "the embedded Kafka cluster dropped 1 messages before they reached the lake (2 of 5 reports, 0 of 3 mentions and 0 of 2 links were not read, 1 of them read but dead-lettered (see above))"
            )
        );
    }

    #[test]
    fn dlq_show_takes_a_topic_and_a_bare_offset_stays_ingests() {
        let ingest = "lkp.reports.dlq";
        assert_eq!(letter_address("7", ingest), Some((ingest, 0, 7)));
        assert_eq!(letter_address("2:7", ingest), Some((ingest, 2, 7)));
        assert_eq!(
            letter_address("lkp.reports.transform.dlq:0:7", ingest),
            Some(("lkp.reports.transform.dlq", 0, 7))
        );
        for wrong in [
            "",
            "x",
            "2:x",
            ":0:7",
            "lkp.reports.transform.dlq:0:",
            "a:b:0:7",
        ] {
            assert_eq!(letter_address(wrong, ingest), None, "{wrong}");
        }
    }
}
