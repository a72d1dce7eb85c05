//! `lkplake sql`: one statement from the command line, or an interactive shell with history
//! and multi-line input.

use anyhow::Context;
use clap::{Args, ValueEnum};
use datafusion::sql::parser::DFParser;
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use lkplake_query::format::{self, Format};
use lkplake_query::{Engine, EngineConfig};
use rustyline::error::ReadlineError;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OutputFormat {
    Table,
    Csv,
    Json,
}

impl From<OutputFormat> for Format {
    fn from(f: OutputFormat) -> Self {
        match f {
            OutputFormat::Table => Format::Table,
            OutputFormat::Csv => Format::Csv,
            OutputFormat::Json => Format::Json,
        }
    }
}

#[derive(Debug, Args)]
pub struct SqlArgs {
    #[command(flatten)]
    pub lake: crate::args::LakeArg,
    /// How to print results.
    #[arg(long, env = "LKPLAKE_FORMAT", value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    /// Memory all running queries may use together, e.g. 2G; beyond it sorts and aggregations
    /// spill to disk or fail.
    #[arg(long, env = "LKPLAKE_MEMORY_LIMIT", value_parser = crate::units::bytes)]
    pub memory_limit: Option<usize>,
    /// SQL to run (statements separated by `;`). Without it, an interactive shell starts.
    pub sql: Option<String>,
}

pub async fn run(args: &SqlArgs) -> anyhow::Result<bool> {
    let config = EngineConfig {
        memory_limit: args.memory_limit,
        target_partitions: None,
        query_threads: None,
        keep_views: false,
    };
    let engine = Engine::open(&args.lake.url, &config).await?;
    match &args.sql {
        Some(sql) => {
            let mut out = std::io::stdout().lock();
            for statement in statements(sql)? {
                execute(&engine, &statement, args.format.into(), &mut out).await?;
            }
            Ok(true)
        }
        None => shell(&engine, args.format.into()).await.map(|()| true),
    }
}

/// Splits `sql` into statements, so that `a; b` runs both. The read-only policy is checked on
/// the text as written, before splitting re-renders it.
fn statements(sql: &str) -> anyhow::Result<Vec<String>> {
    lkplake_query::policy::check_sql(sql)?;
    let parsed = DFParser::parse_sql_with_dialect(sql, &PostgreSqlDialect {})
        .with_context(|| format!("cannot parse: {sql}"))?;
    Ok(parsed.iter().map(ToString::to_string).collect())
}

/// Runs one statement and prints its rows in `format`.
pub(crate) async fn execute(
    engine: &Engine,
    sql: &str,
    format: Format,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let frame = engine.sql(sql).await?;
    let schema = std::sync::Arc::new(frame.schema().as_arrow().clone());
    // As a QueryError, so that a lake file that cannot be read exits with the lake's status.
    let batches = frame
        .collect()
        .await
        .map_err(lkplake_query::QueryError::from)?;
    format::write(out, &schema, &batches, format)?;
    Ok(())
}

fn history_path() -> Option<PathBuf> {
    std::env::var_os("LKPLAKE_HISTORY")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".lkplake_history")))
}

const HELP: &str = "\
End a statement with `;` (it may span lines). Tables: metrics, reports, failures, mention_mails;
views: comparisons, series, headlines, failure_comparisons, mentions, discussion, regressions (see
docs/QUERY.md). \\d lists them, \\d NAME shows columns, \\q quits.";

async fn shell(engine: &Engine, format: Format) -> anyhow::Result<()> {
    let mut editor = rustyline::DefaultEditor::new()?;
    let history = history_path();
    if let Some(path) = &history {
        // A missing history file is the normal first run.
        let _ = editor.load_history(path);
    }
    eprintln!("lkplake sql — {HELP}");
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() {
            "lkplake> "
        } else {
            "     ..> "
        };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        let trimmed = line.trim();
        if buffer.is_empty() {
            let command = match trimmed {
                "" => continue,
                "\\q" | "quit" | "exit" => break,
                "\\?" | "help" => {
                    eprintln!("{HELP}");
                    continue;
                }
                "\\d" => Some(
                    "SELECT table_name, table_type FROM information_schema.tables \
                     WHERE table_schema = 'public' ORDER BY table_name"
                        .to_owned(),
                ),
                d if d.starts_with("\\d ") => Some(format!(
                    "SELECT column_name, data_type, is_nullable FROM information_schema.columns \
                     WHERE table_schema = 'public' AND table_name = '{}' ORDER BY ordinal_position",
                    d[3..].trim().replace('\'', "''")
                )),
                _ => None,
            };
            if let Some(sql) = command {
                let _ = editor.add_history_entry(trimmed);
                report(execute(engine, &sql, format, &mut std::io::stdout().lock()).await);
                continue;
            }
        }
        buffer.push_str(&line);
        buffer.push('\n');
        if !trimmed.ends_with(';') {
            continue;
        }
        let text = std::mem::take(&mut buffer);
        let _ = editor.add_history_entry(text.trim());
        match statements(&text) {
            Ok(statements) => {
                for statement in statements {
                    report(
                        execute(engine, &statement, format, &mut std::io::stdout().lock()).await,
                    );
                }
            }
            Err(e) => report(Err(e)),
        }
    }
    if let Some(path) = &history
        && let Err(e) = editor.save_history(path)
    {
        eprintln!("lkplake: could not save history to {}: {e}", path.display());
    }
    Ok(())
}

/// Errors in the shell are printed and the shell goes on.
fn report(result: anyhow::Result<()>) {
    if let Err(e) = result {
        eprintln!("error: {e:#}");
    }
}
