//! The bundled migration files, embedded at build time, and what each one creates.
//!
//! The files under `migrations/postgres` are the product: operators who cannot let QueueBox change
//! the schema apply the very same files by hand. What each version creates is listed here so the
//! runner can recognise a version that was applied by hand and record it instead of running it.

/// One bundled migration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// The version, `1` for `V1__create_outbox.sql`.
    pub version: i32,
    /// The file name, for example `V1__create_outbox.sql`.
    pub name: &'static str,
    /// The SQL text.
    pub sql: &'static str,
    /// What the version creates; all present means the version is already applied.
    pub(crate) creates: &'static [SchemaObject],
}

impl Migration {
    /// The description part of the file name with spaces: `create outbox`.
    pub fn description(&self) -> String {
        self.name
            .split_once("__")
            .map_or(self.name, |(_, rest)| rest)
            .trim_end_matches(".sql")
            .replace('_', " ")
    }
}

/// A schema object a migration creates (or, for [`SchemaObject::NoIndex`], removes), looked up in
/// the current schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchemaObject {
    /// A table.
    Table(&'static str),
    /// A column of a table.
    Column(&'static str, &'static str),
    /// An index (a unique constraint is backed by an index of its name).
    Index(&'static str),
    /// An index the version drops: in place when no index of that name is left.
    NoIndex(&'static str),
    /// A sequence.
    Sequence(&'static str),
}

use SchemaObject::{Column, Index, NoIndex, Sequence, Table};

macro_rules! migration {
    ($version:literal, $file:literal, [$($object:expr),* $(,)?]) => {
        Migration {
            version: $version,
            name: $file,
            sql: include_str!(concat!("../../../migrations/postgres/", $file)),
            creates: &[$($object),*],
        }
    };
}

static MIGRATIONS: [Migration; 19] = [
    migration!(
        1,
        "V1__create_outbox.sql",
        // idx_outbox_topic, which V1 also creates, is not looked for: V17 drops it, so a schema
        // applied by hand up to V17 would otherwise never be recognised as holding V1.
        [Table("outbox"), Index("idx_outbox_pending_scheduled")]
    ),
    migration!(
        2,
        "V2__create_inbox.sql",
        // Not idx_inbox_pending and idx_inbox_source, which V18 drops, nor idx_inbox_aggregate_state,
        // which V19 drops (see V1).
        [
            Table("inbox"),
            Index("uq_inbox_source_idempotency"),
            Index("idx_inbox_state_created"),
        ]
    ),
    migration!(
        3,
        "V3__add_claimed_at.sql",
        [
            Column("outbox", "claimed_at"),
            Column("inbox", "claimed_at"),
            Index("idx_outbox_processing_claimed"),
            Index("idx_inbox_processing_claimed"),
        ]
    ),
    migration!(
        4,
        "V4__add_last_error.sql",
        [Column("outbox", "last_error")]
    ),
    migration!(
        5,
        "V5__add_correlation_id.sql",
        [Column("inbox", "correlation_id")]
    ),
    migration!(
        6,
        "V6__add_consumption_and_leases.sql",
        // Not idx_inbox_consumption_pending, which V18 drops (see V1).
        [
            Column("outbox", "claim_token"),
            Column("outbox", "lease_expires_at"),
            Column("inbox", "claim_token"),
            Column("inbox", "lease_expires_at"),
            Column("inbox", "consumption"),
            Column("inbox", "scheduled_at"),
            Column("inbox", "attempt"),
            Column("inbox", "last_error"),
        ]
    ),
    migration!(
        7,
        "V7__capture_state.sql",
        [Table("queuebox_capture_state")]
    ),
    migration!(
        8,
        "V8__add_pull_claim_indexes.sql",
        [
            Index("idx_inbox_pull_pending"),
            Index("idx_inbox_pull_busy")
        ]
    ),
    migration!(
        9,
        "V9__add_aggregate_type.sql",
        [Column("outbox", "aggregate_type")]
    ),
    migration!(
        10,
        "V10__add_inbox_headers.sql",
        [Column("inbox", "headers")]
    ),
    migration!(
        11,
        "V11__add_outbox_sequence.sql",
        // Not idx_outbox_key_sequence, which V17 replaces (see V1).
        [
            Sequence("outbox_sequence_seq"),
            Column("outbox", "sequence")
        ]
    ),
    migration!(
        12,
        "V12__add_outbox_unkeyed_index.sql",
        [Index("idx_outbox_unkeyed_pending")]
    ),
    migration!(
        13,
        "V13__add_inbox_pull_aggregate_index.sql",
        [Index("idx_inbox_pull_aggregate")]
    ),
    migration!(
        14,
        "V14__add_outbox_finished_index.sql",
        [Index("idx_outbox_finished_updated")]
    ),
    migration!(
        15,
        "V15__add_inbox_push_aggregate_index.sql",
        [Index("idx_inbox_push_pending_aggregate")]
    ),
    migration!(
        16,
        "V16__add_outbox_dead_topic_index.sql",
        [Index("idx_outbox_dead_topic")]
    ),
    migration!(
        17,
        "V17__narrow_outbox_indexes.sql",
        [
            Index("idx_outbox_keyed_sequence"),
            NoIndex("idx_outbox_key_sequence"),
            NoIndex("idx_outbox_topic"),
        ]
    ),
    migration!(
        18,
        "V18__narrow_inbox_indexes.sql",
        [
            NoIndex("idx_inbox_source"),
            NoIndex("idx_inbox_pending"),
            NoIndex("idx_inbox_consumption_pending"),
        ]
    ),
    migration!(
        19,
        "V19__narrow_inbox_aggregate_index.sql",
        [
            Index("idx_inbox_push_busy"),
            NoIndex("idx_inbox_aggregate_state"),
        ]
    ),
];

/// Every bundled migration, in version order.
pub fn migration_files() -> &'static [Migration] {
    &MIGRATIONS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_consecutive_and_match_file_names() {
        for (index, migration) in migration_files().iter().enumerate() {
            let expected = i32::try_from(index + 1).expect("small");
            assert_eq!(migration.version, expected);
            assert!(
                migration.name.starts_with(&format!("V{expected}__")),
                "{}",
                migration.name
            );
            assert!(!migration.creates.is_empty());
            assert!(!migration.sql.trim().is_empty());
        }
        assert_eq!(migration_files()[0].description(), "create outbox");
    }

    #[test]
    fn files_never_manage_their_own_transaction() {
        // The runner wraps each file in a transaction; a COMMIT inside would break that.
        for migration in migration_files() {
            let upper = migration.sql.to_ascii_uppercase();
            assert!(!upper.contains("COMMIT"), "{}", migration.name);
            assert!(!upper.contains("CONCURRENTLY;"), "{}", migration.name);
        }
    }
}
