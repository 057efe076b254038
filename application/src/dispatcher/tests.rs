//! Unit tests of the dispatcher loop with mocked ports: what is hard to force against a real database
//! (a failing claim, a publish still running at shutdown, the finish of each outcome).

use super::*;
use crate::lifecycle::Workers;
use async_trait::async_trait;
use mockall::mock;
use queuebox_ports::outbox::{Finish, PendingStats, StoreError};
use queuebox_ports::publish::{PublishError, PublishErrorKind, Publisher};
use std::sync::Mutex;
use std::time::Duration;
use uuid::Uuid;

mock! {
    Store {}
    #[async_trait]
    impl OutboxStore for Store {
        async fn claim(&self, request: &ClaimRequest) -> Result<queuebox_ports::outbox::Claim, StoreError>;
        async fn renew(&self, held: &[(Uuid, Uuid)], lease: Duration) -> Result<Vec<bool>, StoreError>;
        async fn finish(&self, writes: &[FencedFinish]) -> Result<Vec<bool>, StoreError>;
        async fn reclaim_expired(&self) -> Result<u64, StoreError>;
        async fn pending_stats(&self) -> Result<PendingStats, StoreError>;
        async fn next_deadline(&self) -> Result<Option<Duration>, StoreError>;
    }
}

mock! {
    Destination {}
    #[async_trait]
    impl Publisher for Destination {
        fn destination_type(&self) -> &'static str;
        async fn publish(&self, message: &OutboundMessage) -> Result<(), PublishError>;
    }
}

fn options() -> DispatcherOptions {
    DispatcherOptions {
        batch_size: 10,
        concurrency: 4,
        poll_interval: Duration::from_millis(20),
        lease: Duration::from_secs(30),
        retry_base_delay: Duration::from_millis(100),
        pending_gauge_interval: Duration::from_secs(60),
        shutdown_timeout: Duration::from_secs(5),
        max_error_bytes: 2048,
    }
}

fn row(topic: &str) -> ClaimedRow {
    ClaimedRow {
        id: Uuid::new_v4(),
        claim_token: Uuid::new_v4(),
        topic: topic.to_owned(),
        key: None,
        aggregate_type: None,
        payload: "{}".to_owned(),
        headers: vec![],
        attempt: 0,
        max_attempts: 5,
        sequence: 1,
        created_at: std::time::SystemTime::UNIX_EPOCH,
    }
}

/// A store whose first claim returns `rows` and later claims return nothing; finishes are recorded.
fn store_with(rows: Vec<ClaimedRow>, finished: Arc<Mutex<Vec<FencedFinish>>>) -> MockStore {
    let mut store = MockStore::new();
    let pending = Mutex::new(Some(rows));
    store.expect_claim().returning(move |_| {
        let rows = pending.lock().expect("lock").take().unwrap_or_default();
        Ok(queuebox_ports::outbox::Claim {
            rows,
            next_key_cursor: String::new(),
        })
    });
    records_finishes(&mut store, finished);
    store
}

/// Records every finish in `finished` (each accepted), and answers the maintenance calls: every
/// lease renewed, nothing to reclaim, empty pending gauges.
fn records_finishes(store: &mut MockStore, finished: Arc<Mutex<Vec<FencedFinish>>>) {
    store.expect_finish().returning(move |writes| {
        finished.lock().expect("lock").extend_from_slice(writes);
        Ok(vec![true; writes.len()])
    });
    store
        .expect_renew()
        .returning(|held, _| Ok(vec![true; held.len()]));
    store.expect_reclaim_expired().returning(|| Ok(0));
    store
        .expect_pending_stats()
        .returning(|| Ok(PendingStats::default()));
}

fn table(publisher: MockDestination) -> Arc<RouteTable> {
    table_with(publisher, None, None)
}

/// Routes `order.*` to destination `api` over `publisher`, with the given transforms.
fn table_with(
    publisher: MockDestination,
    route: Option<crate::transform::StageTransform>,
    destination: Option<crate::transform::StageTransform>,
) -> Arc<RouteTable> {
    let routes = [queuebox_domain::router::RouteSpec {
        topic_pattern: "order.*".into(),
        destination: "api".into(),
    }];
    Arc::new(
        RouteTable::new(
            &routes,
            vec![DestinationSpec {
                name: "api".into(),
                kind: "http",
                publisher: Some(Arc::new(publisher)),
                transform: destination,
            }],
        )
        .expect("routes")
        .with_route_transforms(vec![route]),
    )
}

