//! Reads and parses every message of the given inputs (files, directories, mbox archives,
//! public-inbox archives) the way `lkplake parse` does, without printing the reports, and says
//! how many it read, found and refused: the reading-and-parsing path alone, for
//! `infra/bench/archive.sh`, buildable in release without Kafka or the lake
//! (`cargo run --release -p lkplake-ingest --no-default-features --example read_archive PATH`).

use lkplake_ingest::source::{self, expand_paths};
use lkplake_ingest::{Parsed, parse_message};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let paths: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let inputs = match expand_paths(&paths) {
        Ok(inputs) => inputs,
        Err(e) => {
            eprintln!("read_archive: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (mut messages, mut bytes, mut reports, mut mentions, mut not_reports, mut failed) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for input in &inputs {
        let read = source::read(input, &mut |message| {
            messages += 1;
            bytes += message.bytes.len() as u64;
            match parse_message(&message.bytes, &message.source) {
                Ok(Parsed::Reports(found)) => reports += found.len() as u64,
                Ok(Parsed::Mention { reports: found, .. }) => {
                    reports += found.len() as u64;
                    mentions += 1;
                }
                Ok(Parsed::NotAReport) => not_reports += 1,
                Err(_) => failed += 1,
            }
            ControlFlow::Continue(())
        });
        if let Err(e) = read {
            eprintln!("read_archive: {e}");
            return ExitCode::FAILURE;
        }
    }
    println!(
        "{messages} messages, {bytes} message bytes: {reports} reports, {mentions} mentions, {not_reports} not reports, {failed} failed"
    );
    ExitCode::SUCCESS
}
