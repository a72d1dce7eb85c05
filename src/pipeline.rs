//! `lkplake ingest`, `transform`, `run`, `dlq` and `compact`: flags into the ingest, transform
//! and pipeline crates' configs, signals, and the progress and summaries they print.

use crate::UsageError;
use crate::args::{DirectionsArg, LakeArg, LakeFormatArg, MessageSizeArg, SourcesTopicArg};
use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lkplake_ingest::checkpoint::{Checkpointer, Checkpoints, Position, dead_letter_key};
use lkplake_ingest::follow::FollowConfig;
use lkplake_ingest::kafka::{IngestSummary, KafkaTarget};
use lkplake_ingest::letter::{DeadLetter, read_dead_letters};
use lkplake_kafka::{DLQ_TOPIC, REPORTS_TOPIC, TRANSFORM_DLQ_TOPIC, Topics};
use lkplake_lake::{Lake, LakeTables, LakeUrl};
use lkplake_pipeline::{Observer, RunConfig, follow_observed, ingest_observed};
use lkplake_query::{Engine, EngineConfig};
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
    /// The topics on the brokers given; a usage error when none are.
    pub fn topics(&self) -> Result<Topics, UsageError> {
        self.topics_if_given().ok_or(UsageError::from(
            "no broker given: pass --brokers HOST:PORT or set LKPLAKE_BROKERS (`lkplake run` starts an embedded one)",
        ))
    }

    /// The topics on the brokers given, if any are.
    pub fn topics_if_given(&self) -> Option<Topics> {
        Some(Topics {
            brokers: self.brokers.clone()?,
            reports: self.topic.clone(),
            dlq: self.dlq_topic.clone(),
            transform_dlq: self.transform_dlq_topic.clone(),
        })
    }
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Partitions of the report topic when it has to be created.
    #[arg(long, env = "LKPLAKE_PARTITIONS", default_value_t = 6)]
    pub partitions: i32,
    #[command(flatten)]
    pub max_message_bytes: MessageSizeArg,
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
    #[command(flatten)]
    pub sources_topic: SourcesTopicArg,
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
            sources_topic: self.sources_topic.name.clone(),
            create_topic: true,
        })
    }
}

#[derive(Debug, Args)]
pub struct TransformArgs {
    #[command(flatten)]
    pub kafka: KafkaArgs,
    #[command(flatten)]
    pub lake: LakeArg,
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
    #[command(flatten)]
    pub directions: DirectionsArg,
    #[command(flatten)]
    pub lake_format: LakeFormatArg,
    /// The longest a fetch waits at the broker for data, in milliseconds. Tansu waits this
    /// long after every fetch, so it bounds how fast a transformer reads from it; against
    /// Kafka it is how often an idle transformer asks for more.
    #[arg(long, env = "LKPLAKE_FETCH_WAIT_MS", default_value_t = 10)]
    pub fetch_wait_ms: u64,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub lake: LakeArg,
    /// Use these brokers instead of the embedded in-process cluster.
    #[arg(long, env = "LKPLAKE_BROKERS")]
    pub brokers: Option<String>,
    #[command(flatten)]
    pub directions: DirectionsArg,
    #[command(flatten)]
    pub lake_format: LakeFormatArg,
    #[command(flatten)]
    pub max_message_bytes: MessageSizeArg,
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
        #[command(flatten)]
        sources_topic: SourcesTopicArg,
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
    #[command(flatten)]
    pub lake: LakeArg,
    /// Rewrite every `metrics` partition sorted, also those already in one file (a lake
    /// compacted before compaction sorted).
    #[arg(long)]
    pub resort: bool,
}

