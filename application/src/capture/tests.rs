//! The capture runner over mocked ports: its retry schedule, the wake-up of every attempt, the
//! owner lock on a first and on a later attempt, and a fault that needs a decision.

use super::{CaptureOptions, CaptureRunner, DeliveryWake};
use crate::lifecycle::Workers;
use async_trait::async_trait;
use mockall::mock;
use queuebox_domain::capture::{CaptureScope, Lsn, Recorded};
use queuebox_ports::capture::{
    CaptureConnector, CaptureError, CapturePorts, CaptureSession, CaptureStateStore, ChangeStream,
    SlotPosition, WakeChannel, WakeFeed,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

mock! {
    Connector {}
    #[async_trait]
    impl CaptureConnector for Connector {
        async fn open(&self, resume_after: Option<Lsn>) -> Result<Box<dyn CaptureSession>, CaptureError>;
    }
}

mock! {
    State {}
    #[async_trait]
    impl CaptureStateStore for State {
        async fn load(&self, identity: &str) -> Result<Option<Recorded>, CaptureError>;
        async fn create(&self, identity: &str, record: &Recorded, owner_host: &str) -> Result<(), CaptureError>;
        async fn record_position(&self, identity: &str, position: Lsn, owner_host: &str) -> Result<(), CaptureError>;
        async fn slot_lag(&self, slot: &str) -> Result<Option<u64>, CaptureError>;
    }
}

mock! {
    Wakes {}
    #[async_trait]
    impl WakeChannel for Wakes {
        async fn announce(&self, channel: &str) -> Result<(), CaptureError>;
        async fn subscribe(&self, channel: &str) -> Result<Box<dyn WakeFeed>, CaptureError>;
    }
}

/// A session whose lock answers `owned` and that is never asked for more in these tests.
struct LockOnly {
    owned: bool,
}

#[async_trait]
impl CaptureSession for LockOnly {
    async fn claim_ownership(&mut self) -> Result<bool, CaptureError> {
        Ok(self.owned)
    }
    async fn check_ready(&mut self) -> Result<(), CaptureError> {
        Err(CaptureError::Setup("wal_level is replica".into()))
    }
    async fn slot(&mut self) -> Result<Option<SlotPosition>, CaptureError> {
        Ok(None)
    }
    async fn create_slot(&mut self) -> Result<Lsn, CaptureError> {
        Ok(Lsn(0))
    }
    async fn skip_to_log_end(&mut self) -> Result<Lsn, CaptureError> {
        Ok(Lsn(0))
    }
    async fn stream(self: Box<Self>) -> Result<Box<dyn ChangeStream>, CaptureError> {
        Err(CaptureError::Connection("not in these tests".into()))
    }
}

fn options(dir: &std::path::Path) -> CaptureOptions {
    CaptureOptions {
        identity: "queuebox".into(),
        scope: CaptureScope {
            mode: "postgres-logical".into(),
            host: "db".into(),
            port: 5432,
            database: "queuebox".into(),
            schema: "public".into(),
            table: "outbox".into(),
            slot: "queuebox_outbox".into(),
            publication: "queuebox_outbox".into(),
        },
        state_directory: dir.to_path_buf(),
        owner_host: "test".into(),
        offsets_every: Duration::from_secs(1),
        record_every: Duration::from_secs(5),
    }
}

fn ports(connector: MockConnector) -> CapturePorts {
    let mut state = MockState::new();
    state.expect_load().returning(|_| Ok(None));
    CapturePorts {
        connector: Arc::new(connector),
        state: Arc::new(state),
        wakes: Arc::new(MockWakes::new()),
    }
}

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

#[tokio::test(start_paused = true)]
async fn failures_retry_from_one_second_doubling_to_thirty_and_each_attempt_wakes_delivery() {
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&attempts);
    let started = Instant::now();
    let mut connector = MockConnector::new();
    connector.expect_open().returning(move |_| {
        seen.lock().expect("lock").push(started.elapsed());
        Err(CaptureError::Connection("connection refused".into()))
    });
    let dir = scratch();
    let wake = DeliveryWake::new();
    let runner = CaptureRunner::new(ports(connector), options(dir.path()), wake.clone());
    let health = runner.health_check();
    let mut workers = Workers::new();
    workers.spawn("capture", move |stop| runner.run(stop));
    // Every attempt wakes delivery: the wake-up is there before any time passes.
    tokio::time::timeout(Duration::from_millis(1), wake.woken())
        .await
        .expect("the first attempt woke delivery");
    tokio::time::sleep(Duration::from_secs(100)).await;
    let gaps: Vec<u64> = attempts
        .lock()
        .expect("lock")
        .windows(2)
        .map(|pair| (pair[1] - pair[0]).as_secs())
        .collect();
    assert_eq!(gaps, [1, 2, 4, 8, 16, 30, 30]);
    let reason = health.check().await.expect_err("down while retrying");
    assert!(reason.contains("connection refused"), "{reason}");
    assert!(!health.decides_readiness(), "capture is advisory");
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_lock_held_by_another_process_reports_a_second_owner_and_checks_every_thirty_seconds() {
    let opened = Arc::new(Mutex::new(0));
    let count = Arc::clone(&opened);
    let mut connector = MockConnector::new();
    connector.expect_open().returning(move |_| {
        *count.lock().expect("lock") += 1;
        Ok(Box::new(LockOnly { owned: false }) as Box<dyn CaptureSession>)
    });
    let dir = scratch();
    let runner = CaptureRunner::new(ports(connector), options(dir.path()), DeliveryWake::new());
    let health = runner.health_check();
    let mut workers = Workers::new();
    workers.spawn("capture", move |stop| runner.run(stop));
    tokio::time::sleep(Duration::from_secs(100)).await;
    // At 0, 30, 60 and 90 s.
    assert_eq!(*opened.lock().expect("lock"), 4);
    let reason = health.check().await.expect_err("stopped");
    assert!(reason.contains("already has an owner"), "{reason}");
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_lock_held_at_a_later_attempt_is_retried() {
    // The first attempt owns the lock and fails a check; later the lock is briefly held (by the
    // server's memory of that first session): a retry, not a stop.
    let opened = Arc::new(Mutex::new(0));
    let count = Arc::clone(&opened);
    let mut connector = MockConnector::new();
    connector.expect_open().returning(move |_| {
        let mut n = count.lock().expect("lock");
        *n += 1;
        Ok(Box::new(LockOnly { owned: *n == 1 }) as Box<dyn CaptureSession>)
    });
    let dir = scratch();
    let runner = CaptureRunner::new(ports(connector), options(dir.path()), DeliveryWake::new());
    let health = runner.health_check();
    let mut workers = Workers::new();
    workers.spawn("capture", move |stop| runner.run(stop));
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(
        *opened.lock().expect("lock") >= 4,
        "the lock was not retried"
    );
    let reason = health.check().await.expect_err("retrying");
    assert!(reason.contains("still held"), "{reason}");
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_setup_failure_names_what_to_fix_and_is_retried() {
    let mut connector = MockConnector::new();
    connector
        .expect_open()
        .returning(|_| Ok(Box::new(LockOnly { owned: true }) as Box<dyn CaptureSession>));
    let dir = scratch();
    let runner = CaptureRunner::new(ports(connector), options(dir.path()), DeliveryWake::new());
    let health = runner.health_check();
    let mut workers = Workers::new();
    workers.spawn("capture", move |stop| runner.run(stop));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let reason = health.check().await.expect_err("retrying");
    assert!(
        reason.contains("retrying: wal_level is replica"),
        "{reason}"
    );
    assert!(workers.stop(Duration::from_secs(5)).await.is_empty());
}
