//! Redis Streams end to end: the real binary delivers outbox rows from a real PostgreSQL to the real
//! Redis of `QB_TEST_REDIS_URL` (started by `scripts/services.sh`), and stores the entries of a
//! stream in the inbox through a consumer group. Each test uses stream keys of its own.

#![allow(clippy::unwrap_used)]

use queuebox_tests::database::TestDatabase;
use queuebox_tests::inbox::wait_each_stored_once;
use queuebox_tests::process::{Launch, QueueBox};
use queuebox_tests::{free_port, wait_until};
use redis::aio::MultiplexedConnection;
use sqlx::PgPool;
use std::collections::HashMap;
use std::time::Duration;
use uuid::Uuid;

const START: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(30);

fn redis_url() -> String {
    std::env::var("QB_TEST_REDIS_URL").unwrap_or_else(|_| {
        panic!("QB_TEST_REDIS_URL is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    })
}

fn unique(prefix: &str) -> String {
    format!("qb:e2e:{prefix}:{}", Uuid::new_v4().simple())
}

async fn redis() -> MultiplexedConnection {
    redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("connect to Redis")
}

/// Every entry of `stream`: its fields in order.
async fn entries(redis: &mut MultiplexedConnection, stream: &str) -> Vec<Vec<(String, String)>> {
    let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XRANGE")
        .arg(stream)
        .arg("-")
        .arg("+")
        .query_async(redis)
        .await
        .unwrap();
    entries.into_iter().map(|(_, fields)| fields).collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// One database and one `queuebox serve` with `extra` YAML sections.
struct Service {
    db: TestDatabase,
    port: u16,
    qb: QueueBox,
    sql: PgPool,
}

impl Service {
    async fn start(extra: &str) -> Self {
        let db = TestDatabase::create().await;
        let port = free_port();
        let yaml = format!(
            "server:\n  httpPort: {port}\n\
             database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
             outbox:\n  pollIntervalMs: 50\n  retryBaseDelayMs: 20\n{extra}",
            url = db.jdbc_url(),
            user = db.user,
            password = db.password,
        );
        let mut qb = Launch::with_config(&yaml).spawn(&[]);
        qb.wait_live(port, START).await;
        let sql = db.pool().await;
        Self { db, port, qb, sql }
    }

    async fn count(&self, query: &'static str) -> i64 {
        sqlx::query_scalar(query)
            .fetch_one(&self.sql)
            .await
            .expect("count")
    }

    async fn ready(&self) -> (u16, String) {
        let response = queuebox_tests::http()
            .get(format!("http://127.0.0.1:{}/health/ready", self.port))
            .send()
            .await
            .expect("GET /health/ready");
        let status = response.status().as_u16();
        (status, response.text().await.expect("text"))
    }

    async fn stop(mut self) {
        self.qb.terminate();
        let status = self.qb.wait_exit(Duration::from_secs(20)).await;
        assert!(status.success(), "exit {status}; log:\n{}", self.qb.log());
        self.sql.close().await;
        self.db.drop_database().await;
    }
}

#[tokio::test]
async fn outbox_rows_reach_the_stream_in_key_order_with_their_fields_and_the_exact_trim_holds() {
    let mut redis = redis().await;
    let stream = unique("dest");
    let trimmed = unique("trim");
    let service = Service::start(&format!(
        "destinations:\n\
         \x20 rs:\n    type: redis\n    url: {url}\n    stream: \"{stream}\"\n    timeoutMs: 3000\n    headers:\n      x-static: yes\n      x-tenant: overridden-by-row\n\
         \x20 trim:\n    url: {url}\n    stream: \"{trimmed}\"\n    maxLen: 5\n    maxLenApproximate: false\n\
         routes:\n  - topicPattern: \"order.*\"\n    destination: rs\n  - topicPattern: \"audit.*\"\n    destination: trim\n",
        url = redis_url(),
    ))
    .await;
    let mut ids = Vec::new();
    for i in 0..30 {
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO outbox (topic, key, payload, headers) \
             VALUES ('order.created', $1, $2::jsonb, '{\"x-tenant\":\"acme\"}'::jsonb) RETURNING id",
        )
        .bind(format!("cust-{}", i % 3))
        .bind(format!(r#"{{"n":{i}}}"#))
        .fetch_one(&service.sql)
        .await
        .unwrap();
        ids.push(id.to_string());
    }
    let mut audit = Vec::new();
    for i in 0..12 {
        let id: Uuid = sqlx::query_scalar(
            "INSERT INTO outbox (topic, key, payload) VALUES ('audit.login', 'a', $1::jsonb) RETURNING id",
        )
        .bind(format!(r#"{{"n":{i}}}"#))
        .fetch_one(&service.sql)
        .await
        .unwrap();
        audit.push(id.to_string());
    }
    wait_until("every row sent", WAIT, || async {
        (service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await
            == 42)
            .then_some(())
    })
    .await;
    let got = entries(&mut redis, &stream).await;
    assert_eq!(got.len(), 30, "one entry per row");
    let mut last: HashMap<String, i64> = HashMap::new();
    for fields in &got {
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "x-message-id",
                "x-topic",
                "x-attempt",
                "x-message-key",
                "x-static",
                "x-tenant",
                "payload"
            ],
            "{fields:?}"
        );
        assert!(
            ids.iter()
                .any(|id| Some(id.as_str()) == field(fields, "x-message-id"))
        );
        assert_eq!(field(fields, "x-topic"), Some("order.created"));
        assert_eq!(
            field(fields, "x-tenant"),
            Some("acme"),
            "the row header wins"
        );
        let payload: serde_json::Value =
            serde_json::from_str(field(fields, "payload").unwrap()).unwrap();
        let n = payload["n"].as_i64().unwrap();
        let key = field(fields, "x-message-key").unwrap().to_owned();
        assert_eq!(key, format!("cust-{}", n % 3));
        if let Some(previous) = last.insert(key.clone(), n) {
            assert!(previous < n, "key {key}: {n} arrived after {previous}");
        }
    }
    // MAXLEN = 5: exactly the five newest rows of the key's order are left.
    let kept: Vec<String> = entries(&mut redis, &trimmed)
        .await
        .iter()
        .map(|fields| field(fields, "x-message-id").unwrap().to_owned())
        .collect();
    assert_eq!(kept, audit[7..], "the exact trim keeps the newest five");
    service.stop().await;
    let _: () = redis::cmd("DEL")
        .arg(&stream)
        .arg(&trimmed)
        .query_async(&mut redis)
        .await
        .unwrap();
}

#[tokio::test]
async fn stream_entries_are_stored_once_acknowledged_and_a_bad_body_is_kept_dead() {
    let mut redis = redis().await;
    let stream = unique("src");
    let service = Service::start(&format!(
        "sources:\n  payments:\n    type: redis\n    url: {url}\n    stream: \"{stream}\"\n    group: qb\n    consumer: e2e\n    blockMs: 200\n    idempotencyKeyPath: $.paymentId\n    eventTypePath: $.type\n    topic: \"payments.{{{{ eventType }}}}\"\n",
        url = redis_url(),
    ))
    .await;
    wait_until("the source consuming", WAIT, || async {
        let (status, body) = service.ready().await;
        (status == 200 && body.contains("redis.payments")).then_some(())
    })
    .await;
    for i in 0..20 {
        // Each payment is added twice: a producer that retried.
        for _ in 0..2 {
            let _: String = redis::cmd("XADD")
                .arg(&stream)
                .arg("*")
                .arg("x-tenant")
                .arg("acme")
                .arg("payload")
                .arg(format!(r#"{{"paymentId":"p-{i}","type":"captured"}}"#))
                .query_async(&mut redis)
                .await
                .unwrap();
        }
    }
    let _: String = redis::cmd("XADD")
        .arg(&stream)
        .arg("*")
        .arg("payload")
        .arg("not json")
        .query_async(&mut redis)
        .await
        .unwrap();
    wait_each_stored_once(&service.sql, "payment", 21, WAIT).await;
    assert_eq!(
        service
            .count("SELECT count(*) FROM inbox WHERE state = 'dead'")
            .await,
        1
    );
    assert_eq!(
        service.count("SELECT count(*) FROM inbox WHERE headers->>'x-tenant' = 'acme' AND event_type = 'captured'").await,
        20
    );
    wait_until("every entry acknowledged", WAIT, || async {
        let summary: redis::Value = redis::cmd("XPENDING").arg(&stream).arg("qb").query_async(&mut redis.clone()).await.unwrap();
        matches!(summary, redis::Value::Array(ref parts) if parts.first() == Some(&redis::Value::Int(0))).then_some(())
    })
    .await;
    // The relay forwarded the stored rows into the outbox under the source's topic.
    wait_until("the relay forwarding", WAIT, || async {
        (service
            .count("SELECT count(*) FROM outbox WHERE topic = 'payments.captured'")
            .await
            == 20)
            .then_some(())
    })
    .await;
    service.stop().await;
    let _: () = redis::cmd("DEL")
        .arg(&stream)
        .query_async(&mut redis)
        .await
        .unwrap();
}
