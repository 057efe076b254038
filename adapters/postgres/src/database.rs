//! [`PostgresDatabase`]: the handle the binary wires in — pool, statements, schema preparation,
//! health check.

use std::sync::Arc;

use async_trait::async_trait;
use queuebox_domain::mapping::SchemaNames;
use queuebox_ports::capture::{CapturePorts, CaptureRequest, WakeChannel};
use queuebox_ports::database::{DatabaseBackend, DatabaseError, DatabaseKind, DatabaseOptions};
use queuebox_ports::health::HealthCheck;
use queuebox_ports::inbox::{InboxStore, RelayStore};
use queuebox_ports::outbox::OutboxStore;
use queuebox_ports::replay::ReplayStore;
use queuebox_ports::retention::RetentionStore;

use crate::capture::{CaptureConnection, PgCaptureConnector, PgCaptureStateStore, PgWakeChannel};
use crate::connect::{connect_options, wait_for_database};
use crate::error::PostgresError;
use crate::failover::{Failover, describe};
use crate::guard;
use crate::health::DatabaseHealth;
use crate::migrate::{self, MigrationReport};
use crate::pool::Pool;
use crate::statements::Statements;

/// An open PostgreSQL database: the pool and the statements rendered for the configured names.
#[derive(Debug, Clone)]
pub struct PostgresDatabase {
    pool: Pool,
    statements: Arc<Statements>,
    options: Arc<DatabaseOptions>,
}

/// Waits for the database (up to `startup_timeout`) and builds the pool. Runs no migration.
///
/// Checked before any wait: the names (identifier rule) and that `migrate` is not combined with a
/// renamed table or column.
///
/// # Errors
/// [`PostgresError::InvalidNames`], [`PostgresError::MigrateWithRenamedSchema`],
/// [`PostgresError::Unreachable`] (masked URL and last cause), [`PostgresError::Refused`].
pub async fn connect(options: &DatabaseOptions) -> Result<PostgresDatabase, PostgresError> {
    crate::tls::ensure_crypto_provider();
    let statements = Statements::render(&options.schema)?;
    refuse_migrate_with_renames(options.migrate, &options.schema)?;
    let hosts = connect_options(&options.target)?;
    let chosen = wait_for_database(options, &hosts).await?;
    tracing::info!(
        url = %options.target.display_url(),
        host = %describe(&hosts[chosen]),
        pool_size = options.pool_size,
        "database reachable"
    );
    let pool = if hosts.len() > 1 {
        let failover = Failover::new(
            hosts,
            chosen,
            options.connection_timeout,
            options.target.password.clone(),
        );
        Pool::with_failover(failover, options.pool_size, options.connection_timeout)
    } else {
        let host = hosts.into_iter().next().ok_or(PostgresError::NoHost)?;
        Pool::new(host, options.pool_size, options.connection_timeout)
    };
    Ok(PostgresDatabase {
        pool,
        statements: Arc::new(statements),
        options: Arc::new(options.clone()),
    })
}

/// The bundled files create the default names only, so they must not run against a renamed schema.
fn refuse_migrate_with_renames(migrate: bool, names: &SchemaNames) -> Result<(), PostgresError> {
    let settings = names.renamed_settings();
    if migrate && !settings.is_empty() {
        return Err(PostgresError::MigrateWithRenamedSchema { settings });
    }
    Ok(())
}

impl PostgresDatabase {
    /// Migrates when `database.migrate` is true, then checks the two required columns.
    ///
    /// # Errors
    /// See [`PostgresDatabase::migrate`] and [`PostgresError::SchemaGuard`].
    pub async fn prepare(&self) -> Result<(), PostgresError> {
        if self.options.migrate {
            self.migrate().await?;
        }
        guard::check(&self.pool, &self.statements, &self.options.schema).await
    }

    /// Applies the bundled migrations now, whatever `database.migrate` says (for a `migrate`
    /// command), and reports what it did.
    ///
    /// # Errors
    /// [`PostgresError::MigrateWithRenamedSchema`], [`PostgresError::ChecksumMismatch`],
    /// [`PostgresError::Migration`], or a database error.
    pub async fn migrate(&self) -> Result<MigrationReport, PostgresError> {
        refuse_migrate_with_renames(true, &self.options.schema)?;
        migrate::run(&self.pool).await
    }

    /// The measured pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The outbox table as the dispatcher claims and finishes its rows.
    pub fn outbox_store(&self) -> crate::outbox_store::PgOutboxStore {
        crate::outbox_store::PgOutboxStore::new(self.pool.clone(), Arc::clone(&self.statements))
    }

    /// The inbox table as the ingest pipeline writes it.
    pub fn inbox_store(&self) -> crate::inbox_store::PgInboxStore {
        crate::inbox_store::PgInboxStore::new(self.pool.clone(), Arc::clone(&self.statements))
    }

