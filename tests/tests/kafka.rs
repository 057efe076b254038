//! Kafka end to end: the real binary delivers outbox rows from a real PostgreSQL to a real Kafka
//! (`QB_TEST_KAFKA_BOOTSTRAP`, started by `scripts/services.sh`), and stores the records of Kafka
//! topics in the inbox. Each test uses topics and consumer groups of its own.

use queuebox_tests::broker_forms::{BINARY_HEADER, UNKEYED, check_unkeyed_rows, digest_key};
use queuebox_tests::inbox::wait_each_stored_once;
use queuebox_tests::service::{START, Service};
use queuebox_tests::source_rules::{self, Message as RulesMessage, RulesBroker, Source};
use queuebox_tests::{sample, wait_until};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::{ClientConfig, Message};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

const WAIT: Duration = Duration::from_secs(45);

/// The tests of this file share one broker: each holds this lock for reading, and the test that
/// restarts the broker holds it for writing, so no other test of the file sees the restart.
static BROKER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn bootstrap() -> String {
    std::env::var("QB_TEST_KAFKA_BOOTSTRAP").unwrap_or_else(|_| {
        panic!("QB_TEST_KAFKA_BOOTSTRAP is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    })
}

fn unique(prefix: &str) -> String {
    format!("qb-e2e-{prefix}-{}", Uuid::new_v4().simple())
}

fn admin() -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("admin client")
}

async fn create_topic(topic: &str, partitions: i32) {
    let results = admin()
        .create_topics(
            &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(WAIT)),
        )
        .await
        .expect("create topics");
    for result in results {
        result.unwrap_or_else(|(topic, code)| panic!("creating topic {topic}: {code}"));
    }
}

async fn delete_topics(topics: &[&str]) {
    let _ = admin().delete_topics(topics, &AdminOptions::new()).await;
}

/// One record read back.
#[derive(Debug, Clone)]
struct Record {
    partition: i32,
    offset: i64,
    key: Option<String>,
    payload: serde_json::Value,
    headers: Vec<(String, String)>,
}

impl Record {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads every partition of a topic from its start in the background.
struct Collector {
    records: Arc<Mutex<Vec<Record>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    fn start(topic: &str, partitions: i32) -> Self {
        let consumer: StreamConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .set("group.id", unique("collector"))
            .set("enable.auto.commit", "false")
            .create()
            .expect("collector");
        let mut assignment = TopicPartitionList::new();
        for partition in 0..partitions {
            assignment
                .add_partition_offset(topic, partition, Offset::Beginning)
                .expect("partition");
        }
        consumer.assign(&assignment).expect("assign");
        let records = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&records);
        let task = tokio::spawn(async move {
            loop {
                let Ok(message) = consumer.recv().await else {
                    continue;
                };
                let headers = message
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| {
                                let value = String::from_utf8_lossy(h.value.unwrap_or_default());
                                (h.key.to_owned(), value.into_owned())
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let payload = serde_json::from_slice(message.payload().unwrap_or_default())
                    .unwrap_or(serde_json::Value::Null);
                sink.lock().expect("records").push(Record {
                    partition: message.partition(),
                    offset: message.offset(),
                    key: message
                        .key()
                        .map(|k| String::from_utf8_lossy(k).into_owned()),
                    payload,
                    headers,
                });
            }
        });
        Self { records, task }
    }

    fn records(&self) -> Vec<Record> {
        self.records.lock().expect("records").clone()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn producer() -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("enable.idempotence", "true")
        .create()
        .expect("producer")
}

async fn send(
    producer: &FutureProducer,
    topic: &str,
    key: Option<&str>,
    body: &[u8],
    headers: &[(&str, &str)],
) {
    let headers: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(name, value)| (*name, value.as_bytes()))
        .collect();
    send_bytes(producer, topic, key, body, &headers).await;
}

/// [`send`] with header values of any bytes.
async fn send_bytes(
    producer: &FutureProducer,
    topic: &str,
    key: Option<&str>,
    body: &[u8],
    headers: &[(&str, &[u8])],
) {
    let mut owned = OwnedHeaders::new();
    for (name, value) in headers {
        owned = owned.insert(Header {
            key: name,
            value: Some(*value),
        });
    }
    let mut record = FutureRecord::to(topic).payload(body).headers(owned);
    if let Some(key) = key {
        record = record.key(key);
    }
    producer
        .send(record, Duration::from_secs(10))
        .await
        .unwrap_or_else(|(e, _)| panic!("sending to {topic}: {e}"));
}

/// The offsets `group` committed for the partitions of `topic` (-1 for none).
async fn committed(group: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let (group, topic) = (group.to_owned(), topic.to_owned());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .set("group.id", &group)
            .create()
            .expect("consumer");
        let mut list = TopicPartitionList::new();
        for partition in 0..partitions {
            list.add_partition(&topic, partition);
        }
        let committed = consumer
            .committed_offsets(list, Duration::from_secs(10))
            .expect("committed offsets");
        (0..partitions)
            .map(
                |p| match committed.find_partition(&topic, p).map(|e| e.offset()) {
                    Some(Offset::Offset(o)) => o,
                    _ => -1,
                },
            )
            .collect()
    })
    .await
    .expect("committed task")
}