async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn each_outcome_becomes_its_fenced_finish() {
    let finished = Arc::new(Mutex::new(Vec::new()));
    let (ok, failing, unrouted) = (
        row("order.created"),
        row("order.failed"),
        row("invoice.created"),
    );
    let failing_id = failing.id;
    let store = store_with(
        vec![ok.clone(), failing.clone(), unrouted.clone()],
        Arc::clone(&finished),
    );
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    publisher.expect_publish().returning(move |message| {
        if message.id == failing_id.to_string() {
            Err(PublishError::new(
                PublishErrorKind::Rejected,
                "answered HTTP 503",
            ))
        } else {
            Ok(())
        }
    });
    let dispatcher = Dispatcher::new(Arc::new(store), table(publisher), options());
    let mut workers = Workers::new();
    workers.spawn("dispatcher", move |stop| dispatcher.run(stop));
    wait_for("three finishes", || {
        finished.lock().expect("lock").len() == 3
    })
    .await;
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());

    let finished = finished.lock().expect("lock");
    let of = |id: Uuid| {
        finished
            .iter()
            .find(|f| f.id == id)
            .map(|f| f.finish.clone())
            .expect("finished")
    };
    assert_eq!(of(ok.id), Finish::Sent);
    match of(failing.id) {
        Finish::Retry {
            attempt,
            delay,
            error,
        } => {
            assert_eq!(attempt, 1);
            assert!(delay >= Duration::from_millis(100) && delay <= Duration::from_millis(125));
            assert_eq!(error, "answered HTTP 503");
        }
        other => panic!("expected a retry, got {other:?}"),
    }
    assert_eq!(
        of(unrouted.id),
        Finish::Dead {
            error: "No route matches topic invoice.created".into()
        }
    );
    // Every finish carries the token of its own claim.
    for (id, token) in [(ok.id, ok.claim_token), (failing.id, failing.claim_token)] {
        assert_eq!(
            finished.iter().find(|f| f.id == id).map(|f| f.claim_token),
            Some(token)
        );
    }
}

#[tokio::test]
async fn a_failing_claim_turns_the_poller_health_down_and_a_good_one_up() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let failing = Arc::new(AtomicBool::new(true));
    let fail = Arc::clone(&failing);
    let mut store = MockStore::new();
    store.expect_claim().returning(move |_| {
        if fail.load(Ordering::SeqCst) {
            Err(StoreError {
                operation: "claim",
                reason: "connection refused".into(),
            })
        } else {
            Ok(Default::default())
        }
    });
    store.expect_reclaim_expired().returning(|| Ok(0));
    store
        .expect_pending_stats()
        .returning(|| Ok(PendingStats::default()));
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    let dispatcher = Dispatcher::new(Arc::new(store), table(publisher), options());
    let health = dispatcher.health_check();
    assert!(
        health.check().await.is_ok(),
        "up before the first claim: nothing has failed yet"
    );
    let mut workers = Workers::new();
    workers.spawn("dispatcher", move |stop| dispatcher.run(stop));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Err(reason) = health.check().await
            && reason.contains("connection refused")
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the failing claim was never reported"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    failing.store(false, Ordering::SeqCst);
    while health.check().await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "health never recovered"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
    assert!(health.check().await.is_err(), "down once stopped");
}

