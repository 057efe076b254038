//! The RabbitMQ publisher when the link to the broker breaks: a connection the broker closes, a
//! connection cut while a publish waits for its confirm, a confirm that never comes, and a channel
//! the broker closes over a deleted exchange.

mod support;

use lapin::ExchangeKind;
use lapin::types::FieldTable;
use queuebox_conformance::proxy::FaultProxy;
use queuebox_domain::secret::Secret;
use queuebox_ports::publish::{PublishErrorKind, Publisher};
use queuebox_rabbitmq::RabbitmqPublisher;
use std::sync::Arc;
use std::time::Duration;
use support::{
    TestClient, TestVhost, amqp_url, broker_address, message, options, unique, wait_for, with_port,
    with_vhost,
};

fn publisher(options: queuebox_rabbitmq::RabbitmqPublisherOptions) -> RabbitmqPublisher {
    RabbitmqPublisher::new(options).unwrap_or_else(|e| panic!("{e}"))
}

/// The user name in `url` (`guest` for the local broker).
fn user_of(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    rest.split_once(':')
        .map_or("guest", |(user, _)| user)
        .to_owned()
}

#[tokio::test]
async fn a_connection_closed_by_the_broker_is_replaced_by_the_next_publish() {
    let Some(base) = amqp_url() else { return };
    let vhost = TestVhost::create(&user_of(&base));
    let url = with_vhost(&base, &vhost.name);
    let exchange = unique("forced");
    let queue = unique("forced-q");
    let publisher = publisher(options(&url, &exchange));
    publisher.connect().await.expect("connects");
    let client = TestClient::connect(&url).await;
    client
        .bind_queue(&queue, &exchange, "#", FieldTable::default())
        .await;
    publisher
        .publish(&message("before.close"))
        .await
        .expect("confirmed");
    assert_eq!(
        client.next_message(&queue).await.routing_key,
        "before.close"
    );

    // The broker closes every connection of the vhost, the test client's too.
    vhost.close_connections();
    wait_for("the broker to drop the connections", || async {
        (vhost.connections() == 0).then_some(())
    })
    .await;

    publisher
        .publish(&message("after.close"))
        .await
        .expect("the next publish reconnects and is confirmed");
    let client = TestClient::connect(&url).await;
    assert_eq!(client.next_message(&queue).await.routing_key, "after.close");
    client.clean(&[&exchange], &[&queue]).await;
}

#[tokio::test]
async fn a_publish_whose_connection_dies_before_the_confirm_is_unreachable_and_the_next_reconnects()
{
    let Some(url) = amqp_url() else { return };
    let exchange = unique("cut");
    let queue = unique("cut-q");
    let client = TestClient::connect(&url).await;
    client
        .declare_exchange(&exchange, ExchangeKind::Topic)
        .await;
    client
        .bind_queue(&queue, &exchange, "#", FieldTable::default())
        .await;
    let proxy = FaultProxy::start(broker_address(&url)).await;
    let mut options = options(&with_port(&url, proxy.port()), &exchange);
    options.url = Secret::new(with_port(&url, proxy.port()));
    options.timeout = Duration::from_secs(30);
    let publisher = Arc::new(publisher(options));
    publisher
        .connect()
        .await
        .expect("connects through the proxy");

    // The broker's answers are held back, so the publish waits for its confirm...
    proxy.hold();
    let sent_before = proxy.upstream_bytes();
    let in_flight = tokio::spawn({
        let publisher = Arc::clone(&publisher);
        async move { publisher.publish(&message("in.flight")).await }
    });
    wait_for("the publish to reach the broker", || async {
        (proxy.upstream_bytes() > sent_before).then_some(())
    })
    .await;
    // ...until the connection is cut under it.
    proxy.cut();
    let outcome = tokio::time::timeout(Duration::from_secs(10), in_flight)
        .await
        .expect("the publish ends well before its own 30 s timeout")
        .expect("the task does not panic");
    let error = outcome.expect_err("a publish without a confirm is not a success");
    assert_eq!(error.kind, PublishErrorKind::Unreachable, "{error}");

    proxy.release();
    publisher
        .publish(&message("after.cut"))
        .await
        .expect("the next publish reconnects and is confirmed");
    // The cut message may or may not have reached the queue; the one after the cut did.
    let mut keys = Vec::new();
    while keys.last().map(String::as_str) != Some("after.cut") {
        keys.push(client.next_message(&queue).await.routing_key);
    }
    client.clean(&[&exchange], &[&queue]).await;
}