/// Runs the broker's control script (`start` or `stop`).
fn broker(action: &str) {
    let script = std::env::var("QB_TEST_KAFKA_CONTROL").expect("QB_TEST_KAFKA_CONTROL is not set");
    let output = std::process::Command::new(&script)
        .arg(action)
        .output()
        .expect("run the broker control script");
    assert!(output.status.success(), "{script} {action}: {output:?}");
}

/// Starts the broker again when dropped, and waits until it answers.
struct StartBrokerOnDrop;

impl Drop for StartBrokerOnDrop {
    fn drop(&mut self) {
        broker("start");
        let address = bootstrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        while std::net::TcpStream::connect(&address).is_err()
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn destination(topic: &str, extra: &str) -> String {
    format!(
        "destinations:\n  events:\n    type: kafka\n    bootstrapServers: {servers}\n    topic: {topic}\n    timeoutMs: 5000\n{extra}\
         routes:\n  - topicPattern: \"order.*\"\n    destination: events\n\
         \x20 - topicPattern: \"routed.*\"\n    destination: events\n    routingKeyTemplate: \"{{{{ payload.region }}}}-{{{{ key }}}}\"\n",
        servers = bootstrap()
    )
}

fn source(name: &str, topic: &str, group: &str, extra: &str) -> String {
    format!(
        "sources:\n  {name}:\n    type: kafka\n    bootstrapServers: {servers}\n    topics: [{topic}]\n    groupId: {group}\n{extra}",
        servers = bootstrap()
    )
}

#[tokio::test]
async fn outbox_rows_become_records_with_their_key_and_headers_in_key_order() {
    let _broker = BROKER.read().await;
    let topic = unique("out");
    create_topic(&topic, 3).await;
    let collector = Collector::start(&topic, 3);
    let service = Service::start(&destination(&topic, "    headers:\n      x-static: yes\n")).await;
    for i in 0..60 {
        sqlx::query(
            "INSERT INTO outbox (topic, key, payload, headers) \
             VALUES ('order.created', $1, $2::jsonb, '{\"x-tenant\":\"acme\"}'::jsonb)",
        )
        .bind(format!("cust-{}", i % 6))
        .bind(format!(r#"{{"n":{i}}}"#))
        .execute(&service.sql)
        .await
        .expect("insert");
    }
    let routed: Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, key, payload) VALUES ('routed.x', 'k9', '{\"region\":\"eu\"}') RETURNING id",
    )
    .fetch_one(&service.sql)
    .await
    .expect("insert routed");
    wait_until("every row sent", WAIT, || async {
        let sent = service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await;
        (sent == 61).then_some(())
    })
    .await;
    let records = wait_until("61 records", WAIT, || async {
        let records = collector.records();
        (records.len() >= 61).then_some(records)
    })
    .await;
    assert_eq!(records.len(), 61, "sent exactly once each");
    let mut last: HashMap<String, (i32, i64, i64)> = HashMap::new();
    for record in &records {
        if record.header("x-topic") == Some("routed.x") {
            assert_eq!(
                record.key.as_deref(),
                Some("eu-k9"),
                "the route's template wins"
            );
            assert_eq!(
                record.header("x-message-id"),
                Some(routed.to_string().as_str())
            );
            continue;
        }
        assert_eq!(record.header("x-topic"), Some("order.created"));
        assert_eq!(record.header("x-attempt"), Some("0"));
        assert_eq!(record.header("x-tenant"), Some("acme"));
        assert_eq!(record.header("x-static"), Some("yes"));
        assert!(record.header("x-message-id").is_some());
        let key = record.key.clone().expect("the row key is the record key");
        let n = record.payload["n"].as_i64().expect("n");
        if let Some((partition, offset, previous)) = last.get(&key) {
            assert_eq!(*partition, record.partition, "{key} stays on one partition");
            assert!(
                (*offset < record.offset) == (*previous < n),
                "{key}: n {n} at offset {} vs n {previous} at {offset}",
                record.offset
            );
        }
        last.insert(key, (record.partition, record.offset, n));
    }
    let metrics = service.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            "queuebox_outbox_destination_messages_total{destination=\"events\",outcome=\"success\"}"
        ),
        61.0,
        "{metrics}"
    );
    service.stop().await;
    delete_topics(&[&topic]).await;
}

