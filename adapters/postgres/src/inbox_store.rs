//! The inbox store on PostgreSQL: received messages deduplicated by the unique constraint on
//! (source, idempotency key), one at a time (`queries/insert_inbox.sql`) or a group in one statement
//! (`queries/insert_inbox_many.sql`).

use crate::pool::Pool;
use crate::statements::Statements;
use async_trait::async_trait;
use queuebox_domain::inbox::dead_letter::dead_payload;
use queuebox_ports::inbox::{InboxStore, InsertManyError, NewInboxMessage, Stored};
use queuebox_ports::outbox::StoreError;
use serde_json::value::RawValue;
use sqlx::types::Json;
use std::collections::HashSet;
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

/// The stored state and last error of a message: a row refused at receipt (a broker message that
/// is not JSON, or whose source transform said `Dead`) is stored `dead` with its reason, so the
/// message is acknowledged and kept.
fn state_of(message: &NewInboxMessage) -> (&'static str, Option<&str>) {
    match message.dead_reason.as_deref() {
        None => ("pending", None),
        Some(reason) => ("dead", Some(reason)),
    }
}

/// The payload as JSON. A dead row's payload may not be JSON: then it is kept in the form the
/// pipeline gives such a body (`{"raw": ...}`, see [`dead_payload`]); a pending row's must be.
fn payload_of(message: &NewInboxMessage) -> Result<Box<RawValue>, StoreError> {
    match RawValue::from_string(message.payload.clone()) {
        Ok(payload) => Ok(payload),
        Err(e) if message.dead_reason.is_none() => Err(StoreError {
            operation: "insert",
            reason: format!("the payload is not JSON: {e}"),
        }),
        Err(_) => RawValue::from_string(dead_payload(message.payload.as_bytes()).0).map_err(|e| {
            StoreError {
                operation: "insert",
                reason: format!("the payload could not be kept as JSON text: {e}"),
            }
        }),
    }
}

/// The payload as JSON text, for the group statement: the received text itself when it is JSON,
/// else as [`payload_of`] (so a pending payload that is not JSON fails with the same reason as a
/// single insert, before any statement runs).
fn payload_text(message: &NewInboxMessage) -> Result<String, StoreError> {
    if serde_json::from_str::<&RawValue>(&message.payload).is_ok() {
        return Ok(message.payload.clone());
    }
    payload_of(message).map(|payload| payload.get().to_owned())
}

/// The headers as a JSON object of strings.
fn headers_of(message: &NewInboxMessage) -> serde_json::Map<String, serde_json::Value> {
    message
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone())))
        .collect()
}

fn statement_failed(e: sqlx::Error) -> StoreError {
    StoreError {
        operation: "insert",
        reason: crate::error::PostgresError::from(e).to_string(),
    }
}

/// The group as the parameter arrays of `insert_inbox_many.sql`, one element per message.
#[derive(Default)]
struct GroupArrays {
    ids: Vec<Uuid>,
    sources: Vec<String>,
    keys: Vec<String>,
    aggregate_ids: Vec<Option<String>>,
    event_types: Vec<Option<String>>,
    payloads: Vec<String>,
    headers: Vec<String>,
    correlation_ids: Vec<Option<String>>,
    consumptions: Vec<&'static str>,
    states: Vec<&'static str>,
    last_errors: Vec<Option<String>>,
}

impl GroupArrays {
    /// The arrays of `messages` sorted by (source, idempotency key): concurrent groups that share
    /// keys then take their index locks in one order and cannot deadlock each other.
    fn sorted(messages: &[NewInboxMessage]) -> Result<Self, StoreError> {
        let mut order: Vec<&NewInboxMessage> = messages.iter().collect();
        order.sort_by(|a, b| {
            (a.source.as_str(), a.idempotency_key.as_str())
                .cmp(&(b.source.as_str(), b.idempotency_key.as_str()))
        });
        let mut arrays = Self::default();
        for message in order {
            let (state, last_error) = state_of(message);
            let headers = serde_json::to_string(&headers_of(message)).map_err(|e| StoreError {
                operation: "insert",
                reason: format!("the headers could not be written as JSON: {e}"),
            })?;
            arrays.ids.push(message.id);
            arrays.sources.push(message.source.clone());
            arrays.keys.push(message.idempotency_key.clone());
            arrays.aggregate_ids.push(message.aggregate_id.clone());
            arrays.event_types.push(message.event_type.clone());
            arrays.payloads.push(payload_text(message)?);
            arrays.headers.push(headers);
            arrays.correlation_ids.push(message.correlation_id.clone());
            arrays.consumptions.push(message.consumption.as_str());
            arrays.states.push(state);
            arrays.last_errors.push(last_error.map(str::to_owned));
        }
        Ok(arrays)
    }
}

#[async_trait]
impl InboxStore for PgInboxStore {
    async fn insert(&self, message: &NewInboxMessage) -> Result<Stored, StoreError> {
        let (state, last_error) = state_of(message);
        let payload = payload_of(message)?;
        let headers = headers_of(message);
        let mut connection = self.pool.acquire().await.map_err(|e| StoreError {
            operation: "insert",
            reason: e.to_string(),
        })?;
        let inserted: Result<Option<Uuid>, sqlx::Error> =
            sqlx::query_scalar(self.statements.insert_inbox.clone())
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
                .await;
        match inserted {
            Ok(inserted) => Ok(inserted.map_or(Stored::Duplicate, Stored::New)),
            Err(e) => match crate::error::PostgresError::from(e) {
                // A value the server refuses as data is refused again on every try: the sender's
                // error, not a storage failure.
                refused @ crate::error::PostgresError::DataRefused { .. } => Ok(Stored::Refused {
                    reason: refused.to_string(),
                }),
                other => Err(StoreError {
                    operation: "insert",
                    reason: other.to_string(),
                }),
            },
        }
    }

    async fn insert_many(
        &self,
        messages: &[NewInboxMessage],
    ) -> Result<Vec<Stored>, InsertManyError> {
        if messages.is_empty() {
            return Ok(Vec::new());
        }
        let arrays = GroupArrays::sorted(messages).map_err(InsertManyError::Statement)?;
        let mut connection = self.pool.acquire().await.map_err(|e| {
            InsertManyError::Unavailable(StoreError {
                operation: "insert",
                reason: e.to_string(),
            })
        })?;
        let inserted: Vec<Uuid> = sqlx::query_scalar(self.statements.insert_inbox_many.clone())
            .bind(arrays.ids)
            .bind(arrays.sources)
            .bind(arrays.keys)
            .bind(arrays.aggregate_ids)
            .bind(arrays.event_types)
            .bind(arrays.payloads)
            .bind(arrays.headers)
            .bind(arrays.correlation_ids)
            .bind(arrays.consumptions)
            .bind(arrays.states)
            .bind(arrays.last_errors)
            .fetch_all(&mut *connection)
            .await
            .map_err(|e| InsertManyError::Statement(statement_failed(e)))?;
        // Each message's id is its own (chosen by the caller), so a returned id names the message
        // that made a new row; a message whose id did not come back was a duplicate.
        let inserted: HashSet<Uuid> = inserted.into_iter().collect();
        Ok(messages
            .iter()
            .map(|message| {
                if inserted.contains(&message.id) {
                    Stored::New(message.id)
                } else {
                    Stored::Duplicate
                }
            })
            .collect())
    }
}
