//! The source suite: what every broker source promises once the application's source driver runs
//! its client, checked against the real broker a [`SourceFixture`] sets up (its own queue, topic
//! or stream per test).
//!
//! The ingest side is a [`Recorder`]: a scripted stand-in for the
//! ingest pipeline that keeps the rows it "committed" with the inbox's unique key, so "stored
//! once" is observable without a database.

pub use crate::recorder::{Recorder, Table};
use async_trait::async_trait;
use queuebox_ports::health::{HealthCheck, SharedComponent};
use queuebox_ports::ingest::{Ingest, IngestOutcome, Rejection};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long the suite waits for anything a source does before it fails.
pub const WAIT: Duration = Duration::from_secs(30);
/// The first retry wait a fixture MUST configure (the wait before a message whose store failed
/// is handed back).
pub const RETRY_DELAY: Duration = Duration::from_millis(300);
/// The wait the suite's rate limit asks for.
pub const RATE_LIMIT_WAIT: Duration = Duration::from_millis(900);

/// A source running under the driver, and the means to stop or kill it.
pub struct RunningSource {
    /// The source's health component.
    pub health: SharedComponent,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl RunningSource {
    /// Spawns `run` (the driver's `run` given the stop future) with `health` (the driver's
    /// component).
    pub fn spawn<F, Fut>(health: SharedComponent, run: F) -> Self
    where
        F: FnOnce(Box<dyn Future<Output = ()> + Send + Unpin>) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(run(Box::new(Box::pin(async move {
            let _ = stopped.await;
        }))));
        Self {
            health,
            stop: Some(stop),
            task,
        }
    }

    /// Waits until the health component is up.
    pub async fn wait_up(&self) {
        wait_until("the source to consume", || async {
            self.health.check().await.is_ok()
        })
        .await;
    }

    /// Asks the source to stop without waiting.
    pub fn request_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Stops the source and waits (bounded) for it to return; its health component.
    pub async fn stop(mut self) -> SharedComponent {
        self.request_stop();
        match tokio::time::timeout(WAIT, self.task).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => panic!("the source task failed: {error}"),
            Err(_) => panic!("the source did not return within {WAIT:?} of the stop"),
        }
        self.health
    }

    /// Ends the source at once, as a crash would: nothing is settled or closed in order.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// A broker, as the suite needs it. Each [`fresh`](SourceFixture::fresh) sets up a queue,
/// topic or stream of its own, already existing and empty.
///
/// [`start`](SourceFixture::start) MUST configure the client with a first retry wait of
/// [`RETRY_DELAY`], a drain bound of at least [`WAIT`] / 3, and where the broker redelivers by
/// timer (NATS `ackWaitMs`), a redelivery within a few seconds.
#[async_trait]
pub trait SourceFixture: Sized + Send + Sync + 'static {
    /// Whether the broker can be tested here (its URL is set). When false, each test prints
    /// why and passes without running.
    fn available() -> bool {
        true
    }

    /// A fresh queue, topic or stream and the means to publish to it.
    async fn fresh() -> Self;

    /// The source's client on this broker under the driver, storing through `ingest`.
    fn start(&self, ingest: Arc<dyn Ingest>) -> RunningSource;

    /// Publishes one message with `body`.
    async fn publish(&self, body: &[u8]);

    /// Messages published and not acknowledged yet (ready plus unacknowledged; the group's lag).
    async fn unsettled(&self) -> u64;

    /// The name a health reason names when what the source reads is gone (the queue, topic or
    /// stream name).
    fn name(&self) -> String;

    /// Deletes what the source reads.
    async fn remove(&self);

    /// Creates it again.
    async fn restore(&self);

    /// Removes what the fixture set up. Called at the end of every test that passes.
    async fn done(self) {}
}

/// Waits until `condition` holds, failing after [`WAIT`].
pub async fn wait_until<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    crate::wait::wait_for(what, WAIT, || {
        let holds = condition();
        async move { holds.await.then_some(()) }
    })
    .await;
}

async fn wait_unsettled<F: SourceFixture>(fixture: &F, expected: u64) {
    wait_until(&format!("{expected} unsettled messages"), || async {
        fixture.unsettled().await == expected
    })
    .await;
}

/// A fresh fixture and its source running with `recorder`, consuming; `None` when the broker is
/// not available here.
async fn begin<F: SourceFixture>(recorder: &Arc<Recorder>) -> Option<(F, RunningSource)> {
    if skip::<F>() {
        return None;
    }
    let fixture = F::fresh().await;
    let running = fixture.start(Arc::clone(recorder) as _);
    running.wait_up().await;
    Some((fixture, running))
}

/// Stops the source and removes the fixture.
async fn finish<F: SourceFixture>(fixture: F, running: RunningSource) {
    running.stop().await;
    fixture.done().await;
}

fn skip<F: SourceFixture>() -> bool {
    if F::available() {
        return false;
    }
    eprintln!("skipped: the broker of this source fixture is not available");
    true
}

