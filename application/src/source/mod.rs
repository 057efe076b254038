//! The broker source driver: one consume loop for every source kind, over the
//! [`SourceClient`] port.
//!
//! The client does the broker calls; the driver owns the rest, the same for every kind:
//!
//! - **Batches.** It receives up to `plan.batch` messages, stores them through the
//!   [`Ingest`] port, settles the whole batch, then receives again. Messages sharing an order key
//!   (a Kafka partition and record key) or an idempotency key are stored one after the other in
//!   the broker's order, so the first of a key is the row kept; the others side by side.
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
//! - **Drain.** On stop it receives nothing more, lets the batch being stored finish within
//!   `plan.drain_timeout` (a wait before a hand-back is cut short), settles it (what did not
//!   finish is handed back) and closes the client.

mod order;
#[cfg(test)]
mod tests;
mod verdict;

use queuebox_ports::health::SharedComponent;
use queuebox_ports::ingest::{Ingest, IngestOutcome, Received};
use queuebox_ports::source::{Delivery, Settle, SourceClient, SourcePlan};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::task::JoinSet;
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
    ingest: Arc<dyn Ingest>,
    health: SharedComponent,
    /// Consecutive batches with a failed store, for the retry backoff.
    storage_failures: u32,
}

impl<C: SourceClient> std::fmt::Debug for SourceDriver<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceDriver")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
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

