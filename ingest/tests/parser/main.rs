//! Specification of the report parser, against real reports: the five seeds, eighteen
//! corpus mails with expected values written from reading them, the whole 2,014-mail corpus,
//! synthetic damage applied to real reports, and property tests.

mod corpus;
mod damage;
mod fixtures;
mod properties;
mod seeds;
