//! The message a handler receives.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use uuid::Uuid;

/// One claimed inbox row, as the handler sees it. The claim token stays inside the worker: a
/// handler has no business writing the row itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: Uuid,
    pub source: String,
    /// With `source`, the identity of the message; deduplicate external work on the pair.
    pub idempotency_key: String,
    pub aggregate_id: Option<String>,
    pub event_type: Option<String>,
    pub payload: serde_json::Value,
    /// One string per header name; empty when the row has none.
    pub headers: BTreeMap<String, String>,
    pub correlation_id: Option<String>,
    /// `0` on the first delivery.
    pub attempt: i32,
    pub created_at: DateTime<Utc>,
}

impl Message {
    /// The payload parsed into `T`.
    pub fn payload_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(&self.payload)
    }
}

/// The stored headers as strings. A value that is not a string (a row written by hand) keeps its
/// JSON text, so nothing is silently lost.
pub(crate) fn headers_from_json(value: serde_json::Value) -> BTreeMap<String, String> {
    match value {
        serde_json::Value::Object(map) => map
            .into_iter()
            .map(|(name, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                (name, text)
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}
