//! The inbox store: what the ingest pipeline and the relay need from the database holding the inbox.

use crate::outbox::StoreError;
use async_trait::async_trait;
use std::time::Duration;
use thiserror::Error;
use uuid::Uuid;

/// How a stored message leaves the inbox (`consumption` of the source, stored on the row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumption {
    /// The relay copies the row into the outbox.
    Push,
    /// A pull client claims the row.
    Pull,
}

impl Consumption {
    /// The stored value: `push` or `pull`.
    pub fn as_str(self) -> &'static str {
        match self {
            Consumption::Push => "push",
            Consumption::Pull => "pull",
        }
    }
}

/// A message accepted by a source, ready to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInboxMessage {
    /// The `id` of the row: chosen before the store, because the source transform reads it as
    /// `$messageId`. Unused when the insert finds a duplicate.
    pub id: Uuid,
    /// The source name (its key under `sources`).
    pub source: String,
    /// The deduplication key within the source.
    pub idempotency_key: String,
    /// The unit of order, when the source extracts one.
    pub aggregate_id: Option<String>,
    /// The event type, when the source extracts one.
    pub event_type: Option<String>,
    /// The payload as JSON text (after the source transform).
    pub payload: String,
    /// The received headers, one value per name, credentials removed.
    pub headers: Vec<(String, String)>,
    /// The correlation id, sanitised.
    pub correlation_id: Option<String>,
    /// Push or pull, from the source at receipt.
    pub consumption: Consumption,
    /// `None` stores the row `pending`; `Some(reason)` stores it `dead` at once (a broker message
    /// that is not JSON, or that its transform rejected with `Dead`).
    pub dead_reason: Option<String>,
}

/// What an insert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// A new row with this id.
    New(Uuid),
    /// The source already holds a row with this idempotency key; nothing was written.
    Duplicate,
    /// The database refused a value of the message as data (a number beyond its numeric type, a
    /// character it cannot hold): nothing was written, and the same message would be refused
    /// again, so it is the sender's error, not a storage failure.
    Refused {
        /// The database's words for what it refused, safe to answer (never a credential).
        reason: String,
    },
}

/// The inbox as the ingest pipeline uses it.
#[async_trait]
pub trait InboxStore: Send + Sync {
    /// Inserts the message once per (source, idempotency key): the unique constraint decides, so two
    /// concurrent inserts of one key store one row and the other reports [`Stored::Duplicate`].
    ///
    /// # Errors
    /// A [`StoreError`] when the row could not be written; the caller answers 500 / does not ack.
    async fn insert(&self, message: &NewInboxMessage) -> Result<Stored, StoreError>;

    /// Inserts a group of messages in one statement and one commit, each once per (source,
    /// idempotency key) as [`InboxStore::insert`] does; two messages of the group with the same key
    /// store one row and the other reports [`Stored::Duplicate`]. Returns one outcome per message,
    /// in the order given.
    ///
    /// # Errors
    /// An [`InsertManyError`]; then nothing of the group was stored.
    async fn insert_many(
        &self,
        messages: &[NewInboxMessage],
    ) -> Result<Vec<Stored>, InsertManyError>;
}

/// Why a group insert stored nothing, which decides whether trying each message alone can help.
#[derive(Debug, Error)]
pub enum InsertManyError {
    /// No connection to the database: no statement ran, and each message alone would fail the same.
    #[error(transparent)]
    Unavailable(StoreError),
    /// The statement ran and failed: one message may be the cause (a payload that is not JSON, a
    /// constraint of the table), so the others can still be stored one by one.
    #[error(transparent)]
    Statement(StoreError),
}

/// A push row claimed by the relay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayRow {
    /// The inbox row id (sent on as `x-inbox-id`).
    pub id: Uuid,
    /// The claim token; the forward is fenced on it.
    pub claim_token: Uuid,
    /// The source name.
    pub source: String,
    /// The idempotency key.
    pub idempotency_key: String,
    /// The aggregate id; becomes the outbox `key`.
    pub aggregate_id: Option<String>,
    /// The event type, for the topic template.
    pub event_type: Option<String>,
    /// The payload as JSON text.
    pub payload: String,
    /// The stored headers.
    pub headers: Vec<(String, String)>,
    /// The correlation id.
    pub correlation_id: Option<String>,
}

/// The outbox row the relay writes for one inbox row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardedRow {
    /// The inbox row and its claim.
    pub inbox_id: Uuid,
    /// The claim token of the inbox row.
    pub claim_token: Uuid,
    /// The rendered topic.
    pub topic: String,
    /// The outbox key (the inbox aggregate id).
    pub key: Option<String>,
    /// The payload as JSON text.
    pub payload: String,
    /// The outbox headers: inbox headers plus the relay's own.
    pub headers: Vec<(String, String)>,
    /// `inbox.relay.maxAttempts`, or `outbox.maxAttempts`.
    pub max_attempts: i32,
}

/// The inbox as the relay uses it.
///
/// Every write after the claim is fenced on id, state `processing`, the claim token and a live lease.
#[async_trait]
pub trait RelayStore: Send + Sync {
    /// Claims up to `limit` pending push rows in `created_at` order, never a row whose aggregate
    /// already has a row `processing`, never two rows of one aggregate; serialised across replicas.
    ///
    /// # Errors
    /// A [`StoreError`] when the claim fails; nothing is claimed.
    async fn claim(&self, limit: u32, lease: Duration) -> Result<Vec<RelayRow>, StoreError>;

    /// For each row, atomically: inserts its outbox row and marks the inbox row `processed`, only if
    /// the inbox row's fence still holds; a row whose fence fails writes no outbox row. Returns, per
    /// input, whether it was forwarded.
    ///
    /// # Errors
    /// A [`StoreError`] when the statement fails; nothing of the batch was written.
    async fn forward(&self, rows: &[ForwardedRow]) -> Result<Vec<bool>, StoreError>;

    /// Marks a claimed row `dead` with a reason (fenced); returns whether it applied.
    ///
    /// # Errors
    /// A [`StoreError`] when the statement fails.
    async fn mark_dead(
        &self,
        id: Uuid,
        claim_token: Uuid,
        reason: &str,
    ) -> Result<bool, StoreError>;

    /// Returns `processing` push rows whose lease expired to `pending`; returns how many moved.
    ///
    /// # Errors
    /// A [`StoreError`] when the statement fails.
    async fn reclaim_expired(&self) -> Result<u64, StoreError>;

    /// The age of the oldest `pending` inbox row; zero when none.
    ///
    /// # Errors
    /// A [`StoreError`] when the query fails.
    async fn oldest_pending_age(&self) -> Result<Duration, StoreError>;
}
