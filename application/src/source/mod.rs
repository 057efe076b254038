//! The broker source driver: one consume loop for every source kind, over the
//! [`SourceClient`] port.
//!
//! The client does the broker calls; the driver owns the rest, the same for every kind:
//!
//! - **The pipeline.** At most `plan.batch` messages are in it at once; each is stored through
//!   the [`Ingest`] port and settled as soon as it is decided (with `plan.whole_batches`, the
//!   next batch is received once the last one is decided, and a batch is settled in one call).
//!   Messages sharing an order key (a Kafka partition and record key) or an idempotency key are
//!   stored one after the other in the broker's order, so the first of a key is the row kept;
//!   the others side by side.
//! - **Settlement.** A message is acknowledged only after its row committed (or when there is
//!   nothing to store: a duplicate, a filtered message). A non-JSON body or a rejected transform
//!   is stored by the pipeline as a `dead` row and acknowledged. A failed store is handed back
//!   after the retry backoff, which grows while stores keep failing; a rate-limited store is
//!   handed back after the wait the limit asked for. A crash between the commit and the
//!   acknowledgement redelivers the message, and the idempotency key turns the copy into a
//!   duplicate.
//! - **Reconnect.** A failed connect, a broken session or a failed check marks the health
//!   component down with the client's reason and connects again after the reconnect backoff
//!   (the one [`Backoff`](queuebox_ports::backoff::Backoff) policy).
//! - **Health.** The component `<kind>.<source>`: down "not consuming yet" until the first
//!   connect, up while consuming, down with the reason while not, "stopping" during the drain and
//!   "stopped" at the end.
//! - **Drain.** On stop (and on a break, before it connects again) it receives nothing more,
//!   lets the messages being stored finish within `plan.drain_timeout` (a wait before a
//!   hand-back is cut short at the stop), settles them (what did not finish is handed back) and,
//!   at the stop, closes the client.

mod order;
#[cfg(test)]
mod tests;
mod verdict;

use order::{KeyOrder, Turn};
use queuebox_ports::backoff::Backoff;
use queuebox_ports::health::SharedComponent;
use queuebox_ports::ingest::{Ingest, IngestOutcome, Received};
use queuebox_ports::source::{Delivery, Settle, SourceClient, SourcePlan};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::{Id as TaskId, JoinSet};
use tokio::time::{Instant, Interval, MissedTickBehavior};
use verdict::{Verdict, Wait, verdict};

/// The health reason before the first session.
pub const NOT_CONSUMING_YET: &str = "not consuming yet";
/// The health reason while a stopping source drains.
pub const STOPPING: &str = "stopping";
/// The health reason once the source stopped.
pub const STOPPED: &str = "stopped";

/// One broker source: its client, the ingest pipeline and its health component.
///
/// Build it at start with [`SourceDriver::new`] (the client has made no connection), register
/// [`SourceDriver::health`], then drive [`SourceDriver::run`] as a worker until the shutdown.
pub struct SourceDriver<C: SourceClient> {
    client: C,
    plan: SourcePlan,
    health: SharedComponent,
    shared: Arc<Shared>,
    stopping: watch::Sender<bool>,
}

impl<C: SourceClient> std::fmt::Debug for SourceDriver<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceDriver")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

/// What every message task reads.
struct Shared {
    kind: &'static str,
    source: String,
    ingest: Arc<dyn Ingest>,
    retry: Backoff,
    /// Consecutive messages whose store failed, for the retry backoff.
    storage_failures: AtomicU32,
}

/// The stop future, remembered once it fired.
struct Stop<'a> {
    future: Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
    fired: bool,
}

impl Stop<'_> {
    /// Completes when the stop fires (at once when it already did).
    async fn wait(&mut self) {
        if !self.fired {
            self.future.as_mut().await;
            self.fired = true;
        }
    }
}

/// The messages of a session still in the pipeline, and the decided ones not settled yet.
struct InFlight<T> {
    tokens: HashMap<u64, T>,
    tasks: JoinSet<(u64, Settle)>,
    task_ids: HashMap<TaskId, u64>,
    /// Decided messages not settled yet, with their place in the broker's order.
    decided: Vec<(u64, T, Settle)>,
    order: KeyOrder,
    next: u64,
}

impl<T> InFlight<T> {
    fn new(batch: usize) -> Self {
        Self {
            tokens: HashMap::new(),
            tasks: JoinSet::new(),
            task_ids: HashMap::new(),
            decided: Vec::new(),
            order: KeyOrder::new(batch),
            next: 0,
        }
    }

