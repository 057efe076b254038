//! One test's QueueBox: a fresh database and the real binary serving a configuration built around
//! it, started, read through (rows, metrics, readiness, log) and stopped.
//!
//! Every end-to-end test that needs "a database and `queuebox serve`" starts one through
//! [`Service::start`] (the common settings) or [`Service::with`] (what a test varies):
//!
//! ```ignore
//! let service = Service::with(&sections).retry_base_delay_ms(50).start().await;
//! ```

use crate::database::TestDatabase;
use crate::process::{Launch, QueueBox};
use crate::{free_port, wait_until};
use sqlx::PgPool;
use std::time::Duration;
use uuid::Uuid;

/// How long a start may take (migrations included) before the test fails with the log.
pub const START: Duration = Duration::from_secs(30);
/// How long a stop may take (the drain included) before the test fails with the log.
pub const STOP: Duration = Duration::from_secs(30);

/// What one test varies in the configuration and environment of its [`Service`].
#[must_use = "nothing starts until `.start()`"]
pub struct Options {
    sections: String,
    retry_base_delay_ms: u64,
    outbox_extra: String,
    env: Vec<(String, String)>,
}

impl Options {
    /// `outbox.retryBaseDelayMs` (20 unless set).
    pub fn retry_base_delay_ms(mut self, ms: u64) -> Self {
        self.retry_base_delay_ms = ms;
        self
    }

    /// More lines of the `outbox` section, each indented by two spaces and ending in a newline.
    pub fn outbox_extra(mut self, lines: &str) -> Self {
        self.outbox_extra = lines.to_owned();
        self
    }

    /// An environment variable for the process (for `${NAME}` references in the configuration).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Creates the database, starts `queuebox serve` and waits until it is live (migrations done,
    /// so the tables exist from here on).
    pub async fn start(self) -> Service {
        let db = TestDatabase::create().await;
        let port = free_port();
        let yaml = format!(
            "server:\n  httpPort: {port}\n\
             database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
             outbox:\n  pollIntervalMs: 50\n  retryBaseDelayMs: {retry}\n{outbox_extra}{sections}",
            url = db.jdbc_url(),
            user = db.user,
            password = db.password,
            retry = self.retry_base_delay_ms,
            outbox_extra = self.outbox_extra,
            sections = self.sections,
        );
        let qb = launch(&yaml, &self.env).spawn(&[]);
        let mut service = Service {
            sql: db.pool().await,
            db,
            port,
            qb,
            yaml,
            env: self.env,
            http: crate::http(),
        };
        service.qb.wait_live(port, START).await;
        service
    }
}

fn launch(yaml: &str, env: &[(String, String)]) -> Launch {
    env.iter()
        .fold(Launch::with_config(yaml), |launch, (name, value)| {
            launch.env(name, value)
        })
}

/// An outbox row to insert with [`Service::insert`]; [`OutboxRow::new`] is due now, with no key, no
/// headers and 5 attempts, and the rest is set with `OutboxRow { field, ..OutboxRow::new(..) }`.
pub struct OutboxRow<'a> {
    /// `topic`.
    pub topic: &'a str,
    /// `key`.
    pub key: Option<&'a str>,
    /// `payload`, as JSON text.
    pub payload: String,
    /// `headers`, a JSON object of strings.
    pub headers: serde_json::Value,
    /// `max_attempts`.
    pub max_attempts: i32,
    /// `scheduled_at` this far ahead of the database clock.
    pub delay_ms: i64,
}

impl<'a> OutboxRow<'a> {
    /// A row of `topic` whose payload is the JSON text of `payload` (a `serde_json::Value` or a
    /// `&str` holding JSON).
    pub fn new(topic: &'a str, payload: impl std::fmt::Display) -> Self {
        Self {
            topic,
            key: None,
            payload: payload.to_string(),
            headers: serde_json::json!({}),
            max_attempts: 5,
            delay_ms: 0,
        }
    }
}

