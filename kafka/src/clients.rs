//! How lkplake's Kafka clients are configured, in one place: every producer, consumer and
//! admin client of the pipeline starts from one of these.

use rdkafka::config::ClientConfig;

/// A client of `brokers` (bootstrap addresses, comma-separated), nothing else set.
pub fn client(brokers: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    config
}

/// A consumer that reads by assignment and never commits offsets; `group` only names it to
/// the broker (librdkafka assigns partitions only to a consumer with a group id).
pub fn reader(brokers: &str, group: &str) -> ClientConfig {
    let mut config = client(brokers);
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false");
    config
}

/// The producer of reports and dead letters: `acks=all`, record batches of at most
/// `message_max_bytes`, and a send retried until the broker stored it.
///
/// Not idempotent, on purpose. The lake keeps one copy of a report key whatever the topic
/// holds, and the transformer's letters may be stored twice, so a copy sent twice costs
/// nothing, while librdkafka's idempotent producer answers a failed batch by raising its
/// epoch on its own (`rd_kafka_idemp_drain_epoch_bump`). Tansu 0.6's SQLite engine panics on a
/// produce with an epoch it never issued (`tansu_storage::lite`, "more or less than one row"),
/// and its storage refuses every produce from then on: a durable Tansu restarted under an
/// ingest failed all 2,000 reports that way.
pub fn producer(brokers: &str, message_max_bytes: usize) -> ClientConfig {
    let mut config = client(brokers);
    config
        .set("enable.idempotence", "false")
        .set("acks", "all")
        .set("message.max.bytes", message_max_bytes.to_string());
    config
}
