//! The RabbitMQ inbox source against the real broker at `QB_TEST_AMQP_URL`, with a recording
//! ingest whose outcomes each test scripts: what reaches the pipeline, when each delivery is
//! acknowledged or handed back, the missing queue, `declareQueue`, the prefetch bound, a
//! connection the broker closes, and the stop.

#![allow(clippy::unwrap_used)]

mod support;

use lapin::options::{BasicPublishOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel};
use queuebox_application::source::SourceDriver;
use queuebox_conformance::proxy::closed_port;
use queuebox_conformance::recorder::Recorder;
use queuebox_conformance::source::RunningSource;
use queuebox_domain::secret::Secret;
use queuebox_ports::health::HealthCheck;
use queuebox_ports::ingest::{IngestOutcome, Rejection};
use queuebox_rabbitmq::{RabbitmqError, RabbitmqSource, RabbitmqSourceOptions};
use std::sync::Arc;
use std::time::Duration;
use support::{
    TestClient, TestVhost, amqp_url, declare_queue, rabbitmqctl, unique, wait_for, with_vhost,
};

const SOURCE: &str = "orders-queue";

/// Options with short waits, so the tests see reconnections quickly.
fn options(url: &str, queue: &str) -> RabbitmqSourceOptions {
    let mut options = RabbitmqSourceOptions::new(SOURCE, Secret::new(url), queue);
    options.reconnect_delay_min = Duration::from_millis(50);
    options.reconnect_delay_max = Duration::from_millis(250);
    options.requeue_delay_min = Duration::from_millis(10);
    options.requeue_delay_max = Duration::from_millis(50);
    options.setup_timeout = Duration::from_secs(10);
    options
}

/// The source on `options` under the driver, storing through `ingest`.
fn start(options: RabbitmqSourceOptions, ingest: Arc<Recorder>) -> RunningSource {
    let source = RabbitmqSource::new(options).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(source.name(), SOURCE);
    let driver = SourceDriver::new(source, ingest);
    RunningSource::spawn(driver.health(), |stop| driver.run(stop))
}

/// Whether `queue` exists, asked on a channel of its own (a failed passive declare closes it).
async fn queue_exists(client: &TestClient, queue: &str) -> bool {
    let channel = client.connection.create_channel().await.unwrap();
    channel
        .queue_declare(
            ShortString::from(queue),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .is_ok()
}

/// Publishes `body` straight to `queue` (the default exchange).
async fn publish(channel: &Channel, queue: &str, properties: BasicProperties, body: &[u8]) {
    channel
        .basic_publish(
            ShortString::from(""),
            ShortString::from(queue),
            BasicPublishOptions::default(),
            body,
            properties,
        )
        .await
        .unwrap()
        .await
        .unwrap();
}

async fn publish_json(channel: &Channel, queue: &str, id: &str) {
    let properties = BasicProperties::default().with_message_id(ShortString::from(id));
    publish(
        channel,
        queue,
        properties,
        format!(r#"{{"id":"{id}"}}"#).as_bytes(),
    )
    .await;
}

/// `(ready, unacknowledged)` of `queue` in `vhost`, as the broker counts them.
fn counts(vhost: &str, queue: &str) -> Option<(u64, u64)> {
    let listing = rabbitmqctl(&[
        "-q",
        "--no-table-headers",
        "list_queues",
        "-p",
        vhost,
        "name",
        "messages_ready",
        "messages_unacknowledged",
    ]);
    listing.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        if fields.next()? != queue {
            return None;
        }
        Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
    })
}

