//! A running QueueBox with every part that creates metric series, and traffic on every path: a
//! delivering HTTP destination, a failing one (publish failures, a retry and a dead row), a route
//! transform that refuses (transform failures), an HTTP source with a duplicate and a body that is
//! not JSON, a source whose filter drops a message, the relay, retention on both tables, and
//! PostgreSQL logical capture, and an insert the database refuses (`storage_failed`). A RabbitMQ, a
//! Kafka and a NATS destination each get one row they cannot publish (an exchange, a topic and a
//! subject that do not exist on the broker), so every kind's publish failure series exists.
//!
//! Used by `docs_metrics` (the scrape against the metrics reference) and `deploy_monitoring`
//! (Prometheus scraping it, with the rules and the dashboard of `deploy/monitoring/`).

use crate::database::{TestDatabase, capture_account, drop_replication_slot};
use crate::process::{Launch, QueueBox};
use crate::receiver::{Policy, Receiver};
use crate::{free_port, http, scrape};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the binary may take to start, or to stop.
pub const START: Duration = Duration::from_secs(30);
/// How long the traffic may take to create every expected series.
const SERIES: Duration = Duration::from_secs(60);

/// The running binary of [`start`], with its receivers.
pub struct EveryPath {
    pub qb: QueueBox,
    /// The data port, which also serves `/metrics`.
    pub port: u16,
    /// The scrape in which every expected series was first present.
    pub scrape: String,
    _ok: Receiver,
    _failing: Receiver,
}

/// Drops the capture slot and the database of a run, whatever happened to it: a slot left behind
/// holds WAL on the shared server. Stop the binary first.
///
/// # Errors
/// The slot could not be dropped.
pub async fn finish(db: TestDatabase, slot: &str) -> Result<(), String> {
    let capture_url = {
        let (user, password) = capture_account();
        format!("postgres://{user}:{password}@{}/{}", db.host_port, db.name)
    };
    let dropped = drop_replication_slot(&capture_url, slot, START).await;
    db.drop_database().await;
    dropped
}

fn config(
    db: &TestDatabase,
    port: u16,
    ok: &str,
    failing: &str,
    slot: &str,
    state: &str,
) -> String {
    let (capture_user, capture_password) = capture_account();
    format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         outbox:\n  pollIntervalMs: 100\n  pendingGaugeIntervalMs: 100\n  retryBaseDelayMs: 100\n\
         \x20 capture:\n    mode: postgres-logical\n    enabled: true\n    stateDirectory: {state}\n\
         \x20   slot: {slot}\n    publication: queuebox_outbox\n    reconciliationIntervalMs: 200\n\
         \x20   connection:\n      username: {capture_user}\n      password: {capture_password}\n\
         inbox:\n  relay:\n    pollIntervalMs: 100\n    pendingGaugeIntervalMs: 100\n\
         destinations:\n\
         \x20 ok:\n    type: http\n    baseUrl: {ok}\n    path: /events\n    timeoutMs: 2000\n\
         \x20 failing:\n    type: http\n    baseUrl: {failing}\n    path: /events\n    timeoutMs: 2000\n\
         \x20 amqp:\n    type: rabbitmq\n    url: {amqp}\n    exchange: qb.docs.metrics\n\
         \x20 records:\n    type: kafka\n    bootstrapServers: {kafka}\n    topic: qb-docs-metrics\n    timeoutMs: 2000\n\
         \x20 stream:\n    type: nats\n    servers: {nats}\n    subject: qb.docs.metrics\n\
         routes:\n\
         \x20 - topicPattern: \"fail.*\"\n    destination: failing\n\
         \x20 - topicPattern: \"amqp.*\"\n    destination: amqp\n\
         \x20 - topicPattern: \"kafka.*\"\n    destination: records\n\
         \x20 - topicPattern: \"nats.*\"\n    destination: stream\n\
         \x20 - topicPattern: \"refused.*\"\n    destination: ok\n    transform:\n      expression: '$error(\"refused\")'\n      onError: Dead\n\
         \x20 - topicPattern: \"**\"\n    destination: ok\n\
         sources:\n\
         \x20 orders:\n    type: http\n    path: /orders\n    idempotencyKeyPath: $.id\n    topic: inbox.orders\n\
         \x20 filtered:\n    type: http\n    path: /filtered\n    idempotencyKeyPath: $.id\n    consumption: pull\n\
         \x20   filter:\n      require:\n        - header: x-env\n          equals: prod\n\
         retention:\n  enabled: true\n\
         \x20 outbox:\n    policy: AGE\n    maxAge: 1h\n    cleanupInterval: 1s\n\
         \x20 inbox:\n    policy: AGE\n    maxAge: 1h\n    cleanupInterval: 1s\n",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
        amqp = service("QB_TEST_AMQP_URL"),
        kafka = service("QB_TEST_KAFKA_BOOTSTRAP"),
        nats = service("QB_TEST_NATS_URL"),
    )
}

