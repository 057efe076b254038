//! Replay: moving `sent` and `dead` outbox rows back to `pending` so the dispatcher delivers them
//! again.
//!
//! Two ports meet here. [`Replay`] is what the admin route calls with the caller's filter;
//! [`ReplayStore`] is what the replay use case needs from the database. The store never resolves a
//! destination: that is a routing decision, made by the use case with the same router the
//! dispatcher uses, over the topics of the candidate rows the store pages through.

use crate::outbox::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use thiserror::Error;
use uuid::Uuid;

/// The caller's selection. Every field that is set narrows it (they combine with AND); an empty
/// list is a filter that matches no row, not an absent one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayFilter {
    /// Only these row ids.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<Uuid>>,
    /// Only rows with exactly this topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Only rows with one of these topics.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<String>>,
    /// Only rows whose topic the routes send to this destination (first match wins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// Only rows created strictly after this instant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_after: Option<DateTime<Utc>>,
    /// Only rows created strictly before this instant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_before: Option<DateTime<Utc>>,
}

impl ReplayFilter {
    /// True when no field is set: such a request would select every row, and is refused.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Why a replay did not complete.
#[derive(Debug, Error)]
pub enum ReplayError {
    /// The filter sets no field.
    #[error("A replay needs at least one filter.")]
    NoFilter,
    /// The database failed part way; the rows of the batches before the failure stay moved.
    #[error("replay failed after moving {moved} rows: {source}")]
    Store {
        /// Rows moved before the failure.
        moved: u64,
        /// The store failure.
        source: StoreError,
    },
}

/// The replay use case, as the admin route calls it.
#[async_trait]
pub trait Replay: Send + Sync {
    /// Moves every `sent` and `dead` row the filter selects back to `pending`; returns how many
    /// moved.
    ///
    /// # Errors
    /// [`ReplayError::NoFilter`] for an empty filter (nothing moves); [`ReplayError::Store`] when
    /// the database fails, with the count moved before.
    async fn replay(&self, filter: &ReplayFilter) -> Result<u64, ReplayError>;
}

/// The database part of a selection: every filter except the destination.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplaySelection {
    /// Only these ids, when set.
    pub ids: Option<Vec<Uuid>>,
    /// Only this topic, when set.
    pub topic: Option<String>,
    /// Only these topics, when set.
    pub topics: Option<Vec<String>>,
    /// `created_at` strictly after, when set.
    pub created_after: Option<DateTime<Utc>>,
    /// `created_at` strictly before, when set.
    pub created_before: Option<DateTime<Utc>>,
}

/// One row a page of candidates holds: enough to route it and to move it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayCandidate {
    /// The row id, also the page cursor.
    pub id: Uuid,
    /// The row topic, for the destination filter.
    pub topic: String,
}

/// The outbox table, as replay uses it.
///
/// A replay walks the selection in pages ordered by id (keyset: each page starts after the last id
/// of the previous one), so no statement touches more than one page of rows and none locks the
/// table.
#[async_trait]
pub trait ReplayStore: Send + Sync {
    /// The next page of rows in state `sent` or `dead` that match `selection`, with an id greater
    /// than `after` (from the lowest id when `None`), in id order, at most `limit` rows. An adapter
    /// MUST NOT lock the rows it reads.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn replay_candidates(
        &self,
        selection: &ReplaySelection,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<ReplayCandidate>, StoreError>;

    /// Moves the rows of `ids` that are still `sent` or `dead` to `pending` in one short statement:
    /// `attempt` 0, `scheduled_at` and `updated_at` now (database clock), and `last_error`,
    /// `claimed_at`, `claim_token` and `lease_expires_at` cleared; id, sequence, payload and headers
    /// are kept. A row in any other state MUST stay untouched. Returns how many rows moved.
    ///
    /// # Errors
    /// A [`StoreError`] when the statement fails; nothing of this call moved.
    async fn move_to_pending(&self, ids: &[Uuid]) -> Result<u64, StoreError>;
}
