//! What this build does with a database kind that loads and validates but has no adapter yet
//! (SQL Server), in one place: the start stops with one sentence naming it.

use queuebox_ports::database::DatabaseKind;

/// The sentence that refuses a `database.type` no build of this version supports.
pub(crate) fn unsupported_database(kind: DatabaseKind) -> String {
    format!(
        "database.type is {}: {} is not supported in this version",
        kind.as_str(),
        kind.product()
    )
}

/// The start stops: there is no store to run on.
pub(crate) fn database(kind: DatabaseKind) -> anyhow::Error {
    anyhow::anyhow!(unsupported_database(kind))
}
