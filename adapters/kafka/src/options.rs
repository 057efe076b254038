//! What one Kafka destination is built from: the `destinations.<name>` block of type `kafka` with
//! its static `headers`, and the security keys it shares with the Kafka source.

use queuebox_domain::secret::Secret;
use queuebox_domain::template::address::AddressColumn;
use queuebox_domain::template::routing_key::KafkaKeyTemplate;
use std::time::Duration;

/// `keyTemplate` when the configuration sets none.
pub const DEFAULT_KEY_TEMPLATE: &str = KafkaKeyTemplate::DEFAULT;
/// `timeoutMs` when the configuration sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The smallest `timeoutMs` accepted: the producer's budget must cover a metadata lookup and one
/// retry of a produce request.
pub const MIN_TIMEOUT: Duration = Duration::from_secs(2);
/// How much of a failure reason is kept when the caller sets no limit (the `http.maxErrorBodyBytes`
/// default).
pub const DEFAULT_MAX_REASON_BYTES: usize = 2048;
/// How long the producer waits to fill a batch before sending it (librdkafka's `linger.ms`). A
/// millisecond costs little latency and lets the concurrent publishes of a busy destination share
/// produce requests.
pub const DEFAULT_LINGER: Duration = Duration::from_millis(1);

/// `securityProtocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecurityProtocol {
    /// `PLAINTEXT`, the default.
    #[default]
    Plaintext,
    /// `SSL`.
    Ssl,
    /// `SASL_PLAINTEXT`.
    SaslPlaintext,
    /// `SASL_SSL`.
    SaslSsl,
}

impl SecurityProtocol {
    /// The configuration spelling, which is also librdkafka's `security.protocol` value.
    pub fn as_str(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// True for the two `SASL_` protocols, which need a mechanism, a user name and a password.
    pub fn is_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// The connection settings shared by a Kafka destination and a Kafka source.
#[derive(Debug, Clone, Default)]
pub struct KafkaConnection {
    /// `bootstrapServers`: `host:port` pairs separated by commas.
    pub bootstrap_servers: String,
    /// `securityProtocol`.
    pub security_protocol: SecurityProtocol,
    /// `saslMechanism`: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub sasl_mechanism: Option<String>,
    /// `saslUsername`.
    pub sasl_username: Option<String>,
    /// `saslPassword`; never in an error or a log line.
    pub sasl_password: Option<Secret>,
    /// The `client.id` the broker sees in its logs and quotas.
    pub client_id: Option<String>,
}

/// The settings of one Kafka destination.
#[derive(Debug, Clone)]
pub struct KafkaPublisherOptions {
    /// The destination name (the key under `destinations`), used in errors and the client id.
    pub name: String,
    /// The brokers and the security settings.
    pub connection: KafkaConnection,
    /// `topic`: a literal name or an address template over the row.
    pub topic: String,
    /// `topicFrom`: a row column that holds the topic name; it wins over `topic`.
    pub topic_from: Option<AddressColumn>,
    /// `keyTemplate`: the record key when the matched route sets no `routingKeyTemplate`.
    pub key_template: String,
    /// `headers`: static headers on every record, in configuration order.
    pub headers: Vec<(String, String)>,
    /// `timeoutMs`: the whole budget of one publish, the broker acknowledgement included.
    pub timeout: Duration,
    /// How much of a failure reason is kept (`http.maxErrorBodyBytes` is the natural choice).
    pub max_reason_bytes: usize,
    /// librdkafka's `linger.ms`.
    pub linger: Duration,
}

impl KafkaPublisherOptions {
    /// Options with every documented default.
    pub fn new(
        name: impl Into<String>,
        bootstrap_servers: impl Into<String>,
        topic: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            connection: KafkaConnection {
                bootstrap_servers: bootstrap_servers.into(),
                ..KafkaConnection::default()
            },
            topic: topic.into(),
            topic_from: None,
            key_template: DEFAULT_KEY_TEMPLATE.to_owned(),
            headers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            max_reason_bytes: DEFAULT_MAX_REASON_BYTES,
            linger: DEFAULT_LINGER,
        }
    }
}
