//! The entries of `destinations`, `routes` and `sources`, and the `auth`, `transform` and `filter`
//! blocks they hold.

use super::signatures::{SignedAuth, Signing};
use crate::render::{ms, opt_secret, secret};
use crate::secrets::SecretUrl;
use indexmap::IndexMap;
use queuebox_domain::secret::Secret;
use serde::Serialize;
use std::time::Duration;

/// A row column that names the address instead of a template (`exchangeFrom` and friends).
pub use queuebox_domain::template::address::AddressColumn;

/// Credentials an incoming request must carry (a source `auth` block or `admin.auth`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type")]
pub enum InboundAuth {
    #[serde(rename = "bearer")]
    Bearer {
        #[serde(serialize_with = "secret")]
        token: Secret,
    },
    #[serde(rename = "api-key", rename_all = "camelCase")]
    ApiKey {
        header_name: String,
        #[serde(serialize_with = "secret")]
        key: Secret,
    },
    #[serde(rename = "hmac")]
    Hmac(HmacAuth),
    #[serde(rename = "standardWebhooks")]
    StandardWebhooks(SignedAuth),
    #[serde(rename = "stripe")]
    Stripe(SignedAuth),
    #[serde(rename = "github")]
    Github(SignedAuth),
    #[serde(rename = "shopify")]
    Shopify(SignedAuth),
    #[serde(rename = "slack")]
    Slack(SignedAuth),
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HmacAuth {
    #[serde(serialize_with = "secret")]
    pub secret: Secret,
    pub header_name: String,
    pub algorithm: HmacAlgorithm,
    pub signature_prefix: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp_header: Option<String>,
    #[serde(serialize_with = "ms")]
    pub timestamp_tolerance: Duration,
    pub signature_payload_format: SignaturePayloadFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum HmacAlgorithm {
    #[serde(rename = "HmacSHA256")]
    Sha256,
    #[serde(rename = "HmacSHA512")]
    Sha512,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SignaturePayloadFormat {
    /// The body alone.
    #[serde(rename = "BODY")]
    Body,
    /// The timestamp header value, a dot, then the body.
    #[serde(rename = "TIMESTAMP_DOT_BODY")]
    TimestampDotBody,
}

/// A `transform` block of a source, a route or a destination.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transform {
    /// The JSONata text; compiled by the transform adapter at start.
    pub expression: String,
    #[serde(rename = "timeoutMs", serialize_with = "ms")]
    pub timeout: Duration,
    pub max_depth: u32,
    pub on_error: OnError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum OnError {
    Fail,
    Skip,
    Dead,
}

#[derive(Debug, Clone, Serialize)]
pub struct Destination {
    #[serde(flatten)]
    pub kind: DestinationKind,
    /// Static headers, in file order.
    #[serde(skip_serializing_if = "IndexMap::is_empty")]
    pub headers: IndexMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<Transform>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum DestinationKind {
    Http(HttpDestination),
    Rabbitmq(RabbitmqDestination),
    Kafka(KafkaDestination),
    Nats(NatsDestination),
    Redis(RedisDestination),
}

impl DestinationKind {
    /// The `type` value of this kind.
    pub fn name(&self) -> &'static str {
        match self {
            DestinationKind::Http(_) => "http",
            DestinationKind::Rabbitmq(_) => "rabbitmq",
            DestinationKind::Kafka(_) => "kafka",
            DestinationKind::Nats(_) => "nats",
            DestinationKind::Redis(_) => "redis",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpDestination {
    pub base_url: String,
    pub path: String,
    #[serde(rename = "timeoutMs", serialize_with = "ms")]
    pub timeout: Duration,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<OutboundAuth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing: Option<Signing>,
}

/// Credentials QueueBox sends to an HTTP destination.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum OutboundAuth {
    #[serde(rename_all = "camelCase")]
    Oauth2 {
        client_id: String,
        #[serde(serialize_with = "secret")]
        client_secret: Secret,
        token_url: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        scope: Option<String>,
        #[serde(skip_serializing_if = "IndexMap::is_empty")]
        extra_params: IndexMap<String, String>,
    },
    Basic {
        username: String,
        #[serde(serialize_with = "secret")]
        password: Secret,
    },
    #[serde(rename_all = "camelCase")]
    Header {
        header_name: String,
        #[serde(serialize_with = "secret")]
        header_value: Secret,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExchangeType {
    Topic,
    Direct,
    Fanout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryMode {
    Persistent,
    Transient,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RabbitmqDestination {
    pub url: SecretUrl,
    /// A literal name or an address template.
    pub exchange: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exchange_from: Option<AddressColumn>,
    pub exchange_type: ExchangeType,
    pub routing_key_template: String,
    pub delivery_mode: DeliveryMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SecurityProtocol {
    #[serde(rename = "PLAINTEXT")]
    Plaintext,
    #[serde(rename = "SSL")]
    Ssl,
    #[serde(rename = "SASL_PLAINTEXT")]
    SaslPlaintext,
    #[serde(rename = "SASL_SSL")]
    SaslSsl,
}

impl SecurityProtocol {
    pub fn is_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// The Kafka client security settings shared by the Kafka source and destination.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaSecurity {
    pub security_protocol: SecurityProtocol,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sasl_mechanism: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sasl_username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "opt_secret")]
    pub sasl_password: Option<Secret>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaDestination {
    pub bootstrap_servers: String,
    /// A literal name or an address template.
    pub topic: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_from: Option<AddressColumn>,
    pub key_template: String,
    #[serde(rename = "timeoutMs", serialize_with = "ms")]
    pub timeout: Duration,
    /// `lingerMs` (an addition): how long the producer waits to fill a batch.
    #[serde(rename = "lingerMs", serialize_with = "ms")]
    pub linger: Duration,
    #[serde(flatten)]
    pub security: KafkaSecurity,
}

/// NATS credentials: a user and password, or a token.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NatsCredentials {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "opt_secret")]
    pub password: Option<Secret>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "opt_secret")]
    pub token: Option<Secret>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NatsDestination {
    pub servers: SecretUrl,
    /// A literal subject or an address template.
    pub subject: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject_from: Option<AddressColumn>,
    pub jet_stream: bool,
    #[serde(rename = "timeoutMs", serialize_with = "ms")]
    pub timeout: Duration,
    #[serde(flatten)]
    pub credentials: NatsCredentials,
}

/// A Redis Streams destination (an addition to the contract).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RedisDestination {
    pub url: SecretUrl,
    /// A literal stream key or an address template.
    pub stream: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_from: Option<AddressColumn>,
    /// `maxLen`: trim the stream to about (or exactly) this many entries on each add.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_len: Option<u32>,
    pub max_len_approximate: bool,
    #[serde(rename = "timeoutMs", serialize_with = "ms")]
    pub timeout: Duration,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    pub topic_pattern: String,
    pub destination: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing_key_template: Option<String>,
    pub routing_key_missing_field_default: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<Transform>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Consumption {
    Push,
    Pull,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    #[serde(flatten)]
    pub kind: SourceKind,
    pub consumption: Consumption,
    /// The outbox topic template of a relayed row.
    pub topic: String,
    pub idempotency_key_path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aggregate_id_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_type_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transform: Option<Transform>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<HeaderFilter>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    pub requests_per_minute: u32,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum SourceKind {
    Http(HttpSource),
    Rabbitmq(RabbitmqSource),
    Kafka(KafkaSource),
    Nats(NatsSource),
    Redis(RedisSource),
}

impl SourceKind {
    /// The `type` value of this kind.
    pub fn name(&self) -> &'static str {
        match self {
            SourceKind::Http(_) => "http",
            SourceKind::Rabbitmq(_) => "rabbitmq",
            SourceKind::Kafka(_) => "kafka",
            SourceKind::Nats(_) => "nats",
            SourceKind::Redis(_) => "redis",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct HttpSource {
    /// The path after `inbox.basePath`.
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<InboundAuth>,
}

/// The header names a broker source reads three attributes from.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttributeHeaders {
    pub idempotency_key: String,
    pub aggregate_id: String,
    pub event_type: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RabbitmqSource {
    pub queue_name: String,
    pub connection_url: SecretUrl,
    pub prefetch_count: u16,
    pub declare_queue: bool,
    pub event_type_from_header: bool,
    pub attribute_headers: AttributeHeaders,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoOffsetReset {
    Earliest,
    Latest,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KafkaSource {
    pub bootstrap_servers: String,
    pub topics: Vec<String>,
    pub group_id: String,
    pub auto_offset_reset: AutoOffsetReset,
    pub max_poll_records: u32,
    pub event_type_from_header: bool,
    #[serde(flatten)]
    pub security: KafkaSecurity,
    pub attribute_headers: AttributeHeaders,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NatsSource {
    pub servers: SecretUrl,
    pub stream: String,
    pub durable: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_subject: Option<String>,
    #[serde(rename = "ackWaitMs", serialize_with = "ms")]
    pub ack_wait: Duration,
    pub batch_size: u32,
    pub event_type_from_header: bool,
    #[serde(flatten)]
    pub credentials: NatsCredentials,
    pub attribute_headers: AttributeHeaders,
}

/// A Redis Streams source (an addition to the contract): a consumer group of one stream.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RedisSource {
    pub url: SecretUrl,
    pub stream: String,
    pub group: String,
    /// `None`: the host name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer: Option<String>,
    pub batch_size: u32,
    #[serde(rename = "blockMs", serialize_with = "ms")]
    pub block: Duration,
    #[serde(rename = "claimIdleMs", serialize_with = "ms")]
    pub claim_idle: Duration,
    pub max_deliveries: u32,
    pub dead_letter_stream: String,
    pub event_type_from_header: bool,
    pub attribute_headers: AttributeHeaders,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct HeaderFilter {
    /// A message must match every rule.
    pub require: Vec<FilterRule>,
    /// A message must match no rule.
    pub exclude: Vec<FilterRule>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FilterRule {
    pub header: String,
    #[serde(flatten)]
    pub condition: FilterCondition,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterCondition {
    Equals(String),
    In(Vec<String>),
    /// A topic glob.
    Matches(String),
    /// The header must be present (`exists: true`; `false` does not load).
    Exists(bool),
}
