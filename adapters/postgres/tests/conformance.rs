//! The store conformance suite (queuebox-conformance) against PostgreSQL: a fresh migrated
//! database per test on the server of `QB_TEST_PG_URL`, the stores through the `DatabaseBackend`
//! port, and a session for the few things the ports do not offer (inserting an outbox row as the
//! application does, reading a row's state, letting a lease pass, making a row older).

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::TestDb;
use queuebox_conformance::store::{
    InboxRowView, InboxState, NewOutboxRow, OutboxRowView, StoreFixture,
};
use queuebox_domain::mapping::SchemaNames;
use queuebox_domain::outbox::OutboxState;
use queuebox_ports::database::DatabaseBackend;
use queuebox_ports::inbox::{InboxStore, RelayStore};
use queuebox_ports::outbox::OutboxStore;
use queuebox_ports::replay::ReplayStore;
use queuebox_ports::retention::RetentionStore;
use queuebox_postgres::PostgresDatabase;
use sqlx::{AssertSqlSafe, Connection, PgConnection, Row};
use tokio::sync::Mutex;
use uuid::Uuid;

struct PgFixture {
    db: TestDb,
    database: PostgresDatabase,
    session: Mutex<PgConnection>,
}

impl PgFixture {
    async fn exec(&self, sql: String) {
        let mut session = self.session.lock().await;
        sqlx::raw_sql(AssertSqlSafe(sql.clone()))
            .execute(&mut *session)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
    }

    async fn backdate(&self, table: &str, columns: &[&str], id: Uuid, by: Duration) {
        let set: Vec<String> = columns
            .iter()
            .map(|c| format!("{c} = {c} - $1 * interval '1 millisecond'"))
            .collect();
        let sql = format!("UPDATE {table} SET {} WHERE id = $2", set.join(", "));
        let millis = i64::try_from(by.as_millis()).expect("a duration in range");
        let mut session = self.session.lock().await;
        let done = sqlx::query(AssertSqlSafe(sql))
            .bind(millis)
            .bind(id)
            .execute(&mut *session)
            .await
            .expect("backdate a row");
        assert_eq!(done.rows_affected(), 1, "no {table} row {id}");
    }
}

fn headers_json(pairs: &[(String, String)]) -> String {
    let object: serde_json::Map<String, serde_json::Value> = pairs
        .iter()
        .map(|(name, value)| (name.clone(), serde_json::Value::String(value.clone())))
        .collect();
    serde_json::Value::Object(object).to_string()
}

#[async_trait]
impl StoreFixture for PgFixture {
    async fn fresh() -> Self {
        let db = TestDb::create().await;
        let database = queuebox_postgres::connect(&db.options(true, SchemaNames::default()))
            .await
            .expect("connect");
        database.prepare().await.expect("migrate and check");
        let session = Mutex::new(db.session().await);
        Self {
            db,
            database,
            session,
        }
    }

    fn outbox(&self) -> Arc<dyn OutboxStore> {
        DatabaseBackend::outbox_store(&self.database)
    }

    fn relay(&self) -> Arc<dyn RelayStore> {
        DatabaseBackend::relay_store(&self.database)
    }

    fn inbox(&self) -> Arc<dyn InboxStore> {
        DatabaseBackend::inbox_store(&self.database)
    }

    fn replay(&self) -> Arc<dyn ReplayStore> {
        DatabaseBackend::replay_store(&self.database)
    }

    fn retention(&self) -> Arc<dyn RetentionStore> {
        DatabaseBackend::retention_store(&self.database)
    }

    async fn insert_outbox_row(&self, row: NewOutboxRow) -> Uuid {
        let mut session = self.session.lock().await;
        sqlx::query_scalar(
            "INSERT INTO outbox (topic, key, aggregate_type, payload, headers, max_attempts) \
             VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6) RETURNING id",
        )
        .bind(&row.topic)
        .bind(&row.key)
        .bind(&row.aggregate_type)
        .bind(&row.payload)
        .bind(headers_json(&row.headers))
        .bind(row.max_attempts)
        .fetch_one(&mut *session)
        .await
        .expect("insert an outbox row")
    }

    async fn outbox_row(&self, id: Uuid) -> Option<OutboxRowView> {
        let mut session = self.session.lock().await;
        let row =
            sqlx::query("SELECT state, claim_token, attempt, last_error FROM outbox WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *session)
                .await
                .expect("read an outbox row")?;
        let state: String = row.get("state");
        Some(OutboxRowView {
            state: OutboxState::parse(&state).expect("a known state"),
            claim_token: row.get("claim_token"),
            attempt: row.get("attempt"),
            last_error: row.get("last_error"),
        })
    }

    async fn expire_outbox_lease(&self, id: Uuid) {
        self.exec(format!(
            "UPDATE outbox SET lease_expires_at = now() - interval '1 second' WHERE id = '{id}'"
        ))
        .await;
    }

    async fn backdate_outbox_row(&self, id: Uuid, by: Duration) {
        self.backdate(
            "outbox",
            &["created_at", "updated_at", "scheduled_at"],
            id,
            by,
        )
        .await;
    }

    async fn inbox_row(&self, id: Uuid) -> Option<InboxRowView> {
        let mut session = self.session.lock().await;
        let row = sqlx::query("SELECT state, claim_token, last_error FROM inbox WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *session)
            .await
            .expect("read an inbox row")?;
        let state = match row.get::<&str, _>("state") {
            "pending" => InboxState::Pending,
            "processing" => InboxState::Processing,
            "processed" => InboxState::Processed,
            "dead" => InboxState::Dead,
            other => panic!("unknown inbox state {other}"),
        };
        Some(InboxRowView {
            state,
            claim_token: row.get("claim_token"),
            last_error: row.get("last_error"),
        })
    }

    async fn expire_inbox_lease(&self, id: Uuid) {
        self.exec(format!(
            "UPDATE inbox SET lease_expires_at = now() - interval '1 second' WHERE id = '{id}'"
        ))
        .await;
    }

    async fn backdate_inbox_row(&self, id: Uuid, by: Duration) {
        self.backdate("inbox", &["created_at", "processed_at"], id, by)
            .await;
    }

    async fn done(self) {
        let Self {
            db,
            database,
            session,
        } = self;
        let _ = session.into_inner().close().await;
        database.close().await;
        db.drop_now().await;
    }
}

queuebox_conformance::store_conformance_suite!(PgFixture);
