//! The outbox writer: one insert of an outbox row inside the caller's own transaction.
//!
//! QueueBox delivers a row of the `outbox` table once the transaction that inserted it commits.
//! [`OutboxWriter::write`] runs that insert on the executor you pass (`&mut *tx` for a
//! transaction), so the row commits or rolls back with your business change. Before the insert it
//! refuses what the table cannot hold, with the same words in every QueueBox client (see
//! `clients/conformance/writer-scenarios.json`):
//!
//! - topic, key and aggregate type: at most 255 characters (the `VARCHAR(255)` columns), no U+0000,
//!   and the topic not empty;
//! - the payload: JSON (any value), with no U+0000 in a string or member name (JSONB cannot hold
//!   it); already-encoded bytes must be one JSON text;
//! - headers: no U+0000 in a name or value;
//! - max attempts: 1 to 2147483647 (the `INTEGER` column; 0 could never be delivered);
//! - the trace context ([`OutboxMessage::trace_context`], or `traceparent`/`tracestate` headers
//!   from the caller or the hook): a valid W3C `traceparent`, and a valid `tracestate` only with
//!   one.
//!
//! A refused message runs no SQL, so the transaction stays usable. Headers pass through as given;
//! [`OutboxWriter::header_hook`] is where headers taken from the caller's context (a trace
//! context, for example) are added.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgExecutor;
use uuid::Uuid;

/// The most characters of `topic`, `key` and `aggregate_type` (`VARCHAR(255)`).
pub const MAX_TEXT_CHARS: usize = 255;

/// The largest `max_attempts` the `INTEGER` column holds.
pub const MAX_ATTEMPTS_LIMIT: u32 = i32::MAX as u32;

/// Why a row was not written.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// A value the table cannot hold; nothing was sent to the database.
    #[error("{0}")]
    Refused(String),
    /// A mapped table or column name that cannot be used; found when the writer is built.
    #[error("{0}")]
    Schema(String),
    /// The insert itself failed (a missing table or column, a lost connection, a constraint).
    #[error("the outbox insert failed: {0}")]
    Database(#[source] sqlx::Error),
}

/// The table and column names the writer uses. [`OutboxSchema::default`] holds the names of the
/// bundled migrations; change the fields your mapping renames (the same mapping as the service's
/// `database.outboxTableName` and `database.columnMapping.outbox.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxSchema {
    /// A PostgreSQL schema to qualify the table with; `None` uses the search path.
    pub namespace: Option<String>,
    pub table: String,
    pub id: String,
    pub topic: String,
    pub key: String,
    pub aggregate_type: String,
    pub payload: String,
    pub headers: String,
    pub max_attempts: String,
    pub scheduled_at: String,
}

impl Default for OutboxSchema {
    fn default() -> Self {
        Self {
            namespace: None,
            table: "outbox".into(),
            id: "id".into(),
            topic: "topic".into(),
            key: "key".into(),
            aggregate_type: "aggregate_type".into(),
            payload: "payload".into(),
            headers: "headers".into(),
            max_attempts: "max_attempts".into(),
            scheduled_at: "scheduled_at".into(),
        }
    }
}

/// The body of the message: a JSON value, or bytes that already hold JSON text.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// Any JSON value; encoded by the writer.
    Json(Value),
    /// JSON text encoded by the caller (checked to be one JSON text before the insert).
    Encoded(Vec<u8>),
}

impl Payload {
    /// Bytes that already hold JSON text, such as the output of another serializer.
    pub fn encoded(bytes: impl Into<Vec<u8>>) -> Self {
        Self::Encoded(bytes.into())
    }

    /// Any `Serialize` value as JSON.
    ///
    /// # Errors
    /// [`OutboxError::Refused`] when serde cannot represent the value as JSON.
    pub fn serialize<T: Serialize + ?Sized>(value: &T) -> Result<Self, OutboxError> {
        serde_json::to_value(value).map(Self::Json).map_err(|e| {
            OutboxError::Refused(format!("the payload cannot be encoded as JSON: {e}"))
        })
    }
}

impl From<Value> for Payload {
    fn from(value: Value) -> Self {
        Self::Json(value)
    }
}

