//! The Kafka publisher against the real broker of `QB_TEST_KAFKA_BOOTSTRAP`: what a record
//! carries (topic, key, headers), each failure kind the issue names, SASL/SCRAM on the broker's
//! SCRAM listener, per-key order with many publishes in flight, and an outage.

#![allow(clippy::unwrap_used)]

mod support;

use queuebox_domain::secret::Secret;
use queuebox_domain::template::address::AddressColumn;
use queuebox_kafka::{KafkaPublisher, KafkaPublisherOptions, SecurityProtocol};
use queuebox_ports::publish::{OutboundMessage, PublishErrorKind, Publisher};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use support::{
    Collector, PROXY_PORT, bootstrap, create_topic, delete_topics, sasl_bootstrap, scram_user,
    skip, unique,
};

fn message(topic: &str, key: Option<&str>) -> OutboundMessage {
    OutboundMessage {
        id: uuid::Uuid::new_v4().to_string(),
        topic: topic.to_owned(),
        key: key.map(str::to_owned),
        aggregate_type: Some("order".to_owned()),
        payload: r#"{"orderId":"o-1"}"#.to_owned(),
        headers: vec![("x-tenant".to_owned(), "acme".to_owned())],
        attempt: 2,
        ..OutboundMessage::default()
    }
}

fn options(topic: &str) -> KafkaPublisherOptions {
    let mut options = KafkaPublisherOptions::new("orders", bootstrap().unwrap(), topic);
    options.timeout = Duration::from_secs(10);
    options
}

