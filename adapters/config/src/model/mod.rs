//! The typed settings: one struct per section of `queuebox.yml`. The entries of `destinations`,
//! `routes` and `sources` (with their auth, transform and filter blocks) live in `endpoints.rs`.
//!
//! Durations of `...Ms` keys are [`Duration`]s, credentials are [`Secret`]s and URLs that can carry a
//! password are [`SecretUrl`]s, so `Debug` of any value here prints no credential. `Serialize` writes
//! the effective configuration back with its original key names for `check-config`.

mod endpoints;
mod signatures;
mod telemetry;

pub use endpoints::*;
pub use signatures::{SignedAuth, Signing, SigningScheme};
pub use telemetry::{OtlpProtocol, TelemetrySettings, TracingSettings};

use crate::render::{ms, opt_retention_duration, opt_secret, retention_duration};
use crate::secrets::SecretUrl;
use indexmap::IndexMap;
use queuebox_domain::mapping::SchemaNames;
use queuebox_domain::secret::Secret;
use queuebox_ports::database::{DatabaseKind, DatabaseOptions, DatabaseTarget};
use serde::Serialize;
use std::time::Duration;

/// Every setting of a loaded configuration.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub server: ServerSettings,
    pub database: DatabaseSettings,
    pub outbox: OutboxSettings,
    pub inbox: InboxSettings,
    pub http: HttpSettings,
    pub admin: AdminSettings,
    /// In file order; a route names one of them.
    pub destinations: IndexMap<String, Destination>,
    /// In list order: the first match wins.
    pub routes: Vec<Route>,
    /// In file order; the key is the value of the inbox `source` column.
    pub sources: IndexMap<String, Source>,
    pub retention: RetentionSettings,
    pub telemetry: TelemetrySettings,
}

impl Settings {
    /// What a database adapter needs to open its pool and prepare the schema.
    pub fn database_options(&self) -> DatabaseOptions {
        DatabaseOptions {
            target: self.database.target.clone(),
            pool_size: self.database.pool_size,
            connection_timeout: self.database.connection_timeout,
            startup_timeout: self.database.startup_timeout,
            migrate: self.database.migrate,
            schema: self.database.schema.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerSettings {
    pub http_port: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub management_port: Option<u16>,
    /// `requestReadTimeoutMs` (an addition): how long a client may take to send a request's head,
    /// and then its whole body.
    #[serde(rename = "requestReadTimeoutMs", serialize_with = "ms")]
    pub request_read_timeout: Duration,
}

/// `database.*`. Serialized by hand in `render`, because the schema names spread over three keys.
#[derive(Debug, Clone)]
pub struct DatabaseSettings {
    pub kind: DatabaseKind,
    /// The URL as configured, printed with its password masked.
    pub url: SecretUrl,
    /// The parsed URL with `database.username` and `database.password` applied.
    pub target: DatabaseTarget,
    /// The effective user (the key, or the URL's when the key is absent).
    pub username: String,
    /// The effective password (the key, or the URL's when the key is absent).
    pub password: Secret,
    pub pool_size: u32,
    pub connection_timeout: Duration,
    pub startup_timeout: Duration,
    pub migrate: bool,
    /// `outboxTableName`, `inboxTableName` and `columnMapping`.
    pub schema: SchemaNames,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutboxSettings {
    #[serde(rename = "pollIntervalMs", serialize_with = "ms")]
    pub poll_interval: Duration,
    pub batch_size: u32,
    pub concurrency: u32,
    #[serde(rename = "retryBaseDelayMs", serialize_with = "ms")]
    pub retry_base_delay: Duration,
    pub max_attempts: u32,
    #[serde(rename = "claimTimeoutMs", serialize_with = "ms")]
    pub claim_timeout: Duration,
    #[serde(rename = "pendingGaugeIntervalMs", serialize_with = "ms")]
    pub pending_gauge_interval: Duration,
    #[serde(rename = "shutdownTimeoutMs", serialize_with = "ms")]
    pub shutdown_timeout: Duration,
    pub capture: CaptureSettings,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CaptureMode {
    #[serde(rename = "polling")]
    Polling,
    #[serde(rename = "postgres-logical")]
    PostgresLogical,
    #[serde(rename = "sqlserver-cdc")]
    SqlserverCdc,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaptureSettings {
    pub mode: CaptureMode,
    pub enabled: bool,
    pub identity: String,
    /// Empty when not set.
    pub state_directory: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    pub publication: String,
    pub slot: String,
    #[serde(rename = "reconciliationIntervalMs", serialize_with = "ms")]
    pub reconciliation_interval: Duration,
    pub connection: CaptureConnection,
}

/// Overrides of the capture connection; `None` takes the value from `database.*`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaptureConnection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "opt_secret")]
    pub password: Option<Secret>,
    pub encrypt: bool,
    pub trust_server_certificate: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxSettings {
    pub base_path: String,
    pub max_body_bytes: usize,
    pub relay: RelaySettings,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RelaySettings {
    pub enabled: bool,
    #[serde(rename = "pollIntervalMs", serialize_with = "ms")]
    pub poll_interval: Duration,
    pub batch_size: u32,
    #[serde(rename = "claimTimeoutMs", serialize_with = "ms")]
    pub claim_timeout: Duration,
    #[serde(rename = "pendingGaugeIntervalMs", serialize_with = "ms")]
    pub pending_gauge_interval: Duration,
    /// `outbox.maxAttempts` when not set.
    pub max_attempts: u32,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpSettings {
    pub max_error_body_bytes: usize,
    pub block_private_addresses: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminSettings {
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<InboundAuth>,
    pub insecure: bool,
    #[serde(rename = "maxTransformTimeoutMs", serialize_with = "ms")]
    pub max_transform_timeout: Duration,
    pub max_payload_bytes: usize,
    pub console: ConsoleSettings,
}

/// `admin.console`: the operator console on the management port.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConsoleSettings {
    pub enabled: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RetentionSettings {
    pub enabled: bool,
    pub outbox: RetentionPolicy,
    pub inbox: RetentionPolicy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum RetentionKind {
    Age,
    Count,
    Disabled,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetentionPolicy {
    pub policy: RetentionKind,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "opt_retention_duration"
    )]
    pub max_age: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_count: Option<u64>,
    #[serde(serialize_with = "retention_duration")]
    pub cleanup_interval: Duration,
    pub batch_size: u32,
}
