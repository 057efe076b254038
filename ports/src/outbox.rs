//! The outbox store: what the dispatcher needs from the database holding the outbox table.

use async_trait::async_trait;
use std::time::{Duration, SystemTime};
use thiserror::Error;
use uuid::Uuid;

/// A store failure. The dispatcher logs it, counts it, and tries again on its next cycle.
#[derive(Debug, Clone, Error)]
#[error("{operation} failed: {reason}")]
pub struct StoreError {
    /// What the store was doing, for example `claim`.
    pub operation: &'static str,
    /// Why; never holds a credential.
    pub reason: String,
}

/// One outbox row taken by a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedRow {
    /// The row id (sent as `X-Message-Id`).
    pub id: Uuid,
    /// The token this claim set; every later write of the row is fenced on it.
    pub claim_token: Uuid,
    /// The routing input.
    pub topic: String,
    /// The unit of order; `None` or empty means unordered.
    pub key: Option<String>,
    /// The aggregate type, for address templates.
    pub aggregate_type: Option<String>,
    /// The payload as JSON text, exactly as stored.
    pub payload: String,
    /// The row's headers (a JSON object of strings), in stored order.
    pub headers: Vec<(String, String)>,
    /// Failed deliveries so far.
    pub attempt: i32,
    /// The row's own dead-letter ceiling.
    pub max_attempts: i32,
    /// The insert order of the row.
    pub sequence: i64,
    /// The row's `created_at` (the route and destination transforms read it as `$timestamp`).
    pub created_at: SystemTime,
}

/// What one claim asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRequest {
    /// At most this many rows.
    pub limit: u32,
    /// The lease length (`outbox.claimTimeoutMs`), added to the database clock.
    pub lease: Duration,
    /// Where the previous claim stopped walking the keys, so every ready key gets its turn.
    pub key_cursor: String,
    /// Keys whose head this replica has just finished. Their next rows are claimed first (at most
    /// half of `limit`), so a busy key moves on as soon as its head is done instead of waiting for
    /// the walk to come round all ready keys again; the rest of the limit goes to the walk.
    pub released_keys: Vec<String>,
}

/// The rows one claim took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claim {
    /// The claimed rows, at most one per non-empty key.
    pub rows: Vec<ClaimedRow>,
    /// The cursor for the next claim.
    pub next_key_cursor: String,
}

/// How a claimed row ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// Delivered: state `sent`.
    Sent,
    /// Failed with attempts left: back to `pending`, `attempt` raised, `scheduled_at` moved.
    Retry {
        /// The new `attempt` value.
        attempt: i32,
        /// How long from the database clock until the next try.
        delay: Duration,
        /// The redacted reason, stored in `last_error`.
        error: String,
    },
    /// No attempt left, no route, or no publisher: state `dead`.
    Dead {
        /// The redacted reason, stored in `last_error`.
        error: String,
    },
    /// Never published (the dispatcher stopped first): back to `pending` with `attempt`,
    /// `scheduled_at` and `last_error` unchanged, so another replica takes it at once instead of after
    /// the lease.
    Release,
}

/// One fenced write: applied only while the row is `processing` under `claim_token` with a live lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencedFinish {
    /// The row.
    pub id: Uuid,
    /// The caller's claim token.
    pub claim_token: Uuid,
    /// The end state.
    pub finish: Finish,
}

/// The pending gauges, read at most once per `outbox.pendingGaugeIntervalMs`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PendingStats {
    /// Rows in state `pending`.
    pub pending: u64,
    /// Age of the oldest pending row; zero when none.
    pub oldest_pending_age: Duration,
    /// Pending rows per topic, for the per-destination queue depth.
    pub pending_by_topic: Vec<(String, u64)>,
}

/// The outbox table, as the dispatcher uses it.
///
/// Every write after the claim is fenced: it matches the row id, state `processing`, the caller's claim
/// token and a lease later than the database clock, and reports whether it changed the row. An
/// adapter MUST NOT apply a fenced write that fails any of these conditions.
#[async_trait]
pub trait OutboxStore: Send + Sync {
    /// Claims due rows: state `pending`, `scheduled_at` passed, and for a non-empty key only the head
    /// of its key (no earlier row of the key `pending` or `processing`). Each claimed row gets state
    /// `processing`, a new random token, `claimed_at`, and `lease_expires_at` = database clock + lease.
    ///
    /// # Errors
    /// A [`StoreError`] when the database cannot be reached or the statement fails; nothing is claimed.
    async fn claim(&self, request: &ClaimRequest) -> Result<Claim, StoreError>;

    /// Extends the lease of each (id, token) still held; returns, per input, whether it was renewed.
    /// A `false` means the claim was lost.
    ///
    /// # Errors
    /// A [`StoreError`] when the statement fails; the caller treats the leases as unknown.
    async fn renew(&self, held: &[(Uuid, Uuid)], lease: Duration) -> Result<Vec<bool>, StoreError>;

    /// Applies fenced finishes in one round trip; returns, per input, whether the row changed. A `false`
    /// means the claim was lost and the row belongs to someone else now.
    ///
    /// # Errors
    /// A [`StoreError`] when the statement fails; no write of the batch was applied.
    async fn finish(&self, writes: &[FencedFinish]) -> Result<Vec<bool>, StoreError>;

    /// Returns every `processing` row whose lease expired to `pending`; returns how many moved.
    ///
    /// # Errors
    /// A [`StoreError`] when the statement fails.
    async fn reclaim_expired(&self) -> Result<u64, StoreError>;

    /// Reads the pending gauges.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn pending_stats(&self) -> Result<PendingStats, StoreError>;

    /// How long, by the database clock, until a row falls due without a new insert: the earliest
    /// `scheduled_at` still ahead of a `pending` row, or `lease_expires_at` of a `processing` row.
    /// `None` when there is none. With capture on, the dispatcher sleeps no longer than this, since
    /// no insert will wake it for a retry or an expired lease.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn next_deadline(&self) -> Result<Option<Duration>, StoreError>;
}
