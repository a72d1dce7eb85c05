//! `lkplake-schemas`: the shared vocabulary of lkplake.
//!
//! The [`Report`] model that the ingest side produces and sends over Kafka as
//! JSON, its JSON Schema, the metric knowledge every stage needs (program prefix, how a change
//! is printed, which way is better), and the canonical keys that make copies of one report
//! recognisable. Pure: no I/O, no async, so every crate can depend on it cheaply.

#![warn(missing_docs)]

pub mod key;
pub mod metric;
pub mod report;
pub mod tables;

pub use report::{
    ChangeUnit, Commit, FailRuns, Failure, Headline, Kind, Machine, Report, Row, SCHEMA_VERSION,
    Source, Test, Value,
};

/// The JSON Schema of [`Report`], generated from the types. The checked-in copy at
/// `schemas/report.schema.json` must equal this (a test enforces it).
pub fn report_json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Report)).unwrap_or(serde_json::Value::Null)
}
