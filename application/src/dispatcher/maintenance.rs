//! The dispatcher's timed duties: lease renewal, the reclaim of expired claims, and the pending
//! gauges. One task runs all three so they never overlap one another.

use super::held::Held;
use super::routes::RouteTable;
use crate::telemetry::OutboxMetrics;
use queuebox_ports::outbox::OutboxStore;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior, interval_at};

pub(crate) struct Maintenance {
    pub(crate) store: Arc<dyn OutboxStore>,
    pub(crate) held: Arc<Held>,
    pub(crate) routes: Arc<RouteTable>,
    pub(crate) metrics: Arc<OutboxMetrics>,
    pub(crate) lease: Duration,
    pub(crate) renew_every: Duration,
    pub(crate) reclaim_every: Duration,
    pub(crate) gauges_every: Duration,
}

impl Maintenance {
    /// Runs until `stop` completes.
    pub(crate) async fn run(self, stop: impl std::future::Future<Output = ()>) {
        let now = Instant::now();
        let mut renew = interval_at(now + self.renew_every, self.renew_every);
        // The first reclaim runs at start: rows a crashed replica left behind move on as soon as
        // their lease has passed, not one interval later.
        let mut reclaim = interval_at(now, self.reclaim_every);
        let mut gauges = interval_at(now, self.gauges_every);
        for timer in [&mut renew, &mut reclaim, &mut gauges] {
            timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
        }
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = renew.tick() => self.renew().await,
                _ = reclaim.tick() => self.reclaim().await,
                _ = gauges.tick() => self.refresh_gauges().await,
            }
        }
    }

    async fn renew(&self) {
        let live = self.held.live();
        if live.is_empty() {
            return;
        }
        match self.store.renew(&live, self.lease).await {
            Ok(renewed) => {
                for ((id, _), kept) in live.iter().zip(renewed) {
                    if !kept {
                        tracing::warn!(%id, "lease renewal found the claim lost; dropping the row's work");
                        self.held.mark_lost(id);
                    }
                }
            }
            // The leases are unknown, not lost: the fence decides at the finish.
            Err(error) => tracing::warn!(%error, rows = live.len(), "lease renewal failed"),
        }
    }

    async fn reclaim(&self) {
        match self.store.reclaim_expired().await {
            Ok(0) => {}
            Ok(moved) => {
                tracing::info!(rows = moved, "expired claims returned to pending");
                self.metrics.reclaimed.increment(moved);
            }
            Err(error) => tracing::warn!(%error, "the reclaim step failed"),
        }
    }

    async fn refresh_gauges(&self) {
        match self.store.pending_stats().await {
            Ok(stats) => {
                self.metrics.pending.set(stats.pending as f64);
                self.metrics
                    .oldest_pending_age
                    .set(stats.oldest_pending_age.as_secs_f64());
                self.routes.set_queue_depths(&stats.pending_by_topic);
            }
            Err(error) => tracing::warn!(%error, "reading the pending gauges failed"),
        }
    }
}