#[tokio::test]
async fn shutdown_waits_for_a_publish_in_flight_and_writes_its_finish() {
    let finished = Arc::new(Mutex::new(Vec::new()));
    let slow = row("order.created");
    let store = store_with(vec![slow.clone()], Arc::clone(&finished));
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&started);
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    publisher.expect_publish().returning(move |_| {
        signal.notify_one();
        // A blocking pause stands in for a slow destination; the dispatcher must wait for it.
        std::thread::sleep(Duration::from_millis(300));
        Ok(())
    });
    let dispatcher = Dispatcher::new(Arc::new(store), table(publisher), options());
    let mut workers = Workers::new();
    workers.spawn("dispatcher", move |stop| dispatcher.run(stop));
    started.notified().await;
    assert!(workers.stop(Duration::from_secs(10)).await.is_empty());
    let finished = finished.lock().expect("lock");
    assert_eq!(
        finished.len(),
        1,
        "the in-flight row was finished before the stop returned"
    );
    assert_eq!(finished[0].finish, Finish::Sent);
    assert_eq!(finished[0].id, slow.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_claimed_but_not_started_at_shutdown_are_released_unspent() {
    let finished = Arc::new(Mutex::new(Vec::new()));
    let rows = vec![row("order.a"), row("order.b"), row("order.c")];
    let store = store_with(rows.clone(), Arc::clone(&finished));
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&started);
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    publisher.expect_publish().times(1).returning(move |_| {
        signal.notify_one();
        std::thread::sleep(Duration::from_millis(200));
        Ok(())
    });
    let mut one_at_a_time = options();
    one_at_a_time.concurrency = 1;
    let dispatcher = Dispatcher::new(Arc::new(store), table(publisher), one_at_a_time);
    let mut workers = Workers::new();
    workers.spawn("dispatcher", move |stop| dispatcher.run(stop));
    started.notified().await;
    assert!(workers.stop(Duration::from_secs(10)).await.is_empty());

    let finished = finished.lock().expect("lock");
    let finish_of = |id: Uuid| {
        finished
            .iter()
            .find(|f| f.id == id)
            .map(|f| f.finish.clone())
    };
    assert_eq!(finish_of(rows[0].id), Some(Finish::Sent));
    assert_eq!(finish_of(rows[1].id), Some(Finish::Release));
    assert_eq!(finish_of(rows[2].id), Some(Finish::Release));
    // Each release is fenced on the token of its own claim.
    assert!(
        finished
            .iter()
            .filter(|f| f.finish == Finish::Release)
            .all(|f| rows
                .iter()
                .any(|r| r.id == f.id && r.claim_token == f.claim_token))
    );
}

/// Capture stops streaming during a backlog on the claim loop's word: full claims report one, and
/// the first short claim ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_claims_report_a_backlog_and_a_short_claim_ends_it() {
    let finished = Arc::new(Mutex::new(Vec::new()));
    let mut store = MockStore::new();
    // Full claims until the watcher has seen the backlog, then one short one, then nothing.
    let backlog_seen = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let short_claims = Arc::new(Mutex::new(0_u32));
    let (seen, short) = (Arc::clone(&backlog_seen), Arc::clone(&short_claims));
    store.expect_claim().returning(move |request| {
        let rows = if seen.load(Ordering::SeqCst) {
            let mut n = short.lock().expect("lock");
            *n += 1;
            if *n == 1 { request.limit / 2 } else { 0 }
        } else {
            request.limit
        };
        Ok(queuebox_ports::outbox::Claim {
            rows: (0..rows).map(|_| row("order.a")).collect(),
            next_key_cursor: String::new(),
        })
    });
    store.expect_next_deadline().returning(|| Ok(None));
    records_finishes(&mut store, Arc::clone(&finished));
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    publisher.expect_publish().returning(|_| Ok(()));
    let wake = DeliveryWake::new();
    let seen = {
        let wake = wake.clone();
        tokio::spawn(async move {
            wake.backlog_lasted(Duration::ZERO).await;
            backlog_seen.store(true, Ordering::SeqCst);
            wake.backlog_ended().await;
        })
    };
    let dispatcher = Dispatcher::new(Arc::new(store), table(publisher), options())
        .woken_by(wake, IdleWaking::Reconcile(Duration::from_secs(60)));
    let mut workers = Workers::new();
    workers.spawn("dispatcher", move |stop| dispatcher.run(stop));
    tokio::time::timeout(Duration::from_secs(5), seen)
        .await
        .expect("a backlog reported and then ended")
        .expect("the watcher ran");
    assert!(workers.stop(Duration::from_secs(10)).await.is_empty());
    assert!(*short_claims.lock().expect("lock") >= 1);
}

