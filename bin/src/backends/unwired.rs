//! What this build does with a database kind that loads and validates but has no adapter yet
//! (SQL Server), in one place: the start stops with a sentence naming it.

use queuebox_ports::database::DatabaseKind;

/// The start stops: there is no store to run on.
pub(crate) fn database(kind: DatabaseKind) -> anyhow::Error {
    anyhow::anyhow!(
        "database.type is {}, and {} support is not implemented yet in this version",
        kind.as_str(),
        kind.product()
    )
}
