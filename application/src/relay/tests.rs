//! Unit tests of the relay loop with a mocked store: the outbox row each inbox row becomes, the dead
//! letter of a row without a topic, and the counting of a lost fence.

use super::*;
use crate::lifecycle::Workers;
use crate::test_metrics::{Sample, samples};
use async_trait::async_trait;
use metrics_util::debugging::{DebuggingRecorder, Snapshotter};
use mockall::mock;
use queuebox_domain::template::Template;
use queuebox_ports::inbox::{ForwardedRow, RelayRow};
use queuebox_ports::outbox::StoreError;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use uuid::Uuid;

mock! {
    Store {}
    #[async_trait]
    impl RelayStore for Store {
        async fn claim(&self, limit: u32, lease: Duration) -> Result<Vec<RelayRow>, StoreError>;
        async fn forward(&self, rows: &[ForwardedRow]) -> Result<Vec<bool>, StoreError>;
        async fn mark_dead(&self, id: Uuid, claim_token: Uuid, reason: &str) -> Result<bool, StoreError>;
        async fn reclaim_expired(&self) -> Result<u64, StoreError>;
        async fn oldest_pending_age(&self) -> Result<Duration, StoreError>;
    }
}

fn options() -> RelayOptions {
    RelayOptions {
        batch_size: 10,
        poll_interval: Duration::from_millis(10),
        lease: Duration::from_secs(30),
        pending_gauge_interval: Duration::from_secs(60),
        max_attempts: 7,
    }
}

fn topics() -> SourceTopics {
    let parse = |text: &str| Template::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    SourceTopics::new([
        ("stripe".to_owned(), parse("stripe.{{ eventType }}")),
        ("queue".to_owned(), parse("{{ eventType }}")),
    ])
}

fn row(source: &str, event_type: Option<&str>) -> RelayRow {
    RelayRow {
        id: Uuid::new_v4(),
        claim_token: Uuid::new_v4(),
        source: source.to_owned(),
        idempotency_key: format!("key-{}", Uuid::new_v4().simple()),
        aggregate_id: Some("customer-1".to_owned()),
        event_type: event_type.map(str::to_owned),
        payload: r#"{"amount":5}"#.to_owned(),
        headers: vec![],
        correlation_id: Some("corr-1".to_owned()),
    }
}

/// What the mocked store saw.
#[derive(Default)]
struct Seen {
    forwarded: Vec<ForwardedRow>,
    dead: Vec<(Uuid, Uuid, String)>,
}

/// A store whose first claim returns `rows` and later claims nothing; `fence(row)` decides whether a
/// forward applies.
fn store_with(
    rows: Vec<RelayRow>,
    seen: Arc<Mutex<Seen>>,
    fence: impl Fn(&ForwardedRow) -> bool + Send + Sync + 'static,
) -> MockStore {
    let mut store = MockStore::new();
    let pending = Mutex::new(Some(rows));
    store
        .expect_claim()
        .returning(move |_, _| Ok(pending.lock().expect("lock").take().unwrap_or_default()));
    let forwarded = Arc::clone(&seen);
    store.expect_forward().returning(move |rows| {
        forwarded
            .lock()
            .expect("lock")
            .forwarded
            .extend_from_slice(rows);
        Ok(rows.iter().map(&fence).collect())
    });
    store
        .expect_mark_dead()
        .returning(move |id, token, reason| {
            seen.lock()
                .expect("lock")
                .dead
                .push((id, token, reason.to_owned()));
            Ok(true)
        });
    store.expect_reclaim_expired().returning(|| Ok(0));
    store
        .expect_oldest_pending_age()
        .returning(|| Ok(Duration::from_secs(3)));
    store
}

/// A store whose n-th claim (counting from 0 in `claims`) returns `batch(n, limit)`, and whose forwards
/// all apply.
fn scripted_store(
    claims: Arc<AtomicUsize>,
    batch: impl Fn(usize, u32) -> Vec<RelayRow> + Send + Sync + 'static,
) -> MockStore {
    let mut store = MockStore::new();
    store
        .expect_claim()
        .returning(move |limit, _| Ok(batch(claims.fetch_add(1, Ordering::SeqCst), limit)));
    store
        .expect_forward()
        .returning(|rows| Ok(vec![true; rows.len()]));
    store.expect_reclaim_expired().returning(|| Ok(0));
    store
        .expect_oldest_pending_age()
        .returning(|| Ok(Duration::ZERO));
    store
}

