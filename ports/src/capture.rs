//! Change data capture: what the capture runner needs from a database that can stream its log.
//!
//! Capture only wakes delivery. An adapter reports that rows were inserted into the outbox table
//! and where in the log it is; it never hands rows over, and nothing it misses is lost (the
//! dispatcher's reconciliation pass still claims every row through SQL).

use async_trait::async_trait;
use queuebox_domain::capture::{CaptureScope, Lsn, Recorded};
use queuebox_domain::secret::Secret;
use std::sync::Arc;
use std::time::SystemTime;
use thiserror::Error;

/// Where and what to capture, resolved from `outbox.capture.*` and `database.*`.
#[derive(Debug, Clone)]
pub struct CaptureRequest {
    /// `outbox.capture.identity`.
    pub identity: String,
    /// The scope: host, port, database, schema, table, slot and publication.
    pub scope: CaptureScope,
    /// The capture account.
    pub username: String,
    /// Its password.
    pub password: Secret,
    /// The query parameters of `database.url` (for example `sslmode`), applied to the capture
    /// connection too.
    pub params: Vec<(String, String)>,
}

/// A capture failure. Every variant's text names what failed and never holds a credential.
#[derive(Debug, Clone, Error)]
pub enum CaptureError {
    /// The connection could not be opened or broke; trying again later may work.
    #[error("capture connection: {0}")]
    Connection(String),
    /// The database is not set up for capture (wal_level, publication, account, slot); the text
    /// says what to change. Capture tries again with backoff, so a fix takes effect by itself.
    #[error("{0}")]
    Setup(String),
    /// The state record could not be read or written.
    #[error("capture state: {0}")]
    State(String),
}

/// The replication slot as the database reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotPosition {
    /// The position up to which the owner confirmed the log (what the slot keeps WAL from).
    pub confirmed: Option<Lsn>,
}

/// What the log stream reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeEvent {
    /// A transaction committed. `inserts` counts its inserts into the outbox table; updates,
    /// deletes and truncates of it count in `ignored`.
    Committed {
        /// Inserts into the outbox table.
        inserts: u64,
        /// Other changes of the outbox table.
        ignored: u64,
        /// The log position just past the commit; confirming it releases the transaction's log.
        end: Lsn,
        /// When the transaction committed, by the server's clock.
        committed_at: Option<SystemTime>,
    },
    /// The server's log reached `end` with nothing for capture in between (a keepalive). With no
    /// transaction open, confirming it releases log the slot would otherwise keep.
    Idle {
        /// The server's current log end.
        end: Lsn,
    },
}

/// Opens capture sessions.
#[async_trait]
pub trait CaptureConnector: Send + Sync {
    /// Opens one session on the capture connection (not yet streaming). Its stream will start
    /// after `resume_after` when that lies ahead of the slot's confirmed position (the server
    /// starts at the later of the two), so a position recorded but not yet confirmed to the server
    /// is not read again.
    ///
    /// # Errors
    /// [`CaptureError::Connection`] when the server cannot be reached or refuses the login;
    /// [`CaptureError::Setup`] when the account lacks what capture needs, saying which.
    async fn open(
        &self,
        resume_after: Option<Lsn>,
    ) -> Result<Box<dyn CaptureSession>, CaptureError>;
}

/// One capture session before it streams. An adapter MUST keep the owner lock of
/// [`claim_ownership`](Self::claim_ownership) for as long as the session and the stream it turns
/// into live, and release it when they end (so a crash cannot keep it).
#[async_trait]
pub trait CaptureSession: Send {
    /// Takes the owner lock of the identity. `false` when another session holds it.
    ///
    /// # Errors
    /// [`CaptureError::Connection`] when the session broke.
    async fn claim_ownership(&mut self) -> Result<bool, CaptureError>;

    /// Checks that the database can stream the outbox table's inserts: the log level, the
    /// publication, that it covers the table and publishes inserts.
    ///
    /// # Errors
    /// [`CaptureError::Setup`] naming the first thing missing and how to add it.
    async fn check_ready(&mut self) -> Result<(), CaptureError>;

    /// The replication slot, or `None` when it does not exist.
    ///
    /// # Errors
    /// [`CaptureError::Setup`] when a slot of that name exists but cannot serve capture (another
    /// plugin, another database, a physical slot).
    async fn slot(&mut self) -> Result<Option<SlotPosition>, CaptureError>;

