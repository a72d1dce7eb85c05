//! Reads and parses every message of the given inputs (files, directories, mbox archives,
//! public-inbox archives) the way `lkplake parse` does, without printing the reports, and says
//! how many it read, found and refused: the reading-and-parsing path alone, for
//! `infra/bench/archive.sh`, buildable in release without Kafka or the lake
//! (`cargo run --release -p lkplake-parse --example read_archive PATH`).
//!
//! `LKPLAKE_PARSE_THREADS` sets how many threads decode and parse (one per core but the reading thread's by default).
//!
//! With `--verify-prefilter` first, every message is also decoded and parsed in full, and a
//! message that the byte-level prefilter settles as "not a report" while the full parse finds
//! something, or whose links read from its raw body differ from the full parse's, is named and
//! counted: the check that the prefilter loses nothing on an archive.

use lkplake_parse::decode::decode;
use lkplake_parse::parallel::{default_threads, parse_input};
use lkplake_parse::parser::parse_document;
use lkplake_parse::parser::parse_links;
use lkplake_parse::prefilter::{Plain, read_plain, read_raw};
use lkplake_parse::source::{self, expand_paths};
use lkplake_parse::{Parsed, parse_message};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let verify = args
        .first()
        .is_some_and(|a| a.as_os_str() == "--verify-prefilter");
    let paths = if verify { args.split_off(1) } else { args };
    let threads = std::env::var("LKPLAKE_PARSE_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(default_threads);
    let inputs = match expand_paths(&paths) {
        Ok(inputs) => inputs,
        Err(e) => {
            eprintln!("read_archive: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (mut messages, mut bytes, mut reports, mut mentions, mut not_reports, mut failed) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut links = 0u64;
    let (mut settled, mut lost) = (0u64, 0u64);
    for input in &inputs {
        let mut count = |parsed: &Result<Parsed, _>| match parsed {
            Ok(Parsed::Reports(found)) => reports += found.len() as u64,
            Ok(Parsed::Mention {
                reports: found,
                links: made,
                ..
            }) => {
                reports += found.len() as u64;
                mentions += 1;
                links += made.len() as u64;
            }
            Ok(Parsed::Links(made)) => links += made.len() as u64,
            Ok(Parsed::NotAReport) => not_reports += 1,
            Err(_) => failed += 1,
        };
        let read = if verify {
            source::read(input, &mut |message| {
                messages += 1;
                bytes += message.bytes.len() as u64;
                let light = match read_plain(&message.bytes, read_raw(&message.bytes)) {
                    Plain::Settled => Some(Ok(Parsed::NotAReport)),
                    Plain::Links(body) => Some(parse_links(&message.bytes, body, &message.source)),
                    Plain::Decode => None,
                };
                if let Some(light) = light {
                    settled += 1;
                    let full = parse_document(&decode(&message.bytes), &message.source);
                    if full != light {
                        lost += 1;
                        eprintln!(
                            "read_archive: the prefilter read {} message {} {:?} as {light:?}, the full parse gives {full:?}",
                            message.source.path, message.source.index, message.source.commit
                        );
                    }
                }
                count(&parse_message(&message.bytes, &message.source));
                ControlFlow::Continue(())
            })
        } else {
            // As `lkplake parse` reads: on every core, results in input order.
            parse_input(input, threads, &mut |outcome| {
                messages += 1;
                bytes += outcome.size as u64;
                count(&outcome.parsed);
                ControlFlow::Continue(())
            })
        };
        if let Err(e) = read {
            eprintln!("read_archive: {e}");
            return ExitCode::FAILURE;
        }
    }
    println!(
        "{messages} messages, {bytes} message bytes: {reports} reports, {mentions} mentions, {links} links, {not_reports} not reports, {failed} failed"
    );
    if verify {
        println!(
            "prefilter: read {settled} messages without decoding their body; {lost} of them read differently in full"
        );
        if lost > 0 {
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