/// Two messages of one key and one of another: one row per key, the first of a key kept, and
/// every message acknowledged.
pub async fn source_stores_once_per_key_the_first_kept<F: SourceFixture>() {
    let recorder = Recorder::answering([]);
    let Some((fixture, running)) = begin::<F>(&recorder).await else {
        return;
    };
    fixture.publish(br#"{"id":"k","n":1}"#).await;
    fixture.publish(br#"{"id":"k","n":2}"#).await;
    fixture.publish(br#"{"id":"other","n":3}"#).await;
    recorder.wait_calls(3).await;
    wait_unsettled(&fixture, 0).await;
    let rows = recorder.table().rows();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let kept = rows.iter().find(|(k, _)| k == "k").map(|(_, b)| b.clone());
    assert_eq!(kept.as_deref(), Some(br#"{"id":"k","n":1}"#.as_slice()));
    finish(fixture, running).await;
}

/// A message is acknowledged only once the store answered: held in the store, it stays
/// unsettled on the broker.
pub async fn source_acknowledges_only_after_the_store_answered<F: SourceFixture>() {
    let recorder = Recorder::gated();
    let Some((fixture, running)) = begin::<F>(&recorder).await else {
        return;
    };
    fixture.publish(br#"{"id":"held"}"#).await;
    recorder.wait_calls(1).await;
    // Longer than any broker's automatic commit or acknowledgement interval.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        fixture.unsettled().await,
        1,
        "acknowledged before the store answered"
    );
    recorder.open(1);
    wait_unsettled(&fixture, 0).await;
    finish(fixture, running).await;
}

/// A failed store hands the message back after the retry wait; it comes again and is stored.
pub async fn source_a_failed_store_comes_again_after_the_retry_delay<F: SourceFixture>() {
    let recorder = Recorder::answering([IngestOutcome::Rejected(Rejection::StorageFailed)]);
    let Some((fixture, running)) = begin::<F>(&recorder).await else {
        return;
    };
    fixture.publish(br#"{"id":"again"}"#).await;
    recorder.wait_calls(2).await;
    wait_unsettled(&fixture, 0).await;
    let times = recorder.call_times();
    assert!(
        times[1] - times[0] >= RETRY_DELAY,
        "came again after {:?}, before the retry delay",
        times[1] - times[0]
    );
    assert_eq!(recorder.table().rows().len(), 1);
    finish(fixture, running).await;
}

/// A rate-limited store waits for the wait the limit asked for before the message comes again.
pub async fn source_a_rate_limited_store_waits_for_its_delay<F: SourceFixture>() {
    let recorder = Recorder::answering([IngestOutcome::RateLimited {
        retry_after: RATE_LIMIT_WAIT,
    }]);
    let Some((fixture, running)) = begin::<F>(&recorder).await else {
        return;
    };
    fixture.publish(br#"{"id":"limited"}"#).await;
    recorder.wait_calls(2).await;
    let times = recorder.call_times();
    assert!(
        times[1] - times[0] >= RATE_LIMIT_WAIT,
        "came again after {:?}, before the rate limit's wait",
        times[1] - times[0]
    );
    wait_unsettled(&fixture, 0).await;
    finish(fixture, running).await;
}

/// A body that is not JSON reaches the store byte for byte, is kept as a dead row and is
/// acknowledged; it does not come again.
pub async fn source_a_non_json_body_becomes_a_dead_row_and_is_acknowledged<F: SourceFixture>() {
    let recorder = Recorder::answering([]);
    let Some((fixture, running)) = begin::<F>(&recorder).await else {
        return;
    };
    let body: &[u8] = b"not json \xff\x00 at all";
    fixture.publish(body).await;
    recorder.wait_calls(1).await;
    wait_unsettled(&fixture, 0).await;
    assert_eq!(recorder.calls()[0].body, body);
    tokio::time::sleep(RETRY_DELAY * 3).await;
    assert_eq!(
        recorder.call_count(),
        1,
        "a dead row is not delivered again"
    );
    finish(fixture, running).await;
}

/// Health goes down naming what is gone, and up again once it is back; consuming resumes.
pub async fn source_health_names_the_cause_and_recovers<F: SourceFixture>() {
    let recorder = Recorder::answering([]);
    let Some((fixture, running)) = begin::<F>(&recorder).await else {
        return;
    };
    fixture.remove().await;
    let name = fixture.name();
    wait_until("the health to name what is gone", || async {
        running
            .health
            .check()
            .await
            .err()
            .is_some_and(|reason| reason.contains(&name))
    })
    .await;
    fixture.restore().await;
    running.wait_up().await;
    fixture.publish(br#"{"id":"back"}"#).await;
    recorder.wait_calls(1).await;
    wait_unsettled(&fixture, 0).await;
    finish(fixture, running).await;
}

/// The stop lets the message being stored finish and acknowledges it; health ends `stopped`.
pub async fn source_stop_drains_and_ends_stopped<F: SourceFixture>() {
    let recorder = Recorder::gated();
    let Some((fixture, mut running)) = begin::<F>(&recorder).await else {
        return;
    };
    fixture.publish(br#"{"id":"draining"}"#).await;
    recorder.wait_calls(1).await;
    running.request_stop();
    wait_until("the health to say stopping", || async {
        running.health.check().await == Err("stopping".to_owned())
    })
    .await;
    recorder.open(1);
    let health = running.stop().await;
    assert_eq!(health.check().await, Err("stopped".to_owned()));
    wait_unsettled(&fixture, 0).await;
    assert_eq!(recorder.table().rows().len(), 1);
    fixture.done().await;
}

/// Killed after the row committed and before the acknowledgement, the source's next run gets the
/// message again and the key makes it a duplicate: stored once.
pub async fn source_a_kill_between_commit_and_ack_stores_once<F: SourceFixture>() {
    let table = Table::default();
    let first = Recorder::gated_into(table.clone());
    let Some((fixture, running)) = begin::<F>(&first).await else {
        return;
    };
    fixture.publish(br#"{"id":"once"}"#).await;
    first.wait_calls(1).await;
    assert_eq!(table.rows().len(), 1, "committed before the kill");
    running.kill().await;

    let second = Recorder::storing_into(table.clone());
    let running = fixture.start(Arc::clone(&second) as _);
    second.wait_calls(1).await;
    wait_unsettled(&fixture, 0).await;
    assert_eq!(table.rows().len(), 1, "stored once");
    finish(fixture, running).await;
}
