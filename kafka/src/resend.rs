//! Which failed sends are worth making again, for the stages that produce: ingest's reports and
//! dead letters, and the transformer's dead letters.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use std::time::Duration;

/// How long one message is sent again after failures a broker's restart causes.
pub const RESEND_FOR: Duration = Duration::from_secs(60);

/// Whether a failed send is worth sending again: the broker refused it for the state it was
/// in, not for the message. librdkafka retries a send that failed for want of a broker
/// itself, but takes an `UNKNOWN_SERVER_ERROR` as final (`rd_kafka_handle_Produce_error`), and
/// that is what a Tansu being stopped answers to the produces in flight: its storage stops
/// before its listener. The same message sent once the broker is back is stored.
pub fn worth_resending(error: &KafkaError) -> bool {
    matches!(
        error,
        KafkaError::MessageProduction(RDKafkaErrorCode::Unknown)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_for_the_brokers_state_is_sent_again_and_one_for_the_message_is_not() {
        let produce = KafkaError::MessageProduction;
        assert!(worth_resending(&produce(RDKafkaErrorCode::Unknown)));
        assert!(!worth_resending(&produce(
            RDKafkaErrorCode::MessageSizeTooLarge
        )));
        assert!(!worth_resending(&produce(RDKafkaErrorCode::InvalidRecord)));
        // librdkafka gave up after its own `message.timeout.ms`: the broker is gone, say so.
        assert!(!worth_resending(&produce(
            RDKafkaErrorCode::MessageTimedOut
        )));
        assert!(!worth_resending(&produce(
            RDKafkaErrorCode::TopicAuthorizationFailed
        )));
    }
}
