//! The outbox table on PostgreSQL, as replay uses it: a keyset page of candidates and the move of one
//! page back to pending (see `queries/replay_*.sql` for why each statement is shaped so).

use crate::pool::Pool;
use crate::statements::Statements;
use crate::store_support::{pool_error, sql_limit, store_error};
use async_trait::async_trait;
use queuebox_ports::outbox::StoreError;
use queuebox_ports::replay::{ReplayCandidate, ReplaySelection, ReplayStore};
use sqlx::Row;
use std::sync::Arc;
use uuid::Uuid;

/// The outbox table on PostgreSQL, as replay uses it.
pub struct PgReplayStore {
    pool: Pool,
    statements: Arc<Statements>,
}

impl PgReplayStore {
    /// A store over `pool` with the rendered `statements`.
    pub fn new(pool: Pool, statements: Arc<Statements>) -> Self {
        Self { pool, statements }
    }
}

#[async_trait]
impl ReplayStore for PgReplayStore {
    async fn replay_candidates(
        &self,
        selection: &ReplaySelection,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<ReplayCandidate>, StoreError> {
        const OPERATION: &str = "replay page";
        let mut connection = self
            .pool
            .acquire()
            .await
            .map_err(|e| pool_error(OPERATION, e))?;
        // The nil uuid is the lowest uuid, so the first page starts there and includes it.
        //
        // Not a cached prepared statement: a cached one may switch to PostgreSQL's generic plan,
        // which knows neither the cursor nor which filters are NULL, and then reads every row after
        // the cursor and sorts them on every page (measured: 100-200 ms a page at 300k rows, so a
        // whole replay grew with the square of the table). Planned with the values, the page walks
        // the primary key from the cursor and stops at the limit (4-12 ms a page), or uses the topic
        // index when the topic filter is selective.
        let rows = sqlx::query(self.statements.replay_candidates.clone())
            .persistent(false)
            .bind(after.unwrap_or(Uuid::nil()))
            .bind(after.is_none())
            .bind(selection.ids.as_deref())
            .bind(selection.topic.as_deref())
            .bind(selection.topics.as_deref())
            .bind(selection.created_after)
            .bind(selection.created_before)
            .bind(sql_limit(limit))
            .fetch_all(&mut *connection)
            .await
            .map_err(|e| store_error(OPERATION, e))?;
        rows.iter()
            .map(|row| {
                Ok(ReplayCandidate {
                    id: row.try_get("id").map_err(|e| store_error(OPERATION, e))?,
                    topic: row
                        .try_get("topic")
                        .map_err(|e| store_error(OPERATION, e))?,
                })
            })
            .collect()
    }

    async fn move_to_pending(&self, ids: &[Uuid]) -> Result<u64, StoreError> {
        const OPERATION: &str = "replay move";
        let mut connection = self
            .pool
            .acquire()
            .await
            .map_err(|e| pool_error(OPERATION, e))?;
        let done = sqlx::query(self.statements.replay_move.clone())
            .bind(ids)
            .execute(&mut *connection)
            .await
            .map_err(|e| store_error(OPERATION, e))?;
        Ok(done.rows_affected())
    }
}
