//! The dispatcher's settings, taken from the `outbox` and `http` configuration sections.

use std::time::Duration;

/// How the dispatcher claims, publishes and finishes rows.
#[derive(Debug, Clone)]
pub struct DispatcherOptions {
    /// `outbox.batchSize`: the most rows one claim takes.
    pub batch_size: u32,
    /// `outbox.concurrency`: the most publishes in flight.
    pub concurrency: u32,
    /// `outbox.pollIntervalMs`: the wait between claims when the last one was not full.
    pub poll_interval: Duration,
    /// `outbox.claimTimeoutMs`: the lease length.
    pub lease: Duration,
    /// `outbox.retryBaseDelayMs`: the backoff base.
    pub retry_base_delay: Duration,
    /// `outbox.pendingGaugeIntervalMs`: the shortest interval between two gauge queries.
    pub pending_gauge_interval: Duration,
    /// `outbox.shutdownTimeoutMs`: the longest wait for publishes in flight at shutdown.
    pub shutdown_timeout: Duration,
    /// `http.maxErrorBodyBytes`: the most bytes of a failure reason kept in `last_error`.
    pub max_error_bytes: usize,
}

impl DispatcherOptions {
    /// Leases are renewed every third of their length.
    pub fn renew_interval(&self) -> Duration {
        (self.lease / 3).max(Duration::from_millis(10))
    }

    /// The reclaim step runs at most once per fifth of the lease.
    pub fn reclaim_interval(&self) -> Duration {
        (self.lease / 5).max(Duration::from_millis(10))
    }
}
