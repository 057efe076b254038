//! The Redis source run by the application's source driver against the real server of
//! `QB_TEST_REDIS_URL` (skipped, with a message, when it is unset): entries stored once and
//! acknowledged after the store, a failed store handed back and stored later without counting a
//! delivery, a dead consumer's entries claimed after `claimIdleMs`, an entry delivered too often
//! dead-lettered, and the health component down naming the cause and up again.

#![allow(clippy::unwrap_used)]

mod support;

use queuebox_application::source::SourceDriver;
use queuebox_conformance::proxy::closed_port;
use queuebox_conformance::recorder::Recorder;
use queuebox_conformance::source::RunningSource;
use queuebox_domain::secret::Secret;
use queuebox_ports::health::HealthCheck;
use queuebox_ports::ingest::{IngestOutcome, Rejection};
use queuebox_redis::{RedisSource, RedisSourceOptions};
use std::sync::Arc;
use std::time::Duration;
use support::{add, connection, entries, pending, redis_url, unique, wait_for};

fn options(url: &str, stream: &str, consumer: &str) -> RedisSourceOptions {
    let mut options = RedisSourceOptions::new("orders", Secret::new(url), stream, "qb", consumer);
    options.block = Duration::from_millis(200);
    options.store_retry_min = Duration::from_millis(50);
    options.store_retry_max = Duration::from_millis(200);
    options
}

/// The source on `options` under the driver, storing through `ingest`.
fn start(options: RedisSourceOptions, ingest: Arc<Recorder>) -> RunningSource {
    let driver = SourceDriver::new(RedisSource::new(options).unwrap(), ingest);
    RunningSource::spawn(driver.health(), |stop| driver.run(stop))
}

