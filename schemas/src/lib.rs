//! `lkplake-schemas`: the shared vocabulary of lkplake.
//!
//! The [`Report`], [`Mention`] and [`Link`] models that the ingest side produces and sends
//! over Kafka as JSON ([`Message`]), their JSON Schema, the metric knowledge every stage needs
//! (program prefix, how a change is printed, which way is better), and the canonical keys that
//! make copies of one report recognisable. Pure: no I/O, no async, so every crate can depend on it cheaply.

#![warn(missing_docs)]

pub mod decimal;
mod error_kind;
pub mod key;
pub mod link;
pub mod mention;
pub mod metric;
pub mod report;
pub mod tables;

pub use error_kind::ErrorKind;
pub use link::{Link, LinkKind, link_key};
pub use mention::{Mention, Message, mention_key};
pub use report::{
    ChangeUnit, Commit, FailRuns, Failure, Headline, Kind, Machine, Report, Row, SCHEMA_VERSION,
    Source, Test, Value,
};

/// The JSON Schema of a [`Message`] (a report or a mention), generated from the types. The
/// checked-in copy at `schemas/report.schema.json` must equal this (a test enforces it).
pub fn report_json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Message)).unwrap_or(serde_json::Value::Null)
}