/// How an outbox row stands, read with [`Service::outbox_row`].
#[derive(Debug)]
pub struct OutboxState {
    /// `pending`, `processing`, `sent` or `dead`.
    pub state: String,
    /// Attempts spent.
    pub attempt: i32,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// The stored payload.
    pub payload: serde_json::Value,
    /// `scheduled_at` minus the database clock, in milliseconds.
    pub due_in_ms: f64,
}

/// One database and one running `queuebox serve`.
pub struct Service {
    /// The test's own database.
    pub db: TestDatabase,
    /// The data port (routes, `/metrics`, `/health`).
    pub port: u16,
    /// The running process.
    pub qb: QueueBox,
    /// A small pool on the test database, usable through `&self` inside `wait_until` closures.
    pub sql: PgPool,
    /// The whole configuration, to start the process again or a replica.
    pub yaml: String,
    env: Vec<(String, String)>,
    http: reqwest::Client,
}

impl Service {
    /// The common settings (outbox polled every 50 ms, retries from 20 ms) and the top-level YAML
    /// `sections` (`destinations:`, `routes:`, `sources:`, `inbox:` ...), started.
    pub async fn start(sections: &str) -> Self {
        Self::with(sections).start().await
    }

    /// The settings to vary before [`Options::start`], around the top-level YAML `sections`.
    pub fn with(sections: &str) -> Options {
        Options {
            sections: sections.to_owned(),
            retry_base_delay_ms: 20,
            outbox_extra: String::new(),
            env: Vec::new(),
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// An HTTP client for the routes.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Inserts one outbox row and returns its id.
    pub async fn insert(&self, row: OutboxRow<'_>) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO outbox (topic, key, payload, headers, max_attempts, scheduled_at) \
             VALUES ($1, $2, $3::jsonb, $4::jsonb, $5, now() + $6 * interval '1 millisecond') RETURNING id",
        )
        .bind(row.topic)
        .bind(row.key)
        .bind(&row.payload)
        .bind(row.headers.to_string())
        .bind(row.max_attempts)
        .bind(row.delay_ms)
        .fetch_one(&self.sql)
        .await
        .unwrap_or_else(|error| panic!("insert an outbox row {}: {error}", row.payload))
    }

    /// How outbox row `id` stands now.
    pub async fn outbox_row(&self, id: Uuid) -> OutboxState {
        let (state, attempt, last_error, payload, due_in_ms): (String, i32, Option<String>, String, f64) =
            sqlx::query_as(
                "SELECT state, attempt, last_error, payload::text, \
                 (EXTRACT(EPOCH FROM (scheduled_at - now())) * 1000)::float8 FROM outbox WHERE id = $1",
            )
            .bind(id)
            .fetch_one(&self.sql)
            .await
            .unwrap_or_else(|error| panic!("read outbox row {id}: {error}"));
        OutboxState {
            state,
            attempt,
            last_error,
            payload: serde_json::from_str(&payload).expect("the payload is JSON"),
            due_in_ms,
        }
    }

    /// Waits until outbox row `id` is in `state` and returns it; fails naming how it stands, with
    /// the log, after `deadline`.
    pub async fn wait_outbox_state(
        &self,
        id: Uuid,
        state: &str,
        deadline: Duration,
    ) -> OutboxState {
        let started = std::time::Instant::now();
        loop {
            let row = self.outbox_row(id).await;
            if row.state == state {
                return row;
            }
            assert!(
                started.elapsed() < deadline,
                "row {id} not {state} within {deadline:?}: {row:?}\nlog:\n{}",
                self.qb.log()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Inserts `total` rows of topic `order.created` in the background, row `i` keyed `k-{i % 10}`
    /// with payload `payload(i)` and `max_attempts` attempts. With `spread` it pauses 100 ms after
    /// every 50 rows, so that the rows spread over a broker restart; no assertion may depend on the
    /// pause.
    pub fn produce(
        &self,
        total: i32,
        max_attempts: i32,
        payload: fn(i32) -> String,
        spread: bool,
    ) -> tokio::task::JoinHandle<()> {
        let sql = self.sql.clone();
        tokio::spawn(async move {
            for i in 0..total {
                sqlx::query(
                    "INSERT INTO outbox (topic, key, payload, max_attempts) \
                     VALUES ('order.created', $1, $2::jsonb, $3)",
                )
                .bind(format!("k-{}", i % 10))
                .bind(payload(i))
                .bind(max_attempts)
                .execute(&sql)
                .await
                .expect("insert");
                if spread && i % 50 == 49 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        })
    }

    /// Kills the process with SIGKILL as soon as the inbox holds more than `after` rows (waiting up
    /// to `deadline`), waits for it to end, and returns how many rows it had stored: fewer than
    /// `total`, or the kill came too late to test anything.
    pub async fn kill9_while_storing(&mut self, after: i64, total: i64, deadline: Duration) -> i64 {
        wait_until("some rows stored", deadline, || async {
            (self.count("SELECT count(*) FROM inbox").await > after).then_some(())
        })
        .await;
        self.qb.kill9();
        self.qb.wait_exit(Duration::from_secs(10)).await;
        let stored = self.count("SELECT count(*) FROM inbox").await;
        assert!(stored < total, "the kill came too late to test anything");
        stored
    }

    /// The value of a `SELECT count(*) ...` (or any one-bigint query).
    pub async fn count(&self, query: &'static str) -> i64 {
        sqlx::query_scalar(query)
            .fetch_one(&self.sql)
            .await
            .unwrap_or_else(|error| panic!("{query}: {error}"))
    }

    /// The Prometheus scrape.
    pub async fn metrics(&self) -> String {
        crate::scrape(self.port).await
    }

    /// One sample of the scrape (0 when absent), e.g. `name{label="v"}`.
    pub async fn metric(&self, series: &str) -> f64 {
        crate::sample(&self.metrics().await, series)
    }

    /// Waits until the sample `series` reaches `at_least`, then returns its value.
    pub async fn wait_metric(&self, series: &str, at_least: f64, deadline: Duration) -> f64 {
        wait_until(&format!("{series} >= {at_least}"), deadline, || async {
            let value = self.metric(series).await;
            (value >= at_least).then_some(value)
        })
        .await
    }

    /// The status and body of `GET /health/ready`.
    pub async fn ready(&self) -> (u16, String) {
        let response = self
            .http
            .get(self.url("/health/ready"))
            .send()
            .await
            .expect("GET /health/ready");
        let status = response.status().as_u16();
        (status, response.text().await.expect("readiness body"))
    }

    /// Waits until readiness answers 200 naming `component` (a source's `<kind>.<name>`).
    pub async fn wait_component_up(&self, component: &str, deadline: Duration) {
        wait_until(&format!("{component} up"), deadline, || async {
            let (status, body) = self.ready().await;
            (status == 200 && body.contains(component)).then_some(())
        })
        .await;
    }

    /// What the process wrote to stderr so far (the log).
    pub fn log(&self) -> String {
        self.qb.log()
    }

    /// Starts the same configuration again on the same database and port, after the process was
    /// killed or stopped, and waits until it is live.
    pub async fn restart(&mut self) {
        self.qb = launch(&self.yaml, &self.env).spawn(&[]);
        self.qb.wait_live(self.port, START).await;
    }

    /// A second process on the same database with the same configuration but a port of its own,
    /// started but not waited for.
    pub fn replica(&self) -> (QueueBox, u16) {
        let port = free_port();
        let yaml = self.yaml.replacen(
            &format!("httpPort: {}", self.port),
            &format!("httpPort: {port}"),
            1,
        );
        (launch(&yaml, &self.env).spawn(&[]), port)
    }

    /// Stops the process with SIGTERM, asserts it exited 0 within [`STOP`], drops the database.
    pub async fn stop(mut self) {
        self.qb.terminate();
        let status = self.qb.wait_exit(STOP).await;
        assert!(status.success(), "exit {status}; log:\n{}", self.qb.log());
        self.discard().await;
    }

    /// Drops the database, for a test that ended the process itself.
    pub async fn discard(self) {
        self.sql.close().await;
        self.db.drop_database().await;
    }
}