#[tokio::test]
async fn no_confirm_within_the_timeout_is_a_timeout() {
    let Some(url) = amqp_url() else { return };
    let exchange = unique("slow");
    let proxy = FaultProxy::start(broker_address(&url)).await;
    let mut options = options(&with_port(&url, proxy.port()), &exchange);
    options.url = Secret::new(with_port(&url, proxy.port()));
    options.timeout = Duration::from_millis(500);
    let publisher = publisher(options);
    publisher
        .connect()
        .await
        .expect("connects through the proxy");
    proxy.hold();
    let error = publisher
        .publish(&message("t"))
        .await
        .expect_err("the publish must fail");
    assert_eq!(error.kind, PublishErrorKind::Timeout, "{error}");
    assert!(error.reason.contains("500 ms"), "{}", error.reason);
    proxy.release();
    TestClient::connect(&url)
        .await
        .clean(&[&exchange], &[])
        .await;
}

#[tokio::test]
async fn a_channel_closed_over_a_deleted_exchange_is_reopened_and_the_exchange_declared_again() {
    let Some(url) = amqp_url() else { return };
    let exchange = unique("deleted");
    let queue = unique("deleted-q");
    let publisher = publisher(options(&url, &exchange));
    publisher.connect().await.expect("connects");
    let client = TestClient::connect(&url).await;
    client
        .bind_queue(&queue, &exchange, "#", FieldTable::default())
        .await;
    publisher.publish(&message("one")).await.expect("confirmed");

    // Someone deletes the exchange: the broker closes the publisher's channel (404 NOT_FOUND).
    client.clean(&[&exchange], &[]).await;
    let error = publisher
        .publish(&message("two"))
        .await
        .expect_err("the publish must fail");
    assert_eq!(error.kind, PublishErrorKind::Rejected, "{error}");
    assert!(error.reason.contains("NOT_FOUND"), "{}", error.reason);

    // The next publish opens a new channel and declares the exchange again; with the binding
    // restored the message is routed.
    client
        .declare_exchange(&exchange, ExchangeKind::Topic)
        .await;
    client
        .bind_queue(&queue, &exchange, "#", FieldTable::default())
        .await;
    publisher
        .publish(&message("three"))
        .await
        .expect("confirmed on a new channel");
    let mut keys = Vec::new();
    while keys.last().map(String::as_str) != Some("three") {
        keys.push(client.next_message(&queue).await.routing_key);
    }
    assert_eq!(keys.first().map(String::as_str), Some("one"));
    client.clean(&[&exchange], &[&queue]).await;
}

#[tokio::test]
async fn dropping_publish_futures_at_any_point_leaves_the_publisher_usable() {
    let Some(url) = amqp_url() else { return };
    let exchange = unique("dropped");
    let queue = unique("dropped-q");
    let client = TestClient::connect(&url).await;
    client
        .declare_exchange(&exchange, ExchangeKind::Topic)
        .await;
    client
        .bind_queue(&queue, &exchange, "#", FieldTable::default())
        .await;
    // A fresh publisher, so the first drops land inside connecting and declaring, the later
    // ones inside sending and waiting for the confirm.
    let publisher = publisher(options(&url, &exchange));
    for step in 0..40u64 {
        let budget = Duration::from_micros(step * step * 20);
        let _ = tokio::time::timeout(budget, publisher.publish(&message("dropped"))).await;
    }
    publisher
        .publish(&message("kept"))
        .await
        .expect("the publisher still works");
    let mut keys = Vec::new();
    while keys.last().map(String::as_str) != Some("kept") {
        keys.push(client.next_message(&queue).await.routing_key);
        assert!(keys.len() <= 41, "more messages than publishes");
    }
    client.clean(&[&exchange], &[&queue]).await;
}
