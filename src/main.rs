//! The `lkplake` binary: thin command-line wiring of the library crates.

mod export;
mod generate;
mod parse;
mod pipeline;
mod serve;
mod sql;
mod trend;
mod units;

use clap::{Parser, Subcommand};
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
    /// List the dead-letter topic: what could not be parsed, and why.
    Dlq(pipeline::DlqArgs),
    /// Compact small files per partition and vacuum unreferenced ones.
    Compact(pipeline::CompactArgs),
    /// Generate realistic synthetic reports (for benchmarks and tests).
    Gen(generate::GenArgs),
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
            ExitCode::FAILURE
        }
    };
    runtime.block_on(async {
        match command {
            Command::Ingest(args) => pipeline::run_ingest(&args).await.map(ok),
            Command::Transform(args) => pipeline::run_transform(&args)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Run(args) => pipeline::run_all(&args).await.map(ok),
            Command::Compact(args) => pipeline::run_compact(&args)
                .await
                .map(|()| ExitCode::SUCCESS),
            Command::Sql(args) => sql::run(&args).await.map(ok),
            Command::Serve(args) => serve::run(&args).await.map(|()| ExitCode::SUCCESS),
            Command::Trend(args) => trend::run(&args).await.map(|()| ExitCode::SUCCESS),
            Command::Export(args) => export::run(&args).await.map(|()| ExitCode::SUCCESS),
            Command::Parse(_) | Command::Dlq(_) | Command::Gen(_) => Ok(ExitCode::SUCCESS),
        }
    })
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LKPLAKE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,buoyant_kernel=off")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Parse(args) => parse::run(&args),
        Command::Dlq(args) => pipeline::run_dlq(&args).map(|()| ExitCode::SUCCESS),
        Command::Gen(args) => generate::run(&args).map(|()| ExitCode::SUCCESS),
        command => tokio_main(command),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lkplake: {}", describe(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes, each cause once: library errors often already print their source,
/// and anyhow's `{:#}` would repeat it.
fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
