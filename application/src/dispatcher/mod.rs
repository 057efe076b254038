//! The outbox dispatcher: claim due rows, route each, publish with bounded concurrency, and finish
//! each row with a fenced write. Every replica runs one; the database keeps them apart.
//!
//! ```text
//!  claim loop ──rows──► starter ──► publish tasks (≤ concurrency) ──finish──► finisher (batched)
//!       ▲                                                               │ wakes the claim loop: a
//!       └───────────────────────────────────────────────────────────────┘ finished head frees its key
//!  maintenance: renew leases every lease/3, reclaim expired claims every lease/5, pending gauges
//! ```

mod decide;
mod finisher;
mod held;
mod idle_wait;
mod maintenance;
mod options;
mod released;
mod routes;
mod transforms;

pub use options::DispatcherOptions;
pub use routes::{DestinationEntry, DestinationSpec, RouteError, RouteKeySpec, RouteTable};

use crate::capture::{DeliveryWake, IdleWaking};
use crate::lifecycle::StopSignal;
use crate::telemetry::OutboxMetrics;
use crate::worker_health::WorkerHealth;
use finisher::Pending;
use held::Held;
use idle_wait::IdleWait;
use maintenance::Maintenance;
use queuebox_domain::outbox::DeliveryOutcome;
use queuebox_domain::template::row::RowFields;
use queuebox_ports::health::HealthCheck;
use queuebox_ports::outbox::{ClaimRequest, ClaimedRow, FencedFinish, Finish, OutboxStore};
use queuebox_ports::publish::{OutboundMessage, PublishErrorKind};
use released::Released;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio::task::JoinSet;
use tracing::Instrument as _;

/// How many batches of claimed rows the dispatcher holds at most (claimed, not yet finished).
const HELD_BATCHES: usize = 4;

/// One replica's outbox dispatcher.
pub struct Dispatcher {
    store: Arc<dyn OutboxStore>,
    routes: Arc<RouteTable>,
    options: DispatcherOptions,
    health: Arc<WorkerHealth>,
    /// Capture's wake-up and how to wait without one; `None` polls.
    wake: Option<(DeliveryWake, IdleWaking)>,
}

/// What every publish task shares.
struct Shared {
    routes: Arc<RouteTable>,
    held: Arc<Held>,
    released: Arc<Released>,
    metrics: Arc<OutboxMetrics>,
    options: DispatcherOptions,
    finishes: mpsc::UnboundedSender<Pending>,
}

impl Dispatcher {
    /// A dispatcher over `store`, delivering through `routes`.
    pub fn new(
        store: Arc<dyn OutboxStore>,
        routes: Arc<RouteTable>,
        options: DispatcherOptions,
    ) -> Self {
        Self {
            store,
            routes,
            options,
            health: Arc::new(WorkerHealth::new("outbox-poller")),
            wake: None,
        }
    }

    /// Lets `wake` end the wait between claims, and waits as `idle` says when nothing wakes it.
    pub fn woken_by(mut self, wake: DeliveryWake, idle: IdleWaking) -> Self {
        self.wake = Some((wake, idle));
        self
    }

    /// The longest wait between claims while idle.
    fn idle_interval(&self) -> std::time::Duration {
        match &self.wake {
            Some((_, IdleWaking::Reconcile(interval))) => *interval,
            Some((_, IdleWaking::Poll)) | None => self.options.poll_interval,
        }
    }

    /// The wait before the next claim, no longer than the next retry's due time when capture
    /// replaces polling: no insert wakes the loop for a retry.
    async fn bounded_by_deadline(&self, wait: std::time::Duration) -> std::time::Duration {
        if !matches!(self.wake, Some((_, IdleWaking::Reconcile(_)))) {
            return wait;
        }
        match self.store.next_deadline().await {
            Ok(Some(due)) => wait.min(due),
            Ok(None) => wait,
            Err(error) => {
                tracing::debug!(%error, "reading the next retry deadline failed");
                wait
            }
        }
    }

    /// The `outbox-poller` health component.
    pub fn health_check(&self) -> Arc<dyn HealthCheck> {
        Arc::clone(&self.health) as Arc<dyn HealthCheck>
    }

