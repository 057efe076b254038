//! The database backend chosen by `database.type`, among those compiled in.

use anyhow::Context as _;
use queuebox_ports::database::{DatabaseKind, DatabaseOptions};
use queuebox_ports::health::HealthCheck;
use queuebox_ports::inbox::{InboxStore, RelayStore};
use queuebox_ports::outbox::OutboxStore;
use queuebox_ports::replay::ReplayStore;
use queuebox_ports::retention::RetentionStore;
use std::sync::Arc;

/// An open, prepared database of one of the compiled-in kinds.
pub enum Database {
    /// PostgreSQL through sqlx.
    #[cfg(feature = "postgres")]
    Postgres(queuebox_postgres::PostgresDatabase),
}

impl Database {
    /// Waits for the database (up to `database.startupTimeoutMs`) and opens the pool.
    pub async fn connect(options: &DatabaseOptions) -> anyhow::Result<Self> {
        match options.target.kind {
            DatabaseKind::Postgresql => connect_postgres(options).await,
            DatabaseKind::Sqlserver => anyhow::bail!(
                "database.type is sqlserver, and SQL Server support is not implemented yet in this version"
            ),
        }
    }

    /// Applies the migrations (when `database.migrate` is true) and checks the required columns.
    pub async fn prepare(&self) -> anyhow::Result<()> {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => db
                .prepare()
                .await
                .context("preparing the PostgreSQL schema"),
        }
    }

    /// The outbox table, for the dispatcher.
    pub fn outbox_store(&self) -> Arc<dyn OutboxStore> {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => Arc::new(db.outbox_store()),
        }
    }

    /// The inbox table, for the ingest pipeline.
    pub fn inbox_store(&self) -> Arc<dyn InboxStore> {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => Arc::new(db.inbox_store()),
        }
    }

    /// The inbox table, for the relay.
    pub fn relay_store(&self) -> Arc<dyn RelayStore> {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => Arc::new(db.relay_store()),
        }
    }

    /// The outbox table, for replay.
    pub fn replay_store(&self) -> Arc<dyn ReplayStore> {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => Arc::new(db.replay_store()),
        }
    }

    /// Both tables, for the retention cleanup.
    pub fn retention_store(&self) -> Arc<dyn RetentionStore> {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => Arc::new(db.retention_store()),
        }
    }

    /// The `database` health component.
    pub fn health_check(&self) -> Arc<dyn HealthCheck> {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => db.health_check(),
        }
    }

    /// Closes the pool; waits for connections in use to come back.
    pub async fn close(self) {
        match self {
            #[cfg(feature = "postgres")]
            Database::Postgres(db) => db.close().await,
        }
    }
}

#[cfg(feature = "postgres")]
async fn connect_postgres(options: &DatabaseOptions) -> anyhow::Result<Database> {
    let db = queuebox_postgres::connect(options)
        .await
        .with_context(|| format!("connecting to {}", options.target.display_url()))?;
    Ok(Database::Postgres(db))
}

#[cfg(not(feature = "postgres"))]
async fn connect_postgres(_options: &DatabaseOptions) -> anyhow::Result<Database> {
    anyhow::bail!(
        "database.type is postgresql, but this binary was built without the `postgres` feature"
    )
}
