//! The `database` health check: one trivial statement on a pooled connection.

use async_trait::async_trait;
use queuebox_domain::secret::Secret;
use queuebox_ports::health::HealthCheck;
use sqlx::SqlStr;

use crate::error::redact;
use crate::pool::Pool;

/// The component name in the health report.
pub const COMPONENT: &str = "database";

/// Checks that a connection can be taken and answers `SELECT 1`.
#[derive(Debug)]
pub(crate) struct DatabaseHealth {
    pub(crate) pool: Pool,
    pub(crate) ping: SqlStr,
    /// Only to scrub it from error texts.
    pub(crate) password: Secret,
}

#[async_trait]
impl HealthCheck for DatabaseHealth {
    fn name(&self) -> &str {
        COMPONENT
    }

    async fn check(&self) -> Result<(), String> {
        let result = async {
            let mut connection = self.pool.acquire().await?;
            sqlx::query(self.ping.clone())
                .execute(&mut *connection)
                .await?;
            Ok::<(), crate::error::PostgresError>(())
        }
        .await;
        result.map_err(|error| redact(error.to_string(), self.password.expose()))
    }
}
