//! The migration runner: QueueBox's own replacement for Flyway.
//!
//! One run, under a session advisory lock so that replicas starting together never migrate at the
//! same time:
//! 1. create `queuebox_schema_history` when it is missing;
//! 2. refuse to go on when a recorded version's checksum differs from the embedded file;
//! 3. for each version not recorded yet, in order: when every object the version creates is
//!    already there and every index it drops is gone (a schema applied by hand, or by an earlier
//!    Flyway-based release), record it as
//!    `baselined`; otherwise run the file in its own transaction and record it as `applied`.
//!
//! The files are written with `IF NOT EXISTS`, so a version that was applied by hand only in part
//! is completed by running it.

use std::time::Instant;

use sha2::{Digest, Sha256};
use sqlx::{Connection, PgConnection};

use crate::error::PostgresError;
use crate::migrations::{Migration, SchemaObject, migration_files};
use crate::pool::Pool;

/// The advisory lock key of a migration run: the ASCII bytes of `qbmigrat`.
pub const MIGRATION_LOCK_KEY: i64 = 0x7162_6d69_6772_6174;

/// The table that records each version.
pub const HISTORY_TABLE: &str = "queuebox_schema_history";

const LOCK: &str = include_str!("../queries/migrate/lock.sql");
const UNLOCK: &str = include_str!("../queries/migrate/unlock.sql");
const HISTORY_CREATE: &str = include_str!("../queries/migrate/history_create.sql");
const HISTORY_SELECT: &str = include_str!("../queries/migrate/history_select.sql");
const HISTORY_INSERT: &str = include_str!("../queries/migrate/history_insert.sql");
const RELATION_EXISTS: &str = include_str!("../queries/migrate/relation_exists.sql");
const COLUMN_EXISTS: &str = include_str!("../queries/migrate/column_exists.sql");

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationReport {
    /// Versions whose file ran.
    pub applied: Vec<i32>,
    /// Versions found in place and only recorded.
    pub baselined: Vec<i32>,
}

/// The checksum recorded for a file: SHA-256 of its text with line ends normalised to `\n`, so a
/// checkout that converts line ends does not count as a changed file.
pub fn checksum(sql: &str) -> String {
    let digest = Sha256::digest(sql.replace("\r\n", "\n").as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Brings the schema up to the bundled files; see the module comment.
///
/// # Errors
/// [`PostgresError::ChecksumMismatch`] when an applied file changed, [`PostgresError::Migration`]
/// when a file fails (its transaction is rolled back), or the database error of the bookkeeping.
pub(crate) async fn run(pool: &Pool) -> Result<MigrationReport, PostgresError> {
    let mut connection = pool.acquire().await?;
    sqlx::query(LOCK)
        .bind(MIGRATION_LOCK_KEY)
        .execute(&mut *connection)
        .await?;
    let result = run_locked(&mut connection).await;
    let unlocked = sqlx::query(UNLOCK)
        .bind(MIGRATION_LOCK_KEY)
        .execute(&mut *connection)
        .await;
    if unlocked.is_err() {
        // Closing the session releases its lock; the pool must not hand it out still locked.
        connection.close();
    }
    result
}

async fn run_locked(connection: &mut PgConnection) -> Result<MigrationReport, PostgresError> {
    sqlx::raw_sql(HISTORY_CREATE)
        .execute(&mut *connection)
        .await?;
    let recorded: Vec<(i32, String)> = sqlx::query_as(HISTORY_SELECT)
        .fetch_all(&mut *connection)
        .await?;
    for (version, recorded_checksum) in &recorded {
        match migration_files().iter().find(|m| m.version == *version) {
            Some(migration) => {
                let expected = checksum(migration.sql);
                if *recorded_checksum != expected {
                    return Err(PostgresError::ChecksumMismatch {
                        version: *version,
                        script: migration.name,
                        recorded: recorded_checksum.clone(),
                        expected,
                    });
                }
            }
            None => tracing::warn!(
                version,
                "the schema history records a migration this release does not ship; \
                 a newer QueueBox release applied it"
            ),
        }
    }

    let mut report = MigrationReport::default();
    for migration in migration_files() {
        if recorded
            .iter()
            .any(|(version, _)| *version == migration.version)
        {
            continue;
        }
        if already_present(connection, migration).await? {
            record(connection, migration, "baselined", 0).await?;
            tracing::info!(
                migration = migration.name,
                "schema already present; recorded as baselined"
            );
            report.baselined.push(migration.version);
        } else {
            apply(connection, migration)
                .await
                .map_err(|source| PostgresError::Migration {
                    version: migration.version,
                    script: migration.name,
                    source: Box::new(source),
                })?;
            tracing::info!(migration = migration.name, "migration applied");
            report.applied.push(migration.version);
        }
    }
    Ok(report)
}

async fn apply(connection: &mut PgConnection, migration: &Migration) -> Result<(), PostgresError> {
    let started = Instant::now();
    let mut transaction = connection.begin().await?;
    sqlx::raw_sql(migration.sql)
        .execute(&mut *transaction)
        .await?;
    let elapsed_ms = i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX);
    record(&mut transaction, migration, "applied", elapsed_ms).await?;
    transaction.commit().await?;
    Ok(())
}

async fn record(
    connection: &mut PgConnection,
    migration: &Migration,
    how: &str,
    execution_ms: i32,
) -> Result<(), PostgresError> {
    sqlx::query(HISTORY_INSERT)
        .bind(migration.version)
        .bind(migration.description())
        .bind(migration.name)
        .bind(checksum(migration.sql))
        .bind(how)
        .bind(execution_ms)
        .execute(&mut *connection)
        .await?;
    Ok(())
}

/// True when every object the version creates exists in the current schema (and every index it
/// drops is gone).
async fn already_present(
    connection: &mut PgConnection,
    migration: &Migration,
) -> Result<bool, PostgresError> {
    for object in migration.creates {
        if !exists(connection, *object).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

async fn exists(
    connection: &mut PgConnection,
    object: SchemaObject,
) -> Result<bool, PostgresError> {
    let relation = |name: &'static str, kinds: &'static [&'static str]| {
        sqlx::query_scalar::<_, bool>(RELATION_EXISTS)
            .bind(name)
            .bind(kinds)
    };
    let found = match object {
        // Ordinary and partitioned tables; plain and partitioned indexes.
        SchemaObject::Table(name) => {
            relation(name, &["r", "p"])
                .fetch_one(&mut *connection)
                .await?
        }
        SchemaObject::Index(name) => {
            relation(name, &["i", "I"])
                .fetch_one(&mut *connection)
                .await?
        }
        SchemaObject::Sequence(name) => relation(name, &["S"]).fetch_one(&mut *connection).await?,
        SchemaObject::NoIndex(name) => {
            !relation(name, &["i", "I"])
                .fetch_one(&mut *connection)
                .await?
        }
        SchemaObject::Column(table, column) => {
            sqlx::query_scalar::<_, bool>(COLUMN_EXISTS)
                .bind(table)
                .bind(column)
                .fetch_one(&mut *connection)
                .await?
        }
    };
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_ignores_line_end_style() {
        assert_eq!(checksum("a\r\nb\n"), checksum("a\nb\n"));
        assert_ne!(checksum("a\n"), checksum("b\n"));
        assert_eq!(checksum("").len(), 64);
    }

    #[test]
    fn the_lock_key_spells_qbmigrat() {
        assert_eq!(MIGRATION_LOCK_KEY.to_be_bytes(), *b"qbmigrat");
    }
}
