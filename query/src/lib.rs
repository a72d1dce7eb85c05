//! The read side of the lake: a DataFusion `SessionContext` over the Delta tables `metrics` and
//! `reports` plus the views users reach for first (`comparisons`, `series`, `headlines`), kept
//! current as the transformer commits; the output formats of `lkplake sql`; and the Postgres
//! wire server that psql, Python and Grafana talk to.
//!
//! The reports and metrics are written by `lkplake-transform` alone, so a query can never
//! change what the pipeline's exactly-once bookkeeping relies on; the only tables written here
//! are the ones derived from them (`changes`, `trend_series` from [`trend`]).

pub(crate) mod columns;
pub mod engine;
pub mod error;
pub mod exporter;
pub mod format;
pub mod lake;
pub mod limit;
pub mod pg;
pub mod policy;
pub mod trend;

pub use engine::{Engine, EngineConfig};
pub use error::QueryError;
