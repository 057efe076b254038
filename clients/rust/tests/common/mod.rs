//! A fresh PostgreSQL database per test, built from the repository's migrations.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Executor, PgPool};
use uuid::Uuid;

pub struct TestDb {
    pub pool: PgPool,
    pub options: PgConnectOptions,
    admin: PgConnectOptions,
    name: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The example statements of the SQL contract.
pub fn contract_file(name: &str) -> String {
    let path = repo_root().join("examples/pull/sql/postgresql").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn migrations() -> Vec<(u32, PathBuf)> {
    let dir = repo_root().join("migrations/postgres");
    let mut files: Vec<(u32, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let name = path.file_name()?.to_str()?.to_owned();
            let version = name.strip_prefix('V')?.split("__").next()?.parse().ok()?;
            name.ends_with(".sql").then_some((version, path))
        })
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no migrations found in {}",
        dir.display()
    );
    files
}

impl TestDb {
    pub async fn new() -> Self {
        let url = std::env::var("QB_TEST_PG_URL").unwrap_or_else(|_| {
            panic!(
                "QB_TEST_PG_URL is not set. Start PostgreSQL and export it with \
                 `eval \"$(bash scripts/services.sh)\"` from the repository root."
            )
        });
        let admin: PgConnectOptions = url.parse().expect("QB_TEST_PG_URL is not a PostgreSQL URL");
        let name = format!("qb_pull_{}", Uuid::new_v4().simple());
        let mut conn = admin
            .connect()
            .await
            .expect("connecting with QB_TEST_PG_URL");
        conn.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .await
            .expect("CREATE DATABASE");
        drop(conn);

        let options = admin.clone().database(&name);
        let pool = PgPoolOptions::new()
            .max_connections(20)
            .acquire_timeout(Duration::from_secs(20))
            .connect_with(options.clone())
            .await
            .expect("connecting to the test database");
        for (version, path) in migrations() {
            let sql = std::fs::read_to_string(&path).expect("reading a migration");
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .unwrap_or_else(|e| panic!("migration V{version} failed: {e}"));
        }
        // The index that the README recommends for the claim's aggregate walk (not yet a
        // migration of the repository).
        sqlx::raw_sql(sqlx::AssertSqlSafe(contract_file(
            "recommended_indexes.sql",
        )))
        .execute(&pool)
        .await
        .expect("recommended index");
        Self {
            pool,
            options,
            admin,
            name,
        }
    }

    pub async fn drop_db(self) {
        self.pool.close().await;
        if let Ok(mut conn) = self.admin.connect().await {
            let _ = conn
                .execute(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                    self.name
                )))
                .await;
        }
    }
}

/// Inserts a pull row; `age_ms` orders rows (larger = older), as receipt time would.
pub async fn insert_row(
    pool: &PgPool,
    source: &str,
    key: &str,
    aggregate: Option<&str>,
    age_ms: i64,
) -> Uuid {
    sqlx::query_scalar(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers,
                            consumption, correlation_id, created_at, scheduled_at)
         VALUES ($1, $2, $3, 'test.event', jsonb_build_object('key', $2::text), '{\"x-test\": \"1\"}',
                 'pull', 'corr-' || $2, now() - $4 * interval '1 millisecond',
                 now() - $4 * interval '1 millisecond')
         RETURNING id",
    )
    .bind(source)
    .bind(key)
    .bind(aggregate)
    .bind(age_ms)
    .fetch_one(pool)
    .await
    .expect("insert inbox row")
}

/// Waits until `check` is true, polling every 20 ms; panics with `what` after `deadline`.
pub async fn wait_until<F, Fut>(deadline: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "timed out after {deadline:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Debug)]
pub struct RowState {
    pub state: String,
    pub attempt: i32,
    pub claim_token: Option<Uuid>,
    pub last_error: Option<String>,
    pub processed: bool,
    pub due_in_ms: f64,
    pub lease_left_ms: Option<f64>,
}

pub async fn row_state(pool: &PgPool, id: Uuid) -> RowState {
    let row = sqlx::query(
        "SELECT state, attempt, claim_token, last_error, processed_at IS NOT NULL AS processed,
                (EXTRACT(EPOCH FROM (scheduled_at - now())) * 1000)::float8 AS due_in_ms,
                (EXTRACT(EPOCH FROM (lease_expires_at - now())) * 1000)::float8 AS lease_left_ms
           FROM inbox WHERE id = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .expect("reading an inbox row");
    RowState {
        state: get(&row, "state"),
        attempt: get(&row, "attempt"),
        claim_token: get(&row, "claim_token"),
        last_error: get(&row, "last_error"),
        processed: get(&row, "processed"),
        due_in_ms: get(&row, "due_in_ms"),
        lease_left_ms: get(&row, "lease_left_ms"),
    }
}

fn get<'r, T>(row: &'r sqlx::postgres::PgRow, name: &str) -> T
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    use sqlx::Row;
    row.try_get(name)
        .unwrap_or_else(|e| panic!("decoding column {name}: {e}"))
}
