//! The source's link to the broker: one connection, one channel with the prefetch set, the queue
//! checked (or declared) and one consumer with manual acknowledgements.
//!
//! A failed setup keeps the connection when it is still open (a missing queue closes only the
//! channel), so retrying a missing queue every few seconds does not churn connections.

use lapin::options::{BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};
use lapin::protocol::{AMQPErrorKind, AMQPSoftError};
use lapin::types::{FieldTable, LongString, ShortString};
use lapin::uri::AMQPUri;
use lapin::{Channel, Connection, ConnectionProperties, Consumer, ErrorKind};
use queuebox_domain::redact::Redactor;
use std::future::Future;
use std::time::Duration;
use tokio::time::timeout;

/// Why setting up the consumer failed, masked and ready for the log and the health component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetupFailure {
    pub(crate) reason: String,
    /// The broker gave no answer in time: the connection is not trusted any more.
    timed_out: bool,
}

/// A consumer set up on an open channel.
pub(crate) struct Consuming {
    pub(crate) channel: Channel,
    /// Locked by the receive in progress (the driver receives one batch at a time).
    pub(crate) consumer: tokio::sync::Mutex<Consumer>,
}

/// The connection manager of one source.
pub(crate) struct Broker {
    uri: AMQPUri,
    /// `host:port/vhost`, for reasons; never the user or the password.
    pub(crate) endpoint: String,
    connection_name: String,
    redactor: Redactor,
    queue: String,
    prefetch: u16,
    declare: bool,
    setup_timeout: Duration,
    connection: Option<Connection>,
    consumers: u64,
    consumer_prefix: String,
}

/// The settings a [`Broker`] is built from.
pub(crate) struct BrokerSettings {
    pub(crate) uri: AMQPUri,
    pub(crate) connection_name: String,
    pub(crate) redactor: Redactor,
    pub(crate) queue: String,
    pub(crate) prefetch: u16,
    pub(crate) declare: bool,
    pub(crate) setup_timeout: Duration,
    pub(crate) source: String,
}

impl Broker {
    pub(crate) fn new(settings: BrokerSettings) -> Self {
        let endpoint = format!(
            "{}:{}/{}",
            settings.uri.authority.host, settings.uri.authority.port, settings.uri.vhost
        );
        Self {
            uri: settings.uri,
            endpoint,
            connection_name: settings.connection_name,
            redactor: settings.redactor,
            queue: settings.queue,
            prefetch: settings.prefetch,
            declare: settings.declare,
            setup_timeout: settings.setup_timeout,
            connection: None,
            consumers: 0,
            consumer_prefix: format!("queuebox.{}", settings.source),
        }
    }

    /// The text the health component and the log show when the queue does not exist.
    pub(crate) fn missing_queue_reason(&self) -> String {
        format!(
            "queue `{}` does not exist on the broker; create it or set declareQueue: true",
            self.queue
        )
    }

    /// Connects when needed, opens a channel, sets the prefetch, checks or declares the queue
    /// and starts a consumer with manual acknowledgements.
    pub(crate) async fn consume(&mut self) -> Result<Consuming, SetupFailure> {
        let connection = match self.connection.take() {
            Some(connection) if connection.status().connected() => connection,
            _ => {
                let properties = ConnectionProperties::default()
                    .with_connection_name(LongString::from(self.connection_name.as_str()));
                let connecting = Connection::connect_uri(self.uri.clone(), properties);
                let what = format!("connecting to the broker at {}", self.endpoint);
                self.step(&what, connecting).await?
            }
        };
        // A step that fails on the channel leaves the connection open; one that times out or
        // breaks the connection drops it (dropping closes it).
        let outcome = self.setup(&connection).await;
        if connection.status().connected() && outcome.as_ref().err().is_none_or(|f| !f.timed_out) {
            self.connection = Some(connection);
        }
        outcome
    }

