//! The database backend chosen by `database.type`, among those compiled in: the one match on the
//! database kind (each kind's wiring is in `crate::backends`); everything after it holds an
//! `Arc<dyn DatabaseBackend>`.

use crate::backends;
use anyhow::Context as _;
use queuebox_ports::database::{DatabaseBackend, DatabaseKind, DatabaseOptions};
use std::sync::Arc;

/// Waits for the database (up to `database.startupTimeoutMs`) and opens the pool of the backend
/// `database.type` names.
///
/// # Errors
/// The database stays unreachable or refuses the login, or its kind has no backend in this build.
pub async fn connect(options: &DatabaseOptions) -> anyhow::Result<Arc<dyn DatabaseBackend>> {
    match options.target.kind {
        #[cfg(feature = "postgres")]
        DatabaseKind::Postgresql => backends::postgres::connect(options).await,
        #[cfg(not(feature = "postgres"))]
        DatabaseKind::Postgresql => {
            anyhow::bail!(backends::Feature::Postgres.missing("database.type is postgresql"))
        }
        DatabaseKind::Sqlserver => Err(backends::unwired::database(DatabaseKind::Sqlserver)),
    }
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
