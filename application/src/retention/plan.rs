//! What the cleanup of one table does: which sweeps, how often, in batches of what size. Built from
//! `retention.outbox` and `retention.inbox`; a `DISABLED` table has no plan.

use queuebox_ports::retention::{FinishedInbox, FinishedOutbox, RetentionTable, Sweep};
use std::time::Duration;

/// The cleanup of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablePlan {
    /// The table, and the `table` label of its metrics.
    pub table: RetentionTable,
    /// The deletes of one run, in order; each runs batch after batch until a batch comes back short.
    pub sweeps: Vec<Sweep>,
    /// `cleanupInterval`: the wait between the end of one run and the start of the next.
    pub interval: Duration,
    /// `batchSize`: the most rows one delete statement removes.
    pub batch_size: u32,
}

impl TablePlan {
    /// Outbox `AGE`: `sent` and `dead` rows whose last change is older than `max_age`.
    pub fn outbox_by_age(max_age: Duration, interval: Duration, batch_size: u32) -> Self {
        let sweep = |state| Sweep::OutboxOlderThan { state, max_age };
        Self::new(
            RetentionTable::Outbox,
            vec![sweep(FinishedOutbox::Sent), sweep(FinishedOutbox::Dead)],
            interval,
            batch_size,
        )
    }

    /// Outbox `COUNT`: all but the `keep` most recently changed `sent` rows, and apart from them all
    /// but the `keep` most recently changed `dead` rows.
    pub fn outbox_by_count(keep: u64, interval: Duration, batch_size: u32) -> Self {
        let sweep = |state| Sweep::OutboxBeyondNewest { state, keep };
        Self::new(
            RetentionTable::Outbox,
            vec![sweep(FinishedOutbox::Sent), sweep(FinishedOutbox::Dead)],
            interval,
            batch_size,
        )
    }

    /// Inbox `AGE`: `processed` and `dead` rows received longer than `max_age` ago.
    pub fn inbox_by_age(max_age: Duration, interval: Duration, batch_size: u32) -> Self {
        let sweep = |state| Sweep::InboxOlderThan { state, max_age };
        Self::new(
            RetentionTable::Inbox,
            vec![sweep(FinishedInbox::Processed), sweep(FinishedInbox::Dead)],
            interval,
            batch_size,
        )
    }

    fn new(table: RetentionTable, sweeps: Vec<Sweep>, interval: Duration, batch_size: u32) -> Self {
        Self {
            table,
            sweeps,
            // A zero interval would spin; the configuration refuses it, this keeps the loop safe anyway.
            interval: interval.max(Duration::from_secs(1)),
            batch_size: batch_size.max(1),
        }
    }
}