/// A slow destination over an endless backlog: the finisher frees a few rows at a time, and the
/// claim loop must not turn each of those into a small claim while whole batches still wait for a
/// permit. Every claim after the first fill asks for a whole batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_destination_gets_whole_batch_claims_not_one_per_finish() {
    let limits = Arc::new(Mutex::new(Vec::<u32>::new()));
    let finished = Arc::new(Mutex::new(Vec::new()));
    let mut store = MockStore::new();
    let asked = Arc::clone(&limits);
    store.expect_claim().returning(move |request| {
        asked.lock().expect("lock").push(request.limit);
        Ok(queuebox_ports::outbox::Claim {
            rows: (0..request.limit).map(|_| row("order.a")).collect(),
            next_key_cursor: String::new(),
        })
    });
    records_finishes(&mut store, Arc::clone(&finished));
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    publisher.expect_publish().returning(|_| {
        // A blocking pause stands in for a slow broker confirm.
        std::thread::sleep(Duration::from_millis(2));
        Ok(())
    });
    let mut slow = options();
    slow.concurrency = 1;
    let batch = slow.batch_size;
    let dispatcher = Dispatcher::new(Arc::new(store), table(publisher), slow);
    let mut workers = Workers::new();
    workers.spawn("dispatcher", move |stop| dispatcher.run(stop));
    wait_for("100 rows finished", || {
        finished.lock().expect("lock").len() >= 100
    })
    .await;
    assert!(workers.stop(Duration::from_secs(10)).await.is_empty());
    let limits = limits.lock().expect("lock");
    assert!(
        limits.len() > HELD_BATCHES,
        "claims went on after the first fill: {limits:?}"
    );
    assert!(
        limits.iter().all(|&limit| limit == batch),
        "every claim asks for a whole batch of {batch}: {limits:?}"
    );
}

/// The sequence one CI run of the three-dispatcher ordering test hit: a renewal takes its list of
/// claims; while its statement runs, one of them (a failed row) has its retry written and is claimed
/// again by this same dispatcher with a new token; the statement refuses the old token. That late
/// refusal must not touch the new claim: its row is published, not dropped as a lost claim to wait a
/// whole lease for the reclaim.
#[tokio::test]
async fn a_late_renewal_refusal_of_a_finished_claim_does_not_drop_the_rows_new_claim() {
    let held = Arc::new(Held::default());
    let first = row("order.created");
    let again = ClaimedRow {
        claim_token: Uuid::new_v4(),
        attempt: 1,
        ..first.clone()
    };
    held.insert(first.id, first.claim_token);

    let mut store = MockStore::new();
    let during = Arc::clone(&held);
    let (id, old, new) = (first.id, first.claim_token, again.claim_token);
    store.expect_renew().times(1).returning(move |claims, _| {
        assert_eq!(claims, [(id, old)]);
        // Meanwhile: the retry of the old claim is written and released, the row claimed again.
        during.finishing(&id, &old);
        during.remove(&id, &old);
        during.insert(id, new);
        Ok(vec![false])
    });
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    publisher
        .expect_publish()
        .times(1)
        .withf(move |message| message.id == id.to_string() && message.attempt == 1)
        .returning(|_| Ok(()));
    let routes = table(publisher);
    let metrics = Arc::new(OutboxMetrics::new());
    let maintenance = Maintenance {
        store: Arc::new(store),
        held: Arc::clone(&held),
        routes: Arc::clone(&routes),
        metrics: Arc::clone(&metrics),
        lease: Duration::from_secs(30),
        renew_every: Duration::from_secs(10),
        reclaim_every: Duration::from_secs(6),
        gauges_every: Duration::from_secs(60),
        reclaimed: Arc::new(tokio::sync::Notify::new()),
    };
    maintenance.renew().await;
    assert!(!held.is_lost(&id, &new), "the new claim was marked lost");

    let (finishes, mut written) = mpsc::unbounded_channel();
    let shared = Shared {
        routes,
        held: Arc::clone(&held),
        released: Arc::new(Released::new(10)),
        metrics,
        options: options(),
        finishes,
    };
    deliver(again, &shared).await;
    let finish = written.try_recv().expect("the new claim's finish");
    assert_eq!(finish.write.id, id);
    assert_eq!(finish.write.claim_token, new);
    assert_eq!(finish.write.finish, Finish::Sent);
    (finish.on_written)();
    assert_eq!(held.len(), 0, "the finished claim is no longer held");
}

