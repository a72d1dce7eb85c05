//! `lkplake-transform`: consumes `lkp.reports`, normalizes each report into rows of the
//! `metrics` and `reports` tables and commits them to the Delta Lake tables with the Kafka
//! offsets they cover. The pipeline issue builds it; until then the crate only reserves its
//! place in the dependency graph (`schemas` ← `transform`).