/// One outbox row to write. Only `topic` and `payload` are required; a field left unset takes the
/// column default (no key, no aggregate type, no headers, 5 attempts, due now).
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxMessage {
    pub topic: String,
    pub payload: Payload,
    /// The ordering key: rows of one key are delivered in write order. Empty is stored as NULL.
    pub key: Option<String>,
    /// The kind of entity, for broker addresses. Empty is stored as NULL.
    pub aggregate_type: Option<String>,
    /// Sent as HTTP or message headers.
    pub headers: BTreeMap<String, String>,
    /// Deliveries before the row goes dead (1 to 2147483647).
    pub max_attempts: Option<u32>,
    /// Deliver no earlier than this.
    pub scheduled_at: Option<DateTime<Utc>>,
    /// The caller's W3C trace context (`00-<trace id>-<span id>-<flags>`), stored as the row's
    /// `traceparent` header so the delivery continues the caller's trace; a malformed one is
    /// refused. Empty is none.
    pub traceparent: Option<String>,
    /// The W3C `tracestate` going with `traceparent`, stored as the `tracestate` header.
    pub tracestate: Option<String>,
}

impl OutboxMessage {
    /// A message of `topic` with `payload` (a [`serde_json::Value`] or a [`Payload`]).
    pub fn new(topic: impl Into<String>, payload: impl Into<Payload>) -> Self {
        Self {
            topic: topic.into(),
            payload: payload.into(),
            key: None,
            aggregate_type: None,
            headers: BTreeMap::new(),
            max_attempts: None,
            scheduled_at: None,
            traceparent: None,
            tracestate: None,
        }
    }

    /// Sets the ordering key.
    #[must_use]
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Sets the aggregate type.
    #[must_use]
    pub fn aggregate_type(mut self, aggregate_type: impl Into<String>) -> Self {
        self.aggregate_type = Some(aggregate_type.into());
        self
    }

    /// Adds a header (a later one of the same name replaces it).
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Sets the most delivery attempts.
    #[must_use]
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }

    /// Sets the earliest delivery time.
    #[must_use]
    pub fn scheduled_at(mut self, at: DateTime<Utc>) -> Self {
        self.scheduled_at = Some(at);
        self
    }

    /// Sets the caller's trace context: the `traceparent` of the current span (with the
    /// `opentelemetry` crate, what its `TraceContextPropagator` injects) and its `tracestate`
    /// (`None` or empty for none). They become the row's `traceparent` and `tracestate` headers,
    /// replacing headers of those names in any letter case.
    #[must_use]
    pub fn trace_context(
        mut self,
        traceparent: impl Into<String>,
        tracestate: Option<&str>,
    ) -> Self {
        self.traceparent = Some(traceparent.into());
        self.tracestate = tracestate.map(str::to_owned);
        self
    }
}

type HeaderHook = Arc<dyn Fn(&mut BTreeMap<String, String>) + Send + Sync>;

/// Writes outbox rows under one schema. Cheap to clone; build it once.
#[derive(Clone)]
pub struct OutboxWriter {
    table: String,
    columns: Columns,
    hook: Option<HeaderHook>,
}

impl fmt::Debug for OutboxWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutboxWriter")
            .field("table", &self.table)
            .field("header_hook", &self.hook.is_some())
            .finish_non_exhaustive()
    }
}

/// The quoted column names.
#[derive(Debug, Clone)]
struct Columns {
    id: String,
    topic: String,
    key: String,
    aggregate_type: String,
    payload: String,
    headers: String,
    max_attempts: String,
    scheduled_at: String,
}

/// PostgreSQL cuts identifiers at 63 bytes; a longer name would silently name another object.
const MAX_IDENTIFIER: usize = 63;

fn quote(what: &str, name: &str) -> Result<String, OutboxError> {
    if crate::is_valid_identifier(name) {
        // The rule admits no double quote, so wrapping needs no escaping.
        Ok(format!("\"{name}\""))
    } else {
        Err(OutboxError::Schema(format!(
            "invalid SQL identifier {} for the outbox {what}: use letters, digits and underscores, starting with a letter or underscore, at most {MAX_IDENTIFIER} characters",
            json_string(name)
        )))
    }
}

/// `text` as a JSON string literal: the quoting every client uses in its messages.
fn json_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

