//! The database backend chosen by `database.type`, among those compiled in (the kind's entry in
//! the backend table of `crate::backends` picks its wiring); everything after it holds an
//! `Arc<dyn DatabaseBackend>`.

use crate::backends;
use anyhow::Context as _;
use queuebox_ports::database::{DatabaseBackend, DatabaseOptions};
use std::sync::Arc;

/// Waits for the database (up to `database.startupTimeoutMs`) and opens the pool of the backend
/// `database.type` names.
///
/// # Errors
/// The database stays unreachable or refuses the login, or its kind has no backend in this build.
pub async fn connect(options: &DatabaseOptions) -> anyhow::Result<Arc<dyn DatabaseBackend>> {
    backends::connect_database(options).await
}

/// Applies the migrations (when `database.migrate` is true) and checks the required columns.
///
/// # Errors
/// The backend's own error, under a line that names the product.
pub async fn prepare(database: &dyn DatabaseBackend) -> anyhow::Result<()> {
    database
        .prepare()
        .await
        .with_context(|| format!("preparing the {} schema", database.kind().product()))
}
