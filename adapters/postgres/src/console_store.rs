//! The console's reads on PostgreSQL (see `queries/console_*.sql` for the index each one uses).
//!
//! Its statements are rendered here, apart from [`crate::Statements`], so the console can change
//! without touching the delivery statements or their golden file.

use crate::error::PostgresError;
use crate::pool::Pool;
use crate::statements::render_template;
use crate::store_support::{pool_error, sql_limit, store_error};
use async_trait::async_trait;
use queuebox_domain::mapping::SchemaNames;
use queuebox_ports::console::{
    ConsoleStore, DeadFilter, InboxStateCount, OutboxStateCount, PageCursor, RowDetail, RowSummary,
    Table,
};
use queuebox_ports::outbox::StoreError;
use sqlx::postgres::PgRow;
use sqlx::{Row, SqlStr};
use uuid::Uuid;

/// The console statements, rendered for the configured names.
#[derive(Debug, Clone)]
pub struct ConsoleStatements {
    outbox_counts: SqlStr,
    outbox_dead_topics: SqlStr,
    inbox_counts: SqlStr,
    outbox_dead_page: SqlStr,
    outbox_dead_count: SqlStr,
    inbox_dead_page: SqlStr,
    inbox_dead_count: SqlStr,
    outbox_row: SqlStr,
    inbox_row: SqlStr,
    inbox_by_key: SqlStr,
    inbox_by_correlation: SqlStr,
    inbox_requeue: SqlStr,
}

impl ConsoleStatements {
    /// Renders every console template for `names`.
    ///
    /// # Errors
    /// [`PostgresError::InvalidNames`] or [`PostgresError::UnknownPlaceholder`], as
    /// [`crate::Statements::render`].
    pub fn render(names: &SchemaNames) -> Result<Self, PostgresError> {
        let invalid = names.validate();
        if !invalid.is_empty() {
            return Err(PostgresError::InvalidNames(invalid));
        }
        let r = |name: &'static str, template: &str| render_template(name, template, names);
        Ok(Self {
            outbox_counts: r(
                "console_outbox_counts",
                include_str!("../queries/console_outbox_counts.sql"),
            )?,
            outbox_dead_topics: r(
                "console_outbox_dead_topics",
                include_str!("../queries/console_outbox_dead_topics.sql"),
            )?,
            inbox_counts: r(
                "console_inbox_counts",
                include_str!("../queries/console_inbox_counts.sql"),
            )?,
            outbox_dead_page: r(
                "console_outbox_dead_page",
                include_str!("../queries/console_outbox_dead_page.sql"),
            )?,
            outbox_dead_count: r(
                "console_outbox_dead_count",
                include_str!("../queries/console_outbox_dead_count.sql"),
            )?,
            inbox_dead_page: r(
                "console_inbox_dead_page",
                include_str!("../queries/console_inbox_dead_page.sql"),
            )?,
            inbox_dead_count: r(
                "console_inbox_dead_count",
                include_str!("../queries/console_inbox_dead_count.sql"),
            )?,
            outbox_row: r(
                "console_outbox_row",
                include_str!("../queries/console_outbox_row.sql"),
            )?,
            inbox_row: r(
                "console_inbox_row",
                include_str!("../queries/console_inbox_row.sql"),
            )?,
            inbox_by_key: r(
                "console_inbox_by_key",
                include_str!("../queries/console_inbox_by_key.sql"),
            )?,
            inbox_by_correlation: r(
                "console_inbox_by_correlation",
                include_str!("../queries/console_inbox_by_correlation.sql"),
            )?,
            inbox_requeue: r(
                "console_inbox_requeue",
                include_str!("../queries/console_inbox_requeue.sql"),
            )?,
        })
    }

    /// Every statement as (name, text); for the plan measurements and tests.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("console_outbox_counts", &self.outbox_counts),
            ("console_outbox_dead_topics", &self.outbox_dead_topics),
            ("console_inbox_counts", &self.inbox_counts),
            ("console_outbox_dead_page", &self.outbox_dead_page),
            ("console_outbox_dead_count", &self.outbox_dead_count),
            ("console_inbox_dead_page", &self.inbox_dead_page),
            ("console_inbox_dead_count", &self.inbox_dead_count),
            ("console_outbox_row", &self.outbox_row),
            ("console_inbox_row", &self.inbox_row),
            ("console_inbox_by_key", &self.inbox_by_key),
            ("console_inbox_by_correlation", &self.inbox_by_correlation),
            ("console_inbox_requeue", &self.inbox_requeue),
        ]
        .into_iter()
        .map(|(name, sql)| (name, sql.as_str()))
    }
}

