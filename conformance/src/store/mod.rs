//! The store suite: what `OutboxStore`, `RelayStore`, `InboxStore`, `ReplayStore` and
//! `RetentionStore` promise, checked through the ports and a small [`StoreFixture`].
//!
//! Every body starts from [`StoreFixture::fresh`] (an empty, migrated database of its own) and
//! ends with [`StoreFixture::done`]. Rows the application would write in its own transaction
//! (outbox rows) come from the fixture; everything else goes through the ports. Time never passes
//! by sleeping: a lease is made to pass, or a row to look older, by the fixture.

mod inbox;
mod outbox;
mod relay;
mod replay;
mod retention;

pub use inbox::*;
pub use outbox::*;
pub use relay::*;
pub use replay::*;
pub use retention::*;

use async_trait::async_trait;
use queuebox_domain::outbox::OutboxState;
use queuebox_ports::inbox::{Consumption, InboxStore, NewInboxMessage, RelayStore};
use queuebox_ports::outbox::{Claim, ClaimRequest, FencedFinish, Finish, OutboxStore};
use queuebox_ports::replay::ReplayStore;
use queuebox_ports::retention::RetentionStore;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// An outbox row as the application inserts it: due now, state `pending`, attempt 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOutboxRow {
    /// The routing input.
    pub topic: String,
    /// The unit of order; `None` or empty means unordered.
    pub key: Option<String>,
    /// The aggregate type.
    pub aggregate_type: Option<String>,
    /// A JSON object as text.
    pub payload: String,
    /// A JSON object of strings, as pairs.
    pub headers: Vec<(String, String)>,
    /// The row's dead-letter ceiling.
    pub max_attempts: i32,
}

impl NewOutboxRow {
    /// A row of `topic` and `key` with a small payload, no headers and 5 attempts.
    pub fn new(topic: &str, key: Option<&str>) -> Self {
        Self {
            topic: topic.to_owned(),
            key: key.map(str::to_owned),
            aggregate_type: None,
            payload: r#"{"n":1}"#.to_owned(),
            headers: Vec::new(),
            max_attempts: 5,
        }
    }
}

/// What the suite reads back of an outbox row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRowView {
    /// The `state` column.
    pub state: OutboxState,
    /// The token of the current claim; `None` when unclaimed.
    pub claim_token: Option<Uuid>,
    /// Failed deliveries so far.
    pub attempt: i32,
    /// The stored failure reason.
    pub last_error: Option<String>,
}

/// The state of an inbox row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxState {
    /// Stored, waiting for the relay or a pull client.
    Pending,
    /// Claimed.
    Processing,
    /// Forwarded or completed.
    Processed,
    /// Dead-lettered.
    Dead,
}

/// What the suite reads back of an inbox row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxRowView {
    /// The `state` column.
    pub state: InboxState,
    /// The token of the current claim; `None` when unclaimed.
    pub claim_token: Option<Uuid>,
    /// The stored failure reason.
    pub last_error: Option<String>,
}

/// One fresh database of the adapter under test: its stores, and the few things the suite cannot
/// do through the ports. Keep an implementation small and free of test logic; the suite decides
/// what to check.
#[async_trait]
pub trait StoreFixture: Sized + Send + Sync + 'static {
    /// An empty database with the bundled schema, used by this test only.
    async fn fresh() -> Self;

    /// The outbox store on it.
    fn outbox(&self) -> Arc<dyn OutboxStore>;
    /// The relay store on it.
    fn relay(&self) -> Arc<dyn RelayStore>;
    /// The inbox store on it.
    fn inbox(&self) -> Arc<dyn InboxStore>;
    /// The replay store on it.
    fn replay(&self) -> Arc<dyn ReplayStore>;
    /// The retention store on it.
    fn retention(&self) -> Arc<dyn RetentionStore>;

    /// Inserts an outbox row as the application does in its own transaction; returns its id.
    /// Rows inserted one after another get increasing sequences.
    async fn insert_outbox_row(&self, row: NewOutboxRow) -> Uuid;

    /// Reads an outbox row back; `None` when no row has this id.
    async fn outbox_row(&self, id: Uuid) -> Option<OutboxRowView>;

    /// Makes the lease of a `processing` outbox row lie in the past of the database clock, as if
    /// it had run out; nothing else of the row changes.
    async fn expire_outbox_lease(&self, id: Uuid);

    /// Moves every time stamp of an outbox row (`created_at`, `updated_at`, `scheduled_at`)
    /// `by` into the past, as if the row and its last change were that much older.
    async fn backdate_outbox_row(&self, id: Uuid, by: Duration);

    /// Reads an inbox row back; `None` when no row has this id.
    async fn inbox_row(&self, id: Uuid) -> Option<InboxRowView>;

    /// Makes the lease of a `processing` inbox row lie in the past of the database clock.
    async fn expire_inbox_lease(&self, id: Uuid);

    /// Moves the time stamps of an inbox row (`created_at` and any later one it has) `by` into the
    /// past, as if the row had been received that much earlier.
    async fn backdate_inbox_row(&self, id: Uuid, by: Duration);

    /// Closes the stores and removes the database. Called at the end of every test that passes;
    /// an implementation also cleans up when a failing test drops the fixture instead.
    async fn done(self) {}
}

