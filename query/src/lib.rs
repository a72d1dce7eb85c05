//! `lkplake-query`: DataFusion SQL over the lake, the SQL command line, the Postgres wire
//! server, the Prometheus exporter and trend analysis. The query issue builds it; until then
//! the crate only reserves its place in the dependency graph (`schemas` ← `query`).
