//! The effective configuration as YAML, for `queuebox check-config`.
//!
//! Serialization goes through the typed settings, so what prints is what the process will use:
//! defaults filled in, kinds resolved, every secret replaced by its mask and every URL password by
//! `***`.

use crate::model::{DatabaseSettings, Settings};
use queuebox_domain::secret::Secret;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use std::time::Duration;

/// The effective configuration as YAML, secrets masked.
pub fn render_effective(settings: &Settings) -> String {
    match serde_yaml::to_string(settings) {
        Ok(yaml) => yaml,
        // Every value is a plain string, number, bool, list or map, so this cannot fail in practice;
        // the comment keeps `check-config` from printing nothing if it ever does.
        Err(error) => format!("# the effective configuration cannot be printed: {error}\n"),
    }
}

pub(crate) fn ms<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
}

pub(crate) fn secret<S: Serializer>(value: &Secret, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(value.mask())
}

pub(crate) fn opt_secret<S: Serializer>(
    value: &Option<Secret>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.serialize_str(value.mask()),
        None => serializer.serialize_none(),
    }
}

/// A retention duration in the largest unit that divides it (`7d`, `90m`).
pub(crate) fn retention_duration<S: Serializer>(
    value: &Duration,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format_retention(*value))
}

pub(crate) fn opt_retention_duration<S: Serializer>(
    value: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(value) => serializer.serialize_str(&format_retention(*value)),
        None => serializer.serialize_none(),
    }
}

fn format_retention(value: Duration) -> String {
    let seconds = value.as_secs();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if seconds > 0 && seconds.is_multiple_of(size) {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

impl Serialize for DatabaseSettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", self.kind.as_str())?;
        map.serialize_entry("url", &self.url)?;
        map.serialize_entry("username", &self.username)?;
        map.serialize_entry("password", self.password.mask())?;
        map.serialize_entry("poolSize", &self.pool_size)?;
        map.serialize_entry(
            "connectionTimeoutMs",
            &u64::try_from(self.connection_timeout.as_millis()).unwrap_or(u64::MAX),
        )?;
        map.serialize_entry(
            "startupTimeoutMs",
            &u64::try_from(self.startup_timeout.as_millis()).unwrap_or(u64::MAX),
        )?;
        map.serialize_entry("migrate", &self.migrate)?;
        map.serialize_entry("outboxTableName", &self.schema.outbox_table)?;
        map.serialize_entry("inboxTableName", &self.schema.inbox_table)?;
        let outbox: indexmap::IndexMap<&str, &str> = self.schema.outbox.iter().collect();
        let inbox: indexmap::IndexMap<&str, &str> = self.schema.inbox.iter().collect();
        let mut mapping = indexmap::IndexMap::new();
        mapping.insert("outbox", outbox);
        mapping.insert("inbox", inbox);
        map.serialize_entry("columnMapping", &mapping)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_durations_print_in_their_largest_unit() {
        assert_eq!(format_retention(Duration::from_secs(7 * 86_400)), "7d");
        assert_eq!(format_retention(Duration::from_secs(3_600)), "1h");
        assert_eq!(format_retention(Duration::from_secs(90)), "90s");
        assert_eq!(format_retention(Duration::from_secs(120)), "2m");
    }
}
