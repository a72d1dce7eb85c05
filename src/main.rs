//! The `lkplake` binary: the command line over the library crates. Each subcommand module
//! turns flags into a crate's config and prints its summary; this file owns the runtime, the
//! shutdown, and what each failure means as an exit status.

mod args;
mod export;
mod generate;
mod parse;
mod pipeline;
mod regressions;
mod serve;
mod sql;
mod trend;
mod triage;
mod units;

use clap::{Parser, Subcommand};
use lkplake_schemas::ErrorKind;
use lkplake_shutdown::Shutdown;
use std::process::ExitCode;

/// lkplake turns the kernel test robot's performance reports into a data lake.
#[derive(Debug, Parser)]
#[command(name = "lkplake", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Parse reports from files, directories, mbox[.gz] archives or `-` (stdin) and print
    /// them: one JSON object per report per line, or a table.
    Parse(parse::ParseArgs),
    /// Parse reports and produce them to Kafka (`lkp.reports`; failures to `lkp.reports.dlq`).
    Ingest(pipeline::IngestArgs),
    /// Consume reports from Kafka into the lake, exactly once.
    Transform(pipeline::TransformArgs),
    /// The whole pipeline in one command: embedded broker, ingest, transform, sample query.
    Run(pipeline::RunArgs),
    /// List the dead-letter topics: what ingest could not parse and what the transformer could
    /// not read, and why.
    Dlq(pipeline::DlqArgs),
    /// Compact small files per partition and vacuum unreferenced ones.
    Compact(pipeline::CompactArgs),
    /// Rewrite the lake in the newest format (a no-op on a lake already in it); run it again
    /// after an interruption.
    Upgrade(pipeline::UpgradeArgs),
    /// Generate realistic synthetic reports (for benchmarks and tests).
    Gen(generate::GenArgs),
    /// List the culprits the robot reported, with their status: open, discussed, fix-posted,
    /// fixed, recovered, or the one a person gave.
    Regressions(regressions::RegressionsArgs),
    /// Give a culprit a status by hand (acknowledged, investigating, invalid, wontfix, fixed),
    /// kept in the lake's `triage` table with who, when and why.
    Triage(triage::TriageArgs),
    /// Run SQL over the lake, or open an interactive SQL shell.
    Sql(sql::SqlArgs),
    /// Serve the lake over the Postgres wire protocol (psql, psycopg, Grafana).
    Serve(serve::ServeArgs),
    /// Find the change points of every series and save them to the lake's `changes` table.
    Trend(trend::TrendArgs),
    /// Export the lake's history for other tools (OpenMetrics for Prometheus' backfill).
    Export(export::ExportArgs),
}

fn tokio_main(command: Command) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let ok = |clean: bool| {
        if clean {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(Status::Partial as u8)
        }
    };
    let shutdown = Shutdown::new();
    runtime.block_on(async {
        match command {
            Command::Ingest(args) => pipeline::run_ingest(&args, &shutdown).await.map(ok),
            Command::Transform(args) => pipeline::run_transform(&args, &shutdown).await.map(ok),
            Command::Run(args) => pipeline::run_all(&args, &shutdown).await.map(ok),
            Command::Compact(args) => pipeline::run_compact(&args)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Upgrade(args) => pipeline::run_upgrade(&args)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Sql(args) => sql::run(&args).await.map(ok),
            Command::Regressions(args) => regressions::run(&args).await.map(ok),
            Command::Triage(args) => triage::run(&args).await.map(ok),
            Command::Serve(args) => serve::run(&args, &shutdown)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Trend(args) => trend::run(&args).await.map(|()| ExitCode::SUCCESS),
            Command::Export(args) => export::run(&args).await.map(|()| ExitCode::SUCCESS),
            Command::Dlq(args) => pipeline::run_dlq(&args).await.map(ok),
            Command::Parse(_) | Command::Gen(_) => Ok(ExitCode::SUCCESS),
        }
    })
}

/// What an exit status means; docs/CLI.md, "Exit statuses", lists the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Some inputs could not be read or parsed, the transformer dead-lettered messages it
    /// could not read, a statement failed, or a stop came before the end of the input;
    /// everything else was done.
    Partial = 1,
    /// The command line or a file it names is wrong (clap uses 2 for its own errors too).
    Usage = 2,
    /// No Kafka broker answers, or the broker failed the request.
    Broker = 3,
    /// The lake cannot be opened, read or written.
    Lake = 4,
    /// Anything else that stopped the command.
    Failed = 5,
}

/// A mistake in what the user asked for.
#[derive(Debug)]
struct UsageError(std::borrow::Cow<'static, str>);

impl UsageError {
    fn owned(text: String) -> Self {
        Self(std::borrow::Cow::Owned(text))
    }
}

impl From<&'static str> for UsageError {
    fn from(text: &'static str) -> Self {
        Self(std::borrow::Cow::Borrowed(text))
    }
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The exit status of a failed command: the kind of the outermost cause that has one.
fn status(error: &anyhow::Error) -> Status {
    match error.chain().find_map(kind) {
        Some(ErrorKind::Input) => Status::Partial,
        Some(ErrorKind::Usage) => Status::Usage,
        Some(ErrorKind::Broker) => Status::Broker,
        Some(ErrorKind::Lake) => Status::Lake,
        Some(ErrorKind::Failed) | None => Status::Failed,
    }
}

/// The kind an error of lkplake's crates says it is.
fn kind(cause: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    if cause.is::<UsageError>() {
        return Some(ErrorKind::Usage);
    }
    macro_rules! kind_of {
        ($($error:ty),+) => {
            $(if let Some(e) = cause.downcast_ref::<$error>() {
                return Some(e.kind());
            })+
        };
    }
    kind_of!(
        lkplake_query::policy::Refused,
        lkplake_lake::LakeError,
        lkplake_kafka::BrokerError,
        lkplake_ingest::KafkaIngestError,
        lkplake_transform::TransformError,
        lkplake_query::QueryError,
        lkplake_serve::ServeError,
        lkplake_trend::TrendError,
        lkplake_parse::SourceError,
        lkplake_pipeline::PipelineError
    );
    None
}

/// delta-rs 1.1, after an upload fails (a full disk), calls object_store's `BufWriter::abort`,
/// which panics by design once shutdown has begun ("Already shut down"); delta-rs catches that
/// panic and logs a warning of its own. The default hook would still print the caught panic
/// with a backtrace, as if lkplake had crashed: this hook leaves out that one panic and
/// reports every other as before.
fn quiet_caught_library_panics() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let caught_by_delta = info.location().is_some_and(|at| {
            at.file().contains("object_store") && at.file().ends_with("buffered.rs")
        }) && info.payload().downcast_ref::<&str>()
            == Some(&"Already shut down");
        if !caught_by_delta {
            report(info);
        }
    }));
}

fn main() -> ExitCode {
    quiet_caught_library_panics();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LKPLAKE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,buoyant_kernel=off")),
        )
        .with_writer(std::io::stderr)
        // Colours only on a terminal: a log redirected to a file or a pipe stays greppable.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Parse(args) => parse::run(&args),
        Command::Gen(args) => generate::run(&args).map(|()| ExitCode::SUCCESS),
        command => tokio_main(command),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lkplake: {}", describe(&e));
            ExitCode::from(status(&e) as u8)
        }
    }
}

/// The error and its causes, each cause once (library errors often already print their source,
/// and anyhow's `{:#}` would repeat it) and without the backtrace delta-kernel's carry.
fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = lkplake_lake::without_backtrace(&cause.to_string());
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
