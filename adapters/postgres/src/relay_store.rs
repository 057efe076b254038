//! The inbox relay's store on PostgreSQL: the serialised claim of push rows, the one-statement fenced
//! forward into the outbox, the fenced dead letter, the reclaim and the oldest-pending gauge (see
//! `queries/relay_*.sql` for why each statement is shaped so).

use crate::pool::Pool;
use crate::statements::Statements;
use crate::store_support::{
    applied_positions, decode_walk_claim, header_pairs, millis, pool_error, sql_limit,
    storable_text, store_error,
};
use async_trait::async_trait;
use queuebox_ports::inbox::{ForwardedRow, RelayRow, RelayStore};
use queuebox_ports::outbox::StoreError;
use sqlx::postgres::PgRow;
use sqlx::{Connection, PgConnection, Row};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

/// The most aggregates one claim walks past. A blocked aggregate (a row processing) costs one index
/// probe; the bound keeps a claim cheap when very many aggregates are blocked at once, and the cursor
/// moves the next walk on past them.
const SCAN_BOUND: i32 = 2_000;

/// Rows claimed before leases existed have none: their lease counts from the claim time with the
/// longest lease QueueBox gave by default (five minutes).
const LEGACY_LEASE_MS: i64 = 300_000;

/// The inbox table on PostgreSQL, as the relay uses it.
pub struct PgRelayStore {
    pool: Pool,
    statements: Arc<Statements>,
    /// The configured inbox table name: the key of the relay claim lock.
    table: String,
    /// The aggregate after which this replica's next walk starts ('' = from the first).
    cursor: Mutex<String>,
    /// Which kind of row a claim serves first; flips every claim so that neither rows with an
    /// aggregate nor rows without one can starve the other.
    unkeyed_first: AtomicBool,
}

impl PgRelayStore {
    /// A store over `pool` with the rendered `statements`; `inbox_table` keys the claim lock.
    pub fn new(pool: Pool, statements: Arc<Statements>, inbox_table: String) -> Self {
        Self {
            pool,
            statements,
            table: inbox_table,
            cursor: Mutex::new(String::new()),
            unkeyed_first: AtomicBool::new(false),
        }
    }

    /// Claims the heads of up to `limit` ready aggregates, walking from `cursor`; returns where the
    /// next walk starts.
    async fn claim_keyed(
        &self,
        connection: &mut PgConnection,
        cursor: &str,
        limit: u32,
        lease: Duration,
        rows: &mut Vec<RelayRow>,
    ) -> Result<String, StoreError> {
        let result = sqlx::query(self.statements.relay_claim_keyed.clone())
            .bind(cursor)
            .bind(sql_limit(limit))
            .bind(millis(lease))
            .bind(SCAN_BOUND)
            .fetch_all(&mut *connection)
            .await
            .map_err(|e| store_error("relay claim", e))?;
        decode_walk_claim(&result, limit, SCAN_BOUND, "relay claim", relay_row, rows)
    }

    /// Claims up to `limit` pending push rows without an aggregate, oldest first.
    async fn claim_unkeyed(
        &self,
        connection: &mut PgConnection,
        limit: u32,
        lease: Duration,
        rows: &mut Vec<RelayRow>,
    ) -> Result<(), StoreError> {
        if limit == 0 {
            return Ok(());
        }
        let result = sqlx::query(self.statements.relay_claim_unkeyed.clone())
            .bind(sql_limit(limit))
            .bind(millis(lease))
            .fetch_all(&mut *connection)
            .await
            .map_err(|e| store_error("relay claim", e))?;
        for row in &result {
            rows.push(relay_row(row)?);
        }
        Ok(())
    }

    /// Every claim statement of one claim, in the open transaction that holds the relay lock.
    async fn claim_locked(
        &self,
        connection: &mut PgConnection,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<RelayRow>, StoreError> {
        let mut rows = Vec::with_capacity(limit as usize);
        let unkeyed_first = self.unkeyed_first.fetch_xor(true, Ordering::Relaxed);
        if unkeyed_first {
            self.claim_unkeyed(connection, limit, lease, &mut rows)
                .await?;
        }
        let remaining = limit.saturating_sub(rows.len() as u32);
        if remaining > 0 {
            let started_at = self.current_cursor();
            let mut cursor = self
                .claim_keyed(connection, &started_at, remaining, lease, &mut rows)
                .await?;
            let remaining = limit.saturating_sub(rows.len() as u32);
            // The walk reached the last aggregate before filling the batch: wrap around once, so the
            // aggregates before the cursor get their turn in this claim rather than the next.
            if remaining > 0 && cursor.is_empty() && !started_at.is_empty() {
                cursor = self
                    .claim_keyed(connection, "", remaining, lease, &mut rows)
                    .await?;
            }
            self.set_cursor(cursor);
        }
        if !unkeyed_first {
            let remaining = limit.saturating_sub(rows.len() as u32);
            self.claim_unkeyed(connection, remaining, lease, &mut rows)
                .await?;
        }
        Ok(rows)
    }

    fn current_cursor(&self) -> String {
        self.cursor
            .lock()
            .map(|cursor| cursor.clone())
            .unwrap_or_default()
    }

    fn set_cursor(&self, next: String) {
        if let Ok(mut cursor) = self.cursor.lock() {
            *cursor = next;
        }
    }

    async fn connection(
        &self,
        operation: &'static str,
    ) -> Result<crate::pool::PooledConnection, StoreError> {
        self.pool
            .acquire()
            .await
            .map_err(|e| pool_error(operation, e))
    }
}

#[async_trait]
impl RelayStore for PgRelayStore {
    async fn claim(&self, limit: u32, lease: Duration) -> Result<Vec<RelayRow>, StoreError> {
        let limit = limit.max(1);
        let mut connection = self.connection("relay claim").await?;
        let mut transaction = connection
            .begin()
            .await
            .map_err(|e| store_error("relay claim", e))?;
        sqlx::query(self.statements.relay_lock.clone())
            .bind(&self.table)
            .execute(&mut *transaction)
            .await
            .map_err(|e| store_error("relay claim lock", e))?;
        let rows = self.claim_locked(&mut transaction, limit, lease).await?;
        // Commit releases the lock; on an error above, dropping the transaction rolls it back.
        transaction
            .commit()
            .await
            .map_err(|e| store_error("relay claim", e))?;
        Ok(rows)
    }

