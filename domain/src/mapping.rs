//! The names of the tables and columns QueueBox reads and writes.
//!
//! Every SQL statement is rendered once at start from a [`SchemaNames`]; the names are checked
//! against a strict identifier rule here, so no configured text ever reaches SQL unchecked.

use thiserror::Error;

/// The default name of the outbox table.
pub const DEFAULT_OUTBOX_TABLE: &str = "outbox";
/// The default name of the inbox table.
pub const DEFAULT_INBOX_TABLE: &str = "inbox";

/// The outbox columns: (configuration key under `database.columnMapping.outbox`, default column).
pub const OUTBOX_COLUMNS: [(&str, &str); 17] = [
    ("id", "id"),
    ("topic", "topic"),
    ("key", "key"),
    ("aggregateType", "aggregate_type"),
    ("payload", "payload"),
    ("headers", "headers"),
    ("state", "state"),
    ("attempt", "attempt"),
    ("maxAttempts", "max_attempts"),
    ("scheduledAt", "scheduled_at"),
    ("createdAt", "created_at"),
    ("updatedAt", "updated_at"),
    ("claimedAt", "claimed_at"),
    ("claimToken", "claim_token"),
    ("leaseExpiresAt", "lease_expires_at"),
    ("lastError", "last_error"),
    ("sequence", "sequence"),
];

/// The inbox columns: (configuration key under `database.columnMapping.inbox`, default column).
pub const INBOX_COLUMNS: [(&str, &str); 18] = [
    ("id", "id"),
    ("source", "source"),
    ("idempotencyKey", "idempotency_key"),
    ("aggregateId", "aggregate_id"),
    ("eventType", "event_type"),
    ("payload", "payload"),
    ("state", "state"),
    ("createdAt", "created_at"),
    ("processedAt", "processed_at"),
    ("claimedAt", "claimed_at"),
    ("claimToken", "claim_token"),
    ("leaseExpiresAt", "lease_expires_at"),
    ("correlationId", "correlation_id"),
    ("consumption", "consumption"),
    ("scheduledAt", "scheduled_at"),
    ("attempt", "attempt"),
    ("lastError", "last_error"),
    ("headers", "headers"),
];

/// A name that is not a plain SQL identifier.
#[derive(Debug, Error, PartialEq, Eq)]
#[error(
    "`{value}` is not a SQL identifier: use a letter or `_` first, then letters, digits and `_`"
)]
pub struct InvalidIdentifier {
    /// The rejected text.
    pub value: String,
}

/// True when `name` is a letter or `_` first, then letters, digits and `_` (ASCII), at most 63 bytes
/// (PostgreSQL's identifier limit; a longer name would be silently truncated by the server).
pub fn is_sql_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    name.len() <= 63
        && (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks `name` with [`is_sql_identifier`].
pub fn check_identifier(name: &str) -> Result<(), InvalidIdentifier> {
    if is_sql_identifier(name) {
        Ok(())
    } else {
        Err(InvalidIdentifier {
            value: name.to_owned(),
        })
    }
}

/// Column names of one table, in the order of its key list ([`OUTBOX_COLUMNS`] or [`INBOX_COLUMNS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    keys: &'static [(&'static str, &'static str)],
    names: Vec<String>,
}

impl Columns {
    fn defaults(keys: &'static [(&'static str, &'static str)]) -> Self {
        Self {
            keys,
            names: keys
                .iter()
                .map(|(_, column)| (*column).to_owned())
                .collect(),
        }
    }

    /// The default outbox columns.
    pub fn outbox_defaults() -> Self {
        Self::defaults(&OUTBOX_COLUMNS)
    }

    /// The default inbox columns.
    pub fn inbox_defaults() -> Self {
        Self::defaults(&INBOX_COLUMNS)
    }

    /// Renames the column of configuration key `key`. Returns false when the key is unknown.
    pub fn set(&mut self, key: &str, column: impl Into<String>) -> bool {
        match self.keys.iter().position(|(k, _)| *k == key) {
            Some(index) => {
                self.names[index] = column.into();
                true
            }
            None => false,
        }
    }