    /// Runs until `stop` fires, then stops claiming, waits up to `outbox.shutdownTimeoutMs` for the
    /// publishes in flight, writes their finishes, and returns. Rows still in flight after the bound
    /// stay `processing`; the reclaim step of any replica returns them once their lease passes.
    pub async fn run(self, mut stop: StopSignal) {
        let metrics = Arc::new(OutboxMetrics::new());
        let held = Arc::new(Held::default());
        let batch = self.options.batch_size.max(1) as usize;
        let released = Arc::new(Released::new(batch * HELD_BATCHES));
        let permits = Arc::new(Semaphore::new(self.options.concurrency.max(1) as usize));
        let written = Arc::new(Notify::new());
        let (finish_tx, finish_rx) = mpsc::unbounded_channel();
        let finisher = tokio::spawn(finisher::run(
            Arc::clone(&self.store),
            finish_rx,
            Arc::clone(&metrics),
            Arc::clone(&written),
        ));
        let (maintenance_stop, maintenance_stopped) = tokio::sync::oneshot::channel::<()>();
        let maintenance = tokio::spawn(
            Maintenance {
                store: Arc::clone(&self.store),
                held: Arc::clone(&held),
                routes: Arc::clone(&self.routes),
                metrics: Arc::clone(&metrics),
                lease: self.options.lease,
                renew_every: self.options.renew_interval(),
                reclaim_every: self.options.reclaim_interval(),
                gauges_every: self.options.pending_gauge_interval,
                reclaimed: Arc::clone(&written),
            }
            .run(async move {
                let _ = maintenance_stopped.await;
            }),
        );
        let shared = Arc::new(Shared {
            routes: Arc::clone(&self.routes),
            held: Arc::clone(&held),
            released: Arc::clone(&released),
            metrics: Arc::clone(&metrics),
            options: self.options.clone(),
            finishes: finish_tx,
        });

        // Claimed rows queue here; the starter publishes them as permits free up. Keeping the claim
        // loop apart from the permits lets the next claim run while the previous batch publishes
        // (when the loop itself waited for permits, publishing stalled for the length of every
        // claim). The held set bounds how many rows are claimed and not finished, queue included.
        let (ready_tx, ready_rx) = mpsc::unbounded_channel::<ClaimedRow>();
        let waiting = Arc::new(AtomicUsize::new(0));
        let starter = tokio::spawn(start_publishes(
            ready_rx,
            Arc::clone(&waiting),
            Arc::clone(&permits),
            Arc::clone(&shared),
            stop.clone(),
        ));
        let mut cursor = String::new();
        let idle_interval = self.idle_interval();
        let mut idle_wait = match self.wake {
            Some((_, IdleWaking::Reconcile(_))) => IdleWait::woken_only(idle_interval),
            Some((_, IdleWaking::Poll)) | None => IdleWait::new(idle_interval),
        };
        let never = DeliveryWake::new();
        let wake = self.wake.as_ref().map_or(&never, |(wake, _)| wake);
        while !stop.is_stopping() {
            // Up to four batches are held at once, so the next claim overlaps the publishing and the
            // finish of the previous one instead of waiting for both. Each claim still takes at
            // most one batch.
            let room = (batch * HELD_BATCHES).saturating_sub(held.len()).min(batch);
            // Part of a batch is claimed only when the publishers are about to run out of rows.
            // While a whole batch still waits for permits, the few rows each finisher write frees
            // would make a small claim, and a claim statement costs the database about as much for
            // ten rows as for five hundred: with a slow destination that doubled its cost a row.
            let room = if room < batch && waiting.load(Ordering::Relaxed) >= batch {
                0
            } else {
                room
            };
            let mut full = false;
            let mut found = false;
            if room > 0 {
                let request = ClaimRequest {
                    limit: room as u32,
                    lease: self.options.lease,
                    key_cursor: cursor.clone(),
                    // The store gives these at most half of the limit; asking for more only
                    // holds keys back that the walk will reach anyway.
                    released_keys: released.take(room.div_ceil(2)),
                };
                let claim_started = Instant::now();
                match self.store.claim(&request).await {
                    Ok(claim) => {
                        claim_span(&claim.rows, claim_started.elapsed());
                        self.health.claim_succeeded();
                        cursor = claim.next_key_cursor;
                        full = claim.rows.len() >= room;
                        found = !claim.rows.is_empty();
                        waiting.fetch_add(claim.rows.len(), Ordering::Relaxed);
                        for row in claim.rows {
                            held.insert(row.id, row.claim_token);
                            // The starter ends only after this loop drops the sender.
                            let _ = ready_tx.send(row);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "claiming outbox rows failed");
                        self.health.claim_failed(error.to_string());
                    }
                }
            }
            // While claims come back full or rows wait in hand, the loop does not wait for a
            // wake-up, so capture may stop streaming until a claim comes back short.
            wake.set_backlog(full || room == 0);
            if full {
                continue;
            }
            let wait = if room == 0 {
                // Rows are in hand: the finisher's wake-up (or the poll interval) ends the wait,
                // and the loop counts as active for the backoff once room frees up.
                idle_wait.mark_active(Instant::now());
                idle_interval
            } else {
                let wait = idle_wait.after_claim(found, Instant::now());
                if wait >= idle_interval {
                    self.bounded_by_deadline(wait).await
                } else {
                    wait
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = written.notified() => {}
                _ = wake.woken() => idle_wait.woken(Instant::now()),
                _ = stop.stopped() => break,
            }
        }
        drop(ready_tx);
        let (mut publishes, unstarted) = match starter.await {
            Ok(started) => started,
            Err(error) => {
                // Only a panic ends the starter early; its rows return after their lease.
                tracing::error!(%error, "the outbox publish starter failed");
                (JoinSet::new(), Vec::new())
            }
        };

        // Rows claimed but never published go back to pending at once (fenced), so another replica
        // takes them now instead of after their lease; their attempt is not spent.
        if !unstarted.is_empty() {
            tracing::info!(
                rows = unstarted.len(),
                "releasing claimed rows that were not published"
            );
        }
        for row in unstarted {
            let held = Arc::clone(&shared.held);
            let (id, token) = (row.id, row.claim_token);
            let release = Pending {
                write: FencedFinish {
                    id: row.id,
                    claim_token: row.claim_token,
                    finish: Finish::Release,
                },
                publish_error: None,
                on_written: Box::new(move || held.remove(&id, &token)),
            };
            let _ = shared.finishes.send(release);
        }
        tracing::info!(in_flight = publishes.len(), "outbox dispatcher stopping");
        let drained = tokio::time::timeout(self.options.shutdown_timeout, async {
            while publishes.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                left = publishes.len(),
                "publishes still in flight after outbox.shutdownTimeoutMs; their rows stay processing until the lease passes"
            );
            publishes.abort_all();
        }
        // Dropping the last sender lets the finisher write what it holds and end.
        drop(shared);
        let _ = finisher.await;
        let _ = maintenance_stop.send(());
        let _ = maintenance.await;
        self.health.stopped();
        tracing::info!("outbox dispatcher stopped");
    }
}

/// Publishes queued rows, each once a permit is free, until `stop` fires. Returns the publishes still
/// running and every queued row it did not start (including rows the claim loop queues after the
/// stop, until it drops its sender).
async fn start_publishes(
    mut ready: mpsc::UnboundedReceiver<ClaimedRow>,
    waiting: Arc<AtomicUsize>,
    permits: Arc<Semaphore>,
    shared: Arc<Shared>,
    mut stop: StopSignal,
) -> (JoinSet<()>, Vec<ClaimedRow>) {
    let mut publishes = JoinSet::new();
    let mut unstarted = Vec::new();
    loop {
        // Reap finished publish tasks so the set does not grow.
        while publishes.try_join_next().is_some() {}
        let row = tokio::select! {
            biased;
            _ = stop.stopped() => break,
            row = ready.recv() => row,
        };
        let Some(row) = row else { break };
        // A stop wins over a free permit: nothing new starts once stopping.
        let permit = tokio::select! {
            biased;
            _ = stop.stopped() => None,
            permit = Arc::clone(&permits).acquire_owned() => permit.ok(),
        };
        waiting.fetch_sub(1, Ordering::Relaxed);
        let Some(permit) = permit else {
            unstarted.push(row);
            break;
        };
        let shared = Arc::clone(&shared);
        publishes.spawn(async move {
            deliver(row, &shared).await;
            drop(permit);
        });
    }
    while let Some(row) = ready.recv().await {
        unstarted.push(row);
    }
    (publishes, unstarted)
}

/// The claim span of a batch that found rows (an empty claim makes none): a child of the rows'
/// trace when they share one, otherwise linked to each. It begins once the statement answered, so
/// the statement's time is an attribute. Export off: the span is disabled and nothing is read.
fn claim_span(rows: &[ClaimedRow], took: std::time::Duration) {
    if rows.is_empty() {
        return;
    }
    let _claim =
        crate::trace::Traced::of_batch(rows.iter().map(|row| row.headers.as_slice()), || {
            tracing::info_span!(
                target: crate::trace::TARGET,
                "claim",
                otel.name = "claim outbox",
                otel.kind = "consumer",
                messaging.operation.type = "receive",
                messaging.batch.message_count = rows.len(),
                queuebox.claim.duration_ms = took.as_secs_f64() * 1000.0,
            )
        });
}

/// Routes, publishes and decides the end of one row, then hands the fenced write to the finisher.
async fn deliver(row: ClaimedRow, shared: &Shared) {
    let started = Instant::now();
    if shared.held.is_lost(&row.id, &row.claim_token) {
        // A renewal already found the claim gone: the lease passed and the row is someone else's.
        shared.metrics.claims_lost.increment(1);
        tracing::warn!(
            id = %row.id,
            claim_token = %row.claim_token,
            "claim lost before the row was published (a lease renewal found it gone); the new owner has it"
        );
        shared.held.remove(&row.id, &row.claim_token);
        return;
    }
    let (outcome, publish_error) = match shared.routes.resolve_route(&row.topic) {
        Err(outcome) => (outcome, None),
        Ok(resolved) => publish(&row, resolved).await,
    };
    let finish = decide::finish_for(&row, outcome, &shared.options);
    shared.metrics.processing.record(started.elapsed());
    let held = Arc::clone(&shared.held);
    let (id, token) = (row.id, row.claim_token);
    // A sent or dead head frees its key (a retry keeps holding it back): once written, the next
    // claim asks for the key's next row directly.
    let frees_key = matches!(finish, Finish::Sent | Finish::Dead { .. });
    let freed = row.key.clone().filter(|key| frees_key && !key.is_empty());
    let released = Arc::clone(&shared.released);
    let pending = Pending {
        write: FencedFinish {
            id: row.id,
            claim_token: row.claim_token,
            finish,
        },
        publish_error,
        on_written: Box::new(move || {
            held.remove(&id, &token);
            if let Some(key) = freed {
                released.push(key);
            }
        }),
    };
    // From here the finish's fence tells whether the claim held; a renewal that refuses the claim
    // meanwhile (usually because this very write has just ended it) drops nothing.
    shared.held.finishing(&id, &token);
    if shared.finishes.send(pending).is_err() {
        tracing::error!(id = %row.id, "the finisher has stopped; the row returns after its lease");
    }
}

/// Transforms (route, then destination) and publishes one row to its resolved destination. The
/// transforms run on every attempt over the row's stored payload, which they never change.
///
/// Returns the outcome, and the cause of a failed publish for the log line and the metrics (the
/// domain's outcome carries only the reason: the cause never changes the next state).
async fn publish(
    row: &ClaimedRow,
    resolved: routes::Resolved<'_>,
) -> (DeliveryOutcome, Option<PublishErrorKind>) {
    let destination = resolved.destination;
    // resolve_route() only returns destinations that have a publisher.
    let Some(publisher) = destination.publisher.as_ref() else {
        let outcome = DeliveryOutcome::NoPublisher {
            destination: destination.name.clone(),
            destination_type: destination.kind.to_owned(),
        };
        return (outcome, None);
    };
    let payload = match transforms::payload_for(
        row,
        resolved.route_transform,
        destination.transform.as_ref(),
    )
    .await
    {
        Ok(payload) => payload,
        Err(outcome) => return (outcome, None),
    };
    let mut message = outbound(row, payload, resolved.route_key);
    // The publish span of this message and attempt; the destination receives its context.
    // A trace the head sampler leaves out gets no span (Span::none()), only its context.
    let traced = crate::trace::Traced::continuing(&row.headers, || {
        tracing::info_span!(
            target: crate::trace::TARGET,
            "publish",
            otel.name = %format_args!("publish {}", destination.name),
            otel.kind = "producer",
            messaging.operation.type = "send",
            messaging.system = destination.kind,
            messaging.destination.name = %destination.name,
            messaging.message.id = %message.id,
            queuebox.attempt = row.attempt,
            queuebox.outcome = tracing::field::Empty,
            error.type = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        )
    });
    traced.inject(&mut message.headers);
    let span = traced.span();
    let publish_started = Instant::now();
    let result = publisher.publish(&message).instrument(span.clone()).await;
    destination
        .metrics
        .publish
        .record(publish_started.elapsed());
    match result {
        Ok(()) => {
            destination.metrics.success.increment(1);
            span.record("queuebox.outcome", "delivered");
            (DeliveryOutcome::Delivered, None)
        }
        Err(error) => {
            span.record("queuebox.outcome", "failed");
            crate::trace::record_failure(span, error.kind.as_str());
            destination.metrics.publish_failed(error.kind);
            let outcome = DeliveryOutcome::Failed {
                reason: error.reason,
            };
            (outcome, Some(error.kind))
        }
    }
}

/// The message of `row`, carrying `payload` (the transformed one) or, when `None`, the stored one,
/// and the key of the matched route, rendered over the message as the destination sees it.
fn outbound(
    row: &ClaimedRow,
    payload: Option<String>,
    route_key: Option<&RouteKeySpec>,
) -> OutboundMessage {
    let payload = payload.unwrap_or_else(|| row.payload.clone());
    let missing_default = route_key
        .map(|k| k.missing_default.clone())
        .unwrap_or_default();
    let rendered = route_key.and_then(|k| k.template.as_ref()).map(|template| {
        let fields = RowFields::new(
            &row.topic,
            row.key.as_deref(),
            row.aggregate_type.as_deref(),
            &payload,
        );
        template.render(&fields, &missing_default)
    });
    OutboundMessage {
        id: row.id.to_string(),
        topic: row.topic.clone(),
        key: row.key.clone(),
        aggregate_type: row.aggregate_type.clone(),
        payload,
        headers: row.headers.clone(),
        attempt: row.attempt,
        route_key: rendered,
        missing_field_default: missing_default,
    }
}

#[cfg(test)]
mod tests;
