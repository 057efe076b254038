//! The Kafka inbox source against the real broker of `QB_TEST_KAFKA_BOOTSTRAP`, with a recording
//! ingest whose outcomes each test scripts: what reaches the pipeline, which offsets the group
//! commits and when, a failed store read again, key order inside a partition, a missing topic,
//! brokers that do not answer, two members of one group, and the stop.

#![allow(clippy::unwrap_used)]

mod support;

use queuebox_application::source::SourceDriver;
use queuebox_conformance::proxy::closed_port;
use queuebox_conformance::recorder::Recorder;
use queuebox_conformance::source::RunningSource;
use queuebox_conformance::wait::wait_for_explained;
use queuebox_kafka::{KafkaSource, KafkaSourceOptions};
use queuebox_ports::health::HealthCheck;
use queuebox_ports::ingest::{IngestOutcome, Rejection};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use support::{bootstrap, create_topic, delete_topics, producer, send, skip, unique, wait_for};

const SOURCE: &str = "orders-log";

/// A recorder answering `script`, then storing; each store takes a moment, so records of
/// different keys overlap.
fn scripted(script: impl IntoIterator<Item = IngestOutcome>) -> Arc<Recorder> {
    Recorder::taking(Duration::from_millis(2), script)
}

fn options(topics: &[&str], group: &str) -> KafkaSourceOptions {
    let mut options = KafkaSourceOptions::new(
        SOURCE,
        bootstrap().unwrap(),
        topics.iter().map(|t| (*t).to_owned()).collect(),
        group,
    );
    options.retry_delay_min = Duration::from_millis(20);
    options.retry_delay_max = Duration::from_millis(100);
    options.probe_interval = Duration::from_millis(500);
    options
}

/// The source on `options` under the driver, storing through `ingest`.
fn start(options: KafkaSourceOptions, ingest: Arc<Recorder>) -> RunningSource {
    let driver = SourceDriver::new(KafkaSource::new(options).unwrap(), ingest);
    RunningSource::spawn(driver.health(), |stop| driver.run(stop))
}

