//! Coalesced inbox inserts: the messages that arrive while an insert runs are stored together, in
//! one statement and one commit, instead of one statement, one transaction and one WAL flush each.
//!
//! Under load most of an insert's cost is per statement (a round trip, a commit, the wake-ups on
//! both sides), not per row, so a group of rows costs little more than one. There is no timer: a
//! message that finds no statement running is inserted at once, alone, with the single-row
//! statement; messages that arrive while statements run wait, and the next statement of the first
//! runner to finish takes them. Another runner starts only when more messages wait than the busy
//! runners' next statements would take together (a full group each): more statements at once mean
//! smaller groups and more commits for the same rows, which on a 2-core machine cost a quarter of the
//! ingestion rate (five runners against one, `bench/journal/2026-12-04.md`). Every caller still gets
//! its own outcome, and only after the statement holding its row committed.
//!
//! The wrapper is an [`InboxStore`] itself, so the ingest pipeline (and every source kind behind
//! it) uses it without knowing.

use async_trait::async_trait;
use queuebox_ports::inbox::{InboxStore, InsertManyError, NewInboxMessage, Stored};
use queuebox_ports::outbox::StoreError;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::oneshot;

/// How large groups get and how many statements run at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoalesceOptions {
    /// The most messages one statement inserts.
    pub max_group: usize,
    /// The most group statements in flight at once (each holds one pool connection). Runners beyond
    /// the first start only while a backlog of more than a full group per busy runner waits.
    pub max_parallel: usize,
}

impl CoalesceOptions {
    /// The group bound used in production: large enough that a burst of a few hundred requests
    /// needs only a few statements, small enough that one statement stays short.
    pub const MAX_GROUP: usize = 64;

    /// Half the connection pool for group statements (at least one), leaving the rest to the relay,
    /// the dispatcher and the fallback inserts.
    pub fn for_pool(pool_size: u32) -> Self {
        let half = usize::try_from(pool_size / 2).unwrap_or(1);
        Self {
            max_group: Self::MAX_GROUP,
            max_parallel: half.max(1),
        }
    }
}

/// An inbox store that groups concurrent inserts into [`InboxStore::insert_many`] calls.
pub struct CoalescingInbox {
    shared: Arc<Shared>,
}

struct Shared {
    store: Arc<dyn InboxStore>,
    options: CoalesceOptions,
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    /// Runner tasks alive; at most `max_parallel`.
    runners: usize,
}

struct Waiting {
    message: NewInboxMessage,
    answer: oneshot::Sender<Result<Stored, StoreError>>,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // The lock is held only to move entries in and out, never across an await or a panic point
        // that could leave the queue half-changed, so a poisoned lock still holds a sound queue.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next group, or `None` after giving up the runner's slot when nothing waits (under the
    /// same lock, so a message queued after the check finds the slot free and starts a runner).
    fn next_group(&self) -> Option<Vec<Waiting>> {
        let mut queue = self.queue();
        if queue.waiting.is_empty() {
            queue.runners = queue.runners.saturating_sub(1);
            return None;
        }
        let take = queue.waiting.len().min(self.options.max_group.max(1));
        Some(queue.waiting.drain(..take).collect())
    }

    /// Inserts `group` and answers each of its callers.
    async fn store(&self, group: Vec<Waiting>) {
        let (messages, answers): (Vec<_>, Vec<_>) = group
            .into_iter()
            .map(|waiting| (waiting.message, waiting.answer))
            .unzip();
        if let [message] = messages.as_slice() {
            // A message alone takes the single-row statement: cheaper for the database than a
            // group of one, so a quiet inbox answers as fast as without grouping.
            let outcome = self.store.insert(message).await;
            for answer in answers {
                let _ = answer.send(outcome.clone());
            }
            return;
        }
        match self.store.insert_many(&messages).await {
            Ok(outcomes) => {
                // A store that returned fewer outcomes than messages drops the remaining answers,
                // which their callers read as a failed insert.
                for (answer, outcome) in answers.into_iter().zip(outcomes) {
                    // A caller that went away (its client disconnected) needs no answer.
                    let _ = answer.send(Ok(outcome));
                }
            }
            Err(InsertManyError::Unavailable(error)) => {
                for answer in answers {
                    let _ = answer.send(Err(error.clone()));
                }
            }
            Err(InsertManyError::Statement(error)) => {
                // One message may have failed the statement for all: each alone gets its own
                // outcome, so the others are still stored and only the culprit gets the error.
                tracing::warn!(
                    %error,
                    messages = messages.len(),
                    "a grouped inbox insert failed; inserting its messages one by one"
                );
                for (message, answer) in messages.iter().zip(answers) {
                    let _ = answer.send(self.store.insert(message).await);
                }
            }
        }
    }
}

/// Gives the runner's slot back if its task ends without doing so (a panic in a store), so later
/// messages still find a runner.
struct RunnerSlot {
    shared: Arc<Shared>,
    released: bool,
}

impl Drop for RunnerSlot {
    fn drop(&mut self) {
        if !self.released {
            let mut queue = self.shared.queue();
            queue.runners = queue.runners.saturating_sub(1);
        }
    }
}

/// One runner: inserts groups until nothing waits. A spawned task, so a caller that goes away
/// (its request dropped) never cancels a statement that holds other callers' messages.
async fn run(mut slot: RunnerSlot) {
    while let Some(group) = slot.shared.next_group() {
        slot.shared.store(group).await;
    }
    slot.released = true;
}

impl CoalescingInbox {
    /// Groups the inserts into `store` as `options` bound them.
    pub fn new(store: Arc<dyn InboxStore>, options: CoalesceOptions) -> Self {
        Self {
            shared: Arc::new(Shared {
                store,
                options,
                queue: Mutex::new(Queue::default()),
            }),
        }
    }

    /// Messages queued and not yet taken into a statement.
    pub fn waiting(&self) -> usize {
        self.shared.queue().waiting.len()
    }
}

#[async_trait]
impl InboxStore for CoalescingInbox {
    async fn insert(&self, message: &NewInboxMessage) -> Result<Stored, StoreError> {
        let (answer, outcome) = oneshot::channel();
        let start_runner = {
            let mut queue = self.shared.queue();
            queue.waiting.push_back(Waiting {
                message: message.clone(),
                answer,
            });
            let busy = queue.runners;
            let options = &self.shared.options;
            let start = busy < options.max_parallel.max(1)
                && (busy == 0 || queue.waiting.len() > busy * options.max_group.max(1));
            if start {
                queue.runners += 1;
            }
            start
        };
        if start_runner {
            tokio::spawn(run(RunnerSlot {
                shared: Arc::clone(&self.shared),
                released: false,
            }));
        }
        outcome.await.unwrap_or_else(|_| {
            Err(StoreError {
                operation: "insert",
                reason: "the grouped insert ended without an answer for this message".into(),
            })
        })
    }

    async fn insert_many(
        &self,
        messages: &[NewInboxMessage],
    ) -> Result<Vec<Stored>, InsertManyError> {
        self.shared.store.insert_many(messages).await
    }
}

#[cfg(test)]
mod tests;