fn publisher(options: KafkaPublisherOptions) -> KafkaPublisher {
    KafkaPublisher::new(options).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn a_record_carries_the_payload_the_row_key_and_the_standard_static_and_row_headers() {
    if skip() {
        return;
    }
    let topic = unique("pub");
    create_topic(&topic, 1, &[]).await;
    let collector = Collector::start(&topic, 1);
    let mut options = options(&topic);
    options.headers = vec![
        ("x-team".to_owned(), "orders".to_owned()),
        ("X-Tenant".to_owned(), "static".to_owned()),
    ];
    let publisher = publisher(options);
    let sent = message("order.created", Some("cust-1"));
    publisher.publish(&sent).await.unwrap();
    let record = collector.wait_for_count(1).await.remove(0);
    assert_eq!(record.payload, sent.payload);
    assert_eq!(record.key.as_deref(), Some("cust-1"));
    assert_eq!(
        record.headers,
        vec![
            ("x-message-id".to_owned(), sent.id.clone()),
            ("x-topic".to_owned(), "order.created".to_owned()),
            ("x-attempt".to_owned(), "2".to_owned()),
            ("x-team".to_owned(), "orders".to_owned()),
            // The row header replaced the static one of the same name in another letter case.
            ("x-tenant".to_owned(), "acme".to_owned()),
        ]
    );
    delete_topics(&[&topic]).await;
}

#[tokio::test]
async fn the_key_comes_from_the_route_else_the_key_template_and_empty_sends_none() {
    if skip() {
        return;
    }
    let topic = unique("pub-key");
    create_topic(&topic, 1, &[]).await;
    let collector = Collector::start(&topic, 1);
    let mut templated = options(&topic);
    templated.key_template = "{{ topic }}".to_owned();
    let publisher = publisher(templated);
    let mut routed = message("order.created", Some("cust-1"));
    routed.route_key = Some("eu.cust-1".to_owned());
    publisher.publish(&routed).await.unwrap();
    let mut empty_route = message("order.created", Some("cust-1"));
    empty_route.route_key = Some(String::new());
    publisher.publish(&empty_route).await.unwrap();
    publisher
        .publish(&message("order.paid", Some("cust-1")))
        .await
        .unwrap();
    let keys: Vec<Option<String>> = collector
        .wait_for_count(3)
        .await
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(
        keys,
        vec![
            Some("eu.cust-1".to_owned()),
            None,
            Some("order.paid".to_owned())
        ]
    );
    // The default template on a row without a key sends no key.
    let plain = self::publisher(options(&topic));
    plain
        .publish(&message("order.created", None))
        .await
        .unwrap();
    assert_eq!(collector.wait_for_count(4).await[3].key, None);
    delete_topics(&[&topic]).await;
}

#[tokio::test]
async fn the_topic_comes_from_its_template_or_from_the_topic_from_column() {
    if skip() {
        return;
    }
    let prefix = unique("tpl");
    let by_type = format!("{prefix}.order.v1");
    let by_column = format!("{prefix}-col");
    create_topic(&by_type, 1, &[]).await;
    create_topic(&by_column, 1, &[]).await;
    let typed = Collector::start(&by_type, 1);
    let columned = Collector::start(&by_column, 1);
    let publisher = publisher(options(&format!("{prefix}.{{{{ aggregateType }}}}.v1")));
    publisher.publish(&message("t", Some("k"))).await.unwrap();
    assert_eq!(typed.wait_for_count(1).await.len(), 1);
    let mut from_column = options("ignored-literal");
    from_column.topic_from = Some(AddressColumn::Key);
    let publisher = self::publisher(from_column);
    publisher
        .publish(&message("t", Some(&by_column)))
        .await
        .unwrap();
    assert_eq!(columned.wait_for_count(1).await.len(), 1);
    // A row whose column gives no topic, or a name Kafka refuses, fails as an invalid message.
    let error = publisher.publish(&message("t", None)).await.unwrap_err();
    assert_eq!(error.kind, PublishErrorKind::InvalidMessage, "{error:?}");
    let error = publisher
        .publish(&message("t", Some("not a topic")))
        .await
        .unwrap_err();
    assert_eq!(error.kind, PublishErrorKind::InvalidMessage, "{error:?}");
    assert!(
        error.reason.contains("not a Kafka topic name"),
        "{}",
        error.reason
    );
    delete_topics(&[&by_type, &by_column]).await;
}

#[tokio::test]
async fn a_record_too_large_is_an_invalid_message_and_an_unknown_topic_is_rejected() {
    if skip() {
        return;
    }
    let topic = unique("pub-size");
    create_topic(&topic, 1, &[]).await;
    let publisher = publisher(options(&topic));
    let mut large = message("t", Some("k"));
    large.payload = format!("{{\"blob\":\"{}\"}}", "x".repeat(2 * 1024 * 1024));
    let error = publisher.publish(&large).await.unwrap_err();
    assert_eq!(error.kind, PublishErrorKind::InvalidMessage, "{error:?}");
    assert!(
        error.reason.contains("message too large"),
        "{}",
        error.reason
    );

    let missing = unique("pub-missing");
    let mut unknown = options(&missing);
    unknown.timeout = Duration::from_secs(4);
    let started = std::time::Instant::now();
    let error = self::publisher(unknown)
        .publish(&message("t", Some("k")))
        .await
        .unwrap_err();
    assert_eq!(error.kind, PublishErrorKind::Rejected, "{error:?}");
    assert!(error.reason.contains("unknown topic"), "{}", error.reason);
    assert!(error.reason.contains(&missing), "{}", error.reason);
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    delete_topics(&[&topic]).await;
}

fn sasl_options(topic: &str, user: &str, password: &str, mechanism: &str) -> KafkaPublisherOptions {
    let mut options = KafkaPublisherOptions::new("secure", sasl_bootstrap().unwrap(), topic);
    options.timeout = Duration::from_secs(5);
    options.connection.security_protocol = SecurityProtocol::SaslPlaintext;
    options.connection.sasl_mechanism = Some(mechanism.to_owned());
    options.connection.sasl_username = Some(user.to_owned());
    options.connection.sasl_password = Some(Secret::new(password));
    options
}

#[tokio::test]
async fn scram_logs_in_and_a_refused_login_or_a_missing_acl_is_an_auth_failure() {
    if skip() || sasl_bootstrap().is_none() {
        return;
    }
    let topic = unique("pub-sasl");
    create_topic(&topic, 1, &[]).await;
    let collector = Collector::start(&topic, 1);
    let (user, password) = scram_user("QB_TEST_KAFKA_SCRAM");
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        publisher(sasl_options(&topic, &user, &password, mechanism))
            .publish(&message("t", Some("k")))
            .await
            .unwrap_or_else(|e| panic!("{mechanism}: {e:?}"));
    }
    assert_eq!(collector.wait_for_count(2).await.len(), 2);

    let wrong = "not-the-password-4711";
    let error = publisher(sasl_options(&topic, &user, wrong, "SCRAM-SHA-256"))
        .publish(&message("t", Some("k")))
        .await
        .unwrap_err();
    assert_eq!(error.kind, PublishErrorKind::Auth, "{error:?}");
    assert!(!error.reason.contains(wrong), "{}", error.reason);

    let (denied, denied_password) = scram_user("QB_TEST_KAFKA_DENIED_SCRAM");
    let error = publisher(sasl_options(
        &topic,
        &denied,
        &denied_password,
        "SCRAM-SHA-256",
    ))
    .publish(&message("t", Some("k")))
    .await
    .unwrap_err();
    assert_eq!(error.kind, PublishErrorKind::Auth, "{error:?}");
    assert!(error.reason.contains("authorization"), "{}", error.reason);
    assert!(!error.reason.contains(&denied_password), "{}", error.reason);
    delete_topics(&[&topic]).await;
}