async fn wait_counts(vhost: &str, queue: &str, expected: (u64, u64)) {
    wait_for(
        &format!("queue {queue} to hold (ready, unacked) = {expected:?}"),
        || async { (counts(vhost, queue) == Some(expected)).then_some(()) },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_reaches_ingest_with_body_headers_and_message_id_and_is_acked_after_ingest_returns()
 {
    let Some(url) = amqp_url() else { return };
    let queue = unique("src-basic");
    let client = TestClient::connect(&url).await;
    declare_queue(&client.channel, &queue).await;
    let ingest = Recorder::gated();
    let running = start(options(&url, &queue), Arc::clone(&ingest) as _);
    running.wait_up().await;

    let mut headers = FieldTable::default();
    headers.insert(
        ShortString::from("x-tenant"),
        AMQPValue::LongString(LongString::from("acme")),
    );
    headers.insert(ShortString::from("x-count"), AMQPValue::LongInt(42));
    headers.insert(ShortString::from("x-flag"), AMQPValue::Boolean(true));
    let properties = BasicProperties::default()
        .with_message_id(ShortString::from("msg-1"))
        .with_headers(headers);
    publish(&client.channel, &queue, properties, br#"{"orderId":"o-1"}"#).await;

    ingest.wait_calls(1).await;
    let received = &ingest.calls()[0];
    assert_eq!(received.body, br#"{"orderId":"o-1"}"#);
    assert_eq!(received.message_id.as_deref(), Some("msg-1"));
    assert_eq!(received.record_key, None);
    let header = |name: &str| {
        received
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(header("x-tenant"), Some("acme"));
    assert_eq!(header("x-count"), Some("42"));
    assert_eq!(header("x-flag"), Some("true"));
    assert_eq!(
        ingest.sources()[0],
        SOURCE,
        "the ingest gets the source name"
    );

    // While the ingest has not returned, the message is delivered but not acknowledged.
    wait_counts("/", &queue, (0, 1)).await;
    ingest.open(1);
    wait_counts("/", &queue, (0, 0)).await;
    assert_eq!(ingest.returned(), 1);

    running.stop().await;
    // Acknowledged, so a stopped consumer does not leave it behind.
    assert_eq!(client.depth(&queue).await, 0);
    assert_eq!(ingest.call_count(), 1);
    client.clean(&[], &[&queue]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_store_is_handed_back_and_delivered_again_until_it_is_stored() {
    let Some(url) = amqp_url() else { return };
    let queue = unique("src-requeue");
    let client = TestClient::connect(&url).await;
    declare_queue(&client.channel, &queue).await;
    let ingest = Recorder::answering([
        IngestOutcome::Rejected(Rejection::StorageFailed),
        IngestOutcome::Rejected(Rejection::StorageFailed),
        IngestOutcome::UnknownSource,
    ]);
    let running = start(options(&url, &queue), Arc::clone(&ingest) as _);
    running.wait_up().await;
    publish_json(&client.channel, &queue, "again").await;

    // Three refusals, then the scripted default: stored.
    ingest.wait_calls(4).await;
    wait_counts("/", &queue, (0, 0)).await;
    let calls = ingest.calls();
    assert_eq!(calls.len(), 4, "acknowledged after the store, never again");
    for call in &calls {
        assert_eq!(call.message_id.as_deref(), Some("again"));
        assert_eq!(call.body, br#"{"id":"again"}"#);
    }
    assert!(
        running.health.check().await.is_ok(),
        "a failing store leaves the broker link up"
    );
    running.stop().await;
    assert_eq!(client.depth(&queue).await, 0);
    client.clean(&[], &[&queue]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_dead_filtered_duplicate_and_other_refusals_are_acknowledged() {
    let Some(url) = amqp_url() else { return };
    let queue = unique("src-ack");
    let client = TestClient::connect(&url).await;
    declare_queue(&client.channel, &queue).await;
    let ingest = Recorder::answering([
        IngestOutcome::StoredDead {
            id: uuid::Uuid::new_v4(),
            reason: "Invalid JSON".into(),
        },
        IngestOutcome::Filtered,
        IngestOutcome::Duplicate,
        IngestOutcome::Rejected(Rejection::InvalidJson),
    ]);
    let mut options = options(&url, &queue);
    // One at a time, so the script meets the messages in order.
    options.prefetch_count = 1;
    let running = start(options, Arc::clone(&ingest) as _);
    running.wait_up().await;
    for id in ["dead", "filtered", "duplicate", "poison"] {
        publish_json(&client.channel, &queue, id).await;
    }
    ingest.wait_calls(4).await;
    wait_counts("/", &queue, (0, 0)).await;
    running.stop().await;
    let ids: Vec<_> = ingest
        .calls()
        .into_iter()
        .map(|c| c.message_id.unwrap_or_default())
        .collect();
    assert_eq!(
        ids,
        ["dead", "filtered", "duplicate", "poison"],
        "each once"
    );
    assert_eq!(client.depth(&queue).await, 0);
    client.clean(&[], &[&queue]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_queue_turns_health_down_naming_it_and_creating_the_queue_starts_consuming() {
    let Some(url) = amqp_url() else { return };
    let queue = unique("src-missing");
    let client = TestClient::connect(&url).await;
    let ingest = Recorder::answering([]);
    let running = start(options(&url, &queue), Arc::clone(&ingest) as _);

    let reason = wait_for("the health to name the missing queue", || async {
        match running.health.check().await {
            Err(reason) if reason.contains(&queue) => Some(reason),
            _ => None,
        }
    })
    .await;
    assert_eq!(
        reason,
        format!(
            "queue `{queue}` does not exist on the broker; create it or set declareQueue: true"
        )
    );
    assert_eq!(running.health.name(), format!("rabbitmq.{SOURCE}"));
    assert!(
        !queue_exists(&client, &queue).await,
        "without declareQueue the source never creates the queue"
    );

    declare_queue(&client.channel, &queue).await;
    running.wait_up().await;
    publish_json(&client.channel, &queue, "late").await;
    ingest.wait_calls(1).await;
    wait_counts("/", &queue, (0, 0)).await;
    running.stop().await;
    client.clean(&[], &[&queue]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_stopped_while_its_queue_is_missing_returns() {
    let Some(url) = amqp_url() else { return };
    let queue = unique("src-missing-stop");
    let ingest = Recorder::answering([]);
    let running = start(options(&url, &queue), Arc::clone(&ingest) as _);
    wait_for("the health to name the missing queue", || async {
        running
            .health
            .check()
            .await
            .err()
            .filter(|r| r.contains(&queue))
    })
    .await;
    let health = running.stop().await;
    assert_eq!(health.check().await, Err("stopped".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declare_queue_creates_a_durable_queue() {
    let Some(url) = amqp_url() else { return };
    let queue = unique("src-declare");
    let client = TestClient::connect(&url).await;
    let ingest = Recorder::answering([]);
    let mut options = options(&url, &queue);
    options.declare_queue = true;
    let running = start(options, Arc::clone(&ingest) as _);
    running.wait_up().await;
    assert!(queue_exists(&client, &queue).await);
    let durable = rabbitmqctl(&["-q", "--no-table-headers", "list_queues", "name", "durable"]);
    assert!(
        durable
            .lines()
            .any(|line| line.split_whitespace().collect::<Vec<_>>() == [queue.as_str(), "true"]),
        "the declared queue is durable: {durable}"
    );
    publish_json(&client.channel, &queue, "declared").await;
    ingest.wait_calls(1).await;
    wait_counts("/", &queue, (0, 0)).await;
    running.stop().await;
    client.clean(&[], &[&queue]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prefetch_count_bounds_the_deliveries_in_the_pipeline() {
    let Some(url) = amqp_url() else { return };
    let queue = unique("src-prefetch");
    let client = TestClient::connect(&url).await;
    declare_queue(&client.channel, &queue).await;
    let ingest = Recorder::gated();
    let mut options = options(&url, &queue);
    options.prefetch_count = 3;
    let running = start(options, Arc::clone(&ingest) as _);
    running.wait_up().await;
    for n in 0..10 {
        publish_json(&client.channel, &queue, &format!("m-{n}")).await;
    }
    // Three deliveries are in the pipeline at once, concurrently; the rest wait on the broker.
    ingest.wait_calls(3).await;
    wait_counts("/", &queue, (7, 3)).await;
    assert_eq!(ingest.call_count(), 3);
    assert_eq!(ingest.in_flight(), 3);

    ingest.open(10);
    ingest.wait_calls(10).await;
    wait_counts("/", &queue, (0, 0)).await;
    assert_eq!(ingest.most_in_flight(), 3);
    running.stop().await;
    client.clean(&[], &[&queue]).await;
}

/// The user name in `url` (`guest` for the local broker).
fn user_of(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    url[start..]
        .split_once(':')
        .map_or("guest", |(user, _)| user)
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_by_the_broker_is_reopened_and_consuming_goes_on() {
    let Some(base) = amqp_url() else { return };
    let vhost = TestVhost::create(&user_of(&base));
    let url = with_vhost(&base, &vhost.name);
    let queue = unique("src-forced");
    let client = TestClient::connect(&url).await;
    declare_queue(&client.channel, &queue).await;
    let ingest = Recorder::answering([]);
    let mut options = options(&url, &queue);
    // Long enough for the test to see the component down between the close and the reconnect.
    options.reconnect_delay_min = Duration::from_millis(1500);
    options.reconnect_delay_max = Duration::from_millis(1500);
    let running = start(options, Arc::clone(&ingest) as _);
    running.wait_up().await;
    publish_json(&client.channel, &queue, "before").await;
    ingest.wait_calls(1).await;

    // The broker closes every connection of the vhost, the test client's too.
    vhost.close_connections();
    let reason = wait_for("the health to go down", || async {
        running.health.check().await.err()
    })
    .await;
    assert!(!reason.contains("guest:"), "no credentials: {reason}");
    running.wait_up().await;

    let client = TestClient::connect(&url).await;
    publish_json(&client.channel, &queue, "after").await;
    ingest.wait_calls(2).await;
    wait_counts(&vhost.name, &queue, (0, 0)).await;
    let ids: Vec<_> = ingest
        .calls()
        .into_iter()
        .map(|c| c.message_id.unwrap_or_default())
        .collect();
    assert_eq!(ids, ["before", "after"]);
    running.stop().await;
    client.clean(&[], &[&queue]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stop_lets_in_flight_messages_finish_and_acknowledges_them() {
    let Some(url) = amqp_url() else { return };
    let queue = unique("src-stop");
    let client = TestClient::connect(&url).await;
    declare_queue(&client.channel, &queue).await;
    let ingest = Recorder::gated();
    let mut running = start(options(&url, &queue), Arc::clone(&ingest) as _);
    running.wait_up().await;
    publish_json(&client.channel, &queue, "one").await;
    publish_json(&client.channel, &queue, "two").await;
    ingest.wait_calls(2).await;
    wait_counts("/", &queue, (0, 2)).await;

    // The stop arrives while both are being stored; they finish after it.
    running.request_stop();
    wait_for("the source to start stopping", || async {
        (running.health.check().await == Err("stopping".to_owned())).then_some(())
    })
    .await;
    ingest.open(2);
    let health = running.stop().await;
    assert_eq!(health.check().await, Err("stopped".to_owned()));
    assert_eq!(ingest.returned(), 2);
    // Both were acknowledged before the channel closed: nothing comes back to the queue.
    wait_counts("/", &queue, (0, 0)).await;
    assert_eq!(client.depth(&queue).await, 0);
    client.clean(&[], &[&queue]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_still_being_stored_at_the_drain_bound_goes_back_to_the_queue() {
    let Some(url) = amqp_url() else { return };
    let queue = unique("src-drain");
    let client = TestClient::connect(&url).await;
    declare_queue(&client.channel, &queue).await;
    let ingest = Recorder::gated();
    let mut options = options(&url, &queue);
    options.drain_timeout = Duration::from_millis(200);
    let running = start(options, Arc::clone(&ingest) as _);
    running.wait_up().await;
    publish_json(&client.channel, &queue, "stuck").await;
    ingest.wait_calls(1).await;
    running.stop().await;
    assert_eq!(ingest.returned(), 0);
    wait_counts("/", &queue, (1, 0)).await;
    client.clean(&[], &[&queue]).await;
}

#[test]
fn new_refuses_unusable_settings_without_printing_the_password() {
    let error = |options: RabbitmqSourceOptions| -> RabbitmqError {
        RabbitmqSource::new(options).expect_err("refused")
    };
    let bad_url = error(RabbitmqSourceOptions::new(
        SOURCE,
        Secret::new("http://user:hunter2-pw@host/"),
        "q",
    ));
    let text = bad_url.to_string();
    assert!(
        text.starts_with("source `orders-queue`: connectionUrl"),
        "{text}"
    );
    assert!(!text.contains("hunter2-pw"), "{text}");

    let url = Secret::new("amqp://user:hunter2-pw@127.0.0.1:5672/%2f");
    let mut zero = RabbitmqSourceOptions::new(SOURCE, url.clone(), "q");
    zero.prefetch_count = 0;
    assert!(
        error(zero)
            .to_string()
            .contains("prefetchCount must be at least 1")
    );
    let empty = RabbitmqSourceOptions::new(SOURCE, url.clone(), "");
    assert!(error(empty).to_string().contains("queueName"));

    let options = RabbitmqSourceOptions::new(SOURCE, url, "q");
    assert_eq!(options.prefetch_count, 10);
    assert!(!options.declare_queue);
    let source = RabbitmqSource::new(options).expect("valid");
    assert!(!format!("{source:?}").contains("hunter2-pw"));
}

#[tokio::test]
async fn a_broker_that_cannot_be_reached_keeps_the_component_down_without_the_password() {
    let port = closed_port();
    let url = format!("amqp://user:hunter2-pw@127.0.0.1:{port}/%2f");
    let ingest = Recorder::answering([]);
    let running = start(options(&url, "q"), Arc::clone(&ingest) as _);
    let reason = wait_for("a connection failure", || async {
        running
            .health
            .check()
            .await
            .err()
            .filter(|r| r.contains("connecting"))
    })
    .await;
    assert!(reason.contains(&format!("127.0.0.1:{port}")), "{reason}");
    assert!(!reason.contains("hunter2-pw"), "{reason}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_deleted_while_consuming_turns_the_component_down_until_it_is_back() {
    let Some(url) = amqp_url() else { return };
    let queue = unique("src-deleted");
    let client = TestClient::connect(&url).await;
    declare_queue(&client.channel, &queue).await;
    let ingest = Recorder::answering([]);
    let running = start(options(&url, &queue), Arc::clone(&ingest) as _);
    running.wait_up().await;

    client.clean(&[], &[&queue]).await;
    wait_for("the health to name the deleted queue", || async {
        running
            .health
            .check()
            .await
            .err()
            .filter(|r| r.contains(&format!("queue `{queue}` does not exist")))
    })
    .await;

    declare_queue(&client.channel, &queue).await;
    running.wait_up().await;
    publish_json(&client.channel, &queue, "back").await;
    ingest.wait_calls(1).await;
    wait_counts("/", &queue, (0, 0)).await;
    running.stop().await;
    client.clean(&[], &[&queue]).await;
}
