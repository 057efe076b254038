//! The RabbitMQ destination of QueueBox: outbox rows published to an exchange with lapin.
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
//! This crate depends on the domain and the ports only; it never depends on the application or on
//! another adapter.

mod error;
mod failure;
mod link;
mod message;
mod options;
mod publisher;
mod tls;

pub use error::RabbitmqError;
pub use message::{CONTENT_TYPE, X_ATTEMPT, X_TOPIC};
pub use options::{
    DEFAULT_DELIVERY_MODE, DEFAULT_EXCHANGE_TYPE, DEFAULT_MAX_REASON_BYTES,
    DEFAULT_RECONNECT_DELAY_MAX, DEFAULT_RECONNECT_DELAY_MIN, DEFAULT_ROUTING_KEY_TEMPLATE,
    DEFAULT_TIMEOUT, DeliveryMode, ExchangeType, RabbitmqPublisherOptions,
};
pub use publisher::RabbitmqPublisher;

/// The name of the backend this crate serves, used in start-up messages.
pub const BACKEND: &str = "rabbitmq";
