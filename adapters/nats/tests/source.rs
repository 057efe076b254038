//! The NATS inbox source against the real server at `QB_TEST_NATS_URL`, with a recording ingest
//! whose outcomes each test scripts: what reaches the pipeline, when each message is acknowledged
//! or handed back, the durable consumer QueueBox creates, the batch bound, and the stop.

#![allow(clippy::unwrap_used)]

mod support;

use async_nats::HeaderMap;
use queuebox_application::source::SourceDriver;
use queuebox_conformance::recorder::Recorder;
use queuebox_conformance::source::RunningSource;
use queuebox_domain::secret::Secret;
use queuebox_nats::{NatsSource, NatsSourceOptions};
use queuebox_ports::health::HealthCheck;
use queuebox_ports::ingest::{IngestOutcome, Rejection};
use std::sync::Arc;
use std::time::Duration;
use support::{TestClient, nats_url, unique, wait_for};
use tokio::time::Instant;

const SOURCE: &str = "orders-stream";
const DURABLE: &str = "queuebox-test";

/// Options with short waits; a long ack wait, so a redelivery the test sees within it can only
/// come from a negative acknowledgement.
fn options(url: &str, stream: &str) -> NatsSourceOptions {
    let mut options = NatsSourceOptions::new(SOURCE, Secret::new(url), stream, DURABLE);
    options.retry_delay_min = Duration::from_millis(50);
    options.retry_delay_max = Duration::from_millis(250);
    options.nak_delay_min = Duration::from_millis(10);
    options.nak_delay_max = Duration::from_millis(50);
    options.ack_wait = Duration::from_secs(60);
    options
}

/// The source on `options` under the driver, storing through `ingest`.
fn start(options: NatsSourceOptions, ingest: Arc<Recorder>) -> RunningSource {
    let source = NatsSource::new(options).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(source.name(), SOURCE);
    let driver = SourceDriver::new(source, ingest);
    RunningSource::spawn(driver.health(), |stop| driver.run(stop))
}

/// A stream over `<name>.>` and a client to publish to it and read the consumer's counts.
async fn stream(url: &str) -> (TestClient, String) {
    let client = TestClient::connect(url).await;
    let name = unique("src");
    client.stream(&name, &[&format!("{name}.>")], |_| {}).await;
    (client, name)
}

async fn publish(client: &TestClient, subject: String, headers: HeaderMap, body: &[u8]) {
    client
        .jetstream
        .publish_with_headers(subject, headers, body.to_vec().into())
        .await
        .unwrap()
        .await
        .unwrap();
}

