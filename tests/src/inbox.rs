//! An HTTP inbox under test: a fresh database, the real binary serving the given sources with the
//! relay off (so a stored row stays as the ingest wrote it), and the rows read back.

use crate::database::TestDatabase;
use crate::free_port;
use crate::process::{Launch, QueueBox};
use serde_json::Value;
use sqlx::{PgPool, Row};
use std::time::Duration;
use uuid::Uuid;

/// How long a start may take.
const START: Duration = Duration::from_secs(30);
/// The `inbox.maxBodyBytes` of [`Inbox::start`].
pub const MAX_BODY: usize = 2048;

/// One database and one `queuebox serve` with the given `sources` section.
pub struct Inbox {
    /// The test's own database.
    pub db: TestDatabase,
    /// The data port.
    pub port: u16,
    /// The running process.
    pub qb: QueueBox,
    /// A pool on the test database, to read rows back.
    pub sql: PgPool,
    /// A client for the routes.
    pub http: reqwest::Client,
}

/// One stored inbox row, as read back.
#[derive(Debug)]
#[allow(missing_docs)]
pub struct InboxRow {
    pub id: Uuid,
    pub source: String,
    pub key: String,
    pub event_type: Option<String>,
    pub aggregate_id: Option<String>,
    pub payload: Value,
    pub headers: Value,
    pub correlation_id: Option<String>,
    pub consumption: String,
    pub state: String,
}

impl Inbox {
    /// One database and one `queuebox serve` with `sources` (YAML lines under `sources:`), the
    /// relay off and a body cap of [`MAX_BODY`].
    pub async fn start(sources: &str, env: &[(&str, &str)]) -> Self {
        Self::start_with_cap(sources, env, MAX_BODY).await
    }

    /// As [`Inbox::start`], with `inbox.maxBodyBytes` set to `max_body`.
    pub async fn start_with_cap(sources: &str, env: &[(&str, &str)], max_body: usize) -> Self {
        let db = TestDatabase::create().await;
        let port = free_port();
        let yaml = format!(
            "server:\n  httpPort: {port}\n\
             database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
             inbox:\n  maxBodyBytes: {max_body}\n  relay:\n    enabled: false\n\
             sources:\n{sources}",
            url = db.jdbc_url(),
            user = db.user,
            password = db.password,
        );
        let mut launch = Launch::with_config(&yaml);
        for (name, value) in env {
            launch = launch.env(name, value);
        }
        let mut qb = launch.spawn(&[]);
        qb.wait_live(port, START).await;
        let sql = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(&db.url)
            .await
            .expect("connect to the test database");
        Self {
            db,
            port,
            qb,
            sql,
            http: crate::http(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub async fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        let mut request = self.http.post(self.url(path)).body(body.to_owned());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("POST");
        Answer::read(response).await
    }

    pub async fn rows(&self, source: &str) -> Vec<InboxRow> {
        let rows = sqlx::query(
            "SELECT id, source, idempotency_key, event_type, aggregate_id, payload::text AS payload, \
             headers::text AS headers, correlation_id, consumption, state \
             FROM inbox WHERE source = $1 ORDER BY created_at, idempotency_key",
        )
        .bind(source)
        .fetch_all(&self.sql)
        .await
        .expect("read inbox rows");
        rows.iter()
            .map(|row| {
                let text = |column: &str| -> String { row.get(column) };
                InboxRow {
                    id: row.get("id"),
                    source: text("source"),
                    key: text("idempotency_key"),
                    event_type: row.get("event_type"),
                    aggregate_id: row.get("aggregate_id"),
                    payload: serde_json::from_str(&text("payload")).expect("payload json"),
                    headers: serde_json::from_str(&text("headers")).expect("headers json"),
                    correlation_id: row.get("correlation_id"),
                    consumption: text("consumption"),
                    state: text("state"),
                }
            })
            .collect()
    }

    pub async fn count(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM inbox")
            .fetch_one(&self.sql)
            .await
            .expect("count")
    }

    pub async fn metrics(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .expect("GET /metrics")
            .text()
            .await
            .expect("metrics text")
    }

    pub async fn stop(mut self) {
        self.sql.close().await;
        self.qb.terminate();
        let status = self.qb.wait_exit(Duration::from_secs(15)).await;
        assert!(status.success(), "exit {status}; log:\n{}", self.qb.log());
        self.db.drop_database().await;
    }
}

/// What a route answered.
#[derive(Debug)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// `X-Correlation-Id`.
    pub correlation_id: Option<String>,
    /// `Retry-After`.
    pub retry_after: Option<String>,
    /// The body.
    pub text: String,
}

impl Answer {
    pub async fn read(response: reqwest::Response) -> Self {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .map(|v| v.to_str().expect("ascii header").to_owned())
        };
        let correlation_id = header("x-correlation-id");
        let retry_after = header("retry-after");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        Self {
            status,
            correlation_id,
            retry_after,
            text,
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    pub fn message_id(&self) -> Uuid {
        assert_eq!(self.status, 202, "{self:?}");
        let id = self.json()["messageId"]
            .as_str()
            .expect("messageId")
            .to_owned();
        Uuid::parse_str(&id).expect("messageId is a UUID")
    }
}

/// Waits up to `deadline` until the inbox read through `sql` holds `total` rows, then asserts that
/// they carry `total` distinct idempotency keys: every message stored, none twice. `what` names a
/// message in the failure text ("message", "record").
pub async fn wait_each_stored_once(sql: &PgPool, what: &str, total: i64, deadline: Duration) {
    let count = |query: &'static str| async move {
        sqlx::query_scalar::<_, i64>(query)
            .fetch_one(sql)
            .await
            .expect("count inbox rows")
    };
    crate::wait_until(&format!("every {what} stored"), deadline, || async {
        (count("SELECT count(*) FROM inbox").await == total).then_some(())
    })
    .await;
    assert_eq!(
        count("SELECT count(DISTINCT idempotency_key) FROM inbox").await,
        total,
        "each {what} stored exactly once"
    );
}