    async fn setup(&mut self, connection: &Connection) -> Result<Consuming, SetupFailure> {
        let channel = self
            .step("opening a channel", connection.create_channel())
            .await?;
        let result = self.setup_channel(&channel).await;
        match result {
            Ok(consumer) => Ok(Consuming {
                channel,
                consumer: tokio::sync::Mutex::new(consumer),
            }),
            Err(failure) => {
                if channel.status().connected() {
                    let _ = timeout(
                        self.setup_timeout,
                        channel.close(200, ShortString::from("setup failed")),
                    )
                    .await;
                }
                Err(failure)
            }
        }
    }

    async fn setup_channel(&mut self, channel: &Channel) -> Result<Consumer, SetupFailure> {
        self.step(
            &format!("setting the prefetch count to {}", self.prefetch),
            channel.basic_qos(self.prefetch, BasicQosOptions { global: false }),
        )
        .await?;
        let queue = ShortString::from(self.queue.as_str());
        let declare = QueueDeclareOptions {
            // Without declareQueue the source only checks that the queue exists: declaring a
            // queue whose name has a typo would create an empty queue nobody publishes to, and
            // the source would look healthy while receiving nothing.
            passive: !self.declare,
            durable: self.declare,
            ..QueueDeclareOptions::default()
        };
        let what = if self.declare {
            format!("declaring queue `{}` (durable)", self.queue)
        } else {
            format!("checking that queue `{}` exists", self.queue)
        };
        self.step(
            &what,
            channel.queue_declare(queue.clone(), declare, FieldTable::default()),
        )
        .await?;
        self.consumers += 1;
        let tag = ShortString::try_new(format!("{}.{}", self.consumer_prefix, self.consumers))
            .unwrap_or_else(|_| ShortString::from(format!("queuebox.{}", self.consumers)));
        let consumer = self
            .step(
                &format!("consuming queue `{}`", self.queue),
                channel.basic_consume(
                    queue,
                    tag,
                    BasicConsumeOptions::default(),
                    FieldTable::default(),
                ),
            )
            .await?;
        Ok(consumer)
    }

    /// Runs one setup step under the setup bound, turning its failure into a masked reason.
    async fn step<T>(
        &self,
        what: &str,
        step: impl Future<Output = lapin::Result<T>>,
    ) -> Result<T, SetupFailure> {
        match timeout(self.setup_timeout, step).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) if is_not_found(&error) => Err(SetupFailure {
                reason: self.missing_queue_reason(),
                timed_out: false,
            }),
            Ok(Err(error)) => Err(SetupFailure {
                reason: self.redactor.redact(&format!("{what}: {error}")),
                timed_out: false,
            }),
            Err(_) => Err(SetupFailure {
                reason: format!(
                    "{what}: no answer within {} ms",
                    self.setup_timeout.as_millis()
                ),
                timed_out: true,
            }),
        }
    }

    /// True while the connection and the channel of `consuming` are open.
    pub(crate) fn is_open(&self, consuming: &Consuming) -> bool {
        consuming.channel.status().connected()
            && self
                .connection
                .as_ref()
                .is_some_and(|connection| connection.status().connected())
    }

    /// Closes the channel of `consuming` (the broker hands back what is still unacknowledged).
    pub(crate) async fn close_channel(&self, consuming: &Consuming) {
        if consuming.channel.status().connected() {
            let _ = timeout(
                self.setup_timeout,
                consuming
                    .channel
                    .close(200, ShortString::from("queuebox source stopping")),
            )
            .await;
        }
    }

    /// Closes the connection, if one is open.
    pub(crate) async fn close(&mut self) {
        if let Some(connection) = self.connection.take()
            && connection.status().connected()
        {
            let _ = timeout(
                self.setup_timeout,
                connection.close(200, ShortString::from("queuebox source stopping")),
            )
            .await;
        }
    }

    /// Forgets a connection that broke, so the next setup opens a new one.
    pub(crate) fn drop_broken_connection(&mut self) {
        if self
            .connection
            .as_ref()
            .is_some_and(|connection| !connection.status().connected())
        {
            self.connection = None;
        }
    }
}

/// True for the broker's `404 NOT_FOUND` channel error: the queue does not exist.
fn is_not_found(error: &lapin::Error) -> bool {
    matches!(
        error.kind(),
        ErrorKind::ProtocolError(amqp)
            if amqp.kind() == &AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND)
    )
}
