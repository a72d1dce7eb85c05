//! The `lkplake` binary as a user runs it: `parse` on its own, and the pipeline against a real
//! Kafka-protocol broker (Tansu, started by `./infra/test.sh`).

#![allow(
    clippy::disallowed_methods,
    reason = "tests drive the program from plain threads, not from a runtime worker"
)]

mod archives;
mod clients;
mod common;
mod dashboards;
mod faults;
mod formats;
mod lifecycle;
mod limits;
mod objectstore;
mod parse;
mod pipeline;
mod policy;
mod prometheus;
mod restarts;
mod serve;
mod sql;
mod trend;