/// Runs a relay over `store` until it made `count` claims, with a poll interval longer than
/// `run_until`'s deadline: any wait for the poll interval fails the test.
async fn run_until_claims_without_a_poll_wait(
    store: MockStore,
    claims: &AtomicUsize,
    count: usize,
) {
    let mut options = options();
    options.poll_interval = Duration::from_secs(60);
    let relay = Relay::new(Arc::new(store), topics(), options);
    run_until(relay, || claims.load(Ordering::SeqCst) >= count).await;
}

/// A relay whose metrics record into a recorder of the test's own.
fn relay(store: MockStore) -> (Relay, Snapshotter) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let metrics = metrics::with_local_recorder(&recorder, RelayMetrics::new);
    let relay = Relay {
        metrics: Arc::new(metrics),
        ..Relay::new(Arc::new(store), topics(), options())
    };
    (relay, snapshotter)
}

fn value(samples: &[Sample], name: &str, label: Option<(&str, &str)>) -> f64 {
    samples
        .iter()
        .find(|(n, labels, _)| {
            n == name && label.is_none_or(|(k, v)| labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .map(|(_, _, value)| *value)
        .unwrap_or(0.0)
}

/// Runs the relay until `done` holds, then stops it.
async fn run_until(relay: Relay, mut done: impl FnMut() -> bool) {
    let mut workers = Workers::new();
    workers.spawn("inbox-relay", move |stop| relay.run(stop));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for the relay"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
}

#[tokio::test]
async fn a_row_becomes_its_outbox_row_and_the_relay_headers_win_in_any_letter_case() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut inbox = row("stripe", Some("charge.paid"));
    inbox.headers = vec![
        ("X-INBOX-ID".to_owned(), "forged".to_owned()),
        ("Content-Language".to_owned(), "en".to_owned()),
        ("x-Source".to_owned(), "forged".to_owned()),
        ("X-Idempotency-KEY".to_owned(), "forged".to_owned()),
        ("x-correlation-id".to_owned(), "forged".to_owned()),
        ("X-Custom".to_owned(), "kept".to_owned()),
    ];
    let store = store_with(vec![inbox.clone()], Arc::clone(&seen), |_| true);
    let (relay, snapshotter) = relay(store);
    run_until(relay, || !seen.lock().expect("lock").forwarded.is_empty()).await;

    let samples = samples(&snapshotter);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.forwarded.len(), 1);
    let out = &seen.forwarded[0];
    assert_eq!(out.inbox_id, inbox.id);
    assert_eq!(out.claim_token, inbox.claim_token);
    assert_eq!(out.topic, "stripe.charge.paid");
    assert_eq!(out.key.as_deref(), Some("customer-1"));
    assert_eq!(out.payload, inbox.payload);
    assert_eq!(out.max_attempts, 7);
    let expected: Vec<(String, String)> = [
        ("Content-Language", "en".to_owned()),
        ("X-Custom", "kept".to_owned()),
        ("x-inbox-id", inbox.id.to_string()),
        ("x-source", "stripe".to_owned()),
        ("x-idempotency-key", inbox.idempotency_key.clone()),
        ("X-Correlation-Id", "corr-1".to_owned()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    assert_eq!(out.headers, expected);
    assert_eq!(
        value(
            &samples,
            "queuebox_inbox_messages_total",
            Some(("status", "forwarded"))
        ),
        1.0
    );
    assert_eq!(
        value(&samples, "queuebox_inbox_oldest_pending_age_seconds", None),
        3.0
    );
}

#[tokio::test]
async fn a_received_correlation_header_is_dropped_when_the_row_has_none() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut inbox = row("stripe", Some("charge.paid"));
    inbox.correlation_id = None;
    inbox.headers = vec![("X-CORRELATION-ID".to_owned(), "forged".to_owned())];
    let store = store_with(vec![inbox], Arc::clone(&seen), |_| true);
    let (relay, _) = relay(store);
    run_until(relay, || !seen.lock().expect("lock").forwarded.is_empty()).await;
    let seen = seen.lock().expect("lock");
    let names: Vec<&str> = seen.forwarded[0]
        .headers
        .iter()
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(names, ["x-inbox-id", "x-source", "x-idempotency-key"]);
}

#[tokio::test]
async fn an_empty_topic_or_an_unknown_source_goes_dead_and_is_not_forwarded() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let no_type = row("queue", None);
    let unknown = row("gone", Some("x"));
    let good = row("stripe", Some("charge.paid"));
    let store = store_with(
        vec![no_type.clone(), unknown.clone(), good.clone()],
        Arc::clone(&seen),
        |_| true,
    );
    let (relay, _) = relay(store);
    run_until(relay, || {
        let seen = seen.lock().expect("lock");
        seen.dead.len() == 2 && !seen.forwarded.is_empty()
    })
    .await;
    let seen = seen.lock().expect("lock");
    assert_eq!(
        seen.forwarded
            .iter()
            .map(|f| f.inbox_id)
            .collect::<Vec<_>>(),
        [good.id]
    );
    let (id, token, reason) = &seen.dead[0];
    assert_eq!((*id, *token), (no_type.id, no_type.claim_token));
    assert!(reason.contains("rendered empty"), "{reason}");
    let (id, _, reason) = &seen.dead[1];
    assert_eq!(*id, unknown.id);
    assert!(reason.contains("gone"), "{reason}");
}

#[tokio::test]
async fn a_lost_fence_is_counted_and_not_reported_as_forwarded() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let kept = row("stripe", Some("a"));
    let lost = row("stripe", Some("b"));
    let lost_id = lost.id;
    let store = store_with(vec![kept, lost], Arc::clone(&seen), move |f| {
        f.inbox_id != lost_id
    });
    let (relay, snapshotter) = relay(store);
    run_until(relay, || !seen.lock().expect("lock").forwarded.is_empty()).await;
    let samples = samples(&snapshotter);
    assert_eq!(
        value(
            &samples,
            "queuebox_claims_lost_total",
            Some(("component", "inbox"))
        ),
        1.0
    );
    assert_eq!(
        value(
            &samples,
            "queuebox_inbox_messages_total",
            Some(("status", "forwarded"))
        ),
        1.0
    );
}

