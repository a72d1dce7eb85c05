//! The `lkplake` binary: thin command-line wiring of the library crates.

mod parse;

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
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LKPLAKE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Parse(args) => parse::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lkplake: {e:#}");
            ExitCode::from(2)
        }
    }
}
