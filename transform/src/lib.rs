//! `lkplake-transform`: consumes `lkp.reports`, normalizes each report into rows of the
//! `metrics` and `reports` tables and commits them to the Delta Lake tables with the Kafka
//! offsets they cover, so a restarted transformer resumes exactly where the lake ends.

pub mod consumer;
pub mod ends;
pub mod health;
pub mod lake;
pub mod normalize;
pub mod tracker;
