//! `lkplake-query`: the read-only engine over the lake. A DataFusion `SessionContext` over the
//! Delta tables plus the views users reach for first (`comparisons`, `series`, `headlines`),
//! kept current as writers commit; the statement policy that keeps it read-only; the output
//! formats of `lkplake sql`.
//!
//! Queries execute on a thread pool of their own ([`executor`]), so a heavy query cannot stall
//! what runs on the I/O runtime next to it: Postgres logins, `/metrics` scrapes, Kafka probes.
//! The Postgres wire server and the exporter are `lkplake-serve`; trend analysis is
//! `lkplake-trend`; nothing here writes the lake.

#![warn(missing_docs)]

pub mod columns;
pub mod damaged;
pub mod date_trunc;
pub mod decimal;
pub mod engine;
pub mod error;
pub mod executor;
pub mod format;
pub mod grouped;
pub mod limit;
pub mod materialized;
pub mod policy;
mod referenced;
pub mod unpivot;

pub use engine::{Engine, EngineConfig};
pub use error::QueryError;