#[tokio::test]
async fn a_missing_topic_retries_then_goes_dead_naming_it() {
    let _broker = BROKER.read().await;
    let topic = unique("out-missing");
    let service = Service::start(&destination(&topic, "")).await;
    let id: Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, key, payload, max_attempts) VALUES ('order.x', 'k', '{}', 2) RETURNING id",
    )
    .fetch_one(&service.sql)
    .await
    .expect("insert");
    let (attempt, last_error): (i32, Option<String>) =
        wait_until("the row to go dead", Duration::from_secs(60), || async {
            let row: (String, i32, Option<String>) =
                sqlx::query_as("SELECT state, attempt, last_error FROM outbox WHERE id = $1")
                    .bind(id)
                    .fetch_one(&service.sql)
                    .await
                    .expect("row");
            (row.0 == "dead").then_some((row.1, row.2))
        })
        .await;
    assert_eq!(attempt, 2);
    let last_error = last_error.expect("a reason");
    assert!(last_error.contains(&topic), "{last_error}");
    assert!(last_error.contains("unknown topic"), "{last_error}");
    let metrics = service.metrics().await;
    assert!(
        sample(
            &metrics,
            "queuebox_outbox_publish_failures_total{destination=\"events\",destination_type=\"kafka\",kind=\"rejected\"}"
        ) >= 2.0,
        "{metrics}"
    );
    service.stop().await;
}

