//! The retention store: what the cleanup needs to delete finished rows of the outbox and the inbox.
//!
//! The types only name finished states, so no caller can ask an adapter to delete a row that still
//! waits or runs (`pending`, `processing`).

use crate::outbox::StoreError;
use async_trait::async_trait;
use std::time::Duration;

/// The table a cleanup works on; its name is the `table` label of the cleanup metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetentionTable {
    /// The outbox table.
    Outbox,
    /// The inbox table.
    Inbox,
}

impl RetentionTable {
    /// `outbox` or `inbox`.
    pub fn as_str(self) -> &'static str {
        match self {
            RetentionTable::Outbox => "outbox",
            RetentionTable::Inbox => "inbox",
        }
    }
}

/// A finished outbox state, the only ones retention may delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishedOutbox {
    /// Delivered.
    Sent,
    /// Dead-lettered.
    Dead,
}

impl FinishedOutbox {
    /// The stored state value.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishedOutbox::Sent => "sent",
            FinishedOutbox::Dead => "dead",
        }
    }
}

/// A finished inbox state, the only ones retention may delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishedInbox {
    /// Forwarded by the relay or completed by a pull client.
    Processed,
    /// Dead-lettered.
    Dead,
}

impl FinishedInbox {
    /// The stored state value.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishedInbox::Processed => "processed",
            FinishedInbox::Dead => "dead",
        }
    }
}

/// Which rows one delete removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep {
    /// Outbox rows in `state` whose `updated_at` lies more than `max_age` before the database clock.
    OutboxOlderThan {
        /// The finished state.
        state: FinishedOutbox,
        /// `retention.outbox.maxAge`.
        max_age: Duration,
    },
    /// Outbox rows in `state` beyond the `keep` most recently updated rows of that state.
    OutboxBeyondNewest {
        /// The finished state.
        state: FinishedOutbox,
        /// `retention.outbox.maxCount`.
        keep: u64,
    },
    /// Inbox rows in `state` whose `created_at` lies more than `max_age` before the database clock.
    InboxOlderThan {
        /// The finished state.
        state: FinishedInbox,
        /// `retention.inbox.maxAge`.
        max_age: Duration,
    },
}

impl Sweep {
    /// The table the sweep deletes from.
    pub fn table(&self) -> RetentionTable {
        match self {
            Sweep::OutboxOlderThan { .. } | Sweep::OutboxBeyondNewest { .. } => {
                RetentionTable::Outbox
            }
            Sweep::InboxOlderThan { .. } => RetentionTable::Inbox,
        }
    }
}

/// The finished rows of both tables, as the retention cleanup uses them.
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Deletes at most `limit` rows that `sweep` selects, oldest first, in one short statement, and
    /// returns how many it deleted. A count below `limit` means nothing more was selectable.
    ///
    /// An adapter MUST NOT delete a row in any state other than the sweep's, MUST NOT wait for a row
    /// another transaction holds (it skips it; a later batch or run takes it), and MUST NOT lock more
    /// than the rows it deletes, so the dispatcher, the relay and the ingest path never wait for it.
    ///
    /// # Errors
    /// A [`StoreError`] when the statement fails; nothing of the batch was deleted.
    async fn delete_batch(&self, sweep: &Sweep, limit: u32) -> Result<u64, StoreError>;
}