/// `lkplake upgrade`: the lake rewritten to the newest format.
#[derive(Debug, Args)]
pub struct UpgradeArgs {
    #[command(flatten)]
    pub lake: LakeArg,
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

/// `--follow` starts: one summary line per round that finds something new follows.
fn print_following(config: &FollowConfig) {
    eprintln!(
        "lkplake ingest: following {} path(s), looking every {:?}{}; SIGTERM stops",
        config.paths.len(),
        config.poll,
        if config.fetch { ", fetching first" } else { "" }
    );
}

/// Whether everything the user gave was ingested.
fn complete(summary: &IngestSummary) -> bool {
    summary.all_read() && summary.stopped.is_none()
}

/// Whether a follower read everything it found: stopped on purpose is a follower's normal end.
fn followed(summary: &IngestSummary) -> bool {
    summary.all_read()
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
    let mut target = KafkaTarget::new(args.kafka.topics()?);
    target.partitions = args.partitions;
    target.max_message_bytes = args.max_message_bytes.get();
    shutdown.on_signals("ingest");
    let printer = Printer::default();
    if args.follow.follow {
        let config = args.follow.config(&args.paths)?;
        let summary = follow_observed(config, &target, &printer, shutdown.token()).await?;
        return Ok(followed(&summary));
    }
    let inputs = lkplake_pipeline::inputs(&args.paths).await?;
    let summary = ingest_observed(inputs, &target, &printer, shutdown.token()).await?;
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
    let topics = args.kafka.topics()?;
    let mut config = TransformConfig::new(topics.clone(), args.lake.url.clone());
    config.directions = args.directions.table().await?;
    config.group = args.group.clone();
    config.flush_rows = args.flush_rows;
    config.flush_interval = Duration::from_millis(args.flush_ms);
    config.until_idle = args.until_idle;
    config.instance_id = args.instance_id.clone();
    config.fetch_wait = Duration::from_millis(args.fetch_wait_ms);
    config.lake_format = args.lake_format.format;
    shutdown.on_signals("transform");
    let summary = transform(config, shutdown.cancelled()).await?;
    print_transform(&summary, &topics.transform_dlq, LetterTopic::Kept);
    Ok(summary.dead_lettered == 0)
}

/// What `ingest` and `run` print as they go: ingest's progress bar and summaries, the
/// transformer's. One bar per command: ingest reads its inputs once.
#[derive(Debug, Default)]
struct Printer {
    bar: std::sync::OnceLock<ProgressBar>,
}

impl Observer for Printer {
    fn embedded(&self, bootstrap: &str) {
        eprintln!("lkplake run: embedded Kafka cluster at {bootstrap}");
    }

    fn ingesting(&self, bytes: u64) {
        let _ = self.bar.set(progress_bar(bytes));
    }

    fn ingest_progress(&self, bytes: u64) {
        if let Some(bar) = self.bar.get() {
            bar.set_position(bytes);
        }
    }

    fn following(&self, config: &FollowConfig) {
        print_following(config);
    }

    fn ingested(&self, summary: &IngestSummary) {
        if let Some(bar) = self.bar.get() {
            bar.finish_and_clear();
        }
        print_ingest(summary);
    }

