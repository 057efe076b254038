//! The relay's settings, taken from `inbox.relay` (and `outbox.maxAttempts` as its fallback).

use std::time::Duration;

/// How the relay claims and forwards push rows.
#[derive(Debug, Clone)]
pub struct RelayOptions {
    /// `inbox.relay.batchSize`: the most rows one claim takes.
    pub batch_size: u32,
    /// `inbox.relay.pollIntervalMs`: the wait between claims when the last one was not full.
    pub poll_interval: Duration,
    /// `inbox.relay.claimTimeoutMs`: the lease of a relay claim.
    pub lease: Duration,
    /// `inbox.relay.pendingGaugeIntervalMs`: the shortest interval between two gauge queries.
    pub pending_gauge_interval: Duration,
    /// `inbox.relay.maxAttempts`, or `outbox.maxAttempts`: written into each outbox row.
    pub max_attempts: i32,
}

impl RelayOptions {
    /// The reclaim step runs at most once per fifth of the lease.
    pub fn reclaim_interval(&self) -> Duration {
        (self.lease / 5).max(Duration::from_millis(10))
    }
}
