//! The inbox store on PostgreSQL: one insert per received message, deduplicated by the unique
//! constraint on (source, idempotency key) (see `queries/insert_inbox.sql`).

use crate::pool::Pool;
use crate::statements::Statements;
use async_trait::async_trait;
use queuebox_ports::inbox::{InboxStore, NewInboxMessage, Stored};
use queuebox_ports::outbox::StoreError;
use serde_json::value::RawValue;
use sqlx::types::Json;
use std::sync::Arc;
use uuid::Uuid;

/// The inbox table on PostgreSQL, as the ingest pipeline writes it.
pub struct PgInboxStore {
    pool: Pool,
    statements: Arc<Statements>,
}

impl PgInboxStore {
    /// A store over `pool` with the rendered `statements`.
    pub fn new(pool: Pool, statements: Arc<Statements>) -> Self {
        Self { pool, statements }
    }
}

#[async_trait]
impl InboxStore for PgInboxStore {
    async fn insert(&self, message: &NewInboxMessage) -> Result<Stored, StoreError> {
        // A row refused at receipt (a broker message that is not JSON, or whose source transform
        // said `Dead`) is stored `dead` with its reason, so the message is acknowledged and kept.
        // Its payload may not be JSON: then it is kept as a JSON string of the received text.
        let (state, last_error) = match message.dead_reason.as_deref() {
            None => ("pending", None),
            Some(reason) => ("dead", Some(reason)),
        };
        let payload = match RawValue::from_string(message.payload.clone()) {
            Ok(payload) => payload,
            Err(e) if message.dead_reason.is_none() => {
                return Err(StoreError {
                    operation: "insert",
                    reason: format!("the payload is not JSON: {e}"),
                });
            }
            Err(_) => {
                serde_json::value::to_raw_value(&message.payload).map_err(|e| StoreError {
                    operation: "insert",
                    reason: format!("the payload could not be kept as JSON text: {e}"),
                })?
            }
        };
        let headers: serde_json::Map<String, serde_json::Value> = message
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone())))
            .collect();
        let mut connection = self.pool.acquire().await.map_err(|e| StoreError {
            operation: "insert",
            reason: e.to_string(),
        })?;
        let inserted: Option<Uuid> = sqlx::query_scalar(self.statements.insert_inbox.clone())
            .bind(message.id)
            .bind(&message.source)
            .bind(&message.idempotency_key)
            .bind(message.aggregate_id.as_deref())
            .bind(message.event_type.as_deref())
            .bind(Json(payload))
            .bind(Json(headers))
            .bind(message.correlation_id.as_deref())
            .bind(message.consumption.as_str())
            .bind(state)
            .bind(last_error)
            .fetch_optional(&mut *connection)
            .await
            .map_err(|e| StoreError {
                operation: "insert",
                reason: crate::error::PostgresError::from(e).to_string(),
            })?;
        Ok(inserted.map_or(Stored::Duplicate, Stored::New))
    }
}