    fn transformed(&self, summary: &TransformSummary, topics: &Topics, embedded: bool) {
        let letters = if embedded {
            LetterTopic::EndsWithRun
        } else {
            LetterTopic::Kept
        };
        print_transform(summary, &topics.transform_dlq, letters);
    }
}

pub async fn run_all(args: &RunArgs, shutdown: &Shutdown) -> anyhow::Result<bool> {
    let follow = if args.follow.follow {
        Some(args.follow.config(&args.paths)?)
    } else {
        None
    };
    let config = RunConfig {
        lake: args.lake.url.clone(),
        paths: args.paths.clone(),
        brokers: args.brokers.clone(),
        directions: args.directions.table().await?,
        lake_format: args.lake_format.format,
        max_message_bytes: args.max_message_bytes.get(),
        follow,
    };
    shutdown.on_signals("run");
    let printer = Printer::default();
    let outcome = lkplake_pipeline::run(config, &printer, shutdown.token()).await?;
    let clean = outcome.transformed.dead_lettered == 0;
    if args.follow.follow {
        return Ok(followed(&outcome.ingested) && clean);
    }
    // Stopped before the end: the summaries above say what was done.
    if !shutdown.token().is_cancelled() {
        print_sample(&args.lake.url).await?;
    }
    Ok(complete(&outcome.ingested) && clean)
}

/// `run`'s last word: what the lake holds, per testcase and machine.
async fn print_sample(lake: &LakeUrl) -> anyhow::Result<()> {
    let engine = Engine::open(lake, &EngineConfig::default()).await?;
    let sql = "SELECT testcase, machine, count(DISTINCT report_key) AS reports, count(*) AS observations \
               FROM metrics GROUP BY testcase, machine ORDER BY testcase, machine";
    let batches = engine.sql(sql).await?.collect().await?;
    println!("{sql}");
    println!(
        "{}",
        datafusion::arrow::util::pretty::pretty_format_batches(&batches)?
    );
    Ok(())
}

/// `dlq`, `dlq list`, `dlq replay`, `dlq show`; false when letters are left failing.
pub async fn run_dlq(args: &DlqArgs) -> anyhow::Result<bool> {
    let topics = args.kafka.topics()?;
    let brokers = &topics.brokers;
    match &args.command {
        None | Some(DlqCommand::List) => {
            // Ingest's letters (inputs that could not be parsed), then the transformer's
            // (messages of the reports topic it could not read).
            let mut listed = Vec::new();
            for topic in [&topics.dlq, &topics.transform_dlq] {
                listed.push((topic.as_str(), dead_letters(brokers, topic).await?));
            }
            list_dead_letters(&listed);
            Ok(true)
        }
        Some(DlqCommand::Show { letter }) => {
            show_dead_letter(brokers, &topics.dlq, letter).await?;
            Ok(true)
        }
        Some(DlqCommand::Replay { sources_topic }) => {
            replay_dead_letters(topics, &sources_topic.name).await
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
async fn replay_dead_letters(topics: Topics, sources_topic: &str) -> anyhow::Result<bool> {
    let target = KafkaTarget::new(topics);
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
        target.topics.reports,
        summary.already_replayed,
        summary.not_reports,
        summary.still_failing.len(),
        target.topics.dlq
    );
    let dlq = &target.topics.transform_dlq;
    let transformed = replay_transform_letters(&target, sources_topic).await?;
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
        target.topics.reports,
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
    sources_topic: &str,
) -> anyhow::Result<TransformReplay> {
    let dlq_topic = &target.topics.transform_dlq;
    let letters = dead_letters(&target.topics.brokers, dlq_topic).await?;
    let (brokers, topic) = (target.topics.brokers.clone(), sources_topic.to_owned());
    let saved = tokio::task::spawn_blocking(move || Checkpoints::load(&brokers, &topic)).await??;
    let producer = lkplake_ingest::kafka::producer(&target.topics.brokers)?;
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
        let record = FutureRecord::to(&target.topics.reports)
            .key(message.key())
            .payload(letter.raw.as_slice());
        producer
            .send(record, Timeout::Never)
            .await
            .map_err(|(e, _)| e)
            .with_context(|| {
                format!(
                    "sending letter {dlq_topic}:{}:{} back to {}",
                    letter.partition, letter.offset, target.topics.reports
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
    let mut lake = Lake::open(&args.lake.url).await?;
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

pub async fn run_upgrade(args: &UpgradeArgs) -> anyhow::Result<()> {
    let url = &args.lake.url;
    // The reader's open: a wrong `--lake` is an error, not a new lake.
    LakeTables::open(url).await?;
    let mut lake = Lake::open(url).await?;
    let summary = lake.upgrade().await?;
    if summary.from == lake.format() {
        eprintln!(
            "lkplake upgrade: the lake at {url} is in format {} already: nothing to do",
            summary.from
        );
    } else {
        eprintln!(
            "lkplake upgrade: the lake at {url} is in format {} now (was {}): {} metrics partitions, {} rows as {}",
            lake.format(),
            summary.from,
            summary.partitions,
            summary.rows_read,
            summary.rows_written
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
