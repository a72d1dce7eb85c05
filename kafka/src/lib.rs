//! `lkplake-kafka`: what the producer, the transformer and the server's pipeline probe each need
//! from a broker beyond sending and receiving: whether it answers at all (and why not), the
//! real end of every partition, and the range of offsets a topic holds; reading a topic to its
//! end ([`read`]); the topics every stage shares ([`topics`]) and the dead-letter format
//! ([`letter`]); and which failed sends are worth
//! making again ([`worth_resending`]).
//!
//! Every client is configured by [`clients`].
//!
//! Every call here blocks in librdkafka, so each runs on a thread of its own with a deadline:
//! a broker that never answers must cost a bounded wait, never a hung runtime or exit.

#![warn(missing_docs)]

pub mod clients;
pub mod ends;
mod error;
pub mod letter;
mod reach;
pub mod read;
mod resend;
pub mod topics;
mod watermarks;

pub use ends::partition_ends_within;
pub use error::BrokerError;
pub use reach::{REACH_TIMEOUT, reachable};
pub use read::{QuietAtEnd, is_partition_end, read_topic};
pub use resend::{RESEND_FOR, worth_resending};
pub use topics::{DLQ_TOPIC, REPORTS_TOPIC, SOURCES_TOPIC, TRANSFORM_DLQ_TOPIC, Topics};
pub use watermarks::{Watermarks, watermarks};

/// Runs `work` on a named thread of its own and waits for it at most `limit`. Not
/// `spawn_blocking`: dropping a librdkafka client can wait without bound for it to close, and
/// the runtime waits for its blocking tasks when it shuts down, so a stuck call there would
/// hang the exit.
pub(crate) async fn on_own_thread<T: Send + 'static>(
    name: &str,
    limit: std::time::Duration,
    work: impl FnOnce() -> Result<T, BrokerError> + Send + 'static,
) -> Result<T, BrokerError> {
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let _ = answer.send(work());
        })
        .map_err(|e| BrokerError::Thread {
            what: name.to_owned(),
            reason: e.to_string(),
        })?;
    match tokio::time::timeout(limit, answered).await {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err(BrokerError::Thread {
            what: name.to_owned(),
            reason: "it ended without an answer".to_owned(),
        }),
        Err(_) => Err(BrokerError::Thread {
            what: name.to_owned(),
            reason: format!("no answer within {limit:?}"),
        }),
    }
}