impl<C: SourceClient> SourceDriver<C> {
    /// A driver of `client` storing through `ingest`. The plan is read once, here.
    pub fn new(client: C, ingest: Arc<dyn Ingest>) -> Self {
        let mut plan = client.plan();
        plan.batch = plan.batch.max(1);
        let health = SharedComponent::down_until_up(
            format!("{}.{}", plan.kind, plan.source),
            NOT_CONSUMING_YET,
        );
        Self {
            client,
            plan,
            ingest,
            health,
            storage_failures: 0,
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
                    match self.consume(&mut stop).await {
                        None => break,
                        Some(reason) => {
                            tracing::warn!(%kind, %source, %reason, "broker source stopped consuming; connecting again");
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

    /// Receives, stores and settles batches until the stop (`None`) or a break (its reason).
    async fn consume(&mut self, stop: &mut Stop<'_>) -> Option<String> {
        let mut check = self.plan.check_every.map(|every| {
            let mut check = tokio::time::interval_at(Instant::now() + every, every);
            check.set_missed_tick_behavior(MissedTickBehavior::Delay);
            check
        });
        loop {
            let received = tokio::select! {
                biased;
                () = stop.wait() => return None,
                () = tick(&mut check) => {
                    if let Err(failure) = self.client.check().await {
                        return Some(failure.reason);
                    }
                    continue;
                }
                received = self.client.receive(self.plan.batch) => received,
            };
            let batch = match received {
                Ok(batch) => batch,
                Err(failure) => return Some(failure.reason),
            };
            if batch.is_empty() {
                continue;
            }
            let settled = self.store(batch, stop).await;
            self.client.settle(settled).await;
            if stop.fired {
                return None;
            }
        }
    }

    /// Stores one batch and decides each message's settlement (after any wait it needs).
    async fn store(
        &mut self,
        batch: Vec<Delivery<C::Token>>,
        stop: &mut Stop<'_>,
    ) -> Vec<(C::Token, Settle)> {
        let count = batch.len();
        let mut tokens = Vec::with_capacity(count);
        let mut messages: Vec<Option<Received>> = Vec::with_capacity(count);
        let mut keys = Vec::with_capacity(count);
        for delivery in batch {
            let mut message_keys = Vec::with_capacity(2);
            if let Some(order_key) = delivery.order_key {
                message_keys.push(format!("order:{order_key}"));
            }
            if let Some(key) = self
                .ingest
                .idempotency_key(&self.plan.source, &delivery.received)
            {
                message_keys.push(format!("key:{key}"));
            }
            keys.push(message_keys);
            tokens.push(delivery.token);
            messages.push(Some(delivery.received));
        }
        let outcomes: Arc<Mutex<Vec<Option<IngestOutcome>>>> =
            Arc::new(Mutex::new(vec![None; count]));
        let mut tasks = JoinSet::new();
        for chain in order::chains(&keys) {
            let chain: Vec<(usize, Received)> = chain
                .into_iter()
                .filter_map(|index| messages[index].take().map(|m| (index, m)))
                .collect();
            let ingest = Arc::clone(&self.ingest);
            let source = self.plan.source.clone();
            let outcomes = Arc::clone(&outcomes);
            tasks.spawn(async move {
                for (index, received) in chain {
                    let outcome = ingest.ingest(&source, received).await.outcome;
                    if let Some(slot) = outcomes
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .get_mut(index)
                    {
                        *slot = Some(outcome);
                    }
                }
            });
        }
        self.wait_for(&mut tasks, stop).await;
        let outcomes =
            std::mem::take(&mut *outcomes.lock().unwrap_or_else(PoisonError::into_inner));

        let mut settled = Vec::with_capacity(count);
        let mut wait = Duration::ZERO;
        let (mut stored, mut storage_failed) = (false, false);
        for (token, outcome) in tokens.into_iter().zip(outcomes) {
            let Some(outcome) = outcome else {
                // Not finished within the drain bound: handed back.
                settled.push((token, Settle::Retry));
                continue;
            };
            match verdict(&outcome) {
                Verdict::Ack => {
                    stored |= !matches!(outcome, IngestOutcome::Filtered);
                    settled.push((token, Settle::Ack));
                }
                Verdict::AckUnstored { reason } => {
                    tracing::error!(
                        kind = %self.plan.kind, source = %self.plan.source, %reason,
                        "the ingest pipeline refused a broker message without storing it; \
                         acknowledging it so it cannot come back for ever (the message is dropped)"
                    );
                    settled.push((token, Settle::Ack));
                }
                Verdict::Retry { reason, wait: this } => {
                    let this = match this {
                        Wait::Growing => {
                            if !storage_failed {
                                storage_failed = true;
                                self.storage_failures = self.storage_failures.saturating_add(1);
                            }
                            self.plan.retry.delay(self.storage_failures)
                        }
                        Wait::For(wait) => wait,
                        Wait::First => self.plan.retry.min(),
                    };
                    tracing::warn!(
                        kind = %self.plan.kind, source = %self.plan.source, %reason,
                        retry_in_ms = millis(this),
                        "a broker message is handed back"
                    );
                    wait = wait.max(this);
                    settled.push((token, Settle::Retry));
                }
            }
        }
        if stored && !storage_failed {
            self.storage_failures = 0;
        }
        if !wait.is_zero() && !stop.fired {
            tokio::select! {
                biased;
                () = stop.wait() => self.health.down(STOPPING),
                () = tokio::time::sleep(wait) => {}
            }
        }
        settled
    }

    /// Waits for the batch's tasks; after the stop, for at most the drain bound.
    async fn wait_for(&self, tasks: &mut JoinSet<()>, stop: &mut Stop<'_>) {
        let mut deadline = stop.fired.then(|| Instant::now() + self.plan.drain_timeout);
        while !tasks.is_empty() {
            tokio::select! {
                biased;
                joined = tasks.join_next() => {
                    if let Some(Err(error)) = joined && error.is_panic() {
                        tracing::error!(kind = %self.plan.kind, source = %self.plan.source, "a broker message task panicked; the message is handed back");
                    }
                }
                () = stop.wait(), if deadline.is_none() => {
                    self.health.down(STOPPING);
                    deadline = Some(Instant::now() + self.plan.drain_timeout);
                }
                () = sleep_until(deadline) => {
                    tracing::warn!(
                        kind = %self.plan.kind, source = %self.plan.source, in_flight = tasks.len(),
                        drain_timeout_ms = millis(self.plan.drain_timeout),
                        "broker source stopping with messages still being stored; they are handed back"
                    );
                    tasks.abort_all();
                    while tasks.join_next().await.is_some() {}
                }
            }
        }
    }
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

/// Sleeps until `deadline`; for ever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
