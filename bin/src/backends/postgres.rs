//! PostgreSQL (feature `postgres`): the backend of `database.type: postgresql`.

use anyhow::Context as _;
use queuebox_ports::database::{DatabaseBackend, DatabaseOptions};
use std::sync::Arc;

/// Waits for the database (up to `database.startupTimeoutMs`) and opens the pool.
///
/// # Errors
/// The names are refused, the database stays unreachable, or it refuses the login; the message
/// names the URL with its password masked.
pub async fn connect(options: &DatabaseOptions) -> anyhow::Result<Arc<dyn DatabaseBackend>> {
    let database = queuebox_postgres::connect(options)
        .await
        .with_context(|| format!("connecting to {}", options.target.display_url()))?;
    Ok(Arc::new(database))
}