impl OutboxWriter {
    /// Checks every name of `schema` and returns the writer. Runs no SQL.
    ///
    /// # Errors
    /// [`OutboxError::Schema`] for a name that is not a plain identifier or two columns with one
    /// name.
    pub fn new(schema: OutboxSchema) -> Result<Self, OutboxError> {
        let table = quote("table", &schema.table)?;
        let table = match schema.namespace.as_deref().filter(|ns| !ns.is_empty()) {
            Some(ns) => format!("{}.{table}", quote("namespace", ns)?),
            None => table,
        };
        let fields = [
            ("id", &schema.id),
            ("topic", &schema.topic),
            ("key", &schema.key),
            ("aggregate_type", &schema.aggregate_type),
            ("payload", &schema.payload),
            ("headers", &schema.headers),
            ("max_attempts", &schema.max_attempts),
            ("scheduled_at", &schema.scheduled_at),
        ];
        let mut quoted = Vec::with_capacity(fields.len());
        for (index, (field, name)) in fields.iter().enumerate() {
            quoted.push(quote(&format!("column {field}"), name)?);
            if let Some((earlier, _)) = fields[..index].iter().find(|(_, other)| other == name) {
                return Err(OutboxError::Schema(format!(
                    "the outbox columns {earlier} and {field} are both named {}",
                    json_string(name)
                )));
            }
        }
        let mut quoted = quoted.into_iter();
        let mut next = || quoted.next().unwrap_or_default();
        let columns = Columns {
            id: next(),
            topic: next(),
            key: next(),
            aggregate_type: next(),
            payload: next(),
            headers: next(),
            max_attempts: next(),
            scheduled_at: next(),
        };
        Ok(Self {
            table,
            columns,
            hook: None,
        })
    }

    /// Calls `hook` with a copy of each message's headers before the checks; what it leaves is
    /// stored (and checked like the caller's own headers). The place to add headers from the
    /// caller's context, such as a trace context.
    #[must_use]
    pub fn header_hook(
        mut self,
        hook: impl Fn(&mut BTreeMap<String, String>) + Send + Sync + 'static,
    ) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// Checks `message` and inserts it through `executor` (`&mut *tx` for the caller's
    /// transaction, or a connection); returns the new row's id.
    ///
    /// # Errors
    /// [`OutboxError::Refused`] before any SQL for a value the table cannot hold;
    /// [`OutboxError::Database`] when the insert fails.
    pub async fn write<'c, E>(
        &self,
        executor: E,
        message: &OutboxMessage,
    ) -> Result<Uuid, OutboxError>
    where
        E: PgExecutor<'c>,
    {
        let row = self.prepare(message)?;
        let mut query = sqlx::query_scalar::<_, Uuid>(sqlx::AssertSqlSafe(row.sql))
            .bind(row.topic)
            .bind(row.payload);
        if let Some(key) = row.key {
            query = query.bind(key);
        }
        if let Some(aggregate_type) = row.aggregate_type {
            query = query.bind(aggregate_type);
        }
        if let Some(headers) = row.headers {
            query = query.bind(headers);
        }
        if let Some(max_attempts) = row.max_attempts {
            query = query.bind(max_attempts);
        }
        if let Some(at) = row.scheduled_at {
            query = query.bind(at);
        }
        query
            .fetch_one(executor)
            .await
            .map_err(OutboxError::Database)
    }

    /// The checked values and the statement for them.
    fn prepare(&self, message: &OutboxMessage) -> Result<Prepared, OutboxError> {
        let mut headers = message.headers.clone();
        put_trace_context(
            &mut headers,
            message.traceparent.as_deref(),
            message.tracestate.as_deref(),
        )?;
        if let Some(hook) = &self.hook {
            hook(&mut headers);
        }
        check_trace_headers(&headers)?;
        check_text("topic", &message.topic)?;
        if message.topic.is_empty() {
            return Err(refused("the topic is empty; every outbox row needs one"));
        }
        let key = optional_text("key", message.key.as_deref())?;
        let aggregate_type = optional_text("aggregate type", message.aggregate_type.as_deref())?;
        let payload = payload_text(&message.payload)?;
        if headers
            .iter()
            .any(|(name, value)| name.contains('\0') || value.contains('\0'))
        {
            return Err(refused(
                "a header holds the character U+0000, which the outbox cannot store",
            ));
        }
        let max_attempts = match message.max_attempts {
            Some(n) if n == 0 || n > MAX_ATTEMPTS_LIMIT => {
                return Err(refused(&format!(
                    "max attempts is {n}; it must be a whole number from 1 to {MAX_ATTEMPTS_LIMIT}"
                )));
            }
            Some(n) => Some(i32::try_from(n).unwrap_or(i32::MAX)),
            None => None,
        };

        let c = &self.columns;
        // (column, cast) in bind order.
        let mut slots: Vec<(&str, &str)> = vec![(&c.topic, ""), (&c.payload, "::jsonb")];
        if key.is_some() {
            slots.push((&c.key, ""));
        }
        if aggregate_type.is_some() {
            slots.push((&c.aggregate_type, ""));
        }
        let headers = if headers.is_empty() {
            None
        } else {
            slots.push((&c.headers, "::jsonb"));
            Some(
                Value::Object(
                    headers
                        .into_iter()
                        .map(|(n, v)| (n, Value::String(v)))
                        .collect(),
                )
                .to_string(),
            )
        };
        if max_attempts.is_some() {
            slots.push((&c.max_attempts, "::integer"));
        }
        if message.scheduled_at.is_some() {
            slots.push((&c.scheduled_at, "::timestamptz"));
        }
        let columns: Vec<&str> = slots.iter().map(|(column, _)| *column).collect();
        let values: Vec<String> = slots
            .iter()
            .enumerate()
            .map(|(index, (_, cast))| format!("${}{cast}", index + 1))
            .collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({}) RETURNING {}",
            self.table,
            columns.join(", "),
            values.join(", "),
            c.id
        );
        Ok(Prepared {
            sql,
            topic: message.topic.clone(),
            payload,
            key,
            aggregate_type,
            headers,
            max_attempts,
            scheduled_at: message.scheduled_at,
        })
    }
}

