//! The inbox relay: claims pending push rows of the inbox and copies each into the outbox, marking
//! the inbox row `processed` in the same transaction. Every replica runs one; the claim lock in the
//! database keeps two replicas off one aggregate.
//!
//! ```text
//!  claim (≤ batchSize, one row per aggregate) ──► topic + headers per row ──► one fenced forward
//!     ▲  any row found: claim again at once; an empty claim waits pollIntervalMs
//!     └─ between cycles: reclaim expired claims (≤ once per lease/5), oldest-pending gauge
//! ```
//!
//! The relay forwards a batch before it claims the next, so one aggregate never has two rows in
//! flight from this replica, and the claim itself excludes aggregates in flight anywhere.

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
use queuebox_ports::inbox::RelayStore;
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
    /// statement); nothing is left half-written, and a claimed row that was not forwarded returns
    /// after its lease through the reclaim step of any replica.
    pub async fn run(self, mut stop: StopSignal) {
        let batch = self.options.batch_size.max(1);
        let reclaim_every = self.options.reclaim_interval();
        let gauge_every = self.options.pending_gauge_interval;
        // Both timed steps run on the first cycle: rows a crashed replica left behind move on as soon
        // as their lease has passed, and the gauge has a value from the start.
        let mut next_reclaim = Instant::now();
        let mut next_gauge = Instant::now();
        tracing::info!(batch, "inbox relay started");
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
            // Claim again at once whenever the claim found rows, full batch or not: a claim comes
            // back short when the oldest pending rows hold few aggregates (a burst of one
            // aggregate's events), however many rows wait behind them. Only a claim that found
            // nothing waits for the poll interval.
            let found = match self.store.claim(batch, self.options.lease).await {
                Ok(rows) => {
                    self.health.claim_succeeded();
                    let found = !rows.is_empty();
                    if !rows.is_empty() {
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
                    found
                }
                Err(error) => {
                    tracing::warn!(%error, "claiming inbox rows failed");
                    self.metrics.errors.increment(1);
                    self.health.claim_failed(error.to_string());
                    false
                }
            };
            if found {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(self.options.poll_interval) => {}
                _ = stop.stopped() => break,
            }
        }
        self.health.stopped();
        tracing::info!("inbox relay stopped");
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