/// A failed publish carries its cause into the finisher (for the log line's `kind`) and into
/// `queuebox_outbox_publish_failures_total{destination, destination_type, kind}`, beside the
/// documented failure count of the destination.
#[tokio::test]
async fn the_cause_of_a_failed_publish_reaches_the_finish_and_the_failure_counter() {
    use crate::test_metrics::samples;
    use metrics_util::debugging::DebuggingRecorder;
    use queuebox_ports::metrics as names;

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // The publish below runs on this thread, so the thread's recorder sees every metric of it.
    let _recorder = metrics::set_default_local_recorder(&recorder);
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    publisher.expect_publish().returning(|_| {
        Err(PublishError::new(
            PublishErrorKind::Unreachable,
            "connection refused",
        ))
    });
    let (finishes, mut written) = mpsc::unbounded_channel();
    let shared = Shared {
        routes: table(publisher),
        held: Arc::new(Held::default()),
        released: Arc::new(Released::new(10)),
        metrics: Arc::new(OutboxMetrics::new()),
        options: options(),
        finishes,
    };
    let failing = row("order.created");
    shared.held.insert(failing.id, failing.claim_token);
    deliver(failing, &shared).await;
    let finish = written.try_recv().expect("the finish");
    assert_eq!(finish.publish_error, Some(PublishErrorKind::Unreachable));
    assert!(matches!(finish.write.finish, Finish::Retry { .. }));

    let label = |key: &str, value: &str| (key.to_owned(), value.to_owned());
    let samples = samples(&snapshotter);
    let value_of = |name: &str, labels: &[(String, String)]| {
        samples
            .iter()
            .find(|(n, l, _)| n == name && labels.iter().all(|wanted| l.contains(wanted)))
            .map(|(_, _, value)| *value)
    };
    assert_eq!(
        value_of(
            names::OUTBOX_PUBLISH_FAILURES_TOTAL,
            &[
                label("destination", "api"),
                label("destination_type", "http"),
                label("kind", "unreachable"),
            ]
        ),
        Some(1.0),
        "{samples:?}"
    );
    assert_eq!(
        value_of(
            names::OUTBOX_DESTINATION_MESSAGES_TOTAL,
            &[label("destination", "api"), label("outcome", "failure")]
        ),
        Some(1.0),
        "{samples:?}"
    );
    // No other cause was counted.
    assert_eq!(
        samples
            .iter()
            .filter(|(n, _, _)| n == names::OUTBOX_PUBLISH_FAILURES_TOTAL)
            .count(),
        1,
        "{samples:?}"
    );
}

/// A failure before any publish (no route) has no publish cause.
#[tokio::test]
async fn a_row_without_a_route_has_no_publish_cause() {
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    let (finishes, mut written) = mpsc::unbounded_channel();
    let shared = Shared {
        routes: table(publisher),
        held: Arc::new(Held::default()),
        released: Arc::new(Released::new(10)),
        metrics: Arc::new(OutboxMetrics::new()),
        options: options(),
        finishes,
    };
    let unrouted = row("invoice.created");
    shared.held.insert(unrouted.id, unrouted.claim_token);
    deliver(unrouted, &shared).await;
    let finish = written.try_recv().expect("the finish");
    assert_eq!(finish.publish_error, None);
    assert!(matches!(finish.write.finish, Finish::Dead { .. }));
}

// ------------------------------------------------------------------------------------------------
// Route and destination transforms
// ------------------------------------------------------------------------------------------------

mod transforms {
    use super::*;
    use crate::transform::StageTransform;
    use crate::transform::mock::stage;
    use queuebox_ports::transform::{
        ErrorStrategy, TransformContext, TransformError, TransformErrorKind, TransformOutput,
    };