#[tokio::test]
async fn entries_are_stored_once_and_acknowledged_after_the_store() {
    let Some(url) = redis_url() else { return };
    let mut redis = connection(&url).await;
    let stream = unique("src");
    let first = add(&mut redis, &stream, "m-1", r#"{"id":"a"}"#).await;
    let recorder = Recorder::answering([]);
    let running = start(options(&url, &stream, "c1"), Arc::clone(&recorder));
    add(&mut redis, &stream, "m-2", r#"{"id":"b"}"#).await;
    wait_for("both entries stored", || async {
        (recorder.table().keys() == ["a", "b"]).then_some(())
    })
    .await;
    wait_for("both entries acknowledged", || async {
        (pending(&mut redis.clone(), &stream, "qb").await == 0).then_some(())
    })
    .await;
    let calls = recorder.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].body, br#"{"id":"a"}"#);
    assert_eq!(calls[0].message_id.as_deref(), Some(first.as_str()));
    assert_eq!(
        calls[0].headers,
        [("x-message-id".to_owned(), "m-1".to_owned())]
    );
    assert_eq!(running.health.check().await, Ok(()), "up while consuming");
    running.stop().await;
}

#[tokio::test]
async fn a_failed_store_is_handed_back_and_stored_later_without_counting_a_delivery() {
    let Some(url) = redis_url() else { return };
    let mut redis = connection(&url).await;
    let stream = unique("src");
    add(&mut redis, &stream, "m-1", r#"{"id":"a"}"#).await;
    let recorder = Recorder::answering(vec![IngestOutcome::Rejected(Rejection::StorageFailed); 3]);
    let mut options = options(&url, &stream, "c1");
    options.max_deliveries = 1;
    let running = start(options, Arc::clone(&recorder));
    wait_for("the entry stored after three failures", || async {
        (recorder.table().keys() == ["a"]).then_some(())
    })
    .await;
    assert_eq!(recorder.call_count(), 4);
    wait_for("the entry acknowledged", || async {
        (pending(&mut redis.clone(), &stream, "qb").await == 0).then_some(())
    })
    .await;
    // Three hand-backs did not count as deliveries: nothing was dead-lettered.
    assert!(
        entries(&mut redis, &format!("{stream}:dead"))
            .await
            .is_empty()
    );
    running.stop().await;
}

/// Reads `count` entries as consumer `name` of group `qb` (created at the stream's start) and
/// never acknowledges them: a consumer that died.
async fn dead_consumer_reads(
    redis: &mut redis::aio::MultiplexedConnection,
    stream: &str,
    name: &str,
) {
    let _: redis::Value = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg(stream)
        .arg("qb")
        .arg("0")
        .arg("MKSTREAM")
        .query_async(redis)
        .await
        .unwrap();
    let _: redis::Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("qb")
        .arg(name)
        .arg("COUNT")
        .arg(100)
        .arg("STREAMS")
        .arg(stream)
        .arg(">")
        .query_async(redis)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_dead_consumers_entries_are_claimed_after_the_idle_time() {
    let Some(url) = redis_url() else { return };
    let mut redis = connection(&url).await;
    let stream = unique("src");
    add(&mut redis, &stream, "m-1", r#"{"id":"a"}"#).await;
    add(&mut redis, &stream, "m-2", r#"{"id":"b"}"#).await;
    dead_consumer_reads(&mut redis, &stream, "gone").await;
    assert_eq!(pending(&mut redis, &stream, "qb").await, 2);
    let recorder = Recorder::answering([]);
    let mut options = options(&url, &stream, "alive");
    options.claim_idle = Duration::from_millis(500);
    let started = tokio::time::Instant::now();
    let running = start(options, Arc::clone(&recorder));
    wait_for("the dead consumer's entries stored", || async {
        (recorder.table().keys() == ["a", "b"]).then_some(())
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "claimed after {:?}, before the entries were idle long enough",
        started.elapsed()
    );
    wait_for("the claimed entries acknowledged", || async {
        (pending(&mut redis.clone(), &stream, "qb").await == 0).then_some(())
    })
    .await;
    running.stop().await;
}

#[tokio::test]
async fn an_entry_delivered_too_often_goes_to_the_dead_letter_stream() {
    let Some(url) = redis_url() else { return };
    let mut redis = connection(&url).await;
    let stream = unique("src");
    let poison = add(&mut redis, &stream, "m-poison", r#"{"id":"p"}"#).await;
    dead_consumer_reads(&mut redis, &stream, "crashed-1").await;
    // Two more consumers took it and died: three deliveries in all.
    for name in ["crashed-2", "crashed-3"] {
        let _: redis::Value = redis::cmd("XCLAIM")
            .arg(&stream)
            .arg("qb")
            .arg(name)
            .arg(0)
            .arg(&poison)
            .query_async(&mut redis)
            .await
            .unwrap();
    }
    add(&mut redis, &stream, "m-ok", r#"{"id":"o"}"#).await;
    let recorder = Recorder::answering([]);
    let mut options = options(&url, &stream, "alive");
    options.claim_idle = Duration::from_millis(100);
    options.max_deliveries = 3;
    let running = start(options, Arc::clone(&recorder));
    let dead_stream = format!("{stream}:dead");
    let dead = wait_for("the poison entry dead-lettered", || async {
        let dead = entries(&mut redis.clone(), &dead_stream).await;
        (!dead.is_empty()).then_some(dead)
    })
    .await;
    wait_for("the good entry stored", || async {
        (recorder.table().keys() == ["o"]).then_some(())
    })
    .await;
    assert_eq!(dead.len(), 1);
    let fields = &dead[0].1;
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(field("x-message-id"), Some("m-poison"));
    assert_eq!(field("payload"), Some(r#"{"id":"p"}"#));
    assert_eq!(field("x-dead-stream"), Some(stream.as_str()));
    assert_eq!(field("x-dead-entry-id"), Some(poison.as_str()));
    assert_eq!(field("x-dead-deliveries"), Some("4"));
    wait_for("nothing left pending", || async {
        (pending(&mut redis.clone(), &stream, "qb").await == 0).then_some(())
    })
    .await;
    assert!(!recorder.table().keys().contains(&"p".to_owned()));
    running.stop().await;
}

#[tokio::test]
async fn health_names_an_unreachable_server_and_the_stop_ends_at_stopped() {
    let Some(_) = redis_url() else { return };
    let url = format!("redis://:s3cret-pw@127.0.0.1:{}", closed_port());
    let recorder = Recorder::answering([]);
    let running = start(options(&url, "s", "c"), recorder);
    let reason = wait_for("the health to name the cause", || async {
        let reason = running.health.check().await.err().unwrap_or_default();
        reason.contains("connecting to Redis").then_some(reason)
    })
    .await;
    assert!(!reason.contains("s3cret-pw"), "{reason}");
    let health = running.health.clone();
    running.stop().await;
    assert_eq!(health.check().await, Err("stopped".to_owned()));
}