/// The console's view of the PostgreSQL tables.
pub struct PgConsoleStore {
    pool: Pool,
    statements: ConsoleStatements,
}

impl PgConsoleStore {
    /// A store over `pool` with the rendered console `statements`.
    pub fn new(pool: Pool, statements: ConsoleStatements) -> Self {
        Self { pool, statements }
    }

    async fn fetch(
        &self,
        operation: &'static str,
        query: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<Vec<PgRow>, StoreError> {
        let mut connection = self
            .pool
            .acquire()
            .await
            .map_err(|e| pool_error(operation, e))?;
        query
            .fetch_all(&mut *connection)
            .await
            .map_err(|e| store_error(operation, e))
    }
}

/// `%text%` for ILIKE, with the pattern characters of `text` escaped.
fn contains_pattern(text: &str) -> String {
    let mut pattern = String::with_capacity(text.len() + 2);
    pattern.push('%');
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

fn summary(operation: &'static str, row: &PgRow) -> Result<RowSummary, StoreError> {
    let get = |e| store_error(operation, e);
    Ok(RowSummary {
        id: row.try_get("id").map_err(get)?,
        group: row.try_get("grp").map_err(get)?,
        key: row.try_get("key").map_err(get)?,
        state: row.try_get("state").map_err(get)?,
        attempt: row.try_get("attempt").map_err(get)?,
        last_error: row.try_get("last_error").map_err(get)?,
        created_at: row.try_get("created_at").map_err(get)?,
        changed_at: row.try_get("changed_at").map_err(get)?,
    })
}

#[async_trait]
impl ConsoleStore for PgConsoleStore {
    async fn outbox_counts(&self) -> Result<Vec<OutboxStateCount>, StoreError> {
        const OPERATION: &str = "console outbox counts";
        let rows = self
            .fetch(
                OPERATION,
                sqlx::query(self.statements.outbox_counts.clone()).persistent(false),
            )
            .await?;
        rows.iter()
            .map(|row| {
                let get = |e| store_error(OPERATION, e);
                Ok(OutboxStateCount {
                    topic: row.try_get("grp").map_err(get)?,
                    state: row.try_get("state").map_err(get)?,
                    count: row.try_get("n").map_err(get)?,
                    oldest_age_seconds: row.try_get("oldest").map_err(get)?,
                })
            })
            .collect()
    }

    async fn outbox_dead_topics(&self) -> Result<Vec<String>, StoreError> {
        const OPERATION: &str = "console outbox dead topics";
        let rows = self
            .fetch(
                OPERATION,
                sqlx::query(self.statements.outbox_dead_topics.clone()),
            )
            .await?;
        rows.iter()
            .map(|row| row.try_get("name").map_err(|e| store_error(OPERATION, e)))
            .collect()
    }

    async fn inbox_counts(&self) -> Result<Vec<InboxStateCount>, StoreError> {
        const OPERATION: &str = "console inbox counts";
        let rows = self
            .fetch(
                OPERATION,
                sqlx::query(self.statements.inbox_counts.clone()).persistent(false),
            )
            .await?;
        rows.iter()
            .map(|row| {
                let get = |e| store_error(OPERATION, e);
                Ok(InboxStateCount {
                    source: row.try_get("grp").map_err(get)?,
                    consumption: row.try_get("consumption").map_err(get)?,
                    state: row.try_get("state").map_err(get)?,
                    count: row.try_get("n").map_err(get)?,
                    oldest_age_seconds: row.try_get("oldest").map_err(get)?,
                })
            })
            .collect()
    }

    async fn dead_page(
        &self,
        table: Table,
        filter: &DeadFilter,
        after: Option<PageCursor>,
        limit: u32,
    ) -> Result<Vec<RowSummary>, StoreError> {
        const OPERATION: &str = "console dead page";
        let sql = match table {
            Table::Outbox => self.statements.outbox_dead_page.clone(),
            Table::Inbox => self.statements.inbox_dead_page.clone(),
        };
        // Planned with the values (not a cached generic plan), so unset filters fold away and the
        // cursor becomes a range on the index.
        let query = sqlx::query(sql)
            .persistent(false)
            .bind(after.map(|c| c.at))
            .bind(after.map(|c| c.id))
            .bind(filter.groups.as_deref())
            .bind(filter.key.as_deref())
            .bind(filter.created_from)
            .bind(filter.created_to)
            .bind(filter.error_text.as_deref().map(contains_pattern))
            .bind(sql_limit(limit));
        let rows = self.fetch(OPERATION, query).await?;
        rows.iter().map(|row| summary(OPERATION, row)).collect()
    }

    async fn dead_count(&self, table: Table, filter: &DeadFilter) -> Result<i64, StoreError> {
        const OPERATION: &str = "console dead count";
        let sql = match table {
            Table::Outbox => self.statements.outbox_dead_count.clone(),
            Table::Inbox => self.statements.inbox_dead_count.clone(),
        };
        let query = sqlx::query(sql)
            .persistent(false)
            .bind(filter.groups.as_deref())
            .bind(filter.key.as_deref())
            .bind(filter.created_from)
            .bind(filter.created_to)
            .bind(filter.error_text.as_deref().map(contains_pattern));
        let rows = self.fetch(OPERATION, query).await?;
        match rows.first() {
            Some(row) => row.try_get("n").map_err(|e| store_error(OPERATION, e)),
            None => Ok(0),
        }
    }

    async fn row(
        &self,
        table: Table,
        id: Uuid,
        max_payload_bytes: u32,
    ) -> Result<Option<RowDetail>, StoreError> {
        const OPERATION: &str = "console row";
        let sql = match table {
            Table::Outbox => self.statements.outbox_row.clone(),
            Table::Inbox => self.statements.inbox_row.clone(),
        };
        let query = sqlx::query(sql).bind(id).bind(sql_limit(max_payload_bytes));
        let rows = self.fetch(OPERATION, query).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let get = |e| store_error(OPERATION, e);
        Ok(Some(RowDetail {
            summary: summary(OPERATION, row)?,
            headers: row.try_get("headers").map_err(get)?,
            payload: row.try_get("payload").map_err(get)?,
            payload_bytes: row.try_get("payload_bytes").map_err(get)?,
            kind: row.try_get("kind").map_err(get)?,
            consumption: row.try_get("consumption").map_err(get)?,
            correlation_id: row.try_get("correlation_id").map_err(get)?,
        }))
    }

    async fn inbox_by_key(&self, key: &str) -> Result<Vec<RowSummary>, StoreError> {
        const OPERATION: &str = "console inbox by key";
        let query = sqlx::query(self.statements.inbox_by_key.clone()).bind(key);
        let rows = self.fetch(OPERATION, query).await?;
        rows.iter().map(|row| summary(OPERATION, row)).collect()
    }

    async fn inbox_by_correlation(
        &self,
        correlation_id: &str,
        limit: u32,
    ) -> Result<Vec<RowSummary>, StoreError> {
        const OPERATION: &str = "console inbox by correlation id";
        let query = sqlx::query(self.statements.inbox_by_correlation.clone())
            .bind(correlation_id)
            .bind(sql_limit(limit));
        let rows = self.fetch(OPERATION, query).await?;
        rows.iter().map(|row| summary(OPERATION, row)).collect()
    }

    async fn requeue_inbox(&self, ids: &[Uuid]) -> Result<u64, StoreError> {
        const OPERATION: &str = "console inbox requeue";
        let mut connection = self
            .pool
            .acquire()
            .await
            .map_err(|e| pool_error(OPERATION, e))?;
        let done = sqlx::query(self.statements.inbox_requeue.clone())
            .bind(ids)
            .execute(&mut *connection)
            .await
            .map_err(|e| store_error(OPERATION, e))?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statements::has_placeholder;

    #[test]
    fn every_console_statement_renders_for_renamed_names() {
        let mut names = SchemaNames {
            outbox_table: "qb_outbox".into(),
            inbox_table: "qb_inbox".into(),
            ..SchemaNames::default()
        };
        assert!(names.outbox.set("lastError", "failure"));
        assert!(names.inbox.set("idempotencyKey", "dedup_key"));
        let statements = ConsoleStatements::render(&names).expect("render");
        for (name, sql) in statements.iter() {
            assert!(!has_placeholder(sql), "{name}: {sql}");
            assert!(!sql.contains("--"), "{name} kept a comment");
        }
        assert!(statements.outbox_dead_page.as_str().contains("\"failure\""));
        assert!(statements.inbox_by_key.as_str().contains("\"dedup_key\""));
    }

    #[test]
    fn error_text_wildcards_are_escaped() {
        assert_eq!(contains_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
        assert_eq!(contains_pattern(""), "%%");
    }
}
