//! The retention store on PostgreSQL: one short delete statement per batch (see
//! `queries/retention_*.sql` for the index each one walks and why none of them waits for a lock).

use crate::pool::Pool;
use crate::statements::Statements;
use crate::store_support::{millis, pool_error, store_error};
use async_trait::async_trait;
use queuebox_ports::outbox::StoreError;
use queuebox_ports::retention::{RetentionStore, Sweep};
use std::sync::Arc;

const OPERATION: &str = "retention delete";

/// The outbox and inbox tables on PostgreSQL, as the retention cleanup uses them.
pub struct PgRetentionStore {
    pool: Pool,
    statements: Arc<Statements>,
}

impl PgRetentionStore {
    /// A store over `pool` with the rendered `statements`.
    pub fn new(pool: Pool, statements: Arc<Statements>) -> Self {
        Self { pool, statements }
    }
}

#[async_trait]
impl RetentionStore for PgRetentionStore {
    async fn delete_batch(&self, sweep: &Sweep, limit: u32) -> Result<u64, StoreError> {
        let limit = i32::try_from(limit.max(1)).unwrap_or(i32::MAX);
        let query = match *sweep {
            Sweep::OutboxOlderThan { state, max_age } => {
                sqlx::query(self.statements.retention_outbox_age.clone())
                    .bind(state.as_str())
                    .bind(millis(max_age))
            }
            Sweep::OutboxBeyondNewest { state, keep } => {
                sqlx::query(self.statements.retention_outbox_count.clone())
                    .bind(state.as_str())
                    .bind(i64::try_from(keep).unwrap_or(i64::MAX))
            }
            Sweep::InboxOlderThan { state, max_age } => {
                sqlx::query(self.statements.retention_inbox_age.clone())
                    .bind(state.as_str())
                    .bind(millis(max_age))
            }
        };
        let mut connection = self
            .pool
            .acquire()
            .await
            .map_err(|e| pool_error(OPERATION, e))?;
        // One statement in autocommit: its transaction lasts exactly as long as the batch.
        let done = query
            .bind(limit)
            .execute(&mut *connection)
            .await
            .map_err(|e| store_error(OPERATION, e))?;
        Ok(done.rows_affected())
    }
}
