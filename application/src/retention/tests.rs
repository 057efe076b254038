//! Unit tests of the cleanup loop with a mocked store, on tokio's paused clock so the intervals pass
//! without waiting: the batches of a run, the sweeps of each policy, the interval, a failed run, the
//! stop between batches, and the metrics and health component.

use super::*;
use crate::lifecycle::Workers;
use crate::test_metrics::{Sample, samples};
use async_trait::async_trait;
use metrics_util::debugging::{DebuggingRecorder, Snapshotter};
use mockall::mock;
use queuebox_ports::retention::{FinishedInbox, FinishedOutbox, RetentionTable, Sweep};
use std::collections::VecDeque;
use std::sync::Mutex;

mock! {
    Store {}
    #[async_trait]
    impl RetentionStore for Store {
        async fn delete_batch(&self, sweep: &Sweep, limit: u32) -> Result<u64, StoreError>;
    }
}

const HOUR: Duration = Duration::from_secs(3_600);

/// One call the store saw: the sweep, the limit, and the (paused) clock at the call.
type Call = (Sweep, u32, Instant);

/// A store that records every call and answers from `answer`.
fn recording_store(
    calls: Arc<Mutex<Vec<Call>>>,
    answer: impl Fn(&Sweep, usize) -> Result<u64, StoreError> + Send + Sync + 'static,
) -> MockStore {
    let mut store = MockStore::new();
    store.expect_delete_batch().returning(move |sweep, limit| {
        let mut calls = calls.lock().expect("lock");
        calls.push((*sweep, limit, Instant::now()));
        answer(sweep, calls.len())
    });
    store
}

/// A store answering each sweep from its own script, then 0 once the script is used up.
fn scripted_store(calls: Arc<Mutex<Vec<Call>>>, scripts: Vec<(Sweep, Vec<u64>)>) -> MockStore {
    let scripts: Mutex<Vec<(Sweep, VecDeque<u64>)>> = Mutex::new(
        scripts
            .into_iter()
            .map(|(sweep, counts)| (sweep, counts.into()))
            .collect(),
    );
    recording_store(calls, move |sweep, _| {
        let mut scripts = scripts.lock().expect("lock");
        let next = scripts
            .iter_mut()
            .find(|(s, _)| s == sweep)
            .and_then(|(_, counts)| counts.pop_front());
        Ok(next.unwrap_or(0))
    })
}

fn service(store: MockStore, plans: Vec<TablePlan>) -> (RetentionService, Snapshotter) {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let service =
        metrics::with_local_recorder(&recorder, || RetentionService::new(Arc::new(store), plans));
    (service, snapshotter)
}

/// The value of `name{table}`, `None` when it was never recorded.
fn value(samples: &[Sample], name: &str, table: &str) -> Option<f64> {
    samples
        .iter()
        .find(|(n, labels, _)| n == name && labels.iter().any(|(k, v)| k == "table" && v == table))
        .map(|(_, _, value)| *value)
}

