//! `lkplake parse`: reports, mentions and links to stdout, failures to stderr.

use anyhow::Context;
use clap::{Args, ValueEnum};
use lkplake_parse::Parsed;
use lkplake_parse::parallel::{default_threads, parse_input};
use lkplake_parse::source::expand_paths;
use lkplake_schemas::{Link, Mention, Message, Report, Source};
use std::io::{BufWriter, Write};
use std::num::NonZeroUsize;
use std::ops::ControlFlow;

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct ParseArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Json, env = "LKPLAKE_FORMAT")]
    format: Format,
    /// Threads that decode and parse (one more reads); by default one per core but the one the
    /// reading thread takes. Output keeps the order of the input whatever the number.
    #[arg(long, env = "LKPLAKE_PARSE_THREADS")]
    threads: Option<NonZeroUsize>,
    /// Files, directories (recursive; Maildir works), .mbox / .mbox.gz archives, `-` for stdin.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    /// One JSON object per report, mention or link per line, as sent to Kafka.
    Json,
    /// One line per report test, mention or link, for people.
    Table,
}

#[derive(Debug, Default)]
struct Counts {
    messages: u64,
    reports: u64,
    quoted: u64,
    mentions: u64,
    links: u64,
    not_reports: u64,
    failed: u64,
}

pub fn run(args: &ParseArgs) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut counts = Counts::default();
    let mut unreadable = 0u64;
    // Archive messages their repository lacks (a partial clone): counted, and the exit says so.
    let mut missing = 0u64;
    if matches!(args.format, Format::Table) {
        writeln!(
            out,
            "{:<32}  {:<20}  {:<11}  {:<22}  {:<16}  {:>5}  headline",
            "report_key", "date", "kind", "testcase", "machine", "rows"
        )?;
    }
    let mut written = Ok(());
    let threads = args.threads.map_or_else(default_threads, NonZeroUsize::get);
    for input in expand_paths(&args.paths)? {
        let read = parse_input(&input, threads, &mut |outcome| {
            counts.messages += 1;
            match outcome.parsed {
                Ok(Parsed::NotAReport) => counts.not_reports += 1,
                Ok(parsed) => {
                    for message in parsed.into_messages() {
                        written = match &message {
                            Message::Report(report) => {
                                counts.reports += 1;
                                counts.quoted += u64::from(report.quoted);
                                write_report(&mut out, args.format, report)
                            }
                            Message::Mention(mention) => {
                                counts.mentions += 1;
                                write_mention(&mut out, args.format, mention)
                            }
                            Message::Link(link) => {
                                counts.links += 1;
                                write_link(&mut out, args.format, link)
                            }
                        };
                        if written.is_err() {
                            return ControlFlow::Break(());
                        }
                    }
                }
                Err(reason) => {
                    counts.failed += 1;
                    eprintln!("lkplake parse: {}: {reason}", describe(&outcome.source));
                }
            }
            ControlFlow::Continue(())
        });
        std::mem::replace(&mut written, Ok(())).context("writing to stdout")?;

        match read {
            Ok(read) => missing += read.missing,
            Err(e) => {
                eprintln!("lkplake parse: {e}");
                unreadable += 1;
            }
        }
    }
    out.flush().context("writing to stdout")?;

    eprintln!(
        "lkplake parse: {} messages: {} reports ({} quoted copies), {} mentions, {} links, {} not reports, {} failed{}{}",
        counts.messages,
        counts.reports,
        counts.quoted,
        counts.mentions,
        counts.links,
        counts.not_reports,
        counts.failed,
        if unreadable > 0 {
            format!(", {unreadable} inputs unreadable")
        } else {
            String::new()
        },
        crate::pipeline::missing_messages(missing),
    );
    Ok(if counts.failed + unreadable + missing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn write_report(out: &mut impl Write, format: Format, report: &Report) -> anyhow::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer(&mut *out, report)?;
            writeln!(out)?;
        }
        Format::Table => {
            for test in &report.tests {
                let headline = test
                    .headline
                    .as_ref()
                    .map(|h| format!("{} {:+}%", h.metric, h.change_pct))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{:<32}  {:<20}  {:<11}  {:<22}  {:<16}  {:>5}  {}{}",
                    report.report_key,
                    report
                        .date
                        .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                        .unwrap_or_default(),
                    report
                        .kind
                        .map(|k| k.as_str())
                        .unwrap_or("-")
                        .get(..7)
                        .unwrap_or("-"),
                    test.testcase,
                    test.tbox_group,
                    test.rows.len(),
                    headline,
                    if report.quoted { "  (quoted)" } else { "" },
                )?;
            }
        }
    }
    Ok(())
}

fn write_mention(out: &mut impl Write, format: Format, mention: &Mention) -> anyhow::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer(&mut *out, mention)?;
            writeln!(out)?;
        }
        Format::Table => {
            let cites = match (&mention.metric, mention.change_pct) {
                (Some(metric), Some(change)) => format!("{metric} {change}%"),
                (Some(metric), None) => metric.clone(),
                _ => String::new(),
            };
            writeln!(
                out,
                "{:<32}  {:<20}  {:<11}  {:<22}  {:<16}  {:>5}  cites {} {}  (mention by {})",
                mention.mention_key,
                mention
                    .date
                    .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                    .unwrap_or_default(),
                "mention",
                mention.testcase.as_deref().unwrap_or("-"),
                mention.machine.as_deref().unwrap_or("-"),
                mention.rows.len(),
                mention.commit.as_deref().unwrap_or("-"),
                cites,
                mention.sender.as_deref().unwrap_or("-"),
            )?;
        }
    }
    Ok(())
}

fn write_link(out: &mut impl Write, format: Format, link: &Link) -> anyhow::Result<()> {
    match format {
        Format::Json => {
            serde_json::to_writer(&mut *out, link)?;
            writeln!(out)?;
        }
        Format::Table => writeln!(
            out,
            "{:<32}  {:<20}  {:<11}  {:<22}  {:<16}  {:>5}  {} {}  (link by {})",
            link.link_key,
            link.date
                .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                .unwrap_or_default(),
            "link",
            "-",
            "-",
            "",
            link.kind.as_str(),
            link.target,
            link.sender.as_deref().unwrap_or("-"),
        )?,
    }
    Ok(())
}

/// Where a message is, in words: `file, message 3`, or `inbox epoch 0 commit 1a2b…`.
fn describe(source: &Source) -> String {
    match (&source.commit, source.epoch) {
        (Some(commit), epoch) => format!(
            "{} epoch {} commit {commit}",
            source.path,
            epoch.unwrap_or(0)
        ),
        _ => format!("{}, message {}", source.path, source.index),
    }
}
