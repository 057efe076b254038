//! Two messages of one idempotency key are stored in stream order, so the first is the row kept
//! and the second is its duplicate (the bridge guides' "first in the stream wins", as the Kafka source
//! does for one record key). Messages of different keys are still stored side by side.
//!
//! The consuming loop asks for a [`Turn`] per message, in stream order, before it spawns the
//! message's task. A turn waits for the task of the previous message with the same key to end
//! (stored and settled), and ends itself when dropped.

use std::collections::HashMap;
use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;

/// The last message of each key still in the pipeline.
pub(super) struct KeyOrder {
    /// Per key, what ends when the newest task of that key ends.
    last: HashMap<String, oneshot::Receiver<()>>,
    /// The size past which ended keys are forgotten.
    prune_at: usize,
}

/// One message's place among the messages of its key.
#[derive(Debug)]
pub(super) struct Turn {
    /// Ends when the previous message of the same key is done.
    after: Option<oneshot::Receiver<()>>,
    /// Dropped when this message is done, which lets the next one of its key go.
    _done: Option<oneshot::Sender<()>>,
}

impl Turn {
    /// Waits until every earlier message of the same key is done.
    pub(super) async fn wait(&mut self) {
        if let Some(previous) = self.after.take() {
            // An error only says the previous task ended without a word: it is done either way.
            let _ = previous.await;
        }
    }
}

impl KeyOrder {
    /// An empty order for a pipeline of at most `in_flight` messages.
    pub(super) fn new(in_flight: usize) -> Self {
        Self {
            last: HashMap::new(),
            prune_at: in_flight.saturating_mul(2).max(64),
        }
    }

    /// The turn of the next message in stream order, whose key is `key` (`None`: it waits for
    /// nothing and nothing waits for it).
    pub(super) fn turn(&mut self, key: Option<String>) -> Turn {
        let Some(key) = key else {
            return Turn {
                after: None,
                _done: None,
            };
        };
        let (done, ended) = oneshot::channel();
        let after = self.last.insert(key, ended);
        if self.last.len() > self.prune_at {
            // Keep the keys whose newest task still runs; at most the pipeline's size remain.
            self.last
                .retain(|_, ended| matches!(ended.try_recv(), Err(TryRecvError::Empty)));
        }
        Turn {
            after,
            _done: Some(done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn a_later_message_of_a_key_waits_for_the_earlier_and_other_keys_do_not() {
        let mut order = KeyOrder::new(4);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let first = order.turn(Some("k".into()));
        let mut second = order.turn(Some("k".into()));
        let mut other = order.turn(Some("other".into()));
        let mut unkeyed = order.turn(None);
        let log = Arc::clone(&seen);
        let waiting = tokio::spawn(async move {
            second.wait().await;
            log.lock().map(|mut l| l.push("second")).ok();
        });
        other.wait().await;
        unkeyed.wait().await;
        tokio::task::yield_now().await;
        assert!(
            !waiting.is_finished(),
            "the second of `k` waits for the first"
        );
        seen.lock().map(|mut l| l.push("first")).ok();
        drop(first);
        waiting.await.ok();
        assert_eq!(
            *seen.lock().unwrap_or_else(|e| e.into_inner()),
            ["first", "second"]
        );
    }

    #[tokio::test]
    async fn ended_keys_are_forgotten() {
        let mut order = KeyOrder::new(1);
        for i in 0..1_000 {
            drop(order.turn(Some(format!("k{i}"))));
        }
        assert!(order.last.len() <= 64, "{}", order.last.len());
        let held = order.turn(Some("held".into()));
        for i in 0..200 {
            drop(order.turn(Some(format!("j{i}"))));
        }
        assert!(order.last.contains_key("held"), "a running key is kept");
        drop(held);
    }
}
