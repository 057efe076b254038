//! What one RabbitMQ destination is built from: the `destinations.<name>` block of type
//! `rabbitmq`, with its static `headers`, and the few settings the configuration has no key for.

use queuebox_domain::secret::Secret;
use queuebox_domain::template::address::AddressColumn;
use queuebox_domain::template::routing_key::RoutingKeyTemplate;
use std::time::Duration;

/// `exchangeType` when the configuration sets none.
pub const DEFAULT_EXCHANGE_TYPE: ExchangeType = ExchangeType::Topic;
/// `routingKeyTemplate` when the configuration sets none.
pub const DEFAULT_ROUTING_KEY_TEMPLATE: &str = RoutingKeyTemplate::DESTINATION_DEFAULT;
/// `deliveryMode` when the configuration sets none.
pub const DEFAULT_DELIVERY_MODE: DeliveryMode = DeliveryMode::Persistent;
/// The budget of one publish (connecting, declaring, sending and the confirm) when the caller
/// sets none. The configuration has no RabbitMQ `timeoutMs` key; this matches the HTTP and Kafka
/// default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// How much of a failure reason is kept when the caller sets no limit (the `http.maxErrorBodyBytes`
/// default).
pub const DEFAULT_MAX_REASON_BYTES: usize = 2048;
/// The wait after the first failed connection attempt.
pub const DEFAULT_RECONNECT_DELAY_MIN: Duration = Duration::from_millis(100);
/// The longest wait between two connection attempts.
pub const DEFAULT_RECONNECT_DELAY_MAX: Duration = Duration::from_secs(5);

/// The type of the exchange the publisher declares (`exchangeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExchangeType {
    /// `topic`, the default.
    #[default]
    Topic,
    /// `direct`.
    Direct,
    /// `fanout`.
    Fanout,
}

impl ExchangeType {
    /// The configuration spelling, which is also the AMQP type name.
    pub fn as_str(self) -> &'static str {
        match self {
            ExchangeType::Topic => "topic",
            ExchangeType::Direct => "direct",
            ExchangeType::Fanout => "fanout",
        }
    }
}

/// `deliveryMode`: whether the broker writes the message to disk in a durable queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeliveryMode {
    /// AMQP delivery mode 2: survives a broker restart in a durable queue. The default.
    #[default]
    Persistent,
    /// AMQP delivery mode 1: kept in memory only.
    Transient,
}

impl DeliveryMode {
    /// The AMQP `delivery_mode` property value.
    pub fn amqp_value(self) -> u8 {
        match self {
            DeliveryMode::Persistent => 2,
            DeliveryMode::Transient => 1,
        }
    }
}

/// The settings of one RabbitMQ destination.
#[derive(Debug, Clone)]
pub struct RabbitmqPublisherOptions {
    /// The destination name (the key under `destinations`), used in errors and the connection name.
    pub name: String,
    /// `url`: the AMQP URI (`amqp://user:password@host:5672/vhost`, or `amqps://`). It carries the
    /// password, so it never appears in an error or a log line.
    pub url: Secret,
    /// `exchange`: a literal name or an address template over the row.
    pub exchange: String,
    /// `exchangeFrom`: a row column that holds the exchange name; it wins over `exchange`.
    pub exchange_from: Option<AddressColumn>,
    /// `exchangeType`: the type the exchange is declared with (durable).
    pub exchange_type: ExchangeType,
    /// `routingKeyTemplate` of the destination, used when the matched route sets none; a missing
    /// field renders the route's `routingKeyMissingFieldDefault`, which each message carries.
    pub routing_key_template: String,
    /// `deliveryMode`.
    pub delivery_mode: DeliveryMode,
    /// `headers`: static headers on every message, in configuration order.
    pub headers: Vec<(String, String)>,
    /// The whole budget of one publish: connecting (when needed), declaring the exchange (the
    /// first time), sending, and the broker confirm.
    pub timeout: Duration,
    /// How much of a failure reason is kept (`http.maxErrorBodyBytes` is the natural choice).
    pub max_reason_bytes: usize,
    /// The wait after a failed connection attempt before the next one; doubled per further
    /// failure up to `reconnect_delay_max`. A publish inside the wait fails at once as unreachable.
    pub reconnect_delay_min: Duration,
    /// The longest wait between two connection attempts.
    pub reconnect_delay_max: Duration,
    /// The name the connection shows in the broker's management tools; `queuebox <name>` when
    /// unset.
    pub connection_name: Option<String>,
}

impl RabbitmqPublisherOptions {
    /// Options with every documented default.
    pub fn new(name: impl Into<String>, url: Secret, exchange: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url,
            exchange: exchange.into(),
            exchange_from: None,
            exchange_type: DEFAULT_EXCHANGE_TYPE,
            routing_key_template: DEFAULT_ROUTING_KEY_TEMPLATE.to_owned(),
            delivery_mode: DEFAULT_DELIVERY_MODE,
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            max_reason_bytes: DEFAULT_MAX_REASON_BYTES,
            reconnect_delay_min: DEFAULT_RECONNECT_DELAY_MIN,
            reconnect_delay_max: DEFAULT_RECONNECT_DELAY_MAX,
            connection_name: None,
        }
    }
}