    /// The column of configuration key `key` (for example `maxAttempts`), if the key exists.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.keys
            .iter()
            .position(|(k, _)| *k == key)
            .map(|index| self.names[index].as_str())
    }

    /// Every (configuration key, column name) pair.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.keys
            .iter()
            .zip(&self.names)
            .map(|((key, _), name)| (*key, name.as_str()))
    }

    /// The keys whose column differs from the default.
    pub fn renamed(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.keys
            .iter()
            .zip(&self.names)
            .filter(|((_, default), name)| *default != name.as_str())
            .map(|((key, _), name)| (*key, name.as_str()))
    }
}

/// The two tables and their columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaNames {
    /// `database.outboxTableName`.
    pub outbox_table: String,
    /// `database.inboxTableName`.
    pub inbox_table: String,
    /// `database.columnMapping.outbox`.
    pub outbox: Columns,
    /// `database.columnMapping.inbox`.
    pub inbox: Columns,
}

impl Default for SchemaNames {
    fn default() -> Self {
        Self {
            outbox_table: DEFAULT_OUTBOX_TABLE.to_owned(),
            inbox_table: DEFAULT_INBOX_TABLE.to_owned(),
            outbox: Columns::outbox_defaults(),
            inbox: Columns::inbox_defaults(),
        }
    }
}

impl SchemaNames {
    /// The configuration keys that rename a table or a column, for example
    /// `database.columnMapping.outbox.payload`. Empty for the default schema.
    pub fn renamed_settings(&self) -> Vec<String> {
        let mut renamed = Vec::new();
        if self.outbox_table != DEFAULT_OUTBOX_TABLE {
            renamed.push("database.outboxTableName".to_owned());
        }
        if self.inbox_table != DEFAULT_INBOX_TABLE {
            renamed.push("database.inboxTableName".to_owned());
        }
        renamed.extend(
            self.outbox
                .renamed()
                .map(|(key, _)| format!("database.columnMapping.outbox.{key}")),
        );
        renamed.extend(
            self.inbox
                .renamed()
                .map(|(key, _)| format!("database.columnMapping.inbox.{key}")),
        );
        renamed
    }

    /// Checks every table and column name; returns each offending setting with its error.
    pub fn validate(&self) -> Vec<(String, InvalidIdentifier)> {
        let mut errors = Vec::new();
        let mut check = |setting: String, name: &str| {
            if let Err(error) = check_identifier(name) {
                errors.push((setting, error));
            }
        };
        check("database.outboxTableName".to_owned(), &self.outbox_table);
        check("database.inboxTableName".to_owned(), &self.inbox_table);
        for (key, name) in self.outbox.iter() {
            check(format!("database.columnMapping.outbox.{key}"), name);
        }
        for (key, name) in self.inbox.iter() {
            check(format!("database.columnMapping.inbox.{key}"), name);
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_rule() {
        for good in ["outbox", "_x", "qb_outbox2", "A"] {
            assert!(is_sql_identifier(good), "{good}");
        }
        for bad in [
            "",
            "1abc",
            "a-b",
            "a b",
            "a\"b",
            "ö",
            "x;drop",
            &"a".repeat(64),
        ] {
            assert!(!is_sql_identifier(bad), "{bad}");
        }
    }

    #[test]
    fn defaults_rename_nothing() {
        let names = SchemaNames::default();
        assert!(names.renamed_settings().is_empty());
        assert!(names.validate().is_empty());
        assert_eq!(names.outbox.get("maxAttempts"), Some("max_attempts"));
        assert_eq!(names.inbox.get("idempotencyKey"), Some("idempotency_key"));
    }

    #[test]
    fn renamed_settings_name_each_key() {
        let mut names = SchemaNames {
            outbox_table: "qb_outbox".into(),
            ..SchemaNames::default()
        };
        assert!(names.outbox.set("payload", "body"));
        assert!(names.inbox.set("idempotencyKey", "dedup_key"));
        assert!(!names.inbox.set("nope", "x"));
        assert_eq!(
            names.renamed_settings(),
            vec![
                "database.outboxTableName",
                "database.columnMapping.outbox.payload",
                "database.columnMapping.inbox.idempotencyKey"
            ]
        );
    }

    #[test]
    fn validate_names_the_setting() {
        let mut names = SchemaNames::default();
        names.outbox.set("topic", "bad-name");
        let errors = names.validate();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].0, "database.columnMapping.outbox.topic");
    }
}