#[tokio::test]
async fn a_kafka_restart_while_publishing_loses_nothing_and_keeps_key_order() {
    let _broker = BROKER.write().await;
    let topic = unique("out-restart");
    create_topic(&topic, 2).await;
    let service = Service::start(&destination(&topic, "")).await;
    let total: i32 = 600;
    let producer = service.produce(total, 100, |i| format!(r#"{{"n":{i}}}"#), true);
    wait_until("some deliveries", WAIT, || async {
        let sent = service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await;
        (sent > 0).then_some(())
    })
    .await;
    let failed = {
        let _restart = StartBrokerOnDrop;
        broker("stop");
        wait_until("a publish to fail while the broker is down", WAIT, || async {
            let metrics = service.metrics().await;
            let failures: f64 = ["unreachable", "timeout"]
                .iter()
                .map(|kind| {
                    sample(
                        &metrics,
                        &format!("queuebox_outbox_publish_failures_total{{destination=\"events\",destination_type=\"kafka\",kind=\"{kind}\"}}"),
                    )
                })
                .sum();
            (failures > 0.0).then_some(failures)
        })
        .await
    };
    producer.await.expect("producer");
    wait_until("every row sent", Duration::from_secs(120), || async {
        let sent = service
            .count("SELECT count(*) FROM outbox WHERE state = 'sent'")
            .await;
        (sent == i64::from(total)).then_some(())
    })
    .await;
    let collector = Collector::start(&topic, 2);
    let records = wait_until("every row in the topic", WAIT, || async {
        let records = collector.records();
        let distinct: HashSet<i64> = records
            .iter()
            .filter_map(|r| r.payload["n"].as_i64())
            .collect();
        (distinct.len() == total as usize).then_some(records)
    })
    .await;
    // Per key, the first copy of each row comes in insertion order within its partition.
    let mut ordered = records.clone();
    ordered.sort_by_key(|r| (r.partition, r.offset));
    let mut seen = HashSet::new();
    let mut last_first: HashMap<String, i64> = HashMap::new();
    for record in &ordered {
        let n = record.payload["n"].as_i64().expect("n");
        if seen.insert(n) {
            let key = record.key.clone().expect("key");
            if let Some(previous) = last_first.insert(key.clone(), n) {
                assert!(previous < n, "{key}: {n} first arrived after {previous}");
            }
        }
    }
    println!(
        "kafka restart: {} records for {total} rows, {failed} failed publishes counted",
        records.len()
    );
    service.stop().await;
    delete_topics(&[&topic]).await;
}

/// An inbox row read back: key, event type, aggregate id, state, last error.
type StoredRow = (
    String,
    Option<String>,
    Option<String>,
    String,
    Option<String>,
);

/// A one-partition topic of its own (named after `prefix`) and a service whose source `orders-log`
/// reads it in a group of its own with the `extra` keys, once the source is healthy.
async fn topic_with_source(prefix: &str, extra: &str) -> (String, String, Service) {
    let topic = unique(prefix);
    create_topic(&topic, 1).await;
    let group = unique("group");
    let service = Service::start(&source("orders-log", &topic, &group, extra)).await;
    wait_until("the source healthy", WAIT, || async {
        let (status, body) = service.ready().await;
        (status == 200 && body.contains("kafka.orders-log")).then_some(())
    })
    .await;
    (topic, group, service)
}

#[tokio::test]
async fn records_are_stored_once_each_with_the_key_order_of_page_08_and_bad_ones_kept_dead() {
    let _broker = BROKER.read().await;
    let (topic, group, service) = topic_with_source(
        "in",
        "    idempotencyKeyPath: $.messageId\n    eventTypePath: $.type\n    aggregateIdPath: $.orderId\n",
    )
    .await;
    let producer = producer();
    let body = br#"{"messageId":"m-1","type":"order.created","orderId":"o-1"}"#;
    send(&producer, &topic, Some("rk-0"), body, &[]).await;
    send(&producer, &topic, Some("rk-0"), body, &[]).await;
    // The header comes first, then the path, then the record key, then the digest.
    send(
        &producer,
        &topic,
        Some("rk-1"),
        br#"{"messageId":"ignored"}"#,
        &[
            ("x-idempotency-key", "hdr-1"),
            ("x-event-type", "from.header"),
        ],
    )
    .await;
    send(&producer, &topic, Some("rk-2"), br#"{"other":1}"#, &[]).await;
    send(
        &producer,
        &topic,
        None,
        br#"{"other":2}"#,
        &[("x-aggregate-id", "agg-h")],
    )
    .await;
    send(&producer, &topic, Some("xml-1"), b"<order id='7'/>", &[]).await;
    wait_until("five rows", WAIT, || async {
        (service.count("SELECT count(*) FROM inbox").await == 5).then_some(())
    })
    .await;
    let rows: Vec<StoredRow> = sqlx::query_as(
        "SELECT idempotency_key, event_type, aggregate_id, state, last_error FROM inbox WHERE source = 'orders-log'",
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
    assert_eq!(
        row("hdr-1").2.as_deref(),
        Some("rk-1"),
        "the aggregate falls back to the record key"
    );
    assert_ne!(row("rk-2").3, "dead", "keyed by the record key");
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
    assert_eq!(xml.3, "dead", "not JSON: a dead row under its record key");
    assert!(
        xml.4
            .as_deref()
            .is_some_and(|e| e.starts_with("Invalid JSON")),
        "{rows:?}"
    );
    wait_until("the group to commit past every record", WAIT, || async {
        (committed(&group, &topic, 1).await == [6]).then_some(())
    })
    .await;
    let metrics = service.metrics().await;
    assert_eq!(
        sample(&metrics, "queuebox_inbox_messages_total{status=\"new\"}"),
        5.0,
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "queuebox_inbox_messages_total{status=\"duplicate\"}"
        ),
        1.0,
        "{metrics}"
    );
    service.stop().await;
    delete_topics(&[&topic]).await;
}

/// The source-rules scenario on topics: each source reads a one-partition topic of its own in a
/// group of its own; `relayed` finds its id, event type and aggregate id in attribute headers, and
/// its topic is a template.
struct Topics(FutureProducer);

impl RulesBroker for Topics {
    async fn create(&self, topic: &str) {
        create_topic(topic, 1).await;
    }

    fn source(&self, topic: &str) -> String {
        format!(
            "    type: kafka\n    bootstrapServers: {}\n    topics: [{topic}]\n    groupId: {}\n",
            bootstrap(),
            unique("group"),
        )
    }

    fn attributes(&self, to: Source) -> &'static str {
        match to {
            Source::Relayed => {
                "    eventTypeFromHeader: true\n    topic: \"kafka.{{ eventType }}\"\n\
                 \x20   attributeHeaders:\n      idempotencyKey: id\n      eventType: eventType\n      aggregateId: aggregateId\n"
            }
            Source::Pulled => "",
        }
    }

    fn id_field(&self) -> &'static str {
        "ref"
    }

    fn relayed_topic(&self) -> (&'static str, &'static str) {
        (
            "kafka.order.created",
            "the source's topic template with the header's event type",
        )
    }

    async fn publish(&self, topic: &str, to: Source, message: &RulesMessage) {
        let mut headers = Vec::new();
        let body = match to {
            // The attributes travel in headers: the body holds only `ref` and `ok`.
            Source::Relayed => {
                headers.extend([("id", message.id), ("eventType", "order.created")]);
                if let Some(customer) = message.customer {
                    headers.push(("aggregateId", customer));
                }
                message.body("ref", false)
            }
            Source::Pulled => message.body("id", false),
        };
        headers.extend(message.headers());
        send(&self.0, topic, None, &body, &headers).await;
    }

    async fn delete(&self, topic: &str) {
        delete_topics(&[topic]).await;
    }
}

#[tokio::test]
async fn the_sources_rules_apply_to_records_filter_transform_attribute_headers_pull_and_relay() {
    let _broker = BROKER.read().await;
    let relayed = source_rules::run(&Topics(producer()), WAIT).await;
    assert_eq!(
        relayed.headers["X-Correlation-Id"], "corr-1",
        "the correlation header travels with the relayed row: {relayed:?}"
    );
}

#[tokio::test]
async fn unkeyed_records_get_digest_keys_and_raw_payloads_and_binary_headers_are_kept() {
    let _broker = BROKER.read().await;
    let (topic, _group, service) =
        topic_with_source("forms", "    idempotencyKeyPath: $.messageId\n").await;
    let producer = producer();
    for (i, body) in UNKEYED.iter().enumerate() {
        let headers: &[(&str, &[u8])] = if i == 0 {
            &[("x-binary", BINARY_HEADER.0), ("x-text", b"acme")]
        } else {
            &[]
        };
        send_bytes(&producer, &topic, None, body, headers).await;
    }
    let stored = check_unkeyed_rows(&service.sql, "orders-log", WAIT).await;
    assert_eq!(stored["x-text"], "acme", "{stored}");
    assert_eq!(stored["x-binary"], BINARY_HEADER.1, "{stored}");
    service.stop().await;
    delete_topics(&[&topic]).await;
}

#[tokio::test]
async fn a_missing_topic_shows_in_health_naming_it_until_it_exists() {
    let _broker = BROKER.read().await;
    let topic = unique("in-missing");
    let service = Service::start(&source("orders-log", &topic, &unique("group"), "")).await;
    let body = wait_until("the component down naming the topic", WAIT, || async {
        let (status, body) = service.ready().await;
        (status == 503 && body.contains(&topic)).then_some(body)
    })
    .await;
    assert!(body.contains("kafka.orders-log"), "{body}");
    create_topic(&topic, 1).await;
    send(&producer(), &topic, None, br#"{"id":"late"}"#, &[]).await;
    wait_until("the source to recover and store", WAIT, || async {
        (service.count("SELECT count(*) FROM inbox").await == 1).then_some(())
    })
    .await;
    wait_until("ready again", WAIT, || async {
        (service.ready().await.0 == 200).then_some(())
    })
    .await;
    service.stop().await;
    delete_topics(&[&topic]).await;
}

#[tokio::test]
async fn kill_9_between_the_inbox_commit_and_the_offset_commit_stores_each_record_once() {
    let _broker = BROKER.read().await;
    let topic = unique("in-kill");
    let group = unique("group");
    create_topic(&topic, 2).await;
    let total: i64 = 3000;
    let producer = producer();
    for i in 0..total {
        send(
            &producer,
            &topic,
            None,
            format!(r#"{{"id":"m-{i}"}}"#).as_bytes(),
            &[],
        )
        .await;
    }
    let mut service = Service::start(&source("orders-log", &topic, &group, "")).await;
    let stored_at_kill = service.kill9_while_storing(100, total, WAIT).await;
    let committed_at_kill: i64 = committed(&group, &topic, 2)
        .await
        .iter()
        .map(|o| o.max(&0))
        .sum();
    assert!(
        committed_at_kill < stored_at_kill,
        "the kill must fall between the inbox commit and the offset commit: {stored_at_kill} rows stored, {committed_at_kill} records committed"
    );
    service.restart().await;
    wait_each_stored_once(&service.sql, "record", total, Duration::from_secs(90)).await;
    wait_until("the group to commit past every record", WAIT, || async {
        let offsets = committed(&group, &topic, 2).await;
        (offsets.iter().sum::<i64>() == total).then_some(())
    })
    .await;
    println!(
        "kill -9: {stored_at_kill} rows stored and {committed_at_kill} records committed at the kill"
    );
    service.stop().await;
    delete_topics(&[&topic]).await;
}

#[tokio::test]
async fn two_replicas_in_one_group_share_the_partitions_and_store_every_record_once() {
    let _broker = BROKER.read().await;
    let topic = unique("in-replicas");
    let group = unique("group");
    create_topic(&topic, 4).await;
    let service = Service::start(&source("orders-log", &topic, &group, "")).await;
    let producer = producer();
    let first_half: i64 = 400;
    let send_range = |range: std::ops::Range<i64>| {
        let (producer, topic) = (&producer, &topic);
        async move {
            for i in range {
                let body = format!(r#"{{"id":"m-{i}"}}"#);
                send(
                    producer,
                    topic,
                    Some(&format!("k-{i}")),
                    body.as_bytes(),
                    &[],
                )
                .await;
            }
        }
    };
    // Each replica's metrics count the rows it stored.
    let counted = |port: u16| async move {
        sample(
            &queuebox_tests::scrape(port).await,
            "queuebox_inbox_messages_total{status=\"new\"}",
        )
    };
    send_range(0..first_half).await;
    wait_until("the first replica storing", WAIT, || async {
        (service.count("SELECT count(*) FROM inbox").await > 0).then_some(())
    })
    .await;
    // The second replica joins while records are being read: the group rebalances, the first
    // replica commits what it stored for the partitions it gives up, and nothing is skipped. The
    // broker hands the newcomer its partitions when the rebalance completes, which on a loaded
    // machine can come after a fixed second half has all been read by the first replica: records
    // go on in steps of 100, each waited for, until the second replica has stored some.
    let (mut second, second_port) = service.replica();
    second.wait_live(second_port, START).await;
    let mut total = first_half;
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while counted(second_port).await == 0.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the second replica stored nothing of {total} records"
        );
        send_range(total..total + 100).await;
        total += 100;
        let sent = total;
        wait_until("this step stored", WAIT, || async {
            (service.count("SELECT count(*) FROM inbox").await >= sent).then_some(())
        })
        .await;
    }
    wait_each_stored_once(&service.sql, "record", total, Duration::from_secs(60)).await;
    let (one, two) = (counted(service.port).await, counted(second_port).await);
    assert!(
        one > 0.0 && two > 0.0,
        "both replicas consumed: {one} and {two}"
    );
    second.terminate();
    let status = second.wait_exit(Duration::from_secs(30)).await;
    assert!(status.success(), "{}", second.log());
    service.stop().await;
    let offsets = committed(&group, &topic, 4).await;
    assert_eq!(
        offsets.iter().sum::<i64>(),
        total,
        "committed past every record: {offsets:?}"
    );
    delete_topics(&[&topic]).await;
}

#[tokio::test]
async fn a_record_whose_store_fails_is_retried_not_skipped() {
    let _broker = BROKER.read().await;
    let topic = unique("in-fail");
    let group = unique("group");
    create_topic(&topic, 1).await;
    let service = Service::start(&source("orders-log", &topic, &group, "")).await;
    // A trigger refuses the row of record `r-3` while the switch is on: its store fails.
    sqlx::raw_sql(
        "CREATE TABLE fail_switch (active boolean NOT NULL);
         INSERT INTO fail_switch VALUES (true);
         CREATE FUNCTION refuse_r3() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.idempotency_key = 'r-3' AND (SELECT active FROM fail_switch) THEN
             RAISE EXCEPTION 'refused by the test';
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER refuse_r3 BEFORE INSERT ON inbox FOR EACH ROW EXECUTE FUNCTION refuse_r3();",
    )
    .execute(&service.sql)
    .await
    .expect("trigger");
    let producer = producer();
    for i in 0..6 {
        send(
            &producer,
            &topic,
            None,
            format!(r#"{{"id":"r-{i}"}}"#).as_bytes(),
            &[],
        )
        .await;
    }
    wait_until("the records around r-3 stored", WAIT, || async {
        (service.count("SELECT count(*) FROM inbox").await == 5).then_some(())
    })
    .await;
    // The group never commits past the record that failed while it keeps failing.
    let offsets = committed(&group, &topic, 1).await;
    assert!(
        offsets[0] <= 3,
        "committed past the failed record: {offsets:?}"
    );
    sqlx::query("UPDATE fail_switch SET active = false")
        .execute(&service.sql)
        .await
        .expect("switch off");
    wait_until("r-3 stored too", WAIT, || async {
        (service
            .count("SELECT count(*) FROM inbox WHERE idempotency_key = 'r-3'")
            .await
            == 1)
            .then_some(())
    })
    .await;
    wait_until("the group to commit past every record", WAIT, || async {
        (committed(&group, &topic, 1).await == [6]).then_some(())
    })
    .await;
    assert_eq!(service.count("SELECT count(*) FROM inbox").await, 6);
    service.stop().await;
    delete_topics(&[&topic]).await;
}

#[tokio::test]
async fn scram_credentials_publish_and_consume_over_the_sasl_listener() {
    let _broker = BROKER.read().await;
    let Ok(sasl) = std::env::var("QB_TEST_KAFKA_SASL_BOOTSTRAP") else {
        panic!("QB_TEST_KAFKA_SASL_BOOTSTRAP is not set");
    };
    let scram = std::env::var("QB_TEST_KAFKA_SCRAM").expect("QB_TEST_KAFKA_SCRAM");
    let (user, password) = scram.split_once(':').expect("user:password");
    let (out_topic, in_topic) = (unique("sasl-out"), unique("sasl-in"));
    create_topic(&out_topic, 1).await;
    create_topic(&in_topic, 1).await;
    let collector = Collector::start(&out_topic, 1);
    let security = format!(
        "    securityProtocol: SASL_PLAINTEXT\n    saslMechanism: SCRAM-SHA-512\n    saslUsername: {user}\n    saslPassword: ${{KAFKA_PASSWORD}}\n"
    );
    let yaml = format!(
        "destinations:\n  secure:\n    type: kafka\n    bootstrapServers: {sasl}\n    topic: {out_topic}\n{security}\
         routes:\n  - topicPattern: \"**\"\n    destination: secure\n\
         sources:\n  secure-in:\n    type: kafka\n    bootstrapServers: {sasl}\n    topics: [{in_topic}]\n    groupId: {group}\n{security}",
        group = unique("group")
    );
    let service = Service::with(&yaml)
        .env("KAFKA_PASSWORD", password)
        .start()
        .await;
    sqlx::query("INSERT INTO outbox (topic, payload) VALUES ('any', '{\"n\":1}')")
        .execute(&service.sql)
        .await
        .expect("insert");
    send(&producer(), &in_topic, None, br#"{"id":"s-1"}"#, &[]).await;
    wait_until(
        "the record published and the inbox row stored",
        WAIT,
        || async {
            let inbox = service.count("SELECT count(*) FROM inbox").await;
            // The outbox row, and the relayed inbox row (the route takes every topic).
            (inbox == 1 && collector.records().len() == 2).then_some(())
        },
    )
    .await;
    assert!(
        !service.log().contains(password),
        "the password never reaches the log"
    );
    service.stop().await;
    delete_topics(&[&out_topic, &in_topic]).await;
}