    /// Creates the replication slot and returns the position it starts from.
    ///
    /// # Errors
    /// [`CaptureError::Setup`] when the server refuses (no free slot, no permission).
    async fn create_slot(&mut self) -> Result<Lsn, CaptureError>;

    /// Moves the slot's confirmed position to the server's flushed log end, reading the log in
    /// between without handing anything out, and returns that position. Capture skips a backlog's
    /// log this way instead of streaming it: reading the same log through a stream costs the
    /// server several times more, for wake-ups nobody needs while every claim comes back full.
    /// Only a session that is not streaming may call it, and only while no other session holds
    /// the slot.
    ///
    /// # Errors
    /// [`CaptureError::Connection`] when the session broke; [`CaptureError::Setup`] when the
    /// server refuses (for example while the slot is still held by a session that is ending).
    async fn skip_to_log_end(&mut self) -> Result<Lsn, CaptureError>;

    /// Starts streaming after the later of the slot's confirmed position and the session's
    /// `resume_after`.
    ///
    /// # Errors
    /// [`CaptureError::Connection`] or [`CaptureError::Setup`] when the server refuses.
    async fn stream(self: Box<Self>) -> Result<Box<dyn ChangeStream>, CaptureError>;
}

/// A running log stream.
#[async_trait]
pub trait ChangeStream: Send {
    /// Waits for the next event. MUST be safe to drop mid-call.
    ///
    /// # Errors
    /// [`CaptureError::Connection`] when the stream broke; the stream is then finished.
    async fn next(&mut self) -> Result<ChangeEvent, CaptureError>;

    /// Tells the server that everything up to `position` is handled, so the slot may release the
    /// log before it. An adapter MAY send it later, batched, but MUST NOT confirm more than asked.
    fn confirm(&mut self, position: Lsn);

    /// Ends the stream. The last confirmation may not reach the server; the next start resumes
    /// from the position capture recorded itself, so nothing is read twice.
    async fn close(self: Box<Self>);
}

/// The `queuebox_capture_state` table.
#[async_trait]
pub trait CaptureStateStore: Send + Sync {
    /// The record of `identity`, if any.
    ///
    /// # Errors
    /// [`CaptureError::State`] when the query fails.
    async fn load(&self, identity: &str) -> Result<Option<Recorded>, CaptureError>;

    /// Creates the record of `identity`.
    ///
    /// # Errors
    /// [`CaptureError::State`] when the insert fails, including when a record already exists.
    async fn create(
        &self,
        identity: &str,
        record: &Recorded,
        owner_host: &str,
    ) -> Result<(), CaptureError>;

    /// Writes the last handled position of `identity`.
    ///
    /// # Errors
    /// [`CaptureError::State`] when the update fails.
    async fn record_position(
        &self,
        identity: &str,
        position: Lsn,
        owner_host: &str,
    ) -> Result<(), CaptureError>;

    /// Bytes of log between the server's current position and `slot`'s confirmed one; `None`
    /// when this database holds no such slot (capture reads another host).
    ///
    /// # Errors
    /// [`CaptureError::State`] when the query fails.
    async fn slot_lag(&self, slot: &str) -> Result<Option<u64>, CaptureError>;
}

/// Passes capture wake-ups from the owner to the other replicas of the same identity.
#[async_trait]
pub trait WakeChannel: Send + Sync {
    /// Tells every subscriber of `channel` to wake. Best effort: a lost wake-up costs latency.
    ///
    /// # Errors
    /// [`CaptureError::Connection`] when the database cannot be reached.
    async fn announce(&self, channel: &str) -> Result<(), CaptureError>;

    /// Subscribes to `channel`.
    ///
    /// # Errors
    /// [`CaptureError::Connection`] when the database cannot be reached.
    async fn subscribe(&self, channel: &str) -> Result<Box<dyn WakeFeed>, CaptureError>;
}

/// The wake-ups of one subscription.
#[async_trait]
pub trait WakeFeed: Send {
    /// Waits for the next wake-up. MUST be safe to drop mid-call.
    ///
    /// # Errors
    /// [`CaptureError::Connection`] when the subscription broke; subscribe again.
    async fn next(&mut self) -> Result<(), CaptureError>;
}

/// Everything capture needs from one database, as a backend provides it.
#[derive(Clone)]
pub struct CapturePorts {
    /// Opens the log stream.
    pub connector: Arc<dyn CaptureConnector>,
    /// The state table.
    pub state: Arc<dyn CaptureStateStore>,
    /// Wake-ups between replicas.
    pub wakes: Arc<dyn WakeChannel>,
}
