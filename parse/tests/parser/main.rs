//! Specification of the report parser, against real reports: the five seeds, eighteen
//! corpus mails with expected values written from reading them, the whole 2,014-mail corpus,
//! its functional reports, the replies that cite reports and the follow-ups, synthetic damage
//! applied to real reports, and property tests.

#![allow(
    clippy::disallowed_methods,
    reason = "tests drive the program from plain threads, not from a runtime worker"
)]

mod corpus;
mod damage;
mod failures;
mod fixtures;
mod follow_ups;
mod links;
mod mentions;
mod properties;
mod seeds;