    /// Files the result of one finished task.
    fn finished(&mut self, joined: Result<(TaskId, (u64, Settle)), tokio::task::JoinError>) {
        let (id, settle) = match joined {
            Ok((task, (id, settle))) => {
                self.task_ids.remove(&task);
                (id, settle)
            }
            Err(error) => {
                let Some(id) = self.task_ids.remove(&error.id()) else {
                    return;
                };
                if error.is_panic() {
                    tracing::error!("a broker message task panicked; the message is handed back");
                }
                (id, Settle::Retry)
            }
        };
        if let Some(token) = self.tokens.remove(&id) {
            self.decided.push((id, token, settle));
        }
    }

    /// The decided messages, in the broker's order, taken out for settling.
    fn take_decided(&mut self) -> Vec<(T, Settle)> {
        let mut decided = std::mem::take(&mut self.decided);
        decided.sort_by_key(|(id, _, _)| *id);
        decided
            .into_iter()
            .map(|(_, token, settle)| (token, settle))
            .collect()
    }
}

impl<C: SourceClient> SourceDriver<C> {
    /// A driver of `client` storing through `ingest`. The plan is read once, here.
    pub fn new(client: C, ingest: Arc<dyn Ingest>) -> Self {
        let mut plan = client.plan();
        plan.batch = plan.batch.max(1);
        let health = SharedComponent::down_until_up(
            format!("{}.{}", plan.kind, plan.source),
            NOT_CONSUMING_YET,
        );
        let shared = Arc::new(Shared {
            kind: plan.kind,
            source: plan.source.clone(),
            ingest,
            retry: plan.retry,
            storage_failures: AtomicU32::new(0),
        });
        Self {
            client,
            plan,
            health,
            shared,
            stopping: watch::Sender::new(false),
        }
    }

    /// The health component `<kind>.<source>`; clones share the state with the running driver.
    pub fn health(&self) -> SharedComponent {
        self.health.clone()
    }

    /// Consumes until `stop` completes, then drains, closes the client and returns. It never
    /// returns before `stop` completes and never panics.
    pub async fn run(mut self, stop: impl Future<Output = ()> + Send) {
        let mut stop = Stop {
            future: Box::pin(stop),
            fired: false,
        };
        let (kind, source) = (self.plan.kind, self.plan.source.clone());
        let mut failures: u32 = 0;
        let mut last_reason: Option<String> = None;
        loop {
            let connected = tokio::select! {
                biased;
                () = stop.wait() => break,
                connected = self.client.connect() => connected,
            };
            let reason = match connected {
                Ok(()) => {
                    self.health.up();
                    last_reason = None;
                    tracing::info!(
                        %kind, %source, consumes = %self.plan.consumes, batch = self.plan.batch,
                        "broker source consuming"
                    );
                    let mut in_flight = InFlight::new(self.plan.batch);
                    let ended = self.consume(&mut stop, &mut in_flight).await;
                    match ended {
                        None => {
                            self.health.down(STOPPING);
                            self.stopping.send_replace(true);
                            self.drain(&mut in_flight).await;
                            break;
                        }
                        Some(reason) => {
                            tracing::warn!(%kind, %source, %reason, "broker source stopped consuming; connecting again");
                            self.health.down(reason.clone());
                            self.drain(&mut in_flight).await;
                            // The link worked until now: start over from the shortest wait.
                            failures = 0;
                            reason
                        }
                    }
                }
                Err(failure) => failure.reason,
            };
            failures = failures.saturating_add(1);
            let delay = self.plan.reconnect.delay(failures);
            let retry_in_ms = millis(delay);
            if last_reason.as_deref() == Some(reason.as_str()) {
                tracing::debug!(%kind, %source, %reason, failures, retry_in_ms, "broker source still cannot consume");
            } else {
                tracing::error!(%kind, %source, %reason, failures, retry_in_ms, "broker source cannot consume");
            }
            self.health.down(reason.clone());
            last_reason = Some(reason);
            tokio::select! {
                biased;
                () = stop.wait() => break,
                () = tokio::time::sleep(delay) => {}
            }
        }
        self.health.down(STOPPING);
        self.client.close().await;
        self.health.down(STOPPED);
        tracing::info!(%kind, %source, "broker source stopped");
    }

    /// Receives, stores and settles until the stop (`None`) or a break (its reason).
    async fn consume(
        &mut self,
        stop: &mut Stop<'_>,
        in_flight: &mut InFlight<C::Token>,
    ) -> Option<String> {
        let mut check = self.plan.check_every.map(|every| {
            let mut check = tokio::time::interval_at(Instant::now() + every, every);
            check.set_missed_tick_behavior(MissedTickBehavior::Delay);
            check
        });
        loop {
            let whole = self.plan.whole_batches;
            if !in_flight.decided.is_empty() && (!whole || in_flight.tokens.is_empty()) {
                let decided = in_flight.take_decided();
                self.client.settle(decided).await;
            }
            let room = self.plan.batch.saturating_sub(in_flight.tokens.len());
            let may_receive = room > 0 && (!whole || in_flight.tokens.is_empty());
            tokio::select! {
                biased;
                () = stop.wait() => return None,
                Some(joined) = in_flight.tasks.join_next_with_id(), if !in_flight.tasks.is_empty() => {
                    in_flight.finished(joined);
                }
                () = tick(&mut check) => {
                    if let Err(failure) = self.client.check().await {
                        return Some(failure.reason);
                    }
                }
                received = self.client.receive(room), if may_receive => match received {
                    Ok(batch) => self.start(batch, in_flight),
                    Err(failure) => return Some(failure.reason),
                },
            }
        }
    }