/// Inserts `message` into the `outbox` table of the bundled migrations through `executor`; see
/// [`OutboxWriter::write`].
///
/// # Errors
/// As [`OutboxWriter::write`].
pub async fn write_outbox<'c, E>(executor: E, message: &OutboxMessage) -> Result<Uuid, OutboxError>
where
    E: PgExecutor<'c>,
{
    OutboxWriter::new(OutboxSchema::default())?
        .write(executor, message)
        .await
}

struct Prepared {
    sql: String,
    topic: String,
    payload: String,
    key: Option<String>,
    aggregate_type: Option<String>,
    headers: Option<String>,
    max_attempts: Option<i32>,
    scheduled_at: Option<DateTime<Utc>>,
}

fn refused(text: &str) -> OutboxError {
    OutboxError::Refused(text.to_owned())
}

const BAD_TRACEPARENT: &str = "the traceparent is not a W3C trace context: \
    version-traceid-parentid-flags in lowercase hexadecimal, version not ff, ids not all zeros";
const BAD_TRACESTATE: &str = "the tracestate is not a W3C tracestate: at most 32 \
    comma-separated key=value members with distinct keys";
const LONE_TRACESTATE: &str = "a tracestate needs a traceparent";
/// The most members a `tracestate` may hold.
const MAX_TRACESTATE_MEMBERS: usize = 32;

/// Puts the message's trace context in `headers`, in place of any header of those names.
fn put_trace_context(
    headers: &mut BTreeMap<String, String>,
    traceparent: Option<&str>,
    tracestate: Option<&str>,
) -> Result<(), OutboxError> {
    let tracestate = tracestate.filter(|s| !s.is_empty());
    let Some(traceparent) = traceparent.filter(|s| !s.is_empty()) else {
        return match tracestate {
            Some(_) => Err(refused(LONE_TRACESTATE)),
            None => Ok(()),
        };
    };
    headers.retain(|name, _| {
        !name.eq_ignore_ascii_case("traceparent") && !name.eq_ignore_ascii_case("tracestate")
    });
    headers.insert("traceparent".to_owned(), traceparent.to_owned());
    if let Some(state) = tracestate {
        headers.insert("tracestate".to_owned(), state.to_owned());
    }
    Ok(())
}

