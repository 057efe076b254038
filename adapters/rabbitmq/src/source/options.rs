//! What one RabbitMQ inbox source is built from: the `sources.<name>` block of type `rabbitmq`,
//! plus the few timings the configuration has no key for.

use crate::options::{DEFAULT_RECONNECT_DELAY_MAX, DEFAULT_RECONNECT_DELAY_MIN};
use queuebox_domain::secret::Secret;
use std::time::Duration;

/// `prefetchCount` when the configuration sets none.
pub const DEFAULT_PREFETCH_COUNT: u16 = 10;
/// The first wait before a message is handed back after the store failed; doubled per further
/// consecutive failure up to [`DEFAULT_REQUEUE_DELAY_MAX`].
pub const DEFAULT_REQUEUE_DELAY_MIN: Duration = Duration::from_millis(100);
/// The longest wait before a message is handed back after the store failed.
pub const DEFAULT_REQUEUE_DELAY_MAX: Duration = Duration::from_secs(5);
/// How long a stopping source waits for the messages it is storing before it closes its channel.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// The bound of each step of setting up the consumer (connect, channel, qos, declare, consume).
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// The settings of one RabbitMQ inbox source.
#[derive(Debug, Clone)]
pub struct RabbitmqSourceOptions {
    /// The source name (the key under `sources`): the name handed to the ingest pipeline, and the
    /// health component `rabbitmq.<name>`.
    pub name: String,
    /// `connectionUrl`: the AMQP URI (`amqp://user:password@host:5672/vhost`, or `amqps://`). It
    /// carries the password, so it never appears in an error, a log line or a health reason.
    pub url: Secret,
    /// `queueName`: the queue to consume.
    pub queue_name: String,
    /// `prefetchCount`: the most unacknowledged messages the broker hands this consumer, which is
    /// also the most messages in the ingest pipeline at once. At least 1.
    pub prefetch_count: u16,
    /// `declareQueue`: declare the queue (durable) instead of only checking that it exists.
    pub declare_queue: bool,
    /// The wait after the first failed attempt to connect and consume; doubled per further
    /// failure up to `reconnect_delay_max`.
    pub reconnect_delay_min: Duration,
    /// The longest wait between two attempts to connect and consume.
    pub reconnect_delay_max: Duration,
    /// The first wait before a message whose store failed is handed back to the broker; doubled
    /// per further consecutive store failure up to `requeue_delay_max`. It keeps a database that
    /// is down from turning the queue into a busy loop.
    pub requeue_delay_min: Duration,
    /// The longest wait before a message whose store failed is handed back to the broker.
    pub requeue_delay_max: Duration,
    /// How long a stop waits for the messages being stored before it closes the channel; the
    /// broker hands back whatever is still unacknowledged then.
    pub drain_timeout: Duration,
    /// The bound of each setup step (connect, channel, qos, declare, consume).
    pub setup_timeout: Duration,
    /// The name the connection shows in the broker's management tools; `queuebox source <name>`
    /// when unset.
    pub connection_name: Option<String>,
}

impl RabbitmqSourceOptions {
    /// Options with every documented default: prefetch 10, the queue not declared.
    pub fn new(name: impl Into<String>, url: Secret, queue_name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url,
            queue_name: queue_name.into(),
            prefetch_count: DEFAULT_PREFETCH_COUNT,
            declare_queue: false,
            reconnect_delay_min: DEFAULT_RECONNECT_DELAY_MIN,
            reconnect_delay_max: DEFAULT_RECONNECT_DELAY_MAX,
            requeue_delay_min: DEFAULT_REQUEUE_DELAY_MIN,
            requeue_delay_max: DEFAULT_REQUEUE_DELAY_MAX,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            setup_timeout: DEFAULT_SETUP_TIMEOUT,
            connection_name: None,
        }
    }
}
