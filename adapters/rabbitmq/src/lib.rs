//! The RabbitMQ destination and inbox source of QueueBox (lapin): outbox rows published to an
//! exchange, and a queue consumed into the inbox.
//!
//! # Destination
//!
//! [`RabbitmqPublisher`] implements the [`queuebox_ports::publish::Publisher`] port for one
//! configured destination. It declares its exchange (durable, of the configured type; a templated
//! exchange is declared once per rendered name), publishes every message with the `mandatory`
//! flag on a channel in confirm mode, and reports success only on a broker ack that no
//! `basic.return` preceded. Publishes overlap on the one channel, each waiting for its own confirm.
//!
//! The exchange comes from the destination's address template (or `exchangeFrom` column); the
//! routing key from the matched route's `routingKeyTemplate` (rendered by the dispatcher, carried
//! in [`OutboundMessage::route_key`](queuebox_ports::publish::OutboundMessage::route_key)), else
//! from the destination's `routingKeyTemplate` with the route's missing-field default.
//!
//! Wiring (in the binary): one publisher per `destinations.<name>` of type `rabbitmq`, built once
//! at start and held as `Arc<dyn Publisher>`:
//!
//! ```text
//! name                               <- the key under `destinations`
//! url                                <- `url` (a secret)
//! exchange, exchange_from            <- `exchange`, `exchangeFrom`
//! exchange_type, delivery_mode       <- `exchangeType`, `deliveryMode`
//! routing_key_template               <- the destination `routingKeyTemplate`
//! headers                            <- the destination `headers`, in file order
//! max_reason_bytes                   <- `http.maxErrorBodyBytes`
//! timeout                            <- DEFAULT_TIMEOUT (the configuration has no key for it)
//! ```
//!
//! [`RabbitmqPublisher::new`] checks the settings without connecting; [`RabbitmqPublisher::connect`]
//! may be called at start to connect and declare a literal exchange early.
//!
//! Failure reasons are masked (the URL and its password never appear) and cut to
//! [`RabbitmqPublisherOptions::max_reason_bytes`].
//!
//! # Inbox source
//!
//! [`RabbitmqSource`] consumes one queue into the [`queuebox_ports::ingest::Ingest`] port (page
//! 08). Wiring (in the binary): one source per `sources.<name>` of type `rabbitmq`:
//!
//! ```text
//! name             <- the key under `sources` (handed to the ingest pipeline)
//! url              <- `connectionUrl` (a secret)
//! queue_name       <- `queueName`
//! prefetch_count   <- `prefetchCount` (default 10; 0 is refused)
//! declare_queue    <- `declareQueue` (default false)
//! reconnect/requeue delays, drain and setup timeouts <- the DEFAULT_* constants (no config keys)
//! ```
//!
//! `eventTypeFromHeader` and `attributeHeaders` are read by the ingest pipeline, not here.
//!
//! ```ignore
//! let source = RabbitmqSource::new(options, Arc::clone(&ingest))?;
//! let health: Arc<dyn HealthCheck> = Arc::new(source.health()); // component `rabbitmq.<name>`
//! SourceConsumer::new(health, move |mut stop| async move {
//!     source.run(async move { stop.stopped().await }).await
//! })
//! ```
//!
//! Behaviour:
//! - Consumes with `basic.qos(prefetchCount)` and manual acknowledgements. The queue is only
//!   checked (passive declare) unless `declareQueue: true`, which declares it durable. A missing
//!   queue logs an error and turns the health component down with "queue `x` does not exist on
//!   the broker; create it or set declareQueue: true"; the source keeps retrying, so creating the
//!   queue later starts the consumer without a restart.
//! - Each delivery becomes a `Received`: the AMQP header table as text pairs (strings, numbers,
//!   booleans, decimals, timestamps, UTF-8 byte arrays; one pair per element of an array; nested
//!   tables and void values are left out), the body, and `message_id` from the AMQP `message_id`
//!   property. Up to `prefetchCount` deliveries are in the pipeline at once.
//! - Each delivery is settled with its own delivery tag, only after the pipeline answered:
//!   `Stored`, `StoredDead`, `Duplicate` and `Filtered` are acknowledged; a failed store and an
//!   unknown source are handed back (`basic.nack`, requeue) after a delay that grows from
//!   [`DEFAULT_REQUEUE_DELAY_MIN`] to [`DEFAULT_REQUEUE_DELAY_MAX`] while stores keep failing;
//!   `Unauthorized` and `RateLimited` (HTTP-only outcomes) are handed back with a warning; any
//!   other refusal is acknowledged with an error log, so a poison message cannot loop.
//! - A dropped connection, a broker restart or a closed channel: the health component goes down
//!   with the reason and the source reconnects, waiting [`DEFAULT_RECONNECT_DELAY_MIN`] doubling
//!   up to [`DEFAULT_RECONNECT_DELAY_MAX`]. Reasons and logs never hold the URL or its password.
//! - On stop: cancels the consumer, lets the deliveries being stored finish and settle (within
//!   [`DEFAULT_DRAIN_TIMEOUT`]), closes the channel and the connection, and returns.
//!
//! The inbox metrics are counted by the ingest pipeline; this crate records none.
//!
//! # Dependencies
//!
//! This crate depends on the domain and the ports only; it never depends on the application or on
//! another adapter.

mod error;
mod failure;
mod link;
mod message;
mod options;
mod publisher;
mod source;
mod tls;

pub use error::RabbitmqError;
pub use message::{CONTENT_TYPE, X_ATTEMPT, X_TOPIC};
pub use options::{
    DEFAULT_DELIVERY_MODE, DEFAULT_EXCHANGE_TYPE, DEFAULT_MAX_REASON_BYTES,
    DEFAULT_RECONNECT_DELAY_MAX, DEFAULT_RECONNECT_DELAY_MIN, DEFAULT_ROUTING_KEY_TEMPLATE,
    DEFAULT_TIMEOUT, DeliveryMode, ExchangeType, RabbitmqPublisherOptions,
};
pub use publisher::RabbitmqPublisher;
pub use source::{
    DEFAULT_DRAIN_TIMEOUT, DEFAULT_PREFETCH_COUNT, DEFAULT_REQUEUE_DELAY_MAX,
    DEFAULT_REQUEUE_DELAY_MIN, DEFAULT_SETUP_TIMEOUT, RabbitmqSource, RabbitmqSourceOptions,
    RabbitmqToken,
};

/// The name of the backend this crate serves, used in start-up messages.
pub const BACKEND: &str = "rabbitmq";