    /// Puts received messages into the pipeline, each after the earlier ones of its keys.
    fn start(&self, batch: Vec<Delivery<C::Token>>, in_flight: &mut InFlight<C::Token>) {
        for delivery in batch {
            let mut keys = Vec::with_capacity(2);
            if let Some(order_key) = delivery.order_key {
                keys.push(format!("order:{order_key}"));
            }
            if let Some(key) = self
                .shared
                .ingest
                .idempotency_key(&self.shared.source, &delivery.received)
            {
                keys.push(format!("key:{key}"));
            }
            let turn = in_flight.order.turn(keys);
            let id = in_flight.next;
            in_flight.next += 1;
            in_flight.tokens.insert(id, delivery.token);
            let shared = Arc::clone(&self.shared);
            let stopping = self.stopping.subscribe();
            let task = in_flight
                .tasks
                .spawn(store(shared, delivery.received, turn, stopping, id));
            in_flight.task_ids.insert(task.id(), id);
        }
    }

    /// Lets the messages in the pipeline finish within the drain bound, hands back the rest and
    /// settles them all.
    async fn drain(&mut self, in_flight: &mut InFlight<C::Token>) {
        let deadline = Instant::now() + self.plan.drain_timeout;
        while !in_flight.tasks.is_empty() {
            match tokio::time::timeout_at(deadline, in_flight.tasks.join_next_with_id()).await {
                Ok(Some(joined)) => in_flight.finished(joined),
                Ok(None) => break,
                Err(_) => {
                    tracing::warn!(
                        kind = %self.plan.kind, source = %self.plan.source,
                        in_flight = in_flight.tasks.len(),
                        drain_timeout_ms = millis(self.plan.drain_timeout),
                        "broker source stopping with messages still being stored; they are handed back"
                    );
                    in_flight.tasks.abort_all();
                    while let Some(joined) = in_flight.tasks.join_next_with_id().await {
                        in_flight.finished(joined);
                    }
                }
            }
        }
        let unfinished: Vec<(u64, C::Token)> = in_flight.tokens.drain().collect();
        in_flight.decided.extend(
            unfinished
                .into_iter()
                .map(|(id, token)| (id, token, Settle::Retry)),
        );
        let decided = in_flight.take_decided();
        if !decided.is_empty() {
            self.client.settle(decided).await;
        }
    }
}

/// One message's task: waits for its turn, stores it, decides its settlement (waiting before a
/// hand-back, cut short by the stop) and returns it.
async fn store(
    shared: Arc<Shared>,
    received: Received,
    mut turn: Turn,
    mut stopping: watch::Receiver<bool>,
    id: u64,
) -> (u64, Settle) {
    turn.wait().await;
    let outcome = shared.ingest.ingest(&shared.source, received).await.outcome;
    let (kind, source) = (shared.kind, shared.source.as_str());
    let settle = match verdict(&outcome) {
        Verdict::Ack => {
            if !matches!(outcome, IngestOutcome::Filtered) {
                shared.storage_failures.store(0, Ordering::Relaxed);
            }
            Settle::Ack
        }
        Verdict::AckUnstored { reason } => {
            tracing::error!(
                %kind, %source, %reason,
                "the ingest pipeline refused a broker message without storing it; acknowledging \
                 it so it cannot come back for ever (the message is dropped)"
            );
            Settle::Ack
        }
        Verdict::Retry { reason, wait } => {
            let wait = match wait {
                Wait::Growing => {
                    let failures = shared
                        .storage_failures
                        .fetch_add(1, Ordering::Relaxed)
                        .saturating_add(1);
                    shared.retry.delay(failures)
                }
                Wait::For(wait) => wait,
                Wait::First => shared.retry.min(),
            };
            tracing::warn!(%kind, %source, %reason, retry_in_ms = millis(wait), "a broker message is handed back");
            if !*stopping.borrow() {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = stopping.wait_for(|stopping| *stopping) => {}
                }
            }
            Settle::Retry
        }
    };
    drop(turn);
    (id, settle)
}

/// The next tick of `check`; never, without one.
async fn tick(check: &mut Option<Interval>) {
    match check {
        Some(check) => {
            check.tick().await;
        }
        None => std::future::pending().await,
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
