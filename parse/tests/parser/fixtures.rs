//! Loading fixtures and parsing them.

use lkplake_parse::{ParseError, Parsed, parse_message};
use lkplake_schemas::{Report, Source};
use std::path::PathBuf;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn seed_path(name: &str) -> PathBuf {
    repo_root().join("examples/reports").join(name)
}

pub fn read(path: &PathBuf) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read fixture {}: {e}", path.display()))
}

pub fn parse_bytes(bytes: &[u8]) -> Result<Parsed, ParseError> {
    parse_message(bytes, &Source::file("fixture", 0))
}

/// Parses bytes that must hold exactly one report.
pub fn one_report(bytes: &[u8]) -> Report {
    match parse_bytes(bytes) {
        Ok(Parsed::Reports(mut reports)) if reports.len() == 1 => reports.remove(0),
        other => panic!("expected one report, got {other:?}"),
    }
}

/// `(fail, runs, %reproduction printed before the column)` per commit column.
pub type FailColumns = Vec<(u32, u32, Option<f64>)>;

/// A test's fail:runs rows as `(name, columns)`, in printed order.
pub fn fail_rows(test: &lkplake_schemas::Test) -> Vec<(String, FailColumns)> {
    test.failures
        .iter()
        .map(|f| {
            let columns = f
                .columns
                .iter()
                .map(|c| (c.fail, c.runs, c.reproduction_pct))
                .collect();
            (f.metric.clone(), columns)
        })
        .collect()
}

pub fn seed(name: &str) -> Report {
    one_report(&read(&seed_path(name)))
}
