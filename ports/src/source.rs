//! The port of a broker source: what a broker client (RabbitMQ, Kafka, NATS, ...) must do so the
//! application's source driver (`queuebox_application::source`) can consume it.
//!
//! The client does the broker calls only: connect, receive a batch, settle each message of the
//! batch, close. Everything else is the driver's and is the same for every kind: the order of a
//! key's messages, the store through the [`Ingest`](crate::ingest::Ingest) port, when a message
//! is acknowledged or handed back and after what wait, reconnecting with the one
//! [`Backoff`](crate::backoff::Backoff), the health component and its reasons, and the drain at
//! the stop.
//!
//! The driver keeps up to `batch` messages in the pipeline: it receives, stores each message
//! (side by side, except messages sharing an order key or an idempotency key, which go one after
//! the other in the broker's order), waits when a message must be handed back, and settles
//! messages as they finish. With [`SourcePlan::whole_batches`] it receives the next batch only
//! once the last one is stored, and settles a batch with one [`SourceClient::settle`] call (a
//! broker that settles by offset needs every message of the batch decided).

use crate::backoff::Backoff;
use crate::ingest::Received;
use async_trait::async_trait;
use std::time::Duration;

/// One message as the client received it.
#[derive(Debug)]
pub struct Delivery<T> {
    /// What the client needs to settle this message later (a delivery tag, an offset, the
    /// message itself).
    pub token: T,
    /// The message for the ingest pipeline. Its `headers` are the broker's message headers as
    /// `(name, value)` pairs (the driver reads them for everything that is header-based, the same
    /// way for every kind).
    pub received: Received,
    /// A key the broker orders by, when the broker has one (a Kafka partition and record key):
    /// two messages of one batch with the same order key are stored one after the other.
    /// Messages with the same idempotency key are ordered too, whatever this says.
    pub order_key: Option<String>,
}

/// What the driver decided for one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// The row committed, or there is nothing to store: the broker may forget the message
    /// (ack; move the offset past it).
    Ack,
    /// The message must come again (nack with requeue; seek back to it). The driver has already
    /// waited the delay the message needed; the client hands it back at once.
    Retry,
}

/// Why connecting, receiving or a check failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFailure {
    /// The reason for the health component and the log: it names what failed (the queue, the
    /// topic, the broker address) and MUST NOT hold a URL with credentials, a password or a token.
    pub reason: String,
}

impl SourceFailure {
    /// A failure with `reason` (already masked by the client).
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for SourceFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// The driver settings a client derives from its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePlan {
    /// The kind (`rabbitmq`, `kafka`, `nats`): the first part of the health component's name
    /// `<kind>.<source>` and of log lines.
    pub kind: &'static str,
    /// The source name (the key under `sources`), handed to the ingest pipeline.
    pub source: String,
    /// What is consumed, for log lines: "queue `orders`", "topics `a`, `b`".
    pub consumes: String,
    /// The most messages in one batch, which is also the most messages in the pipeline at once.
    /// At least 1.
    pub batch: usize,
    /// Receive and settle whole batches: the next batch is received only after every message of
    /// the last one is decided, and the batch is settled with one call (Kafka: offsets). Without
    /// it, messages are received while there is room in the pipeline and settled as they finish.
    pub whole_batches: bool,
    /// The waits between attempts to connect after a failure or a break.
    pub reconnect: Backoff,
    /// The waits before a message whose store failed is handed back, growing while stores keep
    /// failing (so a database that is down does not turn the broker into a busy loop).
    pub retry: Backoff,
    /// How long a stop waits for the batch being stored before it hands the rest back.
    pub drain_timeout: Duration,
    /// How often the driver calls [`SourceClient::check`] while consuming; `None` when the
    /// client's `receive` notices every break on its own.
    pub check_every: Option<Duration>,
}

/// A broker client as the source driver uses it.
///
/// A client is built from its configuration with no connection made; the driver owns it from
/// then on and calls, in this order: [`connect`](Self::connect) (again after each failure),
/// [`receive`](Self::receive) and [`settle`](Self::settle) in turns, [`check`](Self::check) now
/// and then, and [`close`](Self::close) once at the end.
#[async_trait]
pub trait SourceClient: Send + Sync + 'static {
    /// What settling one message needs.
    type Token: Send + 'static;

    /// The driver settings of this source.
    fn plan(&self) -> SourcePlan;

    /// Connects and sets up consuming: at start, and after a failure or a break. It MUST keep
    /// what still works from an earlier session (an open connection, a group membership) and
    /// drop what broke; it MUST bound every broker call, so it returns even when the broker does
    /// not answer.
    ///
    /// # Errors
    /// A [`SourceFailure`] naming what is missing or unreachable; the driver marks the health
    /// component down with it and tries again after the reconnect backoff.
    async fn connect(&mut self) -> Result<(), SourceFailure>;

    /// Waits for at least one message, then returns it with whatever else is ready at once, at
    /// most `max` in all (`max` is at least 1), in the broker's order.
    ///
    /// It MUST be cancel-safe: the driver drops the future to run a check or to stop, and a
    /// dropped call MUST NOT lose a message it had taken from the broker.
    ///
    /// # Errors
    /// A [`SourceFailure`] when the session broke (a closed connection, a cancelled consumer, a
    /// deleted topic); the driver then reconnects.
    async fn receive(&self, max: usize) -> Result<Vec<Delivery<Self::Token>>, SourceFailure>;

    /// Settles finished messages, each with its [`Settle`], in the order they finished (with
    /// [`SourcePlan::whole_batches`]: every message of the last batch, in the order received).
    /// A settlement the broker does not take (the channel closed meanwhile) is only logged: the
    /// broker delivers that message again.
    async fn settle(&self, settled: Vec<(Self::Token, Settle)>);

    /// Tells whether the session is still sound, without waiting for a message.
    ///
    /// # Errors
    /// A [`SourceFailure`] when it is not; the driver reconnects.
    async fn check(&self) -> Result<(), SourceFailure> {
        Ok(())
    }

    /// Ends consuming: closes what is open (the broker hands back what was not settled) and
    /// commits what must be committed. Called once, after the last [`settle`](Self::settle).
    async fn close(&mut self);
}