fn lower_hex(bytes: &[u8]) -> bool {
    bytes.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

/// `version-traceid-parentid-flags` in lowercase hexadecimal; version `ff` is invalid, version
/// `00` is exactly 55 characters, a higher one may go on after a `-`; ids not all zeros.
fn valid_traceparent(value: &str) -> bool {
    let b = value.as_bytes();
    if b.len() < 55
        || !lower_hex(&b[0..2])
        || b[2] != b'-'
        || !lower_hex(&b[3..35])
        || b[35] != b'-'
        || !lower_hex(&b[36..52])
        || b[52] != b'-'
        || !lower_hex(&b[53..55])
    {
        return false;
    }
    if &b[0..2] == b"ff" || (b.len() > 55 && (&b[0..2] == b"00" || b[55] != b'-')) {
        return false;
    }
    b[3..35].iter().any(|&c| c != b'0') && b[36..52].iter().any(|&c| c != b'0')
}

fn key_char(c: u8) -> bool {
    matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'*' | b'/')
}

/// A `tracestate` key: `simple-key` or `tenant@system`, in the recommendation's syntax.
fn valid_tracestate_key(key: &str) -> bool {
    let part = |s: &str, max: usize, first: fn(u8) -> bool| {
        let b = s.as_bytes();
        !b.is_empty() && b.len() <= max && first(b[0]) && b[1..].iter().all(|&c| key_char(c))
    };
    match key.split_once('@') {
        Some((tenant, system)) => {
            part(tenant, 241, |c| {
                c.is_ascii_lowercase() || c.is_ascii_digit()
            }) && part(system, 14, |c| c.is_ascii_lowercase())
        }
        None => part(key, 256, |c| c.is_ascii_lowercase()),
    }
}

/// At most 32 comma-separated `key=value` members (blank ones skipped) with distinct keys; a
/// value is 1 to 256 printable ASCII characters without `,` and `=`, not ending in a space.
fn valid_tracestate(value: &str) -> bool {
    let members: Vec<&str> = value
        .split(',')
        .map(|m| m.trim_matches([' ', '\t']))
        .filter(|m| !m.is_empty())
        .collect();
    if members.len() > MAX_TRACESTATE_MEMBERS {
        return false;
    }
    let mut keys = std::collections::BTreeSet::new();
    for member in members {
        let Some((key, val)) = member.split_once('=') else {
            return false;
        };
        let v = val.as_bytes();
        let value_ok = !v.is_empty()
            && v.len() <= 256
            && v.iter()
                .all(|&c| (0x20..=0x7e).contains(&c) && c != b',' && c != b'=')
            && v[v.len() - 1] != b' ';
        if !value_ok || !valid_tracestate_key(key) || !keys.insert(key) {
            return false;
        }
    }
    true
}

/// The row's `traceparent` and `tracestate` headers (any letter case), from the message, the
/// caller's headers or the hook, must be what QueueBox reads as a trace context.
fn check_trace_headers(headers: &BTreeMap<String, String>) -> Result<(), OutboxError> {
    let named = |wanted: &str| -> Vec<&String> {
        headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case(wanted))
            .map(|(_, value)| value)
            .collect()
    };
    let parents = named("traceparent");
    let states = named("tracestate");
    if parents.len() > 1 || parents.iter().any(|v| !valid_traceparent(v)) {
        return Err(refused(BAD_TRACEPARENT));
    }
    if states.len() > 1 || states.iter().any(|v| !valid_tracestate(v)) {
        return Err(refused(BAD_TRACESTATE));
    }
    if !states.is_empty() && parents.is_empty() {
        return Err(refused(LONE_TRACESTATE));
    }
    Ok(())
}

/// A text column's checks: no U+0000 (first), then at most 255 characters.
fn check_text(field: &str, value: &str) -> Result<(), OutboxError> {
    if value.contains('\0') {
        return Err(refused(&format!(
            "the {field} holds the character U+0000, which the outbox cannot store"
        )));
    }
    if value.len() > MAX_TEXT_CHARS {
        let chars = value.chars().count();
        if chars > MAX_TEXT_CHARS {
            return Err(refused(&format!(
                "the {field} is {chars} characters long; the outbox stores at most {MAX_TEXT_CHARS}"
            )));
        }
    }
    Ok(())
}

/// An optional text column: checked, and `None` when absent or empty (stored as NULL).
fn optional_text(field: &str, value: Option<&str>) -> Result<Option<String>, OutboxError> {
    match value {
        Some(text) if !text.is_empty() => {
            check_text(field, text)?;
            Ok(Some(text.to_owned()))
        }
        _ => Ok(None),
    }
}

