//! The transformer's decoding of a message on the report topic (`Message::decode`, what the
//! ledger calls on every Kafka payload) must answer any bytes with a message or an error,
//! never a panic: a payload it cannot read is counted and skipped, not a crashed transformer.

#![no_main]

use libfuzzer_sys::fuzz_target;
use lkplake_schemas::Message;

fuzz_target!(|data: &[u8]| {
    if let Ok(message) = Message::decode(data) {
        // The transformer keys every message it read.
        let _ = message.key();
    }
});