    /// The inbox table as the relay uses it; its claim lock is keyed on the inbox table name.
    pub fn relay_store(&self) -> crate::relay_store::PgRelayStore {
        crate::relay_store::PgRelayStore::new(
            self.pool.clone(),
            Arc::clone(&self.statements),
            self.options.schema.inbox_table.clone(),
        )
    }

    /// Both tables as the retention cleanup deletes from them.
    pub fn retention_store(&self) -> crate::retention_store::PgRetentionStore {
        crate::retention_store::PgRetentionStore::new(
            self.pool.clone(),
            Arc::clone(&self.statements),
        )
    }

    /// The outbox table as replay moves rows back to pending.
    pub fn replay_store(&self) -> crate::replay_store::PgReplayStore {
        crate::replay_store::PgReplayStore::new(self.pool.clone(), Arc::clone(&self.statements))
    }

    /// The console's reads, rendered for the configured names.
    ///
    /// # Errors
    /// A name breaks the identifier rule (checked at connect already, so a last guard).
    pub fn console_store(&self) -> Result<crate::console_store::PgConsoleStore, PostgresError> {
        let statements = crate::console_store::ConsoleStatements::render(&self.options.schema)?;
        Ok(crate::console_store::PgConsoleStore::new(
            self.pool.clone(),
            statements,
        ))
    }

    /// The rendered statements.
    pub fn statements(&self) -> &Statements {
        &self.statements
    }

    /// The `database` health check.
    pub fn health_check(&self) -> Arc<dyn HealthCheck> {
        Arc::new(DatabaseHealth {
            pool: self.pool.clone(),
            ping: self.statements.ping.clone(),
            password: self.options.target.password.clone(),
        })
    }

    /// Closes the pool, waiting for borrowed connections to come back.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The port the binary wires: each method hands out the typed store of the same name above.
#[async_trait]
impl DatabaseBackend for PostgresDatabase {
    fn kind(&self) -> DatabaseKind {
        DatabaseKind::Postgresql
    }

    async fn prepare(&self) -> Result<(), DatabaseError> {
        PostgresDatabase::prepare(self)
            .await
            .map_err(DatabaseError::new)
    }

    fn outbox_store(&self) -> Arc<dyn OutboxStore> {
        Arc::new(PostgresDatabase::outbox_store(self))
    }

    fn inbox_store(&self) -> Arc<dyn InboxStore> {
        Arc::new(PostgresDatabase::inbox_store(self))
    }

    fn relay_store(&self) -> Arc<dyn RelayStore> {
        Arc::new(PostgresDatabase::relay_store(self))
    }

    fn replay_store(&self) -> Arc<dyn ReplayStore> {
        Arc::new(PostgresDatabase::replay_store(self))
    }

    fn retention_store(&self) -> Arc<dyn RetentionStore> {
        Arc::new(PostgresDatabase::retention_store(self))
    }

    fn console_store(&self) -> Option<Arc<dyn queuebox_ports::console::ConsoleStore>> {
        match PostgresDatabase::console_store(self) {
            Ok(store) => Some(Arc::new(store)),
            Err(error) => {
                tracing::error!(%error, "the console statements do not render");
                None
            }
        }
    }

    fn health_check(&self) -> Arc<dyn HealthCheck> {
        PostgresDatabase::health_check(self)
    }

    fn capture_ports(&self, request: CaptureRequest) -> Result<CapturePorts, DatabaseError> {
        let scope = request.scope;
        let connector = PgCaptureConnector::new(CaptureConnection {
            host: scope.host,
            port: scope.port,
            database: scope.database,
            username: request.username,
            password: request.password,
            params: request.params,
            identity: request.identity,
            schema: scope.schema,
            table: scope.table,
            publication: scope.publication,
            slot: scope.slot,
        })
        .map_err(DatabaseError::new)?;
        Ok(CapturePorts {
            connector: Arc::new(connector),
            state: Arc::new(PgCaptureStateStore::new(self.pool.clone())),
            wakes: self.wake_channel(),
        })
    }

    fn wake_channel(&self) -> Arc<dyn WakeChannel> {
        Arc::new(PgWakeChannel::new(self.pool.clone()))
    }

    async fn close(&self) {
        PostgresDatabase::close(self).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrate_with_renames_names_each_setting() {
        let mut names = SchemaNames {
            outbox_table: "qb_outbox".into(),
            ..SchemaNames::default()
        };
        assert!(names.inbox.set("idempotencyKey", "dedup_key"));
        let error = refuse_migrate_with_renames(true, &names).expect_err("refused");
        let text = error.to_string();
        assert!(text.contains("database.outboxTableName"), "{text}");
        assert!(
            text.contains("database.columnMapping.inbox.idempotencyKey"),
            "{text}"
        );
        assert!(refuse_migrate_with_renames(false, &names).is_ok());
        assert!(refuse_migrate_with_renames(true, &SchemaNames::default()).is_ok());
    }
}
