//! The PostgreSQL adapter of QueueBox, on sqlx: it opens and measures the connection pool, owns
//! the schema (the bundled `migrations/postgres` files and the runner that applies them), checks
//! the schema at start, and holds every SQL statement, rendered once from the configured table and
//! column names.
//!
//! It implements the ports of `queuebox-ports` and uses the names of `queuebox-domain`. It never
//! depends on the application crate or on another adapter.
//!
//! The binary calls [`connect`] (wait for the database, build the pool), then
//! [`PostgresDatabase::prepare`] (migrate when configured, then the schema check).

mod capture;
mod connect;
mod console_store;
mod database;
mod error;
mod failover;
mod guard;
mod health;
mod inbox_store;
mod migrate;
mod migrations;
pub mod nodelay;
mod outbox_store;
mod pool;
mod pool_metrics;
mod relay_store;
mod replay_store;
mod retention_store;
mod statements;
mod store_support;
mod tls;

pub use capture::{
    ANNOUNCE_STATEMENT, CaptureConnection, PgCaptureConnector, PgCaptureStateStore, PgWakeChannel,
};
pub use connect::DEFAULT_APPLICATION_NAME;
pub use console_store::{ConsoleStatements, PgConsoleStore};
pub use database::{PostgresDatabase, connect};
pub use error::{PostgresError, sqlstate};
pub use guard::{SchemaProblem, inbox_headers_fix, outbox_sequence_fix};
pub use health::COMPONENT as HEALTH_COMPONENT;
pub use inbox_store::PgInboxStore;
pub use migrate::{HISTORY_TABLE, MIGRATION_LOCK_KEY, MigrationReport, checksum};
pub use migrations::{Migration, migration_files};
pub use outbox_store::PgOutboxStore;
pub use pool::{Pool, PooledConnection};
pub use relay_store::PgRelayStore;
pub use replay_store::PgReplayStore;
pub use retention_store::PgRetentionStore;
pub use statements::{Statements, has_placeholder};
