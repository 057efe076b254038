//! The RabbitMQ publisher against the real broker of `QB_TEST_AMQP_URL`: what arrives, and how
//! each refusal is reported.

mod support;

use lapin::ExchangeKind;
use lapin::options::ExchangeDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use queuebox_conformance::proxy::closed_port;
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::{PublishErrorKind, Publisher};
use queuebox_rabbitmq::{DeliveryMode, ExchangeType, RabbitmqPublisher};
use std::collections::HashSet;
use std::sync::Arc;
use support::{TestClient, amqp_url, message, options, reject_everything, unique, with_port};

fn publisher(options: queuebox_rabbitmq::RabbitmqPublisherOptions) -> RabbitmqPublisher {
    RabbitmqPublisher::new(options).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn a_confirmed_publish_arrives_with_its_properties_headers_and_body() {
    let Some(url) = amqp_url() else { return };
    let exchange = unique("props");
    let queue = unique("props-q");
    let mut options = options(&url, &exchange);
    options.headers = vec![
        ("X-Team".to_owned(), "orders".to_owned()),
        ("x-tenant".to_owned(), "static".to_owned()),
    ];
    let publisher = publisher(options);
    assert_eq!(publisher.destination_type(), "rabbitmq");
    // The publisher declares its exchange; connecting first lets the test bind a queue to it.
    publisher.connect().await.expect("connects and declares");
    let client = TestClient::connect(&url).await;
    client
        .bind_queue(&queue, &exchange, "order.*", FieldTable::default())
        .await;

    let mut sent = message("order.created");
    sent.attempt = 3;
    publisher.publish(&sent).await.expect("confirmed");

    let got = client.next_message(&queue).await;
    assert_eq!(got.exchange, exchange);
    assert_eq!(
        got.routing_key, "order.created",
        "default template {{ topic }}"
    );
    assert_eq!(got.body, sent.payload.as_bytes());
    let properties = &got.properties;
    assert_eq!(
        properties.message_id().as_ref().map(ShortString::as_str),
        Some(sent.id.as_str())
    );
    assert_eq!(
        properties.content_type().as_ref().map(ShortString::as_str),
        Some("application/json")
    );
    assert_eq!(*properties.delivery_mode(), Some(2));
    assert_eq!(got.header_text("x-topic").as_deref(), Some("order.created"));
    assert_eq!(got.header("x-attempt"), Some(&AMQPValue::LongInt(3)));
    assert_eq!(got.header_text("X-Team").as_deref(), Some("orders"));
    // The row header replaced the static header of the same name.
    assert_eq!(got.header_text("x-tenant").as_deref(), Some("acme"));
    assert_eq!(got.header("x-message-key"), None);

    // The exchange was declared durable and of type topic: a redeclare as direct is refused.
    let check = client.connection.create_channel().await.expect("a channel");
    let redeclare = check
        .exchange_declare(
            ShortString::from(exchange.as_str()),
            ExchangeKind::Direct,
            ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await;
    assert!(redeclare.is_err(), "the exchange is not a durable topic");
    client.clean(&[&exchange], &[&queue]).await;
}

#[tokio::test]
async fn transient_and_persistent_delivery_modes() {
    let Some(url) = amqp_url() else { return };
    let exchange = unique("mode");
    let queue = unique("mode-q");
    let client = TestClient::connect(&url).await;
    client
        .declare_exchange(&exchange, ExchangeKind::Topic)
        .await;
    client
        .bind_queue(&queue, &exchange, "#", FieldTable::default())
        .await;
    for (mode, expected) in [(DeliveryMode::Transient, 1), (DeliveryMode::Persistent, 2)] {
        let mut options = options(&url, &exchange);
        options.delivery_mode = mode;
        publisher(options)
            .publish(&message("mode.test"))
            .await
            .expect("confirmed");
        let got = client.next_message(&queue).await;
        assert_eq!(*got.properties.delivery_mode(), Some(expected), "{mode:?}");
    }
    client.clean(&[&exchange], &[&queue]).await;
}

#[tokio::test]
async fn templated_exchange_and_routing_key_render_per_row() {
    let Some(url) = amqp_url() else { return };
    let prefix = unique("tpl");
    let exchange = format!("{prefix}.order");
    let queue = unique("tpl-q");
    let client = TestClient::connect(&url).await;
    client
        .declare_exchange(&exchange, ExchangeKind::Direct)
        .await;
    client
        .bind_queue(&queue, &exchange, "eu.order.created", FieldTable::default())
        .await;
    let mut options = options(&url, &format!("{prefix}.{{{{ aggregateType }}}}"));
    options.exchange_type = ExchangeType::Direct;
    options.routing_key_template = "{{ payload.region }}.{{ topic }}".to_owned();
    let publisher = publisher(options);
    publisher
        .publish(&message("order.created"))
        .await
        .expect("confirmed");
    let got = client.next_message(&queue).await;
    assert_eq!(got.exchange, exchange);
    assert_eq!(got.routing_key, "eu.order.created");

    client.clean(&[&exchange], &[&queue]).await;
}

#[tokio::test]
async fn an_unroutable_message_is_rejected_naming_exchange_and_routing_key() {
    let Some(url) = amqp_url() else { return };
    let exchange = unique("noroute");
    let publisher = publisher(options(&url, &exchange));
    let error = publisher
        .publish(&message("nobody.listens"))
        .await
        .expect_err("the publish must fail");
    assert_eq!(error.kind, PublishErrorKind::Rejected, "{error}");
    assert!(error.reason.contains(&exchange), "{}", error.reason);
    assert!(error.reason.contains("nobody.listens"), "{}", error.reason);
    assert!(error.reason.contains("unroutable"), "{}", error.reason);
    assert!(error.reason.contains("NO_ROUTE"), "{}", error.reason);
    assert!(!error.reason.contains("guest:guest"), "{}", error.reason);
    TestClient::connect(&url)
        .await
        .clean(&[&exchange], &[])
        .await;
}

#[tokio::test]
async fn a_nack_is_rejected_and_says_nack() {
    let Some(url) = amqp_url() else { return };
    let exchange = unique("nack");
    let queue = unique("nack-q");
    let client = TestClient::connect(&url).await;
    client
        .declare_exchange(&exchange, ExchangeKind::Topic)
        .await;
    client
        .bind_queue(&queue, &exchange, "#", reject_everything())
        .await;
    let publisher = publisher(options(&url, &exchange));
    let error = publisher
        .publish(&message("order.created"))
        .await
        .expect_err("the publish must fail");
    assert_eq!(error.kind, PublishErrorKind::Rejected, "{error}");
    assert!(error.reason.contains("nack"), "{}", error.reason);
    assert!(error.reason.contains(&exchange), "{}", error.reason);
    assert_eq!(client.depth(&queue).await, 0);
    client.clean(&[&exchange], &[&queue]).await;
}

#[tokio::test]
async fn a_closed_port_is_unreachable_and_the_reason_hides_the_password() {
    let Some(url) = amqp_url() else { return };
    let port = closed_port();
    let secret_url = with_port(&url, port).replacen("guest:guest", "guest:hunter2-s3cret", 1);
    let mut options = options(&secret_url, &unique("closed"));
    options.url = Secret::new(secret_url.as_str());
    let publisher = publisher(options);
    let first = publisher
        .publish(&message("t"))
        .await
        .expect_err("the publish must fail");
    assert_eq!(first.kind, PublishErrorKind::Unreachable, "{first}");
    assert!(
        first.reason.contains(&format!(":{port}")),
        "{}",
        first.reason
    );
    // Inside the reconnect wait a publish fails at once, with the same cause.
    let started = std::time::Instant::now();
    let second = publisher
        .publish(&message("t"))
        .await
        .expect_err("the publish must fail");
    assert_eq!(second.kind, PublishErrorKind::Unreachable, "{second}");
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    for reason in [&first.reason, &second.reason] {
        assert!(!reason.contains("hunter2"), "{reason}");
        assert!(!reason.contains(&secret_url), "{reason}");
    }
}

#[tokio::test]
async fn a_refused_login_is_an_auth_failure_without_the_password() {
    let Some(url) = amqp_url() else { return };
    let bad = url.replacen("guest:guest", "guest:wrong-pw-4711", 1);
    assert_ne!(bad, url, "the test URL carries guest:guest");
    let publisher = publisher(options(&bad, &unique("auth")));
    let error = publisher
        .publish(&message("t"))
        .await
        .expect_err("the publish must fail");
    assert_eq!(error.kind, PublishErrorKind::Auth, "{error}");
    assert!(!error.reason.contains("wrong-pw-4711"), "{}", error.reason);
}

#[tokio::test]
async fn a_hundred_concurrent_publishes_are_all_confirmed() {
    let Some(url) = amqp_url() else { return };
    let exchange = unique("many");
    let queue = unique("many-q");
    let client = TestClient::connect(&url).await;
    client
        .declare_exchange(&exchange, ExchangeKind::Topic)
        .await;
    client
        .bind_queue(&queue, &exchange, "#", FieldTable::default())
        .await;
    let publisher = Arc::new(publisher(options(&url, &exchange)));
    let messages: Vec<_> = (0..100).map(|_| message("bulk.created")).collect();
    let results = futures::future::join_all(messages.iter().map(|m| {
        let publisher = Arc::clone(&publisher);
        async move { publisher.publish(m).await }
    }))
    .await;
    for result in &results {
        assert!(result.is_ok(), "{result:?}");
    }
    let mut ids = HashSet::new();
    for _ in 0..100 {
        let got = client.next_message(&queue).await;
        ids.insert(
            got.properties
                .message_id()
                .as_ref()
                .map(|id| id.to_string())
                .unwrap_or_default(),
        );
    }
    let sent: HashSet<String> = messages.iter().map(|m| m.id.clone()).collect();
    assert_eq!(ids, sent);
    client.clean(&[&exchange], &[&queue]).await;
}
