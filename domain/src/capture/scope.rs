//! The capture scope: every setting that gives a recorded log position its meaning. A position
//! read through one slot, publication, table, host or database says nothing about another, so the
//! scope is written next to the position (as text in the `identity` file, as a digest in
//! `queuebox_capture_state.settings_fingerprint`) and compared at every start.

use sha2::{Digest, Sha256};

/// What a recorded position depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureScope {
    /// `outbox.capture.mode`, as configured (`postgres-logical`).
    pub mode: String,
    /// The capture host.
    pub host: String,
    /// The capture port.
    pub port: u16,
    /// The database name.
    pub database: String,
    /// The schema of the outbox table.
    pub schema: String,
    /// The outbox table name.
    pub table: String,
    /// The replication slot.
    pub slot: String,
    /// The publication.
    pub publication: String,
}

impl CaptureScope {
    /// The scope as `name=value` pairs, in a fixed order.
    pub fn pairs(&self) -> [(&'static str, String); 8] {
        [
            ("mode", self.mode.clone()),
            ("host", self.host.clone()),
            ("port", self.port.to_string()),
            ("database", self.database.clone()),
            ("schema", self.schema.clone()),
            ("table", self.table.clone()),
            ("slot", self.slot.clone()),
            ("publication", self.publication.clone()),
        ]
    }

    /// One line that names every value (`mode=postgres-logical host=db port=5432 ...`). Values never
    /// hold a space or `=`: names are validated identifiers and hosts cannot hold them.
    pub fn describe(&self) -> String {
        self.pairs()
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The SHA-256 of [`describe`](Self::describe), in lower-case hex: what the database records.
    pub fn fingerprint(&self) -> String {
        hex::encode(Sha256::digest(self.describe().as_bytes()))
    }

    /// The settings that differ between a recorded description and this scope, as
    /// `name: old -> new`; every name when the description cannot be read.
    pub fn changes_since(&self, recorded: &str) -> Vec<String> {
        let old: Vec<(&str, &str)> = recorded
            .split_whitespace()
            .filter_map(|pair| pair.split_once('='))
            .collect();
        self.pairs()
            .iter()
            .filter_map(|(name, value)| {
                let before = old.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
                match before {
                    Some(before) if before == value => None,
                    Some(before) => Some(format!("{name}: {before} -> {value}")),
                    None => Some(format!("{name}: (not recorded) -> {value}")),
                }
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A scope with the default names, for the tests of this module and of reconciliation.
    pub(crate) fn scope() -> CaptureScope {
        CaptureScope {
            mode: "postgres-logical".into(),
            host: "db".into(),
            port: 5432,
            database: "queuebox".into(),
            schema: "public".into(),
            table: "outbox".into(),
            slot: "queuebox_outbox".into(),
            publication: "queuebox_outbox".into(),
        }
    }

    #[test]
    fn the_description_names_every_setting_in_order() {
        assert_eq!(
            scope().describe(),
            "mode=postgres-logical host=db port=5432 database=queuebox schema=public table=outbox slot=queuebox_outbox publication=queuebox_outbox"
        );
    }

    #[test]
    fn every_setting_changes_the_fingerprint() {
        let base = scope().fingerprint();
        assert_eq!(base.len(), 64);
        assert_eq!(base, scope().fingerprint());
        let mut changed = scope();
        changed.slot = "other".into();
        assert_ne!(changed.fingerprint(), base);
        let mut changed = scope();
        changed.port = 5433;
        assert_ne!(changed.fingerprint(), base);
    }

    #[test]
    fn changes_name_the_setting_with_both_values() {
        let recorded = scope().describe();
        let mut now = scope();
        now.slot = "new_slot".into();
        now.host = "replica".into();
        assert_eq!(
            now.changes_since(&recorded),
            vec!["host: db -> replica", "slot: queuebox_outbox -> new_slot"]
        );
        assert!(scope().changes_since(&recorded).is_empty());
        assert_eq!(scope().changes_since("garbage").len(), 8);
    }
}

/// The name of the channel on which the owner of `identity` tells the other replicas that rows
/// arrived. Channel names are identifiers of at most 63 bytes; an identity too long for the prefix
/// is replaced by a digest of it, so two identities never share a channel by truncation.
pub fn wake_channel(identity: &str) -> String {
    const PREFIX: &str = "queuebox_capture_";
    if PREFIX.len() + identity.len() <= 63 {
        format!("{PREFIX}{identity}")
    } else {
        let digest = hex::encode(Sha256::digest(identity.as_bytes()));
        format!("{PREFIX}{}", &digest[..32])
    }
}

#[cfg(test)]
mod channel_tests {
    use super::wake_channel;

    #[test]
    fn short_identities_name_their_channel_long_ones_a_digest() {
        assert_eq!(wake_channel("queuebox"), "queuebox_capture_queuebox");
        let long = "a".repeat(63);
        let channel = wake_channel(&long);
        assert_eq!(channel.len(), 17 + 32);
        assert_ne!(channel, wake_channel(&"a".repeat(62)));
    }
}