/// Waits until the durable consumer has (unacknowledged, undelivered) = `expected`.
async fn wait_backlog(client: &TestClient, stream: &str, expected: (usize, u64)) {
    wait_for(&format!("the consumer backlog {expected:?}"), || async {
        let stream = client.jetstream.get_stream(stream).await.ok()?;
        let info = stream.consumer_info(DURABLE).await.ok()?;
        ((info.num_ack_pending, info.num_pending) == expected).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_reaches_ingest_with_headers_and_msg_id_and_is_acked_after_ingest_returns() {
    let Some(url) = nats_url() else { return };
    let (client, name) = stream(&url).await;
    let ingest = Recorder::gated();
    let mut configured = options(&url, &name);
    configured.filter_subject = Some(format!("{name}.orders.>"));
    let running = start(configured, Arc::clone(&ingest) as _);
    running.wait_up().await;
    assert_eq!(running.health.name(), "nats.orders-stream");

    let mut headers = HeaderMap::new();
    headers.append("x-tenant", "acme");
    headers.append("Nats-Msg-Id", "msg-1");
    publish(&client, format!("{name}.other"), HeaderMap::new(), b"{}").await;
    publish(
        &client,
        format!("{name}.orders.created"),
        headers,
        br#"{"orderId":"o-1"}"#,
    )
    .await;

    ingest.wait_calls(1).await;
    let received = &ingest.calls()[0];
    assert_eq!(
        received.body, br#"{"orderId":"o-1"}"#,
        "the filter subject holds"
    );
    assert_eq!(received.message_id.as_deref(), Some("msg-1"));
    assert!(
        received
            .headers
            .contains(&("x-tenant".to_owned(), "acme".to_owned()))
    );
    assert_eq!(ingest.sources()[0], SOURCE);

    // The consumer QueueBox created: durable, explicit acks, the configured filter and wait.
    let info = client
        .jetstream
        .get_stream(&name)
        .await
        .unwrap()
        .consumer_info(DURABLE)
        .await
        .unwrap();
    assert_eq!(info.config.filter_subject, format!("{name}.orders.>"));
    assert_eq!(info.config.ack_wait, Duration::from_secs(60));
    assert_eq!(info.config.durable_name.as_deref(), Some(DURABLE));

    // While the ingest has not returned, the message is delivered but not acknowledged.
    wait_backlog(&client, &name, (1, 0)).await;
    ingest.open(1);
    wait_backlog(&client, &name, (0, 0)).await;
    running.stop().await;
    assert_eq!(ingest.call_count(), 1);
    client.delete(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_store_is_handed_back_after_the_retry_delay_and_delivered_again_until_it_is_stored()
 {
    let Some(url) = nats_url() else { return };
    let (client, name) = stream(&url).await;
    let ingest = Recorder::answering([
        IngestOutcome::Rejected(Rejection::StorageFailed),
        IngestOutcome::Rejected(Rejection::StorageFailed),
        IngestOutcome::UnknownSource,
    ]);
    let running = start(options(&url, &name), Arc::clone(&ingest) as _);
    running.wait_up().await;
    let started = Instant::now();
    publish(
        &client,
        format!("{name}.x"),
        HeaderMap::new(),
        br#"{"id":"again"}"#,
    )
    .await;
    ingest.wait_calls(4).await;
    wait_backlog(&client, &name, (0, 0)).await;
    // Well within the 60 s ack wait: the negative acknowledgements brought it back, each after
    // the growing retry delay (10 ms, 20 ms, 40 ms), the same rule as every other source kind.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() >= Duration::from_millis(70),
        "three hand-backs each waited the retry delay: {:?}",
        started.elapsed()
    );
    let calls = ingest.calls();
    assert_eq!(calls.len(), 4, "acknowledged after the store, never again");
    assert!(calls.iter().all(|c| c.body == br#"{"id":"again"}"#));
    assert!(running.health.check().await.is_ok());
    running.stop().await;
    client.delete(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_filtered_duplicate_and_other_refusals_are_acknowledged() {
    let Some(url) = nats_url() else { return };
    let (client, name) = stream(&url).await;
    let ingest = Recorder::answering([
        IngestOutcome::StoredDead {
            id: uuid::Uuid::new_v4(),
            reason: "Invalid JSON".to_owned(),
        },
        IngestOutcome::Filtered,
        IngestOutcome::Duplicate,
        IngestOutcome::Rejected(Rejection::InvalidJson),
    ]);
    let running = start(options(&url, &name), Arc::clone(&ingest) as _);
    running.wait_up().await;
    for i in 0..4 {
        publish(
            &client,
            format!("{name}.x"),
            HeaderMap::new(),
            format!("{i}").as_bytes(),
        )
        .await;
    }
    ingest.wait_calls(4).await;
    wait_backlog(&client, &name, (0, 0)).await;
    assert_eq!(ingest.call_count(), 4, "none delivered again");
    running.stop().await;
    client.delete(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_size_bounds_the_messages_in_the_pipeline() {
    let Some(url) = nats_url() else { return };
    let (client, name) = stream(&url).await;
    for i in 0..20 {
        publish(
            &client,
            format!("{name}.x"),
            HeaderMap::new(),
            format!("{i}").as_bytes(),
        )
        .await;
    }
    let ingest = Recorder::gated();
    let mut configured = options(&url, &name);
    configured.batch_size = 5;
    let running = start(configured, Arc::clone(&ingest) as _);
    ingest.wait_calls(5).await;
    // Held at the gate: the server has delivered at least the five (the client may hold another
    // pull's worth in its buffer), yet no sixth message enters the pipeline.
    wait_for("five messages delivered and unacknowledged", || async {
        let stream = client.jetstream.get_stream(&name).await.ok()?;
        let info = stream.consumer_info(DURABLE).await.ok()?;
        (info.num_ack_pending >= 5).then_some(())
    })
    .await;
    assert_eq!(ingest.call_count(), 5);
    ingest.open(20);
    ingest.wait_calls(20).await;
    wait_backlog(&client, &name, (0, 0)).await;
    assert!(ingest.most_in_flight() <= 5);
    running.stop().await;
    client.delete(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stop_lets_in_flight_messages_finish_and_acknowledges_them() {
    let Some(url) = nats_url() else { return };
    let (client, name) = stream(&url).await;
    let ingest = Recorder::gated();
    let mut running = start(options(&url, &name), Arc::clone(&ingest) as _);
    running.wait_up().await;
    for i in 0..3 {
        publish(
            &client,
            format!("{name}.x"),
            HeaderMap::new(),
            format!("{i}").as_bytes(),
        )
        .await;
    }
    ingest.wait_calls(3).await;
    running.request_stop();
    ingest.open(3);
    let health = running.stop().await;
    assert!(health.check().await.is_err(), "down after the stop");
    wait_backlog(&client, &name, (0, 0)).await;
    assert_eq!(ingest.returned(), 3);
    client.delete(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_stream_keeps_the_component_down_naming_it_until_it_exists() {
    let Some(url) = nats_url() else { return };
    let client = TestClient::connect(&url).await;
    let name = unique("late");
    let ingest = Recorder::answering([]);
    let running = start(options(&url, &name), Arc::clone(&ingest) as _);
    let reason = wait_for("the component down naming the stream", || async {
        running
            .health
            .check()
            .await
            .err()
            .filter(|r| r.contains(&name))
    })
    .await;
    assert!(reason.contains("never creates"), "{reason}");
    client.stream(&name, &[&format!("{name}.>")], |_| {}).await;
    running.wait_up().await;
    publish(&client, format!("{name}.x"), HeaderMap::new(), b"{}").await;
    ingest.wait_calls(1).await;
    running.stop().await;
    client.delete(&name).await;
}

#[tokio::test]
async fn bad_settings_are_refused_at_build_naming_the_key() {
    let mut bad = NatsSourceOptions::new(SOURCE, Secret::new("nats://u:pw-9@h:4222"), "a.b", "d");
    let error = NatsSource::new(bad.clone()).unwrap_err().to_string();
    assert!(error.contains("stream `a.b`"), "{error}");
    bad.stream = "ok".to_owned();
    bad.batch_size = 0;
    let error = NatsSource::new(bad).unwrap_err().to_string();
    assert!(error.contains("batchSize"), "{error}");
    assert!(!error.contains("pw-9"), "{error}");
}
