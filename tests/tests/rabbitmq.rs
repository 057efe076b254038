//! RabbitMQ end to end: the real binary delivers outbox rows from a real PostgreSQL to a real
//! RabbitMQ (`QB_TEST_AMQP_URL`, started by `scripts/services.sh`), and stores messages of a
//! RabbitMQ queue in the inbox. Each test uses exchanges and queues of its own.

use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, ByteArray, FieldArray, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use queuebox_tests::broker_forms::{BINARY_HEADER, UNKEYED, check_unkeyed_rows, digest_key};
use queuebox_tests::inbox::wait_each_stored_once;
use queuebox_tests::service::{OutboxRow, Service};
use queuebox_tests::source_rules::{self, Message, RulesBroker, Source};
use queuebox_tests::{sample, wait_until};
use std::time::Duration;
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(30);

/// The tests of this file share one broker: each holds this lock for reading, and the test that
/// restarts the broker holds it for writing, so no other test of the file sees the restart.
static BROKER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn amqp_url() -> String {
    std::env::var("QB_TEST_AMQP_URL").unwrap_or_else(|_| {
        panic!("QB_TEST_AMQP_URL is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    })
}

fn unique(prefix: &str) -> String {
    format!("qb-e2e-{prefix}-{}", Uuid::new_v4().simple())
}

/// `rabbitmqctl` with `args`; panics with its output when it fails.
fn rabbitmqctl(args: &[&str]) {
    let output = std::process::Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("run rabbitmqctl");
    assert!(output.status.success(), "rabbitmqctl {args:?}: {output:?}");
}

/// A virtual host of the test's own, so that closing its connections touches no other test;
/// returns the broker URL that names it.
fn own_vhost() -> (String, String) {
    let vhost = unique("vhost");
    rabbitmqctl(&["add_vhost", &vhost]);
    rabbitmqctl(&["set_permissions", "-p", &vhost, "guest", ".*", ".*", ".*"]);
    let url = amqp_url();
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..].find('/').map_or(url.len(), |i| start + i);
    (vhost.clone(), format!("{}/{vhost}", &url[..end]))
}

/// Starts the broker's application again when dropped (`rabbitmqctl start_app`, then waits for it).
struct StartAppOnDrop;

impl Drop for StartAppOnDrop {
    fn drop(&mut self) {
        for args in [["start_app"].as_slice(), ["await_startup"].as_slice()] {
            let _ = std::process::Command::new("rabbitmqctl")
                .args(args)
                .output();
        }
    }
}

/// A test's own AMQP client.
struct Amqp {
    _connection: Connection,
    channel: Channel,
}

impl Amqp {
    async fn connect() -> Self {
        Self::connect_to(&amqp_url()).await
    }

    async fn connect_to(url: &str) -> Self {
        let connection = Connection::connect(url, ConnectionProperties::default())
            .await
            .expect("connect to RabbitMQ");
        let channel = connection.create_channel().await.expect("channel");
        Self {
            _connection: connection,
            channel,
        }
    }

    /// A durable topic exchange (as the destination declares it) and a queue bound with `#`.
    async fn exchange_with_queue(&self, exchange: &str, queue: &str) {
        self.channel
            .exchange_declare(
                exchange.into(),
                ExchangeKind::Topic,
                ExchangeDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("declare exchange");
        self.queue(queue).await;
        self.channel
            .queue_bind(
                queue.into(),
                exchange.into(),
                "#".into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("bind");
    }

    async fn queue(&self, queue: &str) {
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("declare queue");
    }

    /// Takes every message now in `queue`.
    async fn drain(&self, queue: &str) -> Vec<lapin::message::BasicGetMessage> {
        let mut got = Vec::new();
        while let Some(message) = self
            .channel
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .expect("basic.get")
        {
            got.push(message);
        }
        got
    }

    async fn publish(&self, queue: &str, body: &[u8], properties: BasicProperties) {
        self.channel
            .basic_publish(
                "".into(),
                queue.into(),
                BasicPublishOptions::default(),
                body,
                properties,
            )
            .await
            .expect("publish")
            .await
            .expect("confirm");
    }

    async fn delete_queue(&self, queue: &str) {
        let _ = self
            .channel
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await;
    }
}

/// Inserts an outbox row with the header every test of this file gives it.
async fn insert(
    service: &Service,
    topic: &str,
    key: Option<&str>,
    payload: &str,
    max_attempts: i32,
) -> Uuid {
    service
        .insert(OutboxRow {
            key,
            headers: serde_json::json!({"x-tenant": "acme"}),
            max_attempts,
            ..OutboxRow::new(topic, payload)
        })
        .await
}

fn header(message: &lapin::message::BasicGetMessage, name: &str) -> Option<String> {
    let headers = message.properties.headers().as_ref()?;
    headers.inner().iter().find_map(|(key, value)| {
        (key.as_str() == name).then(|| match value {
            AMQPValue::LongString(text) => text.to_string(),
            other => format!("{other:?}"),
        })
    })
}

/// Checks that the messages (payload `n`, key `k-{n % 10}`) hold every `n` below `total` and that
/// the first delivery of each key's rows came in insertion order; returns how many distinct rows.
fn every_row_once_in_key_order(messages: &[lapin::message::BasicGetMessage], total: i32) -> usize {
    let mut seen = std::collections::HashSet::new();
    let mut last_first: std::collections::HashMap<i64, i64> = Default::default();
    for message in messages {
        let body: serde_json::Value = serde_json::from_slice(&message.delivery.data).expect("JSON");
        let n = body["n"].as_i64().expect("n");
        if seen.insert(n)
            && let Some(previous) = last_first.insert(n % 10, n)
        {
            assert!(
                previous < n,
                "key k-{}: {n} first arrived after {previous}",
                n % 10
            );
        }
    }
    assert_eq!(
        seen.len(),
        total as usize,
        "every row arrived at least once"
    );
    seen.len()
}

fn destination(exchange: &str, extra: &str) -> String {
    destination_at(&amqp_url(), exchange, extra)
}

fn destination_at(url: &str, exchange: &str, extra: &str) -> String {
    format!(
        "destinations:\n  rabbit:\n    type: rabbitmq\n    url: {url}\n    exchange: {exchange}\n{extra}\
         routes:\n  - topicPattern: \"order.*\"\n    destination: rabbit\n    routingKeyTemplate: \"{{{{ payload.region }}}}.{{{{ topic }}}}\"\n    routingKeyMissingFieldDefault: nowhere\n\
         \x20 - topicPattern: \"audit.**\"\n    destination: rabbit\n"
    )
}

#[tokio::test]
async fn outbox_rows_reach_the_exchange_confirmed_persistent_in_key_order_with_their_headers() {
    let _broker = BROKER.read().await;
    let amqp = Amqp::connect().await;
    let (exchange, queue) = (unique("ex"), unique("q"));
    amqp.exchange_with_queue(&exchange, &queue).await;
    let service = Service::start(&destination(
        &exchange,
        "    headers:\n      x-static: yes\n",
    ))
    .await;
    let mut ids = Vec::new();
    for i in 0..30 {
        let key = format!("cust-{}", i % 3);
        ids.push(
            insert(
                &service,
                "order.created",
                Some(&key),
                &format!(r#"{{"n":{i},"region":"eu"}}"#),
                5,
            )
            .await,
        );
    }
    let audit = insert(&service, "audit.login", None, r#"{"who":"x"}"#, 5).await;
    let no_region = insert(&service, "order.paid", Some("k"), r#"{"n":99}"#, 5).await;
    let sent = wait_until("every row sent", WAIT, || async {
        let sent = service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await;
        (sent == 32).then_some(sent)
    })
    .await;
    assert_eq!(sent, 32);
    let messages = amqp.drain(&queue).await;
    assert_eq!(messages.len(), 32);
    // Per key, the order of insertion.
    let mut last: std::collections::HashMap<String, i64> = Default::default();
    for message in &messages {
        let body: serde_json::Value =
            serde_json::from_slice(&message.delivery.data).expect("JSON body");
        let id = message
            .properties
            .message_id()
            .as_ref()
            .map(ToString::to_string)
            .expect("message id");
        let routing_key = message.delivery.routing_key.to_string();
        assert_eq!(message.properties.delivery_mode(), &Some(2), "persistent");
        assert_eq!(header(message, "x-tenant").as_deref(), Some("acme"));
        assert_eq!(header(message, "x-static").as_deref(), Some("yes"));
        if id == audit.to_string() {
            assert_eq!(
                routing_key, "audit.login",
                "the destination's default {{ topic }}"
            );
            continue;
        }
        if id == no_region.to_string() {
            assert_eq!(
                routing_key, "nowhere.order.paid",
                "the route's missing-field default"
            );
            continue;
        }
        assert_eq!(routing_key, "eu.order.created", "the route's template");
        let n = body["n"].as_i64().expect("n");
        let key = format!("cust-{}", n % 3);
        if let Some(previous) = last.insert(key.clone(), n) {
            assert!(previous < n, "{key}: {n} after {previous}");
        }
        assert!(ids.iter().any(|row| row.to_string() == id));
    }
    let metrics = service.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            "queuebox_outbox_destination_messages_total{destination=\"rabbit\",outcome=\"success\"}"
        ),
        32.0,
        "{metrics}"
    );
    amqp.delete_queue(&queue).await;
    service.stop().await;
}

#[tokio::test]
async fn an_unroutable_message_retries_then_goes_dead_naming_the_exchange() {
    let _broker = BROKER.read().await;
    let amqp = Amqp::connect().await;
    // The exchange exists but no queue is bound: every publish comes back unroutable.
    let exchange = unique("ex-unroutable");
    let service = Service::start(&destination(&exchange, "")).await;
    let id = insert(&service, "audit.nobody", None, r#"{"a":1}"#, 3).await;
    let (state, attempt, last_error): (String, i32, Option<String>) =
        wait_until("the row to go dead", WAIT, || async {
            let row: (String, i32, Option<String>) =
                sqlx::query_as("SELECT state, attempt, last_error FROM outbox WHERE id = $1")
                    .bind(id)
                    .fetch_one(&service.sql)
                    .await
                    .expect("row");
            (row.0 == "dead").then_some(row)
        })
        .await;
    assert_eq!(state, "dead");
    assert_eq!(attempt, 3, "every attempt was spent");
    let last_error = last_error.expect("a reason");
    assert!(last_error.contains(&exchange), "{last_error}");
    assert!(last_error.contains("NO_ROUTE"), "{last_error}");
    assert!(!last_error.contains("guest:guest"), "{last_error}");
    let metrics = service.metrics().await;
    assert!(
        sample(
            &metrics,
            "queuebox_outbox_publish_failures_total{destination=\"rabbit\",destination_type=\"rabbitmq\",kind=\"rejected\"}"
        ) >= 3.0,
        "{metrics}"
    );
    drop(amqp);
    service.stop().await;
}

#[tokio::test]
async fn connections_closed_by_the_broker_while_publishing_lose_nothing() {
    let _broker = BROKER.read().await;
    let (vhost, url) = own_vhost();
    let amqp = Amqp::connect_to(&url).await;
    let (exchange, queue) = (unique("ex-restart"), unique("q-restart"));
    amqp.exchange_with_queue(&exchange, &queue).await;
    let service = Service::start(&destination_at(&url, &exchange, "")).await;
    let total = 400;
    let producer = service.produce(total, 5, |i| format!(r#"{{"n":{i},"region":"eu"}}"#), false);
    // Cut every QueueBox connection a few times while rows flow, each time after more rows
    // went out on the new connection.
    let mut sent_at_cut = 0;
    for _ in 0..3 {
        sent_at_cut = wait_until("more deliveries", WAIT, || async {
            let sent = service
                .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
                .await;
            (sent > sent_at_cut + 20 || sent == i64::from(total)).then_some(sent)
        })
        .await;
        rabbitmqctl(&[
            "close_all_connections",
            "-p",
            &vhost,
            "closed by the QueueBox test",
        ]);
    }
    producer.await.expect("producer");
    wait_until("every row sent", Duration::from_secs(60), || async {
        let sent = service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await;
        (sent == i64::from(total)).then_some(())
    })
    .await;
    // The test's own connection was closed too: read with a new one.
    drop(amqp);
    let amqp = Amqp::connect_to(&url).await;
    let messages = amqp.drain(&queue).await;
    let seen = every_row_once_in_key_order(&messages, total);
    let lost_claims = sample(
        &service.metrics().await,
        "queuebox_claims_lost_total{component=\"outbox\"}",
    );
    let duplicates = messages.len() - seen;
    println!(
        "{} messages, {duplicates} duplicates, {lost_claims} lost claims",
        messages.len()
    );
    drop(amqp);
    service.stop().await;
    rabbitmqctl(&["delete_vhost", &vhost]);
}

fn source(queue: &str, url: &str, extra: &str) -> String {
    format!(
        "inbox:\n  relay:\n    enabled: false\n\
         sources:\n  orders-queue:\n    type: rabbitmq\n    queueName: {queue}\n    connectionUrl: {url}\n\
         \x20   idempotencyKeyPath: $.messageId\n    eventTypePath: $.type\n    aggregateIdPath: $.orderId\n\
         \x20   prefetchCount: 20\n{extra}"
    )
}

fn props(message_id: Option<&str>, headers: &[(&str, &str)]) -> BasicProperties {
    let mut table = FieldTable::default();
    for (name, value) in headers {
        table.insert((*name).into(), AMQPValue::LongString((*value).into()));
    }
    let properties = BasicProperties::default().with_headers(table);
    match message_id {
        Some(id) => properties.with_message_id(id.into()),
        None => properties,
    }
}

/// A queue of its own (named after `prefix`) and a service whose source `orders-queue` reads it.
async fn queue_with_source(prefix: &str) -> (Amqp, String, Service) {
    let amqp = Amqp::connect().await;
    let queue = unique(prefix);
    amqp.queue(&queue).await;
    let service = Service::start(&source(&queue, &amqp_url(), "")).await;
    (amqp, queue, service)
}

/// A message to publish: body, AMQP message id, headers.
type Case<'a> = (&'a [u8], Option<&'a str>, &'a [(&'a str, &'a str)]);

/// An inbox row read back: key, event type, aggregate id, state, last error.
type StoredRow = (
    String,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
);

#[tokio::test]
async fn queue_messages_are_stored_once_each_and_bad_ones_kept_dead() {
    let _broker = BROKER.read().await;
    let (amqp, queue, service) = queue_with_source("q-source").await;
    wait_until("the source to consume", WAIT, || async {
        let (status, body) = service.ready().await;
        (status == 200 && body.contains("rabbitmq.orders-queue")).then_some(())
    })
    .await;
    let long_key = format!(r#"{{"messageId":"{}"}}"#, "k".repeat(300));
    let cases: [Case<'_>; 7] = [
        (
            br#"{"messageId":"m-1","type":"order.created","orderId":"o-1"}"#,
            None,
            &[],
        ),
        // A repeat of the same key: stored once.
        (
            br#"{"messageId":"m-1","type":"order.created","orderId":"o-1"}"#,
            None,
            &[],
        ),
        // The header comes first, then the path, then the AMQP message id.
        (
            br#"{"messageId":"ignored"}"#,
            Some("amqp-1"),
            &[
                ("x-idempotency-key", "hdr-1"),
                ("x-event-type", "from.header"),
            ],
        ),
        (br#"{"other":1}"#, Some("amqp-2"), &[]),
        // No key anywhere: the SHA-256 of the body.
        (br#"{"other":2}"#, None, &[("x-aggregate-id", "agg-h")]),
        // Not JSON: kept as a dead row, acknowledged.
        (b"<order id='7'/>", Some("xml-1"), &[]),
        // A key longer than its column: a dead row too.
        (long_key.as_bytes(), None, &[]),
    ];
    for (body, id, headers) in cases {
        amqp.publish(&queue, body, props(id, headers)).await;
    }
    wait_until("six rows", WAIT, || async {
        let rows = service.count("SELECT count(*) FROM inbox").await;
        (rows == 6).then_some(())
    })
    .await;
    // Only once stored: a drain before QueueBox consumed them would take them from under it.
    let left = amqp.drain(&queue).await.len();
    assert_eq!(left, 0, "no message may be left unacknowledged and ready");
    let rows: Vec<StoredRow> = sqlx::query_as(
        "SELECT idempotency_key, event_type, aggregate_id, state, last_error FROM inbox \
         WHERE source = 'orders-queue'",
    )
    .fetch_all(&service.sql)
    .await
    .expect("rows");
    let row = |key: &str| {
        rows.iter()
            .find(|r| r.0 == key)
            .unwrap_or_else(|| panic!("no row {key}: {rows:?}"))
    };
    assert_eq!(row("m-1").1.as_deref(), Some("order.created"));
    assert_eq!(row("m-1").2.as_deref(), Some("o-1"));
    assert_eq!(row("hdr-1").1.as_deref(), Some("from.header"));
    assert_eq!(row("amqp-2").3, "pending");
    let digest = rows
        .iter()
        .find(|r| r.2.as_deref() == Some("agg-h"))
        .expect("the row keyed by its digest");
    assert_eq!(
        digest.0,
        digest_key(br#"{"other":2}"#),
        "the SHA-256 of the body: {rows:?}"
    );
    let xml = row("xml-1");
    assert_eq!(
        xml.3, "dead",
        "not JSON: a dead row under its AMQP message id"
    );
    assert!(
        xml.4
            .as_deref()
            .is_some_and(|e| e.starts_with("Invalid JSON")),
        "{rows:?}"
    );
    let too_long = rows
        .iter()
        .find(|r| r.4.as_deref().is_some_and(|e| e.contains("at most 255")))
        .unwrap_or_else(|| panic!("no dead row for the long key: {rows:?}"));
    assert_eq!(too_long.3, "dead");
    assert_eq!(
        too_long.0,
        digest_key(long_key.as_bytes()),
        "its key gives way to the digest"
    );
    let dead_payload: String = sqlx::query_scalar(
        "SELECT payload ->> 'raw' FROM inbox WHERE state = 'dead' AND idempotency_key = 'xml-1'",
    )
    .fetch_one(&service.sql)
    .await
    .expect("dead payload");
    assert_eq!(dead_payload, "<order id='7'/>", "the received text is kept");
    amqp.delete_queue(&queue).await;
    service.stop().await;
}

#[tokio::test]
async fn unkeyed_messages_get_digest_keys_and_raw_payloads_and_binary_and_table_headers_are_kept() {
    let _broker = BROKER.read().await;
    let (amqp, queue, service) = queue_with_source("q-forms").await;
    let mut death = FieldTable::default();
    death.insert("count".into(), AMQPValue::LongLongInt(2));
    death.insert("queue".into(), AMQPValue::LongString("orders".into()));
    death.insert("redelivered".into(), AMQPValue::Boolean(false));
    death.insert(
        "blob".into(),
        AMQPValue::ByteArray(ByteArray::from(BINARY_HEADER.0.to_vec())),
    );
    let mut deaths = FieldArray::default();
    deaths.push(AMQPValue::FieldTable(death));
    let mut tags = FieldArray::default();
    tags.push(AMQPValue::LongString("a".into()));
    tags.push(AMQPValue::LongInt(2));
    let mut headers = FieldTable::default();
    headers.insert("x-death".into(), AMQPValue::FieldArray(deaths));
    headers.insert("x-tags".into(), AMQPValue::FieldArray(tags));
    headers.insert(
        "x-bytes".into(),
        AMQPValue::ByteArray(ByteArray::from(BINARY_HEADER.0.to_vec())),
    );
    headers.insert(
        "x-long-string".into(),
        AMQPValue::LongString(LongString::from(BINARY_HEADER.0.to_vec())),
    );
    headers.insert("x-text".into(), AMQPValue::LongString("acme".into()));
    for (i, body) in UNKEYED.iter().enumerate() {
        let properties = if i == 0 {
            BasicProperties::default().with_headers(headers.clone())
        } else {
            BasicProperties::default()
        };
        amqp.publish(&queue, body, properties).await;
    }
    let stored = check_unkeyed_rows(&service.sql, "orders-queue", WAIT).await;
    assert_eq!(stored["x-text"], "acme", "{stored}");
    assert_eq!(stored["x-bytes"], BINARY_HEADER.1, "{stored}");
    assert_eq!(stored["x-long-string"], BINARY_HEADER.1, "{stored}");
    assert_eq!(
        stored["x-tags"], r#"["a",2]"#,
        "an array as JSON text: {stored}"
    );
    let death: serde_json::Value =
        serde_json::from_str(stored["x-death"].as_str().expect("x-death is text")).expect("JSON");
    assert_eq!(
        death,
        serde_json::json!([{
            "blob": BINARY_HEADER.1,
            "count": 2,
            "queue": "orders",
            "redelivered": false
        }]),
        "a table as JSON text: {stored}"
    );
    amqp.delete_queue(&queue).await;
    service.stop().await;
}

/// A message keyed `.0` with the headers `.1` and the AMQP `correlation_id` property `.2`.
type CorrelationCase<'a> = (&'a str, &'a [(&'a str, &'a str)], Option<&'a str>);

#[tokio::test]
async fn the_correlation_id_comes_from_the_header_then_the_amqp_property_then_a_new_uuid() {
    let _broker = BROKER.read().await;
    let (amqp, queue, service) = queue_with_source("q-correlation").await;
    let cases: [CorrelationCase<'_>; 4] = [
        (
            "c-both",
            &[("X-Correlation-Id", "from-header")],
            Some("from-property"),
        ),
        (
            "c-lower",
            &[("x-correlation-id", "lower-header")],
            Some("from-property"),
        ),
        ("c-property", &[], Some("from-property")),
        ("c-none", &[], None),
    ];
    for (key, headers, correlation) in cases {
        let mut properties = props(None, headers);
        if let Some(correlation) = correlation {
            properties = properties.with_correlation_id(correlation.into());
        }
        let body = format!(r#"{{"messageId":"{key}"}}"#);
        amqp.publish(&queue, body.as_bytes(), properties).await;
    }
    let rows: Vec<(String, Option<String>)> = wait_until("four rows", WAIT, || async {
        let rows: Vec<(String, Option<String>)> = sqlx::query_as(
            "SELECT idempotency_key, correlation_id FROM inbox WHERE source = 'orders-queue'",
        )
        .fetch_all(&service.sql)
        .await
        .expect("rows");
        (rows.len() == 4).then_some(rows)
    })
    .await;
    let correlation = |key: &str| {
        rows.iter()
            .find(|row| row.0 == key)
            .and_then(|row| row.1.clone())
            .unwrap_or_else(|| panic!("no correlation id for {key}: {rows:?}"))
    };
    assert_eq!(correlation("c-both"), "from-header");
    assert_eq!(correlation("c-lower"), "lower-header");
    assert_eq!(correlation("c-property"), "from-property");
    let generated = correlation("c-none");
    assert!(Uuid::parse_str(&generated).is_ok(), "{generated}");
    amqp.delete_queue(&queue).await;
    service.stop().await;
}

#[tokio::test]
async fn a_missing_queue_shows_in_health_naming_it_until_it_exists() {
    let _broker = BROKER.read().await;
    let amqp = Amqp::connect().await;
    let queue = unique("q-missing");
    let service = Service::start(&source(&queue, &amqp_url(), "")).await;
    let body = wait_until("the component down naming the queue", WAIT, || async {
        let (status, body) = service.ready().await;
        (status == 503 && body.contains(&queue)).then_some(body)
    })
    .await;
    assert!(body.contains("rabbitmq.orders-queue"), "{body}");
    amqp.queue(&queue).await;
    amqp.publish(&queue, br#"{"messageId":"late"}"#, props(None, &[]))
        .await;
    wait_until("the source to recover and store", WAIT, || async {
        let rows = service.count("SELECT count(*) FROM inbox").await;
        (rows == 1).then_some(())
    })
    .await;
    let (status, _) = service.ready().await;
    assert_eq!(status, 200);
    amqp.delete_queue(&queue).await;
    service.stop().await;
}

#[tokio::test]
async fn kill_9_while_consuming_stores_every_message_once_after_the_restart() {
    let _broker = BROKER.read().await;
    let amqp = Amqp::connect().await;
    let queue = unique("q-kill");
    amqp.queue(&queue).await;
    let total = 600;
    for i in 0..total {
        amqp.publish(
            &queue,
            format!(r#"{{"messageId":"m-{i}"}}"#).as_bytes(),
            props(None, &[]),
        )
        .await;
    }
    let mut service = Service::start(&source(&queue, &amqp_url(), "")).await;
    // Kill as soon as part of the queue is stored: deliveries are in flight, some rows committed
    // without their ack.
    service
        .kill9_while_storing(50, i64::from(total), WAIT)
        .await;
    // The same configuration again, on the same database.
    service.restart().await;
    wait_each_stored_once(
        &service.sql,
        "message",
        i64::from(total),
        Duration::from_secs(60),
    )
    .await;
    wait_until("the queue emptied", WAIT, || async {
        (amqp.drain(&queue).await.is_empty()).then_some(())
    })
    .await;
    amqp.delete_queue(&queue).await;
    service.stop().await;
}

#[tokio::test]
async fn a_broker_restart_while_publishing_loses_nothing_and_keeps_key_order() {
    let _broker = BROKER.write().await;
    let amqp = Amqp::connect().await;
    let (exchange, queue) = (unique("ex-broker-restart"), unique("q-broker-restart"));
    amqp.exchange_with_queue(&exchange, &queue).await;
    drop(amqp);
    let service = Service::start(&destination(&exchange, "")).await;
    let total: i32 = 600;
    // Rows keep coming while the broker goes away and comes back, with attempts enough to outlast
    // the restart (the backoff doubles from 20 ms).
    let producer = service.produce(total, 50, |i| format!(r#"{{"n":{i},"region":"eu"}}"#), true);
    wait_until("some deliveries", WAIT, || async {
        let sent = service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await;
        (sent > 0).then_some(())
    })
    .await;
    let failed = {
        // Started again even if a wait below fails, so no later test finds the broker stopped.
        let _restart = StartAppOnDrop;
        rabbitmqctl(&["stop_app"]);
        // While the broker is away, publishes fail as unreachable and the rows wait for a retry.
        wait_until("a publish to fail while the broker is down", WAIT, || async {
            let failures = sample(
                &service.metrics().await,
                "queuebox_outbox_publish_failures_total{destination=\"rabbit\",destination_type=\"rabbitmq\",kind=\"unreachable\"}",
            );
            (failures > 0.0).then_some(failures)
        })
        .await
    };
    producer.await.expect("producer");
    wait_until("every row sent", Duration::from_secs(90), || async {
        let sent = service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await;
        (sent == i64::from(total)).then_some(())
    })
    .await;
    let amqp = Amqp::connect().await;
    let messages = amqp.drain(&queue).await;
    every_row_once_in_key_order(&messages, total);
    println!(
        "broker restart: {} messages for {total} rows, {failed} unreachable publishes counted",
        messages.len()
    );
    amqp.delete_queue(&queue).await;
    service.stop().await;
}

/// The source-rules scenario on queues: each source reads a queue of its own.
impl RulesBroker for Amqp {
    async fn create(&self, name: &str) {
        self.queue(name).await;
    }

    fn source(&self, queue: &str) -> String {
        format!(
            "    type: rabbitmq\n    queueName: {queue}\n    connectionUrl: {}\n",
            amqp_url()
        )
    }

    async fn publish(&self, queue: &str, _to: Source, message: &Message) {
        let body = message.body("id", true);
        Amqp::publish(self, queue, &body, props(None, &message.headers())).await;
    }

    async fn left(&self, queue: &str) -> usize {
        self.drain(queue).await.len()
    }

    async fn delete(&self, queue: &str) {
        self.delete_queue(queue).await;
    }
}

#[tokio::test]
async fn the_sources_rules_apply_to_queue_messages_filter_transform_pull_and_relay() {
    let _broker = BROKER.read().await;
    source_rules::run(&Amqp::connect().await, WAIT).await;
}