/// The payload as JSON text for the JSONB column.
fn payload_text(payload: &Payload) -> Result<String, OutboxError> {
    match payload {
        Payload::Json(value) => {
            check_nul(value)?;
            Ok(value.to_string())
        }
        Payload::Encoded(bytes) => {
            let text = std::str::from_utf8(bytes).map_err(|e| {
                refused(&format!(
                    "the payload is not valid JSON: it is not UTF-8 ({e})"
                ))
            })?;
            let value: Value = serde_json::from_str(text)
                .map_err(|e| refused(&format!("the payload is not valid JSON: {e}")))?;
            check_nul(&value)?;
            Ok(text.to_owned())
        }
    }
}

fn check_nul(document: &Value) -> Result<(), OutboxError> {
    match nul_path(document) {
        Some(path) => Err(refused(&format!(
            "the payload holds the character U+0000 (\\u0000) at {path}, which the outbox cannot store"
        ))),
        None => Ok(()),
    }
}

/// The JSONPath of the first string or member name holding U+0000, depth first, without
/// recursion (a deep document cannot exhaust the stack). The inbox's check in the service
/// (`domain/src/inbox/limits.rs`) walks the same way and names places alike; this crate builds
/// apart from the service, so it carries its own copy.
fn nul_path(document: &Value) -> Option<String> {
    let mut stack: Vec<(&Value, String)> = vec![(document, "$".to_owned())];
    while let Some((value, path)) = stack.pop() {
        match value {
            Value::String(text) if text.contains('\0') => return Some(path),
            Value::Object(members) => {
                for (name, member) in members.iter().rev() {
                    let member_path = format!("{path}[{}]", quoted_name(name));
                    if name.contains('\0') {
                        return Some(member_path);
                    }
                    stack.push((member, member_path));
                }
            }
            Value::Array(items) => {
                for (index, item) in items.iter().enumerate().rev() {
                    stack.push((item, format!("{path}[{index}]")));
                }
            }
            _ => {}
        }
    }
    None
}

/// A member name as a bracketed JSONPath string; control characters as `\u00xx`.
fn quoted_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('\'');
    for c in name.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refusal(message: &OutboxMessage) -> String {
        match OutboxWriter::new(OutboxSchema::default()).map(|w| w.prepare(message).map(|_| ())) {
            Ok(Err(e)) | Err(e) => e.to_string(),
            Ok(Ok(())) => "accepted".into(),
        }
    }

    #[test]
    fn the_statement_names_only_the_columns_given() {
        let writer = OutboxWriter::new(OutboxSchema::default()).expect("default schema");
        let bare = writer
            .prepare(&OutboxMessage::new("t", json!({})))
            .expect("valid");
        assert_eq!(
            bare.sql,
            r#"INSERT INTO "outbox" ("topic", "payload") VALUES ($1, $2::jsonb) RETURNING "id""#
        );
        let full = writer
            .prepare(
                &OutboxMessage::new("t", json!({}))
                    .key("k")
                    .header("a", "b")
                    .max_attempts(3)
                    .scheduled_at(Utc::now()),
            )
            .expect("valid");
        assert_eq!(
            full.sql,
            r#"INSERT INTO "outbox" ("topic", "payload", "key", "headers", "max_attempts", "scheduled_at") VALUES ($1, $2::jsonb, $3, $4::jsonb, $5::integer, $6::timestamptz) RETURNING "id""#
        );
        assert_eq!(full.headers.as_deref(), Some(r#"{"a":"b"}"#));
    }

    #[test]
    fn a_nul_escape_is_told_from_an_escaped_backslash() {
        assert_eq!(
            refusal(&OutboxMessage::new(
                "t",
                Payload::encoded(r#"{"a":"\u0000"}"#)
            )),
            "the payload holds the character U+0000 (\\u0000) at $['a'], which the outbox cannot store"
        );
        assert_eq!(
            refusal(&OutboxMessage::new(
                "t",
                Payload::encoded(r#"{"a":"\\u0000"}"#)
            )),
            "accepted"
        );
        assert!(
            refusal(&OutboxMessage::new("t", Payload::encoded(vec![0xff, 0xfe])))
                .starts_with("the payload is not valid JSON: it is not UTF-8")
        );
    }

    #[test]
    fn a_member_name_with_quotes_and_controls_is_written_as_an_escape() {
        assert_eq!(quoted_name("it's\\\u{7}"), "'it\\'s\\\\\\u0007'");
    }
}
