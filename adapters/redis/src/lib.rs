//! The Redis Streams destination and inbox source of QueueBox (the `redis` crate on tokio):
//! outbox rows added to a stream, and a stream read into the inbox through a consumer group.
//!
//! # Destination
//!
//! [`RedisPublisher`] implements the [`queuebox_ports::publish::Publisher`] port for one
//! configured destination. Each row becomes one `XADD` entry whose fields are the row id
//! (`x-message-id`), topic, attempt and key, the static and row headers, and the `payload` (see
//! `fields`); a row is `sent` only once Redis answered the `XADD` with the new entry's id. With
//! `maxLen` the add trims the stream (`MAXLEN ~ n`, or `MAXLEN = n` with
//! `maxLenApproximate: false`). The first add creates the stream. Redis has no duplicate window:
//! a publish retried after a lost answer adds a second entry with the same `x-message-id`, which
//! a consumer deduplicates on (QueueBox's own Redis source does so through its idempotency key).
//! Wiring:
//!
//! ```text
//! name                   <- the key under `destinations`
//! url                    <- `url` (a secret: it may carry a password)
//! stream, stream_from    <- `stream`, `streamFrom` (a route's routingKeyTemplate is ignored)
//! trim                   <- `maxLen`, `maxLenApproximate`
//! timeout                <- `timeoutMs`
//! headers                <- the destination `headers`, in file order
//! max_reason_bytes       <- `http.maxErrorBodyBytes`
//! ```
//!
//! # Inbox source
//!
//! [`RedisSource`] reads one stream through a consumer group into the
//! [`queuebox_ports::ingest::Ingest`] port; see the `source` module.
//!
//! Failure reasons and logs never hold the URL's password. The inbox metrics are counted by the
//! ingest pipeline; this crate records none.
//!
//! # Dependencies
//!
//! This crate depends on the domain and the ports only; it never depends on the application or on
//! another adapter.

mod connect;
mod error;
mod fields;
mod options;
mod publisher;
mod source;

pub use error::RedisError;
pub use fields::{PAYLOAD, X_ATTEMPT, X_MESSAGE_ID, X_MESSAGE_KEY, X_TOPIC};
pub use options::{
    DEFAULT_MAX_REASON_BYTES, DEFAULT_RECONNECT_DELAY_MAX, DEFAULT_RECONNECT_DELAY_MIN,
    DEFAULT_TIMEOUT, RedisPublisherOptions, Trim,
};
pub use publisher::RedisPublisher;
pub use source::{
    DEFAULT_BATCH_SIZE, DEFAULT_BLOCK, DEFAULT_CLAIM_IDLE, DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_DELIVERIES, DEFAULT_RETRY_DELAY_MAX,
    DEFAULT_RETRY_DELAY_MIN, DEFAULT_STORE_RETRY_MAX, DEFAULT_STORE_RETRY_MIN, RedisSource,
    RedisSourceOptions, RedisToken,
};

/// The name of the backend this crate serves, used in start-up messages.
pub const BACKEND: &str = "redis";
