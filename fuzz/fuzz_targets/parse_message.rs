//! The parser must answer every input with reports, "not a report" or a typed error: never a
//! panic, never a hang.

#![no_main]

use libfuzzer_sys::fuzz_target;
use lkplake_schemas::Source;

fuzz_target!(|data: &[u8]| {
    let source = Source::file("fuzz", 0);
    let _ = lkplake_parse::parse_message(data, &source);
});