/// Waits on the paused clock until `done` holds; fails after ten minutes of virtual time.
async fn until(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while !done() {
        assert!(Instant::now() < deadline, "the condition never held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The outbox's last-run gauge; 0 while no run completed (the gauge exists from the start).
fn last_run(samples: &[Sample]) -> f64 {
    value(samples, "queuebox_cleanup_last_run_timestamp", "outbox").unwrap_or(0.0)
}

fn call_count(calls: &Arc<Mutex<Vec<Call>>>) -> usize {
    calls.lock().expect("lock").len()
}

fn outbox_age(state: FinishedOutbox) -> Sweep {
    Sweep::OutboxOlderThan {
        state,
        max_age: HOUR,
    }
}

#[test]
fn each_policy_sweeps_both_finished_states_of_its_table() {
    let age = TablePlan::outbox_by_age(HOUR, HOUR, 500);
    assert_eq!(age.table, RetentionTable::Outbox);
    assert_eq!(
        age.sweeps,
        vec![
            outbox_age(FinishedOutbox::Sent),
            outbox_age(FinishedOutbox::Dead)
        ]
    );
    let count = TablePlan::outbox_by_count(7, HOUR, 500);
    assert_eq!(
        count.sweeps,
        vec![
            Sweep::OutboxBeyondNewest {
                state: FinishedOutbox::Sent,
                keep: 7
            },
            Sweep::OutboxBeyondNewest {
                state: FinishedOutbox::Dead,
                keep: 7
            },
        ]
    );
    let inbox = TablePlan::inbox_by_age(HOUR, HOUR, 500);
    assert_eq!(inbox.table, RetentionTable::Inbox);
    assert_eq!(
        inbox.sweeps,
        vec![
            Sweep::InboxOlderThan {
                state: FinishedInbox::Processed,
                max_age: HOUR
            },
            Sweep::InboxOlderThan {
                state: FinishedInbox::Dead,
                max_age: HOUR
            },
        ]
    );
    assert_eq!(inbox.batch_size, 500);
}

#[tokio::test(start_paused = true)]
async fn a_run_deletes_batch_after_batch_until_a_short_one_then_records_its_metrics() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let sent = outbox_age(FinishedOutbox::Sent);
    let dead = outbox_age(FinishedOutbox::Dead);
    let store = scripted_store(
        Arc::clone(&calls),
        vec![(sent, vec![10, 10, 3]), (dead, vec![10, 0])],
    );
    let (service, snapshotter) = service(store, vec![TablePlan::outbox_by_age(HOUR, HOUR, 10)]);
    let health = service.health_check();
    assert_eq!(health.name(), "retention-service");
    let mut workers = Workers::new();
    workers.spawn("retention", move |stop| service.run(stop));
    until(|| call_count(&calls) >= 5).await;
    // The run is over once its timestamp is recorded.
    let mut seen = Vec::new();
    until(|| {
        seen = samples(&snapshotter);
        last_run(&seen) > 0.0
    })
    .await;
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());

    let asked: Vec<(Sweep, u32)> = calls
        .lock()
        .expect("lock")
        .iter()
        .map(|(s, l, _)| (*s, *l))
        .collect();
    assert_eq!(
        asked,
        vec![(sent, 10), (sent, 10), (sent, 10), (dead, 10), (dead, 10)],
        "each sweep runs until a short batch, and the next run waits an hour"
    );
    assert_eq!(
        value(&seen, "queuebox_cleanup_messages_deleted_total", "outbox"),
        Some(33.0)
    );
    assert!(last_run(&seen) > 1.0e9, "a Unix time in seconds: {seen:?}");
    assert_eq!(
        value(&seen, "queuebox_cleanup_duration_seconds", "outbox"),
        Some(1.0),
        "one run observed: {seen:?}"
    );
    assert!(
        value(&seen, "queuebox_cleanup_duration_seconds_max", "outbox").is_some(),
        "{seen:?}"
    );
    assert_eq!(
        health.check().await,
        Err("retention-service has stopped".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn both_tables_run_each_on_its_own_interval_with_their_own_labels() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let store = recording_store(Arc::clone(&calls), |sweep, _| {
        Ok(match sweep.table() {
            RetentionTable::Outbox => 1,
            RetentionTable::Inbox => 2,
        })
    });
    let plans = vec![
        TablePlan::outbox_by_count(100, Duration::from_secs(60), 50),
        TablePlan::inbox_by_age(HOUR, Duration::from_secs(90), 50),
    ];
    let (service, snapshotter) = service(store, plans);
    let mut workers = Workers::new();
    workers.spawn("retention", move |stop| service.run(stop));
    // Outbox runs start at 0, 60, 120 and 180 s; inbox runs at 0, 90 and 180 s.
    let run_starts = |table: RetentionTable| {
        let calls = calls.lock().expect("lock");
        let mut starts: Vec<Instant> = calls
            .iter()
            .filter(|(s, _, _)| s.table() == table)
            .map(|(_, _, at)| *at)
            .collect();
        starts.dedup();
        starts
    };
    until(|| {
        run_starts(RetentionTable::Outbox).len() >= 4
            && run_starts(RetentionTable::Inbox).len() >= 3
    })
    .await;
    let seen = samples(&snapshotter);
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());

    let outbox = run_starts(RetentionTable::Outbox);
    let gaps: Vec<Duration> = outbox.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|gap| *gap == Duration::from_secs(60)),
        "{gaps:?}"
    );
    let inbox = run_starts(RetentionTable::Inbox);
    let gaps: Vec<Duration> = inbox.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|gap| *gap == Duration::from_secs(90)),
        "{gaps:?}"
    );
    // Each sweep ran one short batch per run: two sweeps of one row per outbox run, of two per inbox run.
    assert_eq!(
        value(&seen, "queuebox_cleanup_messages_deleted_total", "outbox"),
        Some(2.0 * outbox.len() as f64)
    );
    assert_eq!(
        value(&seen, "queuebox_cleanup_messages_deleted_total", "inbox"),
        Some(4.0 * inbox.len() as f64)
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_run_turns_the_component_down_and_is_retried_soon() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let store = recording_store(Arc::clone(&calls), |_, call| {
        if call == 1 {
            Err(StoreError {
                operation: "retention delete",
                reason: "connection refused".into(),
            })
        } else {
            Ok(0)
        }
    });
    let (service, snapshotter) = service(store, vec![TablePlan::outbox_by_age(HOUR, HOUR, 10)]);
    let health = service.health_check();
    assert!(health.check().await.is_ok(), "up before the first run");
    let mut workers = Workers::new();
    workers.spawn("retention", move |stop| service.run(stop));

    until(|| call_count(&calls) >= 1).await;
    assert_eq!(
        health_turns(&health, false).await,
        Err("cleanup fails: outbox: retention delete failed: connection refused".to_owned())
    );
    let seen = samples(&snapshotter);
    assert_eq!(last_run(&seen), 0.0, "a failed run does not count as a run");

    // The retry comes 30 s later, not after the hour, and succeeds.
    until(|| call_count(&calls) >= 3).await;
    assert_eq!(health_turns(&health, true).await, Ok(()));
    {
        let calls = calls.lock().expect("lock");
        assert_eq!(calls[1].2 - calls[0].2, RETRY_AFTER_FAILURE);
    }
    assert!(last_run(&samples(&snapshotter)) > 0.0);
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_stop_ends_a_run_between_batches() {
    let calls = Arc::new(Mutex::new(Vec::new()));
    // Every batch comes back full: the run would never end on its own.
    let store = recording_store(Arc::clone(&calls), |_, _| Ok(10));
    let (service, snapshotter) = service(store, vec![TablePlan::outbox_by_age(HOUR, HOUR, 10)]);
    let health = service.health_check();
    let mut workers = Workers::new();
    workers.spawn("retention", move |stop| service.run(stop));
    // The run never waits for the clock here, so the paused clock stands still: yield instead of
    // sleeping until the run is under way.
    for _ in 0..10_000 {
        if call_count(&calls) >= 3 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(call_count(&calls) >= 3, "the run never started");
    assert!(
        workers.stop(Duration::from_secs(5)).await.is_empty(),
        "the cleanup returned on its own"
    );
    let after_stop = call_count(&calls);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(call_count(&calls), after_stop, "no batch after the stop");
    let seen = samples(&snapshotter);
    assert_eq!(
        last_run(&seen),
        0.0,
        "an interrupted run is not a complete run"
    );
    assert!(
        value(&seen, "queuebox_cleanup_messages_deleted_total", "outbox")
            .is_some_and(|deleted| deleted >= 30.0)
    );
    assert_eq!(
        health.check().await,
        Err("retention-service has stopped".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn with_every_table_disabled_the_service_is_up_and_stops_when_asked() {
    let mut store = MockStore::new();
    store.expect_delete_batch().never();
    let (service, _snapshotter) = service(store, Vec::new());
    let health = service.health_check();
    let mut workers = Workers::new();
    workers.spawn("retention", move |stop| service.run(stop));
    tokio::time::sleep(HOUR).await;
    assert!(health.check().await.is_ok());
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
    assert_eq!(
        health.check().await,
        Err("retention-service has stopped".to_owned())
    );
}

/// Waits on the paused clock until the component is up (`up`) or down, and returns that check.
async fn health_turns(health: &Arc<dyn HealthCheck>, up: bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let outcome = health.check().await;
        if outcome.is_ok() == up {
            return outcome;
        }
        assert!(Instant::now() < deadline, "the component never turned");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
