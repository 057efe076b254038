//! The Kafka destination and inbox source of QueueBox (rdkafka over librdkafka): outbox rows
//! published to a topic, and topics consumed into the inbox by a consumer group.
//!
//! # Destination
//!
//! [`KafkaPublisher`] implements the [`queuebox_ports::publish::Publisher`] port for one
//! configured destination with one idempotent producer (`acks=all`, `enable.idempotence=true`).
//! A publish returns `Ok` only once the partition leader and its in-sync replicas have the record.
//! Publishes overlap; the dispatcher keeps one row of a key in flight, and the idempotent producer
//! keeps the order of one partition across its own retries.
//!
//! ```text
//! name                      <- the key under `destinations`
//! connection                <- `bootstrapServers`, `securityProtocol`, `sasl*`
//! topic, topic_from         <- `topic` (a literal name or an address template), `topicFrom`
//! key_template              <- `keyTemplate` (default `{{ key }}`; a route's routingKeyTemplate wins)
//! headers                   <- the destination `headers`, in file order
//! timeout                   <- `timeoutMs` (at least 2000): librdkafka's message.timeout.ms
//! max_reason_bytes          <- `http.maxErrorBodyBytes`
//! ```
//!
//! Failure kinds: a record too large or a topic name the broker refuses is `invalid_message`; an
//! unknown topic and any other refusal of the broker is `rejected`; a refused login or a missing
//! ACL is `auth`; no broker reachable is `unreachable` (also when the budget ran out while no
//! broker answered); no acknowledgement within `timeoutMs` is `timeout`.
//!
//! # Inbox source
//!
//! [`KafkaSource`] consumes `topics` in the consumer group `groupId` into the
//! [`queuebox_ports::ingest::Ingest`] port; see its docs for the offset rules.
//!
//! # Dependencies
//!
//! This crate depends on the domain and the ports only; it never depends on the application or on
//! another adapter. librdkafka is compiled from the rdkafka crate's sources and linked statically
//! (OpenSSL and zlib from the system).

mod client;
mod context;
mod error;
mod failure;
mod options;
mod publisher;
mod record;
mod source;

pub use client::SASL_MECHANISMS;
pub use error::KafkaError;
pub use options::{
    DEFAULT_KEY_TEMPLATE, DEFAULT_LINGER, DEFAULT_MAX_REASON_BYTES, DEFAULT_TIMEOUT,
    KafkaConnection, KafkaPublisherOptions, MIN_TIMEOUT, SecurityProtocol,
};
pub use publisher::KafkaPublisher;
pub use record::{X_ATTEMPT, X_MESSAGE_ID, X_TOPIC};
pub use source::{
    AutoOffsetReset, DEFAULT_MAX_POLL_RECORDS, DEFAULT_PROBE_INTERVAL, DEFAULT_RETRY_DELAY_MAX,
    DEFAULT_RETRY_DELAY_MIN, KafkaSource, KafkaSourceOptions, KafkaToken,
};

/// The name of the backend this crate serves, used in start-up messages.
pub const BACKEND: &str = "kafka";
