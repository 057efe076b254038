//! The coalescer over a recording store: what reaches the store in which groups, and what each
//! caller gets back.
#![allow(clippy::unwrap_used)]

use super::*;
use queuebox_ports::inbox::Consumption;
use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Semaphore;
use uuid::Uuid;

/// Deduplicates by key like the database, records every call, and can hold its first statement
/// (single or group) until the test releases it, so the test controls what queues behind it.
#[derive(Default)]
struct RecordingStore {
    keys: Mutex<HashSet<String>>,
    groups: Mutex<Vec<Vec<String>>>,
    singles: Mutex<Vec<String>>,
    started: AtomicUsize,
    hold_first: Option<Semaphore>,
    unavailable: bool,
}

impl RecordingStore {
    fn holding_the_first_statement() -> Self {
        Self {
            hold_first: Some(Semaphore::new(0)),
            ..Self::default()
        }
    }

    fn release_the_first_statement(&self) {
        if let Some(gate) = &self.hold_first {
            gate.add_permits(1);
        }
    }

    /// Counts the statement and holds the first one when asked to.
    async fn enter(&self) {
        let first = self.started.fetch_add(1, Ordering::SeqCst) == 0;
        if first && let Some(gate) = &self.hold_first {
            let _permit = gate.acquire().await.unwrap();
        }
    }

    fn singles(&self) -> Vec<String> {
        self.singles.lock().unwrap().clone()
    }

    fn group_sizes(&self) -> Vec<usize> {
        self.groups.lock().unwrap().iter().map(Vec::len).collect()
    }

    fn store_one(&self, message: &NewInboxMessage) -> Stored {
        if self
            .keys
            .lock()
            .unwrap()
            .insert(message.idempotency_key.clone())
        {
            Stored::New(message.id)
        } else {
            Stored::Duplicate
        }
    }
}

fn failed(reason: &str) -> StoreError {
    StoreError {
        operation: "insert",
        reason: reason.into(),
    }
}

#[async_trait]
impl InboxStore for RecordingStore {
    async fn insert(&self, message: &NewInboxMessage) -> Result<Stored, StoreError> {
        self.enter().await;
        self.singles
            .lock()
            .unwrap()
            .push(message.idempotency_key.clone());
        if self.unavailable {
            return Err(failed("pool timed out"));
        }
        if message.idempotency_key == "poison" {
            return Err(failed("check constraint"));
        }
        Ok(self.store_one(message))
    }

    async fn insert_many(
        &self,
        messages: &[NewInboxMessage],
    ) -> Result<Vec<Stored>, InsertManyError> {
        self.enter().await;
        self.groups.lock().unwrap().push(
            messages
                .iter()
                .map(|message| message.idempotency_key.clone())
                .collect(),
        );
        if self.unavailable {
            return Err(InsertManyError::Unavailable(failed("pool timed out")));
        }
        if messages.iter().any(|m| m.idempotency_key == "poison") {
            return Err(InsertManyError::Statement(failed("check constraint")));
        }
        Ok(messages.iter().map(|m| self.store_one(m)).collect())
    }
}

fn message(key: &str) -> NewInboxMessage {
    NewInboxMessage {
        id: Uuid::new_v4(),
        source: "orders".into(),
        idempotency_key: key.into(),
        aggregate_id: None,
        event_type: None,
        payload: "{}".into(),
        headers: Vec::new(),
        correlation_id: None,
        consumption: Consumption::Push,
        dead_reason: None,
    }
}

fn options(max_group: usize, max_parallel: usize) -> CoalesceOptions {
    CoalesceOptions {
        max_group,
        max_parallel,
    }
}

/// Polls `condition` (letting the spawned tasks run) until it holds; fails after five seconds.
async fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(5), async {
        while !condition() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting for {what}");
}

type Pending = tokio::task::JoinHandle<(NewInboxMessage, Result<Stored, StoreError>)>;

fn submit(inbox: &Arc<CoalescingInbox>, key: &str) -> Pending {
    let inbox = Arc::clone(inbox);
    let message = message(key);
    tokio::spawn(async move {
        let outcome = inbox.insert(&message).await;
        (message, outcome)
    })
}

/// Starts one insert that the store holds, queues `keys` behind it, then releases the store.
async fn queued_behind_a_held_statement(
    store: &Arc<RecordingStore>,
    inbox: &Arc<CoalescingInbox>,
    keys: &[&str],
) -> Vec<(NewInboxMessage, Result<Stored, StoreError>)> {
    let mut pending = vec![submit(inbox, "first")];
    wait_for("the first statement", || {
        store.started.load(Ordering::SeqCst) == 1
    })
    .await;
    pending.extend(keys.iter().map(|key| submit(inbox, key)));
    wait_for("the queued messages", || inbox.waiting() == keys.len()).await;
    store.release_the_first_statement();
    let mut outcomes = Vec::new();
    for task in pending {
        outcomes.push(task.await.unwrap());
    }
    outcomes
}