    async fn forward(&self, rows: &[ForwardedRow]) -> Result<Vec<bool>, StoreError> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut ids = Vec::with_capacity(rows.len());
        let mut tokens = Vec::with_capacity(rows.len());
        let mut topics = Vec::with_capacity(rows.len());
        let mut keys: Vec<Option<String>> = Vec::with_capacity(rows.len());
        let mut payloads = Vec::with_capacity(rows.len());
        let mut headers = Vec::with_capacity(rows.len());
        let mut max_attempts = Vec::with_capacity(rows.len());
        for row in rows {
            ids.push(row.inbox_id);
            tokens.push(row.claim_token);
            topics.push(row.topic.clone());
            keys.push(row.key.clone());
            payloads.push(row.payload.clone());
            headers.push(headers_object(&row.headers));
            max_attempts.push(row.max_attempts);
        }
        let mut connection = self.connection("relay forward").await?;
        let forwarded: Vec<i64> = sqlx::query_scalar(self.statements.relay_forward.clone())
            .bind(&ids)
            .bind(&tokens)
            .bind(&topics)
            .bind(&keys)
            .bind(&payloads)
            .bind(&headers)
            .bind(&max_attempts)
            .fetch_all(&mut *connection)
            .await
            .map_err(|e| store_error("relay forward", e))?;
        Ok(applied_positions(rows.len(), &forwarded))
    }

    async fn mark_dead(
        &self,
        id: Uuid,
        claim_token: Uuid,
        reason: &str,
    ) -> Result<bool, StoreError> {
        let mut connection = self.connection("relay dead letter").await?;
        let changed: Option<Uuid> = sqlx::query_scalar(self.statements.relay_dead.clone())
            .bind(id)
            .bind(claim_token)
            .bind(storable_text(reason))
            .fetch_optional(&mut *connection)
            .await
            .map_err(|e| store_error("relay dead letter", e))?;
        Ok(changed.is_some())
    }

    async fn reclaim_expired(&self) -> Result<u64, StoreError> {
        let mut connection = self.connection("relay reclaim").await?;
        let result = sqlx::query(self.statements.relay_reclaim.clone())
            .bind(LEGACY_LEASE_MS)
            .execute(&mut *connection)
            .await
            .map_err(|e| store_error("relay reclaim", e))?;
        Ok(result.rows_affected())
    }

    async fn oldest_pending_age(&self) -> Result<Duration, StoreError> {
        let mut connection = self.connection("inbox pending gauge").await?;
        let seconds: f64 = sqlx::query_scalar(self.statements.relay_oldest_pending.clone())
            .fetch_one(&mut *connection)
            .await
            .map_err(|e| store_error("inbox pending gauge", e))?;
        // A row stamped by a clock ahead of the database's has a negative age: report zero.
        Ok(Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or_default())
    }
}

fn relay_row(row: &PgRow) -> Result<RelayRow, StoreError> {
    let get_err = |e: sqlx::Error| store_error("relay claim", e);
    let headers_text: String = row.try_get("headers").map_err(get_err)?;
    Ok(RelayRow {
        id: row.try_get("id").map_err(get_err)?,
        claim_token: row.try_get("claim_token").map_err(get_err)?,
        source: row.try_get("source").map_err(get_err)?,
        idempotency_key: row.try_get("idempotency_key").map_err(get_err)?,
        aggregate_id: row.try_get("aggregate_id").map_err(get_err)?,
        event_type: row.try_get("event_type").map_err(get_err)?,
        payload: row.try_get("payload").map_err(get_err)?,
        headers: header_pairs(&headers_text),
        correlation_id: row.try_get("correlation_id").map_err(get_err)?,
    })
}

/// The pairs as one JSON object, in their order; a repeated name keeps its last value.
fn headers_object(pairs: &[(String, String)]) -> String {
    let map: serde_json::Map<String, serde_json::Value> = pairs
        .iter()
        .map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone())))
        .collect();
    serde_json::Value::Object(map).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_object_keeps_the_order_of_the_pairs() {
        let pairs = header_pairs(r#"{"X-B":"2","X-A":"1","X-N":3}"#);
        assert_eq!(headers_object(&pairs), r#"{"X-B":"2","X-A":"1","X-N":"3"}"#);
    }
}