#[tokio::test]
async fn a_failing_claim_counts_an_error_and_turns_the_health_down_then_stopped() {
    let mut store = MockStore::new();
    store.expect_claim().returning(|_, _| {
        Err(StoreError {
            operation: "relay claim",
            reason: "connection refused".into(),
        })
    });
    store.expect_reclaim_expired().returning(|| Ok(0));
    store
        .expect_oldest_pending_age()
        .returning(|| Ok(Duration::ZERO));
    let (relay, snapshotter) = relay(store);
    let health = relay.health_check();
    assert_eq!(health.name(), "inbox-relay");
    assert!(health.check().await.is_ok(), "up before the first claim");
    let mut workers = Workers::new();
    workers.spawn("inbox-relay", move |stop| relay.run(stop));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Err(reason) = health.check().await
            && reason.contains("connection refused")
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never reported");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        value(
            &samples(&snapshotter),
            "queuebox_inbox_relay_errors_total",
            None
        ) >= 1.0
    );
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
    assert_eq!(
        health.check().await,
        Err("inbox-relay has stopped".to_owned())
    );
}

#[tokio::test]
async fn a_full_batch_is_followed_by_a_claim_at_once() {
    let claims = Arc::new(AtomicUsize::new(0));
    // Three full batches, then empty ones.
    let store = scripted_store(Arc::clone(&claims), |n, limit| {
        if n < 3 {
            (0..limit).map(|_| row("stripe", Some("a"))).collect()
        } else {
            Vec::new()
        }
    });
    let mut options = options();
    options.poll_interval = Duration::from_secs(60);
    let relay = Relay::new(Arc::new(store), topics(), options);
    let started = std::time::Instant::now();
    run_until(relay, || claims.load(Ordering::SeqCst) >= 4).await;
    // With a 60 s poll interval, four claims in a moment means no wait after a full batch.
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_claim_that_returned_rows_is_followed_by_another_at_once_even_when_not_full() {
    // Claims come back short of a batch while thousands of rows wait when few aggregates are ready:
    // the relay must claim again at once, and wait the poll interval only after a claim that found
    // nothing.
    let claims = Arc::new(AtomicUsize::new(0));
    // Three short batches of one row, then empty ones.
    let store = scripted_store(Arc::clone(&claims), |n, _| {
        if n < 3 {
            vec![row("stripe", Some("a"))]
        } else {
            Vec::new()
        }
    });
    run_until_claims_without_a_poll_wait(store, &claims, 4).await;
}

#[tokio::test]
async fn the_next_claim_is_sent_before_the_forward_of_the_last_batch_returns() {
    // The two run side by side: the second claim is issued while the first batch is being
    // forwarded, not after its forward answered.
    let calls = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut store = MockStore::new();
    let claims = Arc::clone(&calls);
    store.expect_claim().returning(move |_, _| {
        let mut calls = claims.lock().expect("lock");
        let n = calls.iter().filter(|c| c.starts_with("claim")).count();
        calls.push(format!("claim {}", n + 1));
        Ok(if n < 2 {
            vec![row("stripe", Some("a"))]
        } else {
            Vec::new()
        })
    });
    let forwards = Arc::clone(&calls);
    store.expect_forward().returning(move |rows| {
        let mut calls = forwards.lock().expect("lock");
        let n = calls.iter().filter(|c| c.starts_with("forward")).count();
        calls.push(format!("forward {}", n + 1));
        Ok(vec![true; rows.len()])
    });
    store.expect_reclaim_expired().returning(|| Ok(0));
    store
        .expect_oldest_pending_age()
        .returning(|| Ok(Duration::ZERO));
    let relay = Relay::new(Arc::new(store), topics(), options());
    let seen = Arc::clone(&calls);
    run_until(relay, move || {
        seen.lock().expect("lock").iter().any(|c| c == "forward 2")
    })
    .await;
    let calls = calls.lock().expect("lock").clone();
    let position = |name: &str| {
        calls
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no {name}: {calls:?}"))
    };
    assert!(
        position("claim 2") < position("forward 1"),
        "the second claim waited for the first forward: {calls:?}"
    );
    assert!(
        position("claim 3") < position("forward 2"),
        "the third claim waited for the second forward: {calls:?}"
    );
}

#[tokio::test]
async fn an_empty_claim_beside_a_forward_is_tried_again_at_once() {
    // Few aggregates: every claim that runs beside a forward finds their next rows still blocked and
    // comes back empty. That must not cost a poll interval: the next claim runs at once.
    let claims = Arc::new(AtomicUsize::new(0));
    // Rows on the 1st, 3rd and 5th claim; the ones in between ran beside a forward.
    let store = scripted_store(Arc::clone(&claims), |n, _| {
        if n % 2 == 0 && n < 6 {
            vec![row("stripe", Some("a"))]
        } else {
            Vec::new()
        }
    });
    run_until_claims_without_a_poll_wait(store, &claims, 6).await;
}

#[tokio::test]
async fn a_batch_the_outbox_refuses_is_forwarded_row_by_row_and_a_too_long_topic_goes_dead() {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let good = row("stripe", Some("a"));
    let poison = row("stripe", Some("b"));
    let long = row("stripe", Some(&"x".repeat(250)));
    let poison_id = poison.id;
    let mut store = MockStore::new();
    let pending = Mutex::new(Some(vec![good.clone(), poison, long.clone()]));
    store
        .expect_claim()
        .returning(move |_, _| Ok(pending.lock().expect("lock").take().unwrap_or_default()));
    let forwarded = Arc::clone(&seen);
    store.expect_forward().returning(move |rows| {
        if rows.iter().any(|r| r.inbox_id == poison_id) {
            return Err(StoreError {
                operation: "relay forward",
                reason: "value too long for type character varying(255)".into(),
            });
        }
        forwarded
            .lock()
            .expect("lock")
            .forwarded
            .extend_from_slice(rows);
        Ok(vec![true; rows.len()])
    });
    let dead = Arc::clone(&seen);
    store
        .expect_mark_dead()
        .returning(move |id, token, reason| {
            dead.lock()
                .expect("lock")
                .dead
                .push((id, token, reason.to_owned()));
            Ok(true)
        });
    store.expect_reclaim_expired().returning(|| Ok(0));
    store
        .expect_oldest_pending_age()
        .returning(|| Ok(Duration::ZERO));
    let (relay, snapshotter) = relay(store);
    run_until(relay, || !seen.lock().expect("lock").forwarded.is_empty()).await;
    let samples = samples(&snapshotter);
    let seen = seen.lock().expect("lock");
    assert_eq!(
        seen.forwarded
            .iter()
            .map(|f| f.inbox_id)
            .collect::<Vec<_>>(),
        [good.id]
    );
    assert_eq!(seen.dead.len(), 1);
    assert_eq!(seen.dead[0].0, long.id);
    assert!(
        seen.dead[0].2.contains("255 characters"),
        "{}",
        seen.dead[0].2
    );
    // Three tries of the batch, then the poison row alone.
    assert_eq!(
        value(&samples, "queuebox_inbox_relay_errors_total", None),
        4.0
    );
}
