//! Table and column names of the inbox, for a table that was created or renamed by hand.
//!
//! Every name is checked against a strict identifier rule and then double-quoted, so a mapping can
//! never carry SQL into a statement, and a name keeps its exact letter case.

use crate::Error;

/// The names the worker uses. [`Schema::default`] holds the names of the bundled migrations; change
/// the fields that your mapping renames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// A PostgreSQL schema to qualify the table with; `None` uses the search path.
    pub namespace: Option<String>,
    pub table: String,
    pub id: String,
    pub source: String,
    pub idempotency_key: String,
    pub aggregate_id: String,
    pub event_type: String,
    pub payload: String,
    pub headers: String,
    pub state: String,
    pub consumption: String,
    pub attempt: String,
    pub last_error: String,
    pub scheduled_at: String,
    pub created_at: String,
    pub processed_at: String,
    pub claimed_at: String,
    pub claim_token: String,
    pub lease_expires_at: String,
    pub correlation_id: String,
}

impl Default for Schema {
    fn default() -> Self {
        Self {
            namespace: None,
            table: "inbox".into(),
            id: "id".into(),
            source: "source".into(),
            idempotency_key: "idempotency_key".into(),
            aggregate_id: "aggregate_id".into(),
            event_type: "event_type".into(),
            payload: "payload".into(),
            headers: "headers".into(),
            state: "state".into(),
            consumption: "consumption".into(),
            attempt: "attempt".into(),
            last_error: "last_error".into(),
            scheduled_at: "scheduled_at".into(),
            created_at: "created_at".into(),
            processed_at: "processed_at".into(),
            claimed_at: "claimed_at".into(),
            claim_token: "claim_token".into(),
            lease_expires_at: "lease_expires_at".into(),
            correlation_id: "correlation_id".into(),
        }
    }
}

/// The checked and quoted names, ready to paste into SQL text.
#[derive(Debug, Clone)]
pub(crate) struct Quoted {
    pub table: String,
    pub id: String,
    pub source: String,
    pub idempotency_key: String,
    pub aggregate_id: String,
    pub event_type: String,
    pub payload: String,
    pub headers: String,
    pub state: String,
    pub consumption: String,
    pub attempt: String,
    pub last_error: String,
    pub scheduled_at: String,
    pub created_at: String,
    pub processed_at: String,
    pub claimed_at: String,
    pub claim_token: String,
    pub lease_expires_at: String,
    pub correlation_id: String,
}

/// PostgreSQL cuts identifiers at 63 bytes; a longer name would silently name another object.
const MAX_IDENTIFIER: usize = 63;

/// Letters, digits and underscores, not starting with a digit, at most 63 bytes.
pub fn is_valid_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(first) if first.is_ascii_alphabetic() || first == '_' => {}
        _ => return false,
    }
    name.len() <= MAX_IDENTIFIER && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn quote(what: &'static str, name: &str) -> Result<String, Error> {
    if is_valid_identifier(name) {
        // The rule admits no double quote, so wrapping needs no escaping.
        Ok(format!("\"{name}\""))
    } else {
        Err(Error::Identifier {
            what,
            name: name.to_owned(),
        })
    }
}

impl Schema {
    pub(crate) fn quoted(&self) -> Result<Quoted, Error> {
        let table = match &self.namespace {
            Some(ns) => format!(
                "{}.{}",
                quote("namespace", ns)?,
                quote("table", &self.table)?
            ),
            None => quote("table", &self.table)?,
        };
        Ok(Quoted {
            table,
            id: quote("id", &self.id)?,
            source: quote("source", &self.source)?,
            idempotency_key: quote("idempotency_key", &self.idempotency_key)?,
            aggregate_id: quote("aggregate_id", &self.aggregate_id)?,
            event_type: quote("event_type", &self.event_type)?,
            payload: quote("payload", &self.payload)?,
            headers: quote("headers", &self.headers)?,
            state: quote("state", &self.state)?,
            consumption: quote("consumption", &self.consumption)?,
            attempt: quote("attempt", &self.attempt)?,
            last_error: quote("last_error", &self.last_error)?,
            scheduled_at: quote("scheduled_at", &self.scheduled_at)?,
            created_at: quote("created_at", &self.created_at)?,
            processed_at: quote("processed_at", &self.processed_at)?,
            claimed_at: quote("claimed_at", &self.claimed_at)?,
            claim_token: quote("claim_token", &self.claim_token)?,
            lease_expires_at: quote("lease_expires_at", &self.lease_expires_at)?,
            correlation_id: quote("correlation_id", &self.correlation_id)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_names_and_rejects_anything_else() {
        for ok in ["inbox", "qb_inbox", "_x", "Dedup_Key2"] {
            assert!(is_valid_identifier(ok), "{ok}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "1x",
            "a-b",
            "a b",
            "x\"; DROP TABLE t; --",
            "é",
            long.as_str(),
        ] {
            assert!(!is_valid_identifier(bad), "{bad}");
        }
    }

    #[test]
    fn a_bad_mapping_fails_with_the_setting_name() {
        let schema = Schema {
            idempotency_key: "dedup key".into(),
            ..Schema::default()
        };
        match schema.quoted() {
            Err(Error::Identifier { what, .. }) => assert_eq!(what, "idempotency_key"),
            other => panic!("expected an identifier error, got {other:?}"),
        }
    }
}
