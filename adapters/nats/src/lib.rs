//! The NATS JetStream destination and inbox source of QueueBox (async-nats): outbox rows published
//! to a subject, and a stream read into the inbox.
//!
//! # Destination
//!
//! [`NatsPublisher`] implements the [`queuebox_ports::publish::Publisher`] port for one configured
//! destination. With `jetStream: true` (the default) a row is `sent` only once JetStream
//! acknowledged the message, so a stream must hold the subject (no stream is a `rejected` failure
//! that follows the retry path). Every message carries `Nats-Msg-Id` = the row id, so JetStream's
//! duplicate window drops the second copy of a publish retried after a lost acknowledgement. With
//! `jetStream: false` it publishes on core NATS and reports success once the server read the
//! bytes: no proof that anything received it. Publishes overlap on one client. Wiring:
//!
//! ```text
//! name                   <- the key under `destinations`
//! servers, credentials   <- `servers` (a secret), `username`/`password` or `token`
//! subject, subject_from  <- `subject`, `subjectFrom` (a route's routingKeyTemplate is ignored)
//! jet_stream, timeout    <- `jetStream`, `timeoutMs`
//! headers                <- the destination `headers`, in file order
//! max_reason_bytes       <- `http.maxErrorBodyBytes`
//! ```
//!
//! # Inbox source
//!
//! [`NatsSource`] reads one stream through a durable pull consumer into the
//! [`queuebox_ports::ingest::Ingest`] port (docs/how-to/bridge-*.md). It never creates the stream; it creates the
//! durable consumer when missing (see `source/setup.rs`). Each message is acknowledged after its
//! row committed (or was a duplicate, filtered, or kept dead), negatively acknowledged when the
//! store failed, and redelivered by JetStream after `ackWaitMs` when QueueBox died in between.
//! Wiring:
//!
//! ```text
//! name                     <- the key under `sources`
//! servers, credentials     <- `servers`, `username`/`password` or `token`
//! stream, durable          <- `stream`, `durable`
//! filter_subject           <- `filterSubject`
//! ack_wait, batch_size     <- `ackWaitMs`, `batchSize`
//! ```
//!
//! Failure reasons and logs never hold a server URL's password or a token. The inbox metrics are
//! counted by the ingest pipeline; this crate records none.
//!
//! # Dependencies
//!
//! This crate depends on the domain and the ports only; it never depends on the application or on
//! another adapter.

mod connect;
mod error;
mod failure;
mod headers;
mod link;
mod options;
mod publisher;
mod source;
mod subject;

pub use connect::NatsCredentials;
pub use error::NatsError;
pub use headers::{NATS_MSG_ID, X_ATTEMPT, X_MESSAGE_ID, X_MESSAGE_KEY, X_TOPIC};
pub use options::{
    DEFAULT_MAX_REASON_BYTES, DEFAULT_RECONNECT_DELAY_MAX, DEFAULT_RECONNECT_DELAY_MIN,
    DEFAULT_TIMEOUT, NatsPublisherOptions,
};
pub use publisher::NatsPublisher;
pub use source::{
    DEFAULT_ACK_WAIT, DEFAULT_BATCH_SIZE, DEFAULT_DRAIN_TIMEOUT, DEFAULT_NAK_DELAY_MAX,
    DEFAULT_NAK_DELAY_MIN, DEFAULT_RETRY_DELAY_MAX, DEFAULT_RETRY_DELAY_MIN, DEFAULT_SETUP_TIMEOUT,
    NatsSource, NatsSourceOptions,
};

/// The name of the backend this crate serves, used in start-up messages.
pub const BACKEND: &str = "nats";