    /// A stage that wraps its input as `{"<tag>": input}`.
    fn wrapping(tag: &'static str, key_path: &str) -> StageTransform {
        stage(ErrorStrategy::Fail, key_path, move |input, _| {
            Ok(TransformOutput::Json(format!(r#"{{"{tag}":{input}}}"#)))
        })
    }

    fn failing(strategy: ErrorStrategy, key_path: &str) -> StageTransform {
        stage(strategy, key_path, |_, _| {
            Err(TransformError::new(
                TransformErrorKind::Evaluation,
                "T2001: not a number",
            ))
        })
    }

    /// A publisher that records every payload it is given and accepts it.
    fn recording() -> (MockDestination, Arc<Mutex<Vec<String>>>) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&sent);
        let mut publisher = MockDestination::new();
        publisher.expect_destination_type().return_const("http");
        publisher.expect_publish().returning(move |message| {
            record.lock().expect("lock").push(message.payload.clone());
            Ok(())
        });
        (publisher, sent)
    }

    /// Runs one claimed row through a dispatcher over `routes` and returns its finish.
    async fn finish_of(row: ClaimedRow, routes: Arc<RouteTable>) -> Finish {
        let finished = Arc::new(Mutex::new(Vec::new()));
        let store = store_with(vec![row], Arc::clone(&finished));
        let dispatcher = Dispatcher::new(Arc::new(store), routes, options());
        let mut workers = Workers::new();
        workers.spawn("dispatcher", move |stop| dispatcher.run(stop));
        wait_for("the finish", || finished.lock().expect("lock").len() == 1).await;
        assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
        let finished = finished.lock().expect("lock");
        finished[0].finish.clone()
    }

    fn stored(payload: &str, attempt: i32) -> ClaimedRow {
        let mut row = row("order.created");
        row.payload = payload.into();
        row.attempt = attempt;
        row
    }

    #[tokio::test]
    async fn the_route_output_feeds_the_destination_and_the_delivery_variables_are_bound() {
        let (publisher, sent) = recording();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        let route = stage(
            ErrorStrategy::Fail,
            "routes[0].transform",
            move |input, c| {
                record.lock().expect("lock").push(c.clone());
                Ok(TransformOutput::Json(format!(r#"{{"route":{input}}}"#)))
            },
        );
        let routes = table_with(publisher, Some(route), Some(wrapping("dest", "d")));
        let row = stored(r#"{"n":1}"#, 2);
        let (id, created_at) = (row.id, row.created_at);
        assert_eq!(finish_of(row, routes).await, Finish::Sent);
        assert_eq!(
            *sent.lock().expect("lock"),
            vec![r#"{"dest":{"route":{"n":1}}}"#.to_owned()]
        );
        let seen = seen.lock().expect("lock");
        let TransformContext::Delivery(context) = &seen[0] else {
            panic!(
                "the route stage must bind the delivery variables: {:?}",
                seen[0]
            );
        };
        assert_eq!(context.message_id, id);
        assert_eq!(context.topic, "order.created");
        assert_eq!(context.attempt, 2);
        assert_eq!(context.created_at, created_at);
    }

    #[tokio::test]
    async fn fail_retries_with_an_attempt_spent_and_publishes_nothing() {
        let (publisher, sent) = recording();
        let routes = table_with(
            publisher,
            Some(failing(ErrorStrategy::Fail, "routes[0].transform")),
            None,
        );
        match finish_of(stored("{}", 1), routes).await {
            Finish::Retry { attempt, error, .. } => {
                assert_eq!(attempt, 2);
                assert_eq!(error, "routes[0].transform failed: T2001: not a number");
            }
            other => panic!("expected a retry, got {other:?}"),
        }
        assert!(sent.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn dead_at_the_destination_stage_is_dead_at_once() {
        let (publisher, sent) = recording();
        let routes = table_with(
            publisher,
            Some(wrapping("route", "routes[0].transform")),
            Some(failing(ErrorStrategy::Dead, "destinations.api.transform")),
        );
        assert_eq!(
            finish_of(stored("{}", 0), routes).await,
            Finish::Dead {
                error: "destinations.api.transform failed: T2001: not a number".into()
            }
        );
        assert!(sent.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn skip_at_the_route_passes_the_stored_payload_to_the_destination_stage() {
        let (publisher, sent) = recording();
        let routes = table_with(
            publisher,
            Some(failing(ErrorStrategy::Skip, "routes[0].transform")),
            Some(wrapping("dest", "destinations.api.transform")),
        );
        assert_eq!(
            finish_of(stored(r#"{"n":1}"#, 0), routes).await,
            Finish::Sent
        );
        assert_eq!(
            *sent.lock().expect("lock"),
            vec![r#"{"dest":{"n":1}}"#.to_owned()]
        );
    }

    #[tokio::test]
    async fn skip_at_the_destination_sends_the_route_output() {
        let (publisher, sent) = recording();
        let routes = table_with(
            publisher,
            Some(wrapping("route", "routes[0].transform")),
            Some(failing(ErrorStrategy::Skip, "destinations.api.transform")),
        );
        assert_eq!(
            finish_of(stored(r#"{"n":1}"#, 0), routes).await,
            Finish::Sent
        );
        assert_eq!(
            *sent.lock().expect("lock"),
            vec![r#"{"route":{"n":1}}"#.to_owned()]
        );
    }
}

#[test]
fn the_route_key_is_rendered_over_the_message_payload_with_the_route_default() {
    use queuebox_domain::template::routing_key::RoutingKeyTemplate;
    let mut claimed = row("order.created");
    claimed.aggregate_type = Some("order".to_owned());
    claimed.payload = r#"{"region":"eu"}"#.to_owned();
    let with_template = RouteKeySpec {
        template: Some(
            RoutingKeyTemplate::parse("{{ payload.region }}.{{ payload.tier }}").expect("template"),
        ),
        missing_default: "none".to_owned(),
    };
    let message = outbound(&claimed, None, Some(&with_template));
    assert_eq!(message.route_key.as_deref(), Some("eu.none"));
    assert_eq!(message.missing_field_default, "none");
    // A transformed payload is what the key reads, as the destination sees it.
    let message = outbound(
        &claimed,
        Some(r#"{"region":"us","tier":"gold"}"#.to_owned()),
        Some(&with_template),
    );
    assert_eq!(message.route_key.as_deref(), Some("us.gold"));
    // A route without a template hands only its default to the destination's own template.
    let default_only = RouteKeySpec {
        template: None,
        missing_default: "x".to_owned(),
    };
    let message = outbound(&claimed, None, Some(&default_only));
    assert_eq!(message.route_key, None);
    assert_eq!(message.missing_field_default, "x");
    let message = outbound(&claimed, None, None);
    assert_eq!(
        (message.route_key, message.missing_field_default.as_str()),
        (None, "")
    );
}

/// A store that finds nothing, counts its claims and gives `deadline` as the next due time.
fn counting_store(
    claims: Arc<std::sync::atomic::AtomicUsize>,
    deadline: Option<Duration>,
) -> MockStore {
    let mut store = MockStore::new();
    store.expect_claim().returning(move |_| {
        claims.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(Default::default())
    });
    store.expect_reclaim_expired().returning(|| Ok(0));
    store
        .expect_pending_stats()
        .returning(|| Ok(PendingStats::default()));
    store.expect_next_deadline().returning(move || Ok(deadline));
    store
}

#[tokio::test]
async fn with_capture_an_idle_dispatcher_claims_on_a_wake_not_on_the_poll_interval() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let claims = Arc::new(AtomicUsize::new(0));
    let store = counting_store(Arc::clone(&claims), None);
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    let wake = crate::capture::DeliveryWake::new();
    let dispatcher = Dispatcher::new(Arc::new(store), table(publisher), options()).woken_by(
        wake.clone(),
        crate::capture::IdleWaking::Reconcile(Duration::from_secs(3600)),
    );
    let mut workers = Workers::new();
    workers.spawn("dispatcher", move |stop| dispatcher.run(stop));
    wait_for("the first claim", || claims.load(Ordering::SeqCst) >= 1).await;
    // Ten poll intervals pass without a claim: the loop waits for a wake-up.
    tokio::time::sleep(options().poll_interval * 10).await;
    assert_eq!(claims.load(Ordering::SeqCst), 1, "the dispatcher polled");
    for n in 2..=4 {
        wake.wake();
        wait_for("a claim after the wake-up", || {
            claims.load(Ordering::SeqCst) >= n
        })
        .await;
    }
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
}

#[tokio::test]
async fn with_capture_the_idle_wait_ends_when_the_next_retry_falls_due() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let claims = Arc::new(AtomicUsize::new(0));
    let store = counting_store(Arc::clone(&claims), Some(Duration::from_millis(30)));
    let mut publisher = MockDestination::new();
    publisher.expect_destination_type().return_const("http");
    let dispatcher = Dispatcher::new(Arc::new(store), table(publisher), options()).woken_by(
        crate::capture::DeliveryWake::new(),
        crate::capture::IdleWaking::Reconcile(Duration::from_secs(3600)),
    );
    let mut workers = Workers::new();
    workers.spawn("dispatcher", move |stop| dispatcher.run(stop));
    // No wake-up ever comes; the deadline alone brings the claims.
    wait_for("claims at each deadline", || {
        claims.load(Ordering::SeqCst) >= 4
    })
    .await;
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
}
