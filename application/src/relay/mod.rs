//! The inbox relay: claims pending push rows of the inbox and copies each into the outbox, marking
//! the inbox row `processed` in the same transaction. Every replica runs one; the claim lock in the
//! database keeps two replicas off one aggregate.
//!
//! ```text
//!  claim N+1 (≤ batchSize, one row per aggregate)   ┐ at the same time
//!  batch N: topic + headers per row ──► one fenced forward ┘
//!     ▲  any row found, or a forward ran: claim again at once; otherwise wait pollIntervalMs
//!     └─ between cycles: reclaim expired claims (≤ once per lease/5), oldest-pending gauge
//! ```
//!
//! One aggregate never has two rows in flight: the claim leaves out every aggregate with a row
//! `processing`, anywhere, and the batch being forwarded stays `processing` until its forward commits.

mod forward;
mod headers;
mod options;
mod topics;

pub use headers::{X_CORRELATION_ID, X_IDEMPOTENCY_KEY, X_INBOX_ID, X_SOURCE};
pub use options::RelayOptions;
pub use topics::SourceTopics;

use crate::lifecycle::StopSignal;
use crate::telemetry::RelayMetrics;
use crate::worker_health::WorkerHealth;
use queuebox_ports::health::HealthCheck;
use queuebox_ports::inbox::{RelayRow, RelayStore};
use std::sync::Arc;
use tokio::time::Instant;

/// One replica's inbox relay.
pub struct Relay {
    store: Arc<dyn RelayStore>,
    topics: SourceTopics,
    options: RelayOptions,
    health: Arc<WorkerHealth>,
    metrics: Arc<RelayMetrics>,
}

impl Relay {
    /// A relay over `store`, naming each forwarded row's topic from `topics`.
    pub fn new(store: Arc<dyn RelayStore>, topics: SourceTopics, options: RelayOptions) -> Self {
        Self {
            store,
            topics,
            options,
            health: Arc::new(WorkerHealth::new("inbox-relay")),
            metrics: Arc::new(RelayMetrics::new()),
        }
    }

    /// The `inbox-relay` health component.
    pub fn health_check(&self) -> Arc<dyn HealthCheck> {
        Arc::clone(&self.health) as Arc<dyn HealthCheck>
    }

    /// Runs until `stop` fires. A batch being forwarded when the stop comes is finished first (one
    /// statement), and a batch claimed just before it is forwarded too; nothing is left half-written,
    /// and a claimed row whose forward failed returns after its lease through the reclaim step of any
    /// replica.
    pub async fn run(self, mut stop: StopSignal) {
        let batch = self.options.batch_size.max(1);
        let reclaim_every = self.options.reclaim_interval();
        let gauge_every = self.options.pending_gauge_interval;
        // Both timed steps run on the first cycle: rows a crashed replica left behind move on as soon
        // as their lease has passed, and the gauge has a value from the start.
        let mut next_reclaim = Instant::now();
        let mut next_gauge = Instant::now();
        tracing::info!(batch, "inbox relay started");
        // The batch the last claim returned: it is forwarded while the next claim runs.
        let mut claimed: Vec<RelayRow> = Vec::new();
        while !stop.is_stopping() {
            let now = Instant::now();
            if now >= next_reclaim {
                self.reclaim().await;
                next_reclaim = Instant::now() + reclaim_every;
            }
            if now >= next_gauge {
                self.refresh_gauge().await;
                next_gauge = Instant::now() + gauge_every;
            }
            // Claiming and forwarding overlap: each round trip waits for the database, and the two
            // together keep it busier than one after the other. The order of an aggregate holds: the
            // rows being forwarded are `processing` until their forward commits, so the claim beside
            // it leaves their aggregates out, and their next rows can only be claimed after it.
            let forwarding = !claimed.is_empty();
            let (claim, ()) = tokio::join!(
                self.store.claim(batch, self.options.lease),
                self.forward(std::mem::take(&mut claimed)),
            );
            let found = match claim {
                Ok(rows) => {
                    self.health.claim_succeeded();
                    claimed = rows;
                    !claimed.is_empty()
                }
                Err(error) => {
                    tracing::warn!(%error, "claiming inbox rows failed");
                    self.metrics.errors.increment(1);
                    self.health.claim_failed(error.to_string());
                    false
                }
            };
            // Claim again at once whenever the claim found rows, full batch or not: a claim comes
            // back short when few aggregates are ready (the others have a row in flight), however
            // many rows wait behind them. A claim that ran beside a forward could not take the next
            // rows of that batch's aggregates, so it is tried again at once too. Only a claim that
            // found nothing with nothing in flight waits for the poll interval.
            if found || forwarding {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(self.options.poll_interval) => {}
                _ = stop.stopped() => break,
            }
        }
        // A batch claimed just before the stop is forwarded rather than left to the reclaim.
        self.forward(claimed).await;
        self.health.stopped();
        tracing::info!("inbox relay stopped");
    }

    /// Forwards one claimed batch (nothing when it is empty).
    async fn forward(&self, rows: Vec<RelayRow>) {
        if rows.is_empty() {
            return;
        }
        let outcome = forward::forward_batch(
            self.store.as_ref(),
            &self.topics,
            self.options.max_attempts,
            rows,
            &self.metrics,
        )
        .await;
        tracing::debug!(?outcome, "relay batch done");
    }

    async fn reclaim(&self) {
        match self.store.reclaim_expired().await {
            Ok(0) => {}
            Ok(moved) => tracing::info!(rows = moved, "expired relay claims returned to pending"),
            Err(error) => {
                self.metrics.errors.increment(1);
                tracing::warn!(%error, "the relay reclaim step failed");
            }
        }
    }

    async fn refresh_gauge(&self) {
        match self.store.oldest_pending_age().await {
            Ok(age) => self.metrics.oldest_pending_age.set(age.as_secs_f64()),
            Err(error) => tracing::warn!(%error, "reading the oldest pending inbox row failed"),
        }
    }
}

#[cfg(test)]
mod tests;
