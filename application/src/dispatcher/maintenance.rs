//! The dispatcher's timed duties: lease renewal, the reclaim of expired claims, and the pending
//! gauges. One task runs all three so they never overlap one another.

use super::held::{Held, Refusal};
use super::routes::RouteTable;
use crate::telemetry::{OutboxMetrics, OutboxPendingGauges};
use queuebox_ports::outbox::OutboxStore;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, MissedTickBehavior, interval_at, sleep_until};

/// The gauge query counts every pending row, so its cost grows with the backlog (0.37 s at a
/// million pending rows). After a refresh that took `d`, the next one waits at least
/// `d * GAUGE_COST_RATIO`: the query then takes at most one fiftieth of one database connection's
/// time, however large the backlog. A fast query (a backlog of up to about 100k rows at the default
/// five seconds) is never delayed; the values stay exact, only older.
const GAUGE_COST_RATIO: u32 = 50;
/// However long the gauge query takes, it runs at least this often.
const GAUGE_LONGEST_WAIT: Duration = Duration::from_secs(60);

/// When the gauges are read next, after a read at `started` that took `took`.
pub(crate) fn next_gauge_read(started: Instant, took: Duration, every: Duration) -> Instant {
    let stretched = took.saturating_mul(GAUGE_COST_RATIO);
    let wait = every.max(stretched.min(GAUGE_LONGEST_WAIT.max(every)));
    started + wait
}

pub(crate) struct Maintenance {
    pub(crate) store: Arc<dyn OutboxStore>,
    pub(crate) held: Arc<Held>,
    pub(crate) routes: Arc<RouteTable>,
    pub(crate) metrics: Arc<OutboxMetrics>,
    pub(crate) lease: Duration,
    pub(crate) renew_every: Duration,
    pub(crate) reclaim_every: Duration,
    pub(crate) gauges_every: Duration,
    /// Woken when the reclaim returned rows, so the claim loop takes them without waiting out its
    /// idle interval.
    pub(crate) reclaimed: Arc<tokio::sync::Notify>,
}

impl Maintenance {
    /// Runs until `stop` completes.
    pub(crate) async fn run(self, stop: impl std::future::Future<Output = ()>) {
        let now = Instant::now();
        let mut renew = interval_at(now + self.renew_every, self.renew_every);
        // The first reclaim runs at start: rows a crashed replica left behind move on as soon as
        // their lease has passed, not one interval later.
        let mut reclaim = interval_at(now, self.reclaim_every);
        for timer in [&mut renew, &mut reclaim] {
            timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
        }
        // The first gauge count comes one interval after start, like every later one, not at start.
        // The count is the one query whose cost grows with the backlog (a quarter of a second of a
        // core at a million pending rows), and a restart into a large backlog is when delivery
        // matters most: at start it ran beside the first claims and took about half of the database
        // time the first 10k deliveries of a 1M backlog spent beyond those of a 10k backlog
        // (bench/RESULTS.md). Until that count the gauges are not exported at all (see
        // `OutboxPendingGauges`), so no scrape takes an unmeasured zero for an empty outbox.
        let gauges = sleep_until(now + self.gauges_every);
        tokio::pin!(stop, gauges);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = renew.tick() => self.renew().await,
                _ = reclaim.tick() => self.reclaim().await,
                _ = &mut gauges => {
                    let started = Instant::now();
                    self.refresh_gauges().await;
                    let next = next_gauge_read(started, started.elapsed(), self.gauges_every);
                    gauges.as_mut().reset(next);
                }
            }
        }
    }

    pub(super) async fn renew(&self) {
        let live = self.held.live();
        if live.is_empty() {
            return;
        }
        match self.store.renew(&live, self.lease).await {
            Ok(renewed) => {
                for ((id, token), kept) in live.iter().zip(renewed) {
                    if kept {
                        continue;
                    }
                    // Most refusals are claims finished while the renewal ran: not lost.
                    match self.held.refused(id, token) {
                        Refusal::Lost => tracing::warn!(
                            %id,
                            claim_token = %token,
                            "lease renewal found the claim lost; the row's work is dropped if it has not started"
                        ),
                        Refusal::Finishing => tracing::debug!(
                            %id,
                            claim_token = %token,
                            "lease renewal refused a claim whose finish is under way; its fence decides"
                        ),
                        Refusal::Ended => {}
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
                self.reclaimed.notify_one();
            }
            Err(error) => tracing::warn!(%error, "the reclaim step failed"),
        }
    }

    async fn refresh_gauges(&self) {
        match self.store.pending_stats().await {
            Ok(stats) => {
                OutboxPendingGauges::set_pending(stats.pending, stats.oldest_pending_age);
                self.routes.set_queue_depths(&stats.pending_by_topic);
            }
            Err(error) => tracing::warn!(%error, "reading the pending gauges failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_gauge_read_stretches_the_wait_within_bounds() {
        let at = Instant::now();
        let every = Duration::from_secs(5);
        // Fast: the configured interval.
        assert_eq!(
            next_gauge_read(at, Duration::from_millis(74), every),
            at + every
        );
        // 0.37 s (a million pending rows): 50 x as long, 18.5 s.
        assert_eq!(
            next_gauge_read(at, Duration::from_millis(370), every),
            at + Duration::from_millis(18_500)
        );
        // Very slow: never more than a minute.
        assert_eq!(
            next_gauge_read(at, Duration::from_secs(10), every),
            at + Duration::from_secs(60)
        );
        // A configured interval above the minute is kept as it is.
        let hourly = Duration::from_secs(3600);
        assert_eq!(
            next_gauge_read(at, Duration::from_secs(10), hourly),
            at + hourly
        );
    }
}
