//! The database backend chosen by `database.type`, among those compiled in. This is the one place
//! that names a database product; everything after it holds an `Arc<dyn DatabaseBackend>`.

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
        DatabaseKind::Postgresql => connect_postgres(options).await,
        DatabaseKind::Sqlserver => anyhow::bail!(
            "database.type is sqlserver, and SQL Server support is not implemented yet in this version"
        ),
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

#[cfg(feature = "postgres")]
async fn connect_postgres(options: &DatabaseOptions) -> anyhow::Result<Arc<dyn DatabaseBackend>> {
    let db = queuebox_postgres::connect(options)
        .await
        .with_context(|| format!("connecting to {}", options.target.display_url()))?;
    Ok(Arc::new(db))
}

#[cfg(not(feature = "postgres"))]
async fn connect_postgres(_options: &DatabaseOptions) -> anyhow::Result<Arc<dyn DatabaseBackend>> {
    anyhow::bail!(
        "database.type is postgresql, but this binary was built without the `postgres` feature"
    )
}