fn service(variable: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| {
        panic!("{variable} is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    })
}

/// Series the traffic creates (name and labels as the exporter renders them, or a bare family
/// name), each with a value above zero where a value follows.
const TRAFFIC_SERIES: [&str; 18] = [
    "queuebox_outbox_messages_total{status=\"sent\"}",
    "queuebox_outbox_messages_total{status=\"dead\"}",
    "queuebox_outbox_publish_failures_total{destination=\"failing\",destination_type=\"http\",kind=\"rejected\"}",
    "queuebox_outbox_publish_failures_total{destination=\"amqp\",destination_type=\"rabbitmq\",kind=\"rejected\"}",
    "queuebox_outbox_publish_failures_total{destination=\"records\",destination_type=\"kafka\",kind=\"rejected\"}",
    "queuebox_outbox_publish_failures_total{destination=\"stream\",destination_type=\"nats\",kind=\"rejected\"}",
    "queuebox_http_publish_responses_total{status_class=\"2xx\"}",
    "queuebox_http_publish_responses_total{status_class=\"5xx\"}",
    "queuebox_transform_failures_total{strategy=\"Dead\"}",
    "queuebox_inbox_messages_total{status=\"new\"}",
    "queuebox_inbox_messages_total{status=\"duplicate\"}",
    "queuebox_inbox_messages_total{status=\"forwarded\"}",
    "queuebox_inbox_rejections_total{reason=\"extraction_failed\"}",
    "queuebox_inbox_rejections_total{reason=\"storage_failed\"}",
    "queuebox_inbox_filtered_total{source=\"filtered\"}",
    "queuebox_cleanup_last_run_timestamp{table=\"outbox\"}",
    "queuebox_cleanup_last_run_timestamp{table=\"inbox\"}",
    "queuebox_capture_changes_total{kind=\"insert\"}",
];

/// Families or series that must be present, whatever their value: the pending gauges after their
/// first count, and the broker destinations' kinds (registered at start).
const PRESENT: [&str; 6] = [
    "queuebox_outbox_messages_pending",
    "queuebox_outbox_oldest_pending_age_seconds",
    "queuebox_outbox_queue_depth",
    "queuebox_outbox_publish_duration_seconds_max{destination_type=\"rabbitmq\"}",
    "queuebox_outbox_publish_duration_seconds_max{destination_type=\"kafka\"}",
    "queuebox_outbox_publish_duration_seconds_max{destination_type=\"nats\"}",
];

fn missing(text: &str) -> Vec<&'static str> {
    let positive = |series: &str| {
        text.lines().any(|line| {
            line.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
                .and_then(|value| value.trim().parse::<f64>().ok())
                .is_some_and(|value| value > 0.0)
        })
    };
    let present = |family: &str| {
        text.lines().any(|line| {
            line.starts_with(&format!("{family} ")) || line.starts_with(&format!("{family}{{"))
        })
    };
    TRAFFIC_SERIES
        .iter()
        .copied()
        .filter(|series| !positive(series))
        .chain(PRESENT.iter().copied().filter(|family| !present(family)))
        .collect()
}

async fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    let mut request = http()
        .post(format!("http://127.0.0.1:{port}/inbox{path}"))
        .header("Content-Type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("POST").status().as_u16()
}

/// Starts the binary on `db` with every part that creates series, sends the traffic and waits until
/// the series it creates are exported. `slot` is the capture slot to create (drop it with
/// [`finish`]); `state_dir` the capture state directory. The process is killed when the returned
/// value is dropped.
pub async fn start(db: &TestDatabase, slot: &str, state_dir: &Path) -> EveryPath {
    let ok = Receiver::start(Policy::status(200)).await;
    let failing = Receiver::start(Policy::status(500)).await;
    let port = free_port();
    let yaml = config(
        db,
        port,
        &ok.url(),
        &failing.url(),
        slot,
        &state_dir.display().to_string(),
    );
    let launch = Launch::with_config(&yaml);
    let (status, _, stderr) = launch.run(&["migrate"], START).await;
    assert!(status.success(), "migrate failed: {stderr}");
    db.execute("CREATE PUBLICATION queuebox_outbox FOR TABLE outbox WITH (publish = 'insert')")
        .await;
    let mut qb = launch.spawn(&[]);
    qb.wait_live(port, START).await;
    qb.wait_for_log("capture streaming", START).await;

    db.execute(
        "INSERT INTO outbox (topic, payload) VALUES ('order.created', '{\"n\": 1}');\n\
         INSERT INTO outbox (topic, payload, max_attempts) VALUES ('fail.created', '{\"n\": 2}', 1);\n\
         INSERT INTO outbox (topic, payload) VALUES ('refused.created', '{\"n\": 3}');\n\
         INSERT INTO outbox (topic, payload, max_attempts) VALUES ('amqp.created', '{\"n\": 4}', 1);\n\
         INSERT INTO outbox (topic, payload, max_attempts) VALUES ('kafka.created', '{\"n\": 5}', 1);\n\
         INSERT INTO outbox (topic, payload, max_attempts) VALUES ('nats.created', '{\"n\": 6}', 1);",
    )
    .await;
    assert_eq!(post(port, "/orders", &[], r#"{"id": "evt-1"}"#).await, 202);
    assert_eq!(post(port, "/orders", &[], r#"{"id": "evt-1"}"#).await, 200);
    assert_eq!(post(port, "/orders", &[], "not json").await, 400);
    // The database refuses one insert, as a full disk or a broken schema would: a 500 and a
    // `storage_failed` rejection.
    db.execute("ALTER TABLE inbox ADD CONSTRAINT refuse_lost CHECK (idempotency_key <> 'lost')")
        .await;
    assert_eq!(post(port, "/orders", &[], r#"{"id": "lost"}"#).await, 500);
    assert_eq!(
        post(port, "/filtered", &[("x-env", "dev")], r#"{"id": "f-1"}"#).await,
        202
    );

    let started = Instant::now();
    let text = loop {
        let text = scrape(port).await;
        let absent = missing(&text);
        if absent.is_empty() {
            break text;
        }
        assert!(
            started.elapsed() < SERIES,
            "after {SERIES:?} the scrape still lacks {absent:?}; log:\n{}\nscrape:\n{text}",
            qb.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    EveryPath {
        qb,
        port,
        scrape: text,
        _ok: ok,
        _failing: failing,
    }
}