/// A lease no test row loses by accident.
pub(crate) const LEASE: Duration = Duration::from_secs(300);

/// An hour, the retry delay and retention age the suite uses.
pub(crate) const HOUR: Duration = Duration::from_secs(3_600);

/// Claims up to `limit` outbox rows with [`LEASE`] from the start of the key walk.
pub(crate) async fn claim<F: StoreFixture>(fx: &F, limit: u32) -> Claim {
    fx.outbox()
        .claim(&ClaimRequest {
            limit,
            lease: LEASE,
            key_cursor: String::new(),
            released_keys: Vec::new(),
        })
        .await
        .expect("claim")
}

/// Claims until a claim comes back empty; returns every row claimed (at most 50 rounds).
pub(crate) async fn claim_all<F: StoreFixture>(fx: &F) -> Vec<queuebox_ports::outbox::ClaimedRow> {
    let mut rows = Vec::new();
    let mut cursor = String::new();
    for _ in 0..50 {
        let claim = fx
            .outbox()
            .claim(&ClaimRequest {
                limit: 100,
                lease: LEASE,
                key_cursor: cursor,
                released_keys: Vec::new(),
            })
            .await
            .expect("claim");
        if claim.rows.is_empty() {
            return rows;
        }
        cursor = claim.next_key_cursor;
        rows.extend(claim.rows);
    }
    panic!("claims kept returning rows after 50 rounds: {rows:?}")
}

/// Applies one fenced finish and returns whether it changed the row.
pub(crate) async fn finish<F: StoreFixture>(fx: &F, id: Uuid, token: Uuid, finish: Finish) -> bool {
    let applied = fx
        .outbox()
        .finish(&[FencedFinish {
            id,
            claim_token: token,
            finish,
        }])
        .await
        .expect("finish");
    assert_eq!(applied.len(), 1, "one answer per write: {applied:?}");
    applied[0]
}

/// The state of an outbox row that must exist.
pub(crate) async fn outbox_state<F: StoreFixture>(fx: &F, id: Uuid) -> OutboxRowView {
    fx.outbox_row(id)
        .await
        .unwrap_or_else(|| panic!("outbox row {id} is missing"))
}

/// The state of an inbox row that must exist.
pub(crate) async fn inbox_state<F: StoreFixture>(fx: &F, id: Uuid) -> InboxRowView {
    fx.inbox_row(id)
        .await
        .unwrap_or_else(|| panic!("inbox row {id} is missing"))
}

/// An inbox message of `source` and `key`, for the relay when `consumption` is push.
pub(crate) fn inbox_message(
    source: &str,
    key: &str,
    aggregate: Option<&str>,
    consumption: Consumption,
) -> NewInboxMessage {
    NewInboxMessage {
        id: Uuid::new_v4(),
        source: source.to_owned(),
        idempotency_key: key.to_owned(),
        aggregate_id: aggregate.map(str::to_owned),
        event_type: Some("charge.paid".to_owned()),
        payload: r#"{"amount":12}"#.to_owned(),
        headers: vec![("x-tenant".to_owned(), "acme".to_owned())],
        correlation_id: Some("corr-1".to_owned()),
        consumption,
        dead_reason: None,
    }
}

/// Stores `message` through the inbox port and returns the new row's id.
pub(crate) async fn store_inbox<F: StoreFixture>(fx: &F, message: &NewInboxMessage) -> Uuid {
    match fx.inbox().insert(message).await.expect("inbox insert") {
        queuebox_ports::inbox::Stored::New(id) => id,
        other => panic!("expected a new inbox row, got {other:?}"),
    }
}

/// Parses JSON text, for comparing payloads without caring about spacing or key order.
pub(crate) fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Pairs as a sorted list, for comparing header sets whose order a store may not keep.
pub(crate) fn sorted(pairs: &[(String, String)]) -> Vec<(String, String)> {
    let mut pairs = pairs.to_vec();
    pairs.sort();
    pairs
}
