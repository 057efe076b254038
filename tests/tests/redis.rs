//! Redis Streams end to end: the real binary delivers outbox rows from a real PostgreSQL to the real
//! Redis of `QB_TEST_REDIS_URL` (started by `scripts/services.sh`), and stores the entries of a
//! stream in the inbox through a consumer group. Each test uses stream keys of its own.

#![allow(clippy::unwrap_used)]

use queuebox_tests::inbox::wait_each_stored_once;
use queuebox_tests::service::Service;
use queuebox_tests::source_rules::{self, Message, RulesBroker, Source};
use queuebox_tests::wait_until;
use redis::aio::MultiplexedConnection;
use std::collections::HashMap;
use std::time::Duration;
use uuid::Uuid;

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

/// The source-rules scenario on streams: each source reads a stream of its own through the consumer
/// group `qb`.
struct Streams(MultiplexedConnection);

impl RulesBroker for Streams {
    /// The source makes its stream and group.
    async fn create(&self, _stream: &str) {}

    fn source(&self, stream: &str) -> String {
        format!(
            "    type: redis\n    url: {url}\n    stream: \"{stream}\"\n    group: qb\n    consumer: e2e\n    blockMs: 200\n",
            url = redis_url(),
        )
    }

    async fn publish(&self, stream: &str, _to: Source, message: &Message) {
        let mut command = redis::cmd("XADD");
        command.arg(stream).arg("*");
        for (name, value) in message.headers() {
            command.arg(name).arg(value);
        }
        command.arg("payload").arg(message.body("id", true));
        let _: String = command.query_async(&mut self.0.clone()).await.unwrap();
    }

    /// True when group `qb` of `stream` holds no entry delivered and not acknowledged.
    async fn acknowledged(&self, stream: &str) -> bool {
        let summary: redis::Value = redis::cmd("XPENDING")
            .arg(stream)
            .arg("qb")
            .query_async(&mut self.0.clone())
            .await
            .unwrap();
        matches!(summary, redis::Value::Array(ref parts) if parts.first() == Some(&redis::Value::Int(0)))
    }

    async fn delete(&self, stream: &str) {
        let _: () = redis::cmd("DEL")
            .arg(stream)
            .query_async(&mut self.0.clone())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn the_sources_rules_apply_to_stream_entries_filter_transform_pull_and_relay() {
    source_rules::run(&Streams(redis().await), WAIT).await;
}
