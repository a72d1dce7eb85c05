//! Whether a broker answers, asked once before a command starts its work: librdkafka itself
//! retries an unreachable broker for ever and reports only timeouts of whatever operation
//! waited on it ("Admin operation error: OperationTimedOut" after a minute), never that nothing
//! listens at the address.

use crate::BrokerError;
use crate::on_own_thread;
use rdkafka::consumer::{BaseConsumer, Consumer};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long a broker has to answer a metadata request before it counts as unreachable.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(10);

/// Asks `brokers` for the cluster metadata; an error names the address and why it failed
/// within about [`REACH_TIMEOUT`].
pub async fn reachable(brokers: &str) -> Result<(), BrokerError> {
    let owned = brokers.to_owned();
    on_own_thread(
        "broker-probe",
        REACH_TIMEOUT + Duration::from_secs(3),
        move || probe(&owned),
    )
    .await
    .map_err(|e| match e {
        BrokerError::Thread { reason, .. } => BrokerError::Unreachable {
            brokers: brokers.to_owned(),
            reason,
        },
        other => other,
    })
}

/// Why no bootstrap address accepts a TCP connection ("127.0.0.1:1: Connection refused (os
/// error 111)"), or `None` when one does. librdkafka knows the same but reports it through
/// callbacks that fire too late to be quoted; the operating system's answer is immediate.
fn refused(brokers: &str) -> Option<String> {
    let mut reasons = Vec::new();
    for address in brokers.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let host_port = address.rsplit_once("://").map_or(address, |(_, rest)| rest);
        let resolved = match host_port.to_socket_addrs() {
            Ok(resolved) => resolved.collect::<Vec<_>>(),
            Err(e) => {
                reasons.push(format!("{host_port}: {e}"));
                continue;
            }
        };
        for socket in resolved {
            match TcpStream::connect_timeout(&socket, Duration::from_secs(3)) {
                Ok(_) => return None,
                Err(e) => reasons.push(format!("{socket}: {e}")),
            }
        }
    }
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

fn probe(brokers: &str) -> Result<(), BrokerError> {
    if let Some(reason) = refused(brokers) {
        return Err(BrokerError::Unreachable {
            brokers: brokers.to_owned(),
            reason,
        });
    }
    // Something accepts connections: ask it for metadata, as a Kafka broker answers.
    let consumer: BaseConsumer = crate::clients::reader(brokers, "lkplake-broker-probe")
        .create()
        .map_err(|source| BrokerError::Client {
            brokers: brokers.to_owned(),
            source: Box::new(source),
        })?;
    consumer
        .fetch_metadata(None, REACH_TIMEOUT)
        .map(drop)
        .map_err(|e| BrokerError::Unreachable {
            brokers: brokers.to_owned(),
            reason: format!("it accepts connections but answered no metadata request within {REACH_TIMEOUT:?} ({e}); is it a Kafka broker?"),
        })
}