/// The offsets `group` committed for `topic`'s partitions `0..partitions` (-1 for none).
async fn committed(group: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let group = group.to_owned();
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap().unwrap())
            .set("group.id", &group)
            .create()
            .unwrap();
        let mut list = TopicPartitionList::new();
        for partition in 0..partitions {
            list.add_partition(&topic, partition);
        }
        let committed = consumer
            .committed_offsets(list, Duration::from_secs(10))
            .unwrap();
        (0..partitions)
            .map(
                |p| match committed.find_partition(&topic, p).unwrap().offset() {
                    Offset::Offset(o) => o,
                    _ => -1,
                },
            )
            .collect()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_reach_the_pipeline_and_the_offset_is_committed_after_the_store() {
    if skip() {
        return;
    }
    let topic = unique("src");
    let group = unique("group");
    create_topic(&topic, 1, &[]).await;
    let producer = producer();
    send(
        &producer,
        &topic,
        None,
        Some("cust-1"),
        br#"{"id":"a"}"#,
        &[("x-event-type", "order.created")],
    )
    .await;
    send(&producer, &topic, None, None, br#"{"id":"b"}"#, &[]).await;
    let recorder = scripted([]);
    let running = start(options(&[&topic], &group), recorder.clone());
    wait_for("two records", || async {
        (recorder.calls().len() >= 2).then_some(())
    })
    .await;
    let calls = recorder.calls();
    let sources = recorder.sources();
    assert!(sources.iter().all(|s| s == SOURCE), "{sources:?}");
    let first = calls.iter().find(|r| r.body == br#"{"id":"a"}"#).unwrap();
    assert_eq!(first.record_key.as_deref(), Some("cust-1"));
    assert_eq!(
        first.headers,
        vec![("x-event-type".to_owned(), "order.created".to_owned())]
    );
    assert_eq!(first.message_id, None);
    wait_for("the source healthy", || async {
        running.health.check().await.ok()
    })
    .await;
    wait_for("offset 2 committed", || async {
        (committed(&group, &topic, 1).await == [2]).then_some(())
    })
    .await;
    let health = running.health.clone();
    running.stop().await;
    assert_eq!(health.check().await, Err("stopped".to_owned()));
    delete_topics(&[&topic]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_store_is_read_again_and_never_skipped() {
    if skip() {
        return;
    }
    let topic = unique("src-retry");
    let group = unique("group");
    create_topic(&topic, 1, &[]).await;
    let producer = producer();
    for n in 0..5 {
        send(
            &producer,
            &topic,
            None,
            None,
            format!(r#"{{"n":{n}}}"#).as_bytes(),
            &[],
        )
        .await;
    }
    // The third call fails to store; every record is done in the end, the failed one included,
    // and the offset never passes a record before it was stored.
    let recorder = scripted([
        IngestOutcome::Stored {
            id: uuid::Uuid::new_v4(),
        },
        IngestOutcome::Stored {
            id: uuid::Uuid::new_v4(),
        },
        IngestOutcome::Rejected(Rejection::StorageFailed),
    ]);
    let running = start(options(&[&topic], &group), recorder.clone());
    wait_for("offset 5 committed", || async {
        (committed(&group, &topic, 1).await == [5]).then_some(())
    })
    .await;
    let bodies = recorder.bodies();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for body in &bodies {
        *seen.entry(body.clone()).or_default() += 1;
    }
    assert_eq!(seen.len(), 5, "{bodies:?}");
    assert!(
        bodies.len() > 5,
        "the failed record was read again: {bodies:?}"
    );
    running.stop().await;
    delete_topics(&[&topic]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_one_key_are_stored_in_order_and_other_keys_side_by_side() {
    if skip() {
        return;
    }
    let topic = unique("src-order");
    let group = unique("group");
    create_topic(&topic, 1, &[]).await;
    let producer = producer();
    for n in 0..30 {
        for key in ["a", "b", "c"] {
            send(
                &producer,
                &topic,
                Some(0),
                Some(key),
                format!(r#"{{"k":"{key}","n":{n}}}"#).as_bytes(),
                &[],
            )
            .await;
        }
    }
    let recorder = scripted([]);
    let running = start(options(&[&topic], &group), recorder.clone());
    wait_for("90 records", || async {
        (recorder.calls().len() >= 90).then_some(())
    })
    .await;
    for key in ["a", "b", "c"] {
        let order: Vec<String> = recorder
            .calls()
            .iter()
            .filter(|r| r.record_key.as_deref() == Some(key))
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect();
        let expected: Vec<String> = (0..30)
            .map(|n| format!(r#"{{"k":"{key}","n":{n}}}"#))
            .collect();
        assert_eq!(order, expected, "key {key}");
    }
    assert!(
        recorder.most_in_flight() > 1,
        "different keys were stored side by side"
    );
    running.stop().await;
    delete_topics(&[&topic]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_topic_turns_the_health_down_naming_it_until_it_is_created() {
    if skip() {
        return;
    }
    let topic = unique("src-missing");
    let recorder = scripted([]);
    let running = start(options(&[&topic], &unique("group")), recorder.clone());
    let reason = wait_for("the health down naming the topic", || async {
        match running.health.check().await {
            Err(reason) if reason.contains(&topic) => Some(reason),
            _ => None,
        }
    })
    .await;
    assert!(reason.contains("does not exist"), "{reason}");
    assert_eq!(running.health.name(), "kafka.orders-log");
    create_topic(&topic, 1, &[]).await;
    send(&producer(), &topic, None, None, br#"{"id":"late"}"#, &[]).await;
    wait_for("the record of the topic created later", || async {
        (!recorder.calls().is_empty()).then_some(())
    })
    .await;
    wait_for("the source healthy", || async {
        running.health.check().await.ok()
    })
    .await;
    running.stop().await;
    delete_topics(&[&topic]).await;
}

#[tokio::test]
async fn brokers_that_do_not_answer_turn_the_health_down() {
    if skip() {
        return;
    }
    let mut options = options(&["anything"], "group");
    options.connection.bootstrap_servers = format!("127.0.0.1:{}", closed_port());
    let running = start(options, scripted([]));
    let reason = wait_for("the health down", || async {
        running
            .health
            .check()
            .await
            .err()
            .filter(|r| r != queuebox_application::source::NOT_CONSUMING_YET)
    })
    .await;
    assert!(reason.contains("broker"), "{reason}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_of_one_group_share_the_partitions_and_a_stopped_one_commits() {
    if skip() {
        return;
    }
    let topic = unique("src-group");
    let group = unique("group");
    create_topic(&topic, 4, &[]).await;
    let one = scripted([]);
    let two = scripted([]);
    let first = start(options(&[&topic], &group), one.clone());
    let second = start(options(&[&topic], &group), two.clone());
    let producer = producer();
    // Keep producing to every partition until both members have read something.
    let mut n = 0;
    wait_for("both members reading", || {
        n += 1;
        let (producer, topic, one, two) = (&producer, &topic, &one, &two);
        async move {
            send(
                producer,
                topic,
                Some(n % 4),
                None,
                format!(r#"{{"n":{n}}}"#).as_bytes(),
                &[],
            )
            .await;
            (!one.calls().is_empty() && !two.calls().is_empty()).then_some(())
        }
    })
    .await;
    // The record sent in the last round may still be on its way to a member when the condition
    // held: let both finish reading before they stop.
    let read = |one: &Recorder, two: &Recorder| {
        one.calls()
            .into_iter()
            .chain(two.calls())
            .map(|r| r.body)
            .collect::<std::collections::HashSet<Vec<u8>>>()
            .len()
    };
    // 90 s, not the suites' 30: a CI run on the shared machine once timed out here after 30 s
    // while every run alone or with the file took under 11 s, and the cause was not found. A
    // timeout names the records neither member read, so the next one shows where they were.
    wait_for_explained(
        "every record read",
        Duration::from_secs(90),
        || {
            let done = read(&one, &two) >= n as usize;
            async move { done.then_some(()) }
        },
        || {
            let seen: std::collections::HashSet<Vec<u8>> = one
                .calls()
                .into_iter()
                .chain(two.calls())
                .map(|r| r.body)
                .collect();
            let missing: Vec<i32> = (1..=n)
                .filter(|k| !seen.contains(format!(r#"{{"n":{k}}}"#).as_bytes()))
                .collect();
            format!(
                "{} of {n} records read (first member {} calls, second {}); not read, by \
                 number (sent to partition number % 4): {missing:?}",
                seen.len(),
                one.calls().len(),
                two.calls().len()
            )
        },
    )
    .await;
    first.stop().await;
    second.stop().await;
    let offsets = committed(&group, &topic, 4).await;
    // A partition that got no record has no committed offset (-1): it holds nothing to count.
    // With fewer than four rounds some partition got none; one that got records and shows -1
    // still leaves the sum short of n.
    let total: i64 = offsets.iter().map(|offset| (*offset).max(0)).sum();
    assert_eq!(read(&one, &two), n as usize, "every record read");
    assert_eq!(
        total,
        i64::from(n),
        "both members committed what they stored: {offsets:?}"
    );
    // A member of the same group started again reads nothing old.
    let again = scripted([]);
    let third = start(options(&[&topic], &group), again.clone());
    send(&producer, &topic, Some(0), None, br#"{"n":"last"}"#, &[]).await;
    wait_for("the new record", || async {
        (!again.calls().is_empty()).then_some(())
    })
    .await;
    assert_eq!(again.bodies(), vec![r#"{"n":"last"}"#.to_owned()]);
    third.stop().await;
    delete_topics(&[&topic]).await;
}

#[test]
fn settings_are_checked_at_build_time_naming_the_key() {
    let check = |options: KafkaSourceOptions| KafkaSource::new(options).unwrap_err().to_string();
    let base = || KafkaSourceOptions::new(SOURCE, "127.0.0.1:9092", vec!["orders".into()], "g");
    let mut none = base();
    none.topics.clear();
    assert_eq!(check(none), "source `orders-log`: topics names no topic");
    let mut blank = base();
    blank.topics = vec![" ".into()];
    assert!(check(blank).contains("is not a Kafka topic name"));
    let mut group = base();
    group.group_id = " ".into();
    assert_eq!(
        check(group),
        "source `orders-log`: groupId must not be blank"
    );
    let mut zero = base();
    zero.max_poll_records = 0;
    assert_eq!(
        check(zero),
        "source `orders-log`: maxPollRecords must be above 0"
    );
}