async fn joined<F: Future<Output = T>, T>(future: F) -> T {
    tokio::time::timeout(Duration::from_secs(5), future)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_lone_message_is_inserted_at_once_with_the_single_row_statement() {
    let store = Arc::new(RecordingStore::default());
    let inbox = CoalescingInbox::new(store.clone(), options(64, 2));
    let lone = message("a");
    let outcome = joined(inbox.insert(&lone)).await.unwrap();
    assert_eq!(outcome, Stored::New(lone.id));
    assert_eq!(store.singles(), vec!["a"]);
    assert!(store.group_sizes().is_empty());
    // Nothing is left waiting and the runner gave its slot back: the next one also runs at once.
    assert_eq!(inbox.waiting(), 0);
    let next = message("b");
    assert_eq!(
        joined(inbox.insert(&next)).await.unwrap(),
        Stored::New(next.id)
    );
    assert_eq!(store.singles(), vec!["a", "b"]);
    assert!(store.group_sizes().is_empty());
}

#[tokio::test]
async fn messages_that_arrive_while_a_statement_runs_share_the_next_one() {
    let store = Arc::new(RecordingStore::holding_the_first_statement());
    let inbox = Arc::new(CoalescingInbox::new(store.clone(), options(64, 1)));
    let outcomes = queued_behind_a_held_statement(&store, &inbox, &["a", "b", "a", "c"]).await;
    assert_eq!(store.singles(), vec!["first"]);
    assert_eq!(store.group_sizes(), vec![4]);
    // Each caller gets its own outcome: its own id when new, a duplicate for the second "a".
    let mut new = 0;
    let mut duplicates = 0;
    for (message, outcome) in outcomes {
        match outcome.unwrap() {
            Stored::New(id) => {
                assert_eq!(id, message.id);
                new += 1;
            }
            Stored::Duplicate => {
                assert_eq!(message.idempotency_key, "a");
                duplicates += 1;
            }
            Stored::Refused { reason } => panic!("refused: {reason}"),
        }
    }
    assert_eq!((new, duplicates), (4, 1));
}

#[tokio::test]
async fn a_group_never_exceeds_its_bound() {
    let store = Arc::new(RecordingStore::holding_the_first_statement());
    let inbox = Arc::new(CoalescingInbox::new(store.clone(), options(2, 1)));
    let outcomes = queued_behind_a_held_statement(&store, &inbox, &["a", "b", "c", "d", "e"]).await;
    assert_eq!(store.group_sizes(), vec![2, 2]);
    // What is left for the last statement is one message: it goes alone.
    assert_eq!(store.singles(), vec!["first", "e"]);
    assert!(outcomes.iter().all(|(_, outcome)| outcome.is_ok()));
}

#[tokio::test]
async fn a_failed_group_is_inserted_one_by_one_so_only_the_culprit_fails() {
    let store = Arc::new(RecordingStore::holding_the_first_statement());
    let inbox = Arc::new(CoalescingInbox::new(store.clone(), options(64, 1)));
    let outcomes = queued_behind_a_held_statement(&store, &inbox, &["a", "poison", "b"]).await;
    assert_eq!(store.group_sizes(), vec![3]);
    assert_eq!(store.singles(), vec!["first", "a", "poison", "b"]);
    for (message, outcome) in outcomes {
        if message.idempotency_key == "poison" {
            assert!(outcome.is_err());
        } else {
            assert_eq!(outcome.unwrap(), Stored::New(message.id));
        }
    }
}

#[tokio::test]
async fn a_lone_failed_message_gets_its_error_from_one_try() {
    let store = Arc::new(RecordingStore::default());
    let inbox = CoalescingInbox::new(store.clone(), options(64, 1));
    let error = joined(inbox.insert(&message("poison"))).await.unwrap_err();
    assert_eq!(error.reason, "check constraint");
    assert_eq!(store.singles(), vec!["poison"]);
    assert!(store.group_sizes().is_empty());
}

#[tokio::test]
async fn without_a_connection_every_message_of_the_group_fails_without_retries() {
    let store = Arc::new(RecordingStore {
        unavailable: true,
        ..RecordingStore::holding_the_first_statement()
    });
    let inbox = Arc::new(CoalescingInbox::new(store.clone(), options(64, 1)));
    let outcomes = queued_behind_a_held_statement(&store, &inbox, &["a", "b"]).await;
    assert_eq!(store.group_sizes(), vec![2]);
    // The group is not retried message by message: only the first, alone, tried a single insert.
    assert_eq!(store.singles(), vec!["first"]);
    for (_, outcome) in outcomes {
        assert_eq!(outcome.unwrap_err().reason, "pool timed out");
    }
}

#[tokio::test]
async fn a_second_runner_starts_only_when_more_wait_than_the_busy_one_takes_next() {
    let store = Arc::new(RecordingStore::holding_the_first_statement());
    let inbox = Arc::new(CoalescingInbox::new(store.clone(), options(2, 2)));
    let held = submit(&inbox, "held");
    wait_for("the held statement", || {
        store.started.load(Ordering::SeqCst) == 1
    })
    .await;
    // Two waiting messages fit the busy runner's next group: they wait for it, no runner starts
    // (the decision is taken under the queue's lock as each message is queued).
    let queued = [submit(&inbox, "a"), submit(&inbox, "b")];
    wait_for("two queued messages", || inbox.waiting() == 2).await;
    assert_eq!(inbox.shared.queue().runners, 1);
    // A third is more than one group: a second runner starts and stores all three while the first
    // statement is still held.
    let third = submit(&inbox, "c");
    for pending in queued.into_iter().chain([third]) {
        let (message, outcome) = joined(pending).await.unwrap();
        assert_eq!(outcome.unwrap(), Stored::New(message.id));
    }
    assert_eq!(
        store.started.load(Ordering::SeqCst),
        3,
        "held, a group of two, then one"
    );
    assert_eq!(store.group_sizes(), vec![2]);
    store.release_the_first_statement();
    assert!(joined(held).await.unwrap().1.is_ok());
    wait_for("both runners to give their slot back", || {
        inbox.shared.queue().runners == 0
    })
    .await;
}

#[test]
fn half_the_pool_runs_group_statements() {
    assert_eq!(CoalesceOptions::for_pool(10).max_parallel, 5);
    assert_eq!(CoalesceOptions::for_pool(1).max_parallel, 1);
    assert_eq!(CoalesceOptions::for_pool(10).max_group, 64);
}
