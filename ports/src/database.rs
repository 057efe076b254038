//! The database port: where the database is, as the configuration names it, independent of any
//! driver, and [`DatabaseBackend`], the open database the binary wires the use cases to.

use crate::capture::{CapturePorts, CaptureRequest, WakeChannel};
use crate::console::ConsoleStore;
use crate::health::HealthCheck;
use crate::inbox::{InboxStore, RelayStore};
use crate::outbox::OutboxStore;
use crate::replay::ReplayStore;
use crate::retention::RetentionStore;
use async_trait::async_trait;
use queuebox_domain::mapping::SchemaNames;
use queuebox_domain::secret::Secret;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;

/// The database product of `database.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseKind {
    /// `postgresql`
    Postgresql,
    /// `sqlserver`
    Sqlserver,
}

impl DatabaseKind {
    /// The configuration value.
    pub fn as_str(self) -> &'static str {
        match self {
            DatabaseKind::Postgresql => "postgresql",
            DatabaseKind::Sqlserver => "sqlserver",
        }
    }

    /// The product name, for messages.
    pub fn product(self) -> &'static str {
        match self {
            DatabaseKind::Postgresql => "PostgreSQL",
            DatabaseKind::Sqlserver => "SQL Server",
        }
    }
}

/// One `host[:port]` of a database URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseHost {
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// Port; `None` means the product's default.
    pub port: Option<u16>,
}

/// A parsed `database.url` with `database.username` and `database.password` applied.
///
/// `Debug` masks the password; [`DatabaseTarget::display_url`] prints a URL with the password masked.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseTarget {
    /// The database product.
    pub kind: DatabaseKind,
    /// One or more hosts, tried in order.
    pub hosts: Vec<DatabaseHost>,
    /// The database name.
    pub database: String,
    /// The user; `database.username` wins over a user in the URL.
    pub username: String,
    /// The password; `database.password` wins over a password in the URL.
    pub password: Secret,
    /// The query parameters of the URL, in order (for example `sslmode=require`).
    pub params: Vec<(String, String)>,
}

impl DatabaseTarget {
    /// A `postgres://` style URL with the password masked, for logs and `check-config`.
    pub fn display_url(&self) -> String {
        let hosts = self
            .hosts
            .iter()
            .map(|h| {
                let host = if h.host.contains(':') {
                    format!("[{}]", h.host)
                } else {
                    h.host.clone()
                };
                match h.port {
                    Some(port) => format!("{host}:{port}"),
                    None => host,
                }
            })
            .collect::<Vec<_>>()
            .join(",");
        let scheme = match self.kind {
            DatabaseKind::Postgresql => "postgresql",
            DatabaseKind::Sqlserver => "sqlserver",
        };
        let user = if self.username.is_empty() {
            String::new()
        } else if self.password.is_empty() {
            format!("{}@", self.username)
        } else {
            format!("{}:***@", self.username)
        };
        let query = if self.params.is_empty() {
            String::new()
        } else {
            let pairs: Vec<String> = self
                .params
                .iter()
                .map(|(k, v)| {
                    if k.eq_ignore_ascii_case("password") {
                        format!("{k}=***")
                    } else {
                        format!("{k}={v}")
                    }
                })
                .collect();
            format!("?{}", pairs.join("&"))
        };
        format!("{scheme}://{user}{hosts}/{}{query}", self.database)
    }
}

impl fmt::Debug for DatabaseTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseTarget")
            .field("url", &self.display_url())
            .field("password", &self.password)
            .finish()
    }
}

/// Everything a database adapter needs to open its pool and prepare its schema.
#[derive(Debug, Clone)]
pub struct DatabaseOptions {
    /// Where to connect.
    pub target: DatabaseTarget,
    /// `database.poolSize`.
    pub pool_size: u32,
    /// `database.connectionTimeoutMs`: the longest wait for a pooled connection.
    pub connection_timeout: Duration,
    /// `database.startupTimeoutMs`: how long the start retries an unreachable database.
    pub startup_timeout: Duration,
    /// `database.migrate`.
    pub migrate: bool,
    /// Table and column names.
    pub schema: SchemaNames,
}

/// A failure to prepare the database at start (a migration, the schema check). It displays as the
/// adapter's own error and keeps that error's causes, so the start prints the whole chain.
#[derive(Debug, Error)]
#[error(transparent)]
pub struct DatabaseError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl DatabaseError {
    /// Wraps an adapter's error, whose text and causes MUST NOT hold a credential.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Box::new(error))
    }
}

/// An open database of one product, connected by its adapter: the stores every use case takes and
/// the `database` health component. The binary holds it as `Arc<dyn DatabaseBackend>`, so nothing
/// past the one place that connects names the product.
///
/// Each store shares the backend's pool; asking for a store twice gives two handles on the same
/// pool, never a second pool.
#[async_trait]
pub trait DatabaseBackend: Send + Sync {
    /// The product this backend talks to.
    fn kind(&self) -> DatabaseKind;

    /// Applies the bundled migrations when `database.migrate` is true, then checks the schema the
    /// stores need (tables, columns, renamed names).
    ///
    /// # Errors
    /// A [`DatabaseError`] naming what is wrong (a failed migration, a changed migration file, a
    /// missing column with the statement that adds it); the start stops on it.
    async fn prepare(&self) -> Result<(), DatabaseError>;

    /// The outbox table, for the dispatcher.
    fn outbox_store(&self) -> Arc<dyn OutboxStore>;

    /// The inbox table, for the ingest pipeline.
    fn inbox_store(&self) -> Arc<dyn InboxStore>;

    /// The inbox table, for the relay.
    fn relay_store(&self) -> Arc<dyn RelayStore>;

    /// The outbox table, for replay.
    fn replay_store(&self) -> Arc<dyn ReplayStore>;

    /// Both tables, for the retention cleanup.
    fn retention_store(&self) -> Arc<dyn RetentionStore>;

    /// The reads of the operator console; `None` when this backend has none (the console is then
    /// refused at start).
    fn console_store(&self) -> Option<Arc<dyn ConsoleStore>> {
        None
    }

    /// The `database` health component.
    fn health_check(&self) -> Arc<dyn HealthCheck>;

    /// What change data capture needs from this database, for the replica that owns `request`'s
    /// identity (`outbox.capture.enabled: true`).
    ///
    /// # Errors
    /// A [`DatabaseError`] when this product cannot capture in the configured mode.
    fn capture_ports(&self, request: CaptureRequest) -> Result<CapturePorts, DatabaseError>;

    /// The wake-up channel alone, for a replica that follows another's capture.
    fn wake_channel(&self) -> Arc<dyn WakeChannel>;

    /// Closes the pool, waiting for connections in use to come back. Called once, last, after
    /// every worker has stopped.
    async fn close(&self);
}