#[test]
fn settings_are_checked_at_build_time_naming_the_key() {
    let mut short = KafkaPublisherOptions::new("orders", "127.0.0.1:9092", "t");
    short.timeout = Duration::from_millis(1999);
    let error = KafkaPublisher::new(short).unwrap_err().to_string();
    assert_eq!(
        error,
        "destination `orders`: timeoutMs is 1999 and must be at least 2000"
    );
    let error = KafkaPublisher::new(KafkaPublisherOptions::new(
        "orders",
        "127.0.0.1:9092",
        "a b",
    ))
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("topic `a b` is not a Kafka topic name"),
        "{error}"
    );
    let error = KafkaPublisher::new(KafkaPublisherOptions::new(
        "orders",
        "127.0.0.1:9092",
        "{{ nope }}",
    ))
    .unwrap_err()
    .to_string();
    assert!(error.contains("orders"), "{error}");
    let mut bad_key = KafkaPublisherOptions::new("orders", "127.0.0.1:9092", "t");
    bad_key.key_template = "{{ key".to_owned();
    let error = KafkaPublisher::new(bad_key).unwrap_err().to_string();
    assert!(error.contains("keyTemplate is malformed"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_publishes_in_flight_keep_each_keys_order() {
    if skip() {
        return;
    }
    const KEYS: usize = 20;
    const PER_KEY: usize = 40;
    let topic = unique("pub-order");
    create_topic(&topic, 3, &[]).await;
    let collector = Collector::start(&topic, 3);
    let publisher = Arc::new(publisher(options(&topic)));
    // One row of a key in flight at a time (what the dispatcher guarantees), the keys side by
    // side: up to KEYS publishes in flight on one producer.
    let tasks: Vec<_> = (0..KEYS)
        .map(|k| {
            let publisher = Arc::clone(&publisher);
            tokio::spawn(async move {
                for n in 0..PER_KEY {
                    let mut m = message("order.step", Some(&format!("key-{k}")));
                    m.payload = format!(r#"{{"n":{n}}}"#);
                    publisher.publish(&m).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let records = collector.wait_for_count(KEYS * PER_KEY).await;
    let mut by_key: HashMap<String, Vec<(i64, String)>> = HashMap::new();
    let mut partitions: HashMap<String, i32> = HashMap::new();
    for record in &records {
        let key = record.key.clone().unwrap();
        assert_eq!(
            *partitions.entry(key.clone()).or_insert(record.partition),
            record.partition
        );
        by_key
            .entry(key)
            .or_default()
            .push((record.offset, record.payload.clone()));
    }
    assert_eq!(by_key.len(), KEYS);
    for (key, mut seen) in by_key {
        seen.sort();
        let order: Vec<String> = seen.into_iter().map(|(_, p)| p).collect();
        let expected: Vec<String> = (0..PER_KEY).map(|n| format!(r#"{{"n":{n}}}"#)).collect();
        assert_eq!(order, expected, "{key}");
    }
    delete_topics(&[&topic]).await;
}

#[tokio::test]
async fn an_outage_fails_publishes_as_unreachable_and_the_publisher_recovers() {
    if skip() || support::proxied().is_none() {
        return;
    }
    let _port = PROXY_PORT.lock().await;
    let topic = unique("pub-outage");
    create_topic(&topic, 1, &[]).await;
    let collector = Collector::start(&topic, 1);
    let proxy = support::proxy().await;
    let mut outage = options(&topic);
    outage.connection.bootstrap_servers = proxy.address().to_owned();
    outage.timeout = Duration::from_secs(3);
    let publisher = publisher(outage);
    let first = message("t", Some("k"));
    publisher.publish(&first).await.unwrap();
    drop(proxy); // the listener closes and every connection through it is cut
    let error = publisher
        .publish(&message("t", Some("k")))
        .await
        .unwrap_err();
    assert_eq!(error.kind, PublishErrorKind::Unreachable, "{error:?}");
    let proxy = support::proxy().await;
    let after = message("t", Some("k"));
    support::wait_for("a publish after the outage", || async {
        publisher.publish(&after).await.ok()
    })
    .await;
    let ids = collector.wait_for_count(2).await;
    assert!(
        ids.iter()
            .any(|r| r.header("x-message-id") == Some(first.id.as_str()))
    );
    assert!(
        ids.iter()
            .any(|r| r.header("x-message-id") == Some(after.id.as_str()))
    );
    drop(proxy);
    delete_topics(&[&topic]).await;
}
