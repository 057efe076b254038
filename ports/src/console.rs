//! The reads and the one write the operator console needs from the database.
//!
//! The console (`/console` on the management port) shows the backlog, lists dead outbox and inbox
//! rows, shows one row, and looks rows up. Every read is bounded: lists are keyset pages, counts
//! cover the unfinished and dead rows only (never the sent or processed ones), so each statement
//! uses an index of the states it reads. The outbox replay goes through [`crate::replay::Replay`];
//! the inbox has no replay use case of its own, so [`ConsoleStore::requeue_inbox`] moves dead inbox
//! rows back to pending here.

use crate::outbox::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Outbox rows of one topic in one state (`pending`, `processing` or `dead`).
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxStateCount {
    /// The topic.
    pub topic: String,
    /// `pending`, `processing` or `dead`.
    pub state: String,
    /// How many rows.
    pub count: i64,
    /// For `pending`: seconds since the oldest of them was created (database clock).
    pub oldest_age_seconds: Option<f64>,
}

/// Inbox rows of one source, consumption mode and state (`pending`, `processing` or `dead`).
#[derive(Debug, Clone, PartialEq)]
pub struct InboxStateCount {
    /// The source name.
    pub source: String,
    /// `push` or `pull`.
    pub consumption: String,
    /// `pending`, `processing` or `dead`.
    pub state: String,
    /// How many rows.
    pub count: i64,
    /// For `pending`: seconds since the oldest of them was created.
    pub oldest_age_seconds: Option<f64>,
}

/// The selection of a dead-row list. Every field that is set narrows it (AND).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadFilter {
    /// Outbox: only rows of one of these topics (the console turns a destination into the topics
    /// routed to it). Inbox: only rows of one of these sources.
    pub groups: Option<Vec<String>>,
    /// Outbox: the row key; inbox: the idempotency key. Exact match.
    pub key: Option<String>,
    /// Only rows created at or after this instant.
    pub created_from: Option<DateTime<Utc>>,
    /// Only rows created before this instant.
    pub created_to: Option<DateTime<Utc>>,
    /// Only rows whose `last_error` contains this text (any letter case).
    pub error_text: Option<String>,
}

/// Where a page starts: after the row with this (`updated_at` for the outbox, `created_at` for
/// the inbox, id), going back in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCursor {
    /// The time of the last row of the previous page.
    pub at: DateTime<Utc>,
    /// Its id.
    pub id: Uuid,
}

/// One row of a list or a lookup, without its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSummary {
    /// The row id.
    pub id: Uuid,
    /// Outbox: topic; inbox: source.
    pub group: String,
    /// Outbox: key; inbox: idempotency key.
    pub key: Option<String>,
    /// The row state.
    pub state: String,
    /// Delivery or processing attempts so far.
    pub attempt: i32,
    /// The stored (already redacted) reason of the last failure.
    pub last_error: Option<String>,
    /// When the row was created.
    pub created_at: DateTime<Utc>,
    /// The time the page is ordered by (outbox `updated_at`, inbox `created_at`).
    pub changed_at: DateTime<Utc>,
}

/// One row in full, its payload cut to a length the caller chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowDetail {
    /// The summary fields.
    pub summary: RowSummary,
    /// The headers as stored (a JSON object as text).
    pub headers: String,
    /// The payload as JSON text, at most the requested number of bytes (cut on a character
    /// boundary by the database).
    pub payload: String,
    /// The full payload length in bytes.
    pub payload_bytes: i64,
    /// Outbox: aggregate type; inbox: event type.
    pub kind: Option<String>,
    /// Inbox: consumption mode; outbox: `None`.
    pub consumption: Option<String>,
    /// Inbox: correlation id; outbox: `None`.
    pub correlation_id: Option<String>,
}

/// Which table a row lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// The outbox.
    Outbox,
    /// The inbox.
    Inbox,
}

/// The console's view of the database.
#[async_trait]
pub trait ConsoleStore: Send + Sync {
    /// Pending, processing and dead outbox rows per topic and state.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn outbox_counts(&self) -> Result<Vec<OutboxStateCount>, StoreError>;

    /// Every distinct topic of a dead outbox row, for the dead list's destination filter.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn outbox_dead_topics(&self) -> Result<Vec<String>, StoreError>;

    /// Pending, processing and dead inbox rows per source, consumption mode and state.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn inbox_counts(&self) -> Result<Vec<InboxStateCount>, StoreError>;

    /// One page of dead rows of `table` matching `filter`, newest first, starting after `after`,
    /// at most `limit` rows.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn dead_page(
        &self,
        table: Table,
        filter: &DeadFilter,
        after: Option<PageCursor>,
        limit: u32,
    ) -> Result<Vec<RowSummary>, StoreError>;

    /// How many dead rows of `table` match `filter`.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn dead_count(&self, table: Table, filter: &DeadFilter) -> Result<i64, StoreError>;

    /// One row of `table` by id, the payload cut to `max_payload_bytes`.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn row(
        &self,
        table: Table,
        id: Uuid,
        max_payload_bytes: u32,
    ) -> Result<Option<RowDetail>, StoreError>;

    /// The inbox rows with this idempotency key (one per source at most).
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn inbox_by_key(&self, key: &str) -> Result<Vec<RowSummary>, StoreError>;

    /// The inbox rows with this correlation id, newest first, at most `limit`.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn inbox_by_correlation(
        &self,
        correlation_id: &str,
        limit: u32,
    ) -> Result<Vec<RowSummary>, StoreError>;

    /// Moves the inbox rows of `ids` that are still `dead` back to `pending` (attempt 0, due now,
    /// error and claim cleared); returns how many moved. Rows in another state stay untouched.
    ///
    /// # Errors
    /// A [`StoreError`] when the statement fails; nothing moved.
    async fn requeue_inbox(&self, ids: &[Uuid]) -> Result<u64, StoreError>;
}
