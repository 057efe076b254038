//! Messages that share an order key (a Kafka partition and record key) or an idempotency key are
//! stored in the broker's order, so the first of a key is the row kept and the later ones are its
//! duplicates. Messages with no key in common are stored side by side.
//!
//! The driver asks for a [`Turn`] per message, in the broker's order, before it spawns the
//! message's task. A turn waits for the tasks of the previous messages sharing one of its keys
//! to end (stored and decided), and ends itself when dropped.

use std::collections::HashMap;
use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;

/// The last message of each key still in the pipeline.
pub(crate) struct KeyOrder {
    /// Per key, what ends when the newest task of that key ends.
    last: HashMap<String, oneshot::Receiver<()>>,
    /// The size past which ended keys are forgotten.
    prune_at: usize,
}

/// One message's place among the messages of its keys.
#[derive(Debug)]
pub(crate) struct Turn {
    /// End when the previous messages of the same keys are done.
    after: Vec<oneshot::Receiver<()>>,
    /// Dropped when this message is done, which lets the next ones of its keys go.
    _done: Vec<oneshot::Sender<()>>,
}

impl Turn {
    /// Waits until every earlier message sharing a key is done.
    pub(crate) async fn wait(&mut self) {
        for previous in self.after.drain(..) {
            // An error only says the previous task ended without a word: it is done either way.
            let _ = previous.await;
        }
    }
}

impl KeyOrder {
    /// An empty order for a pipeline of at most `in_flight` messages.
    pub(crate) fn new(in_flight: usize) -> Self {
        Self {
            last: HashMap::new(),
            prune_at: in_flight.saturating_mul(2).max(64),
        }
    }

    /// The turn of the next message in the broker's order, whose keys are `keys` (none: it
    /// waits for nothing and nothing waits for it).
    pub(crate) fn turn(&mut self, keys: Vec<String>) -> Turn {
        let mut turn = Turn {
            after: Vec::with_capacity(keys.len()),
            _done: Vec::with_capacity(keys.len()),
        };
        for key in keys {
            let (done, ended) = oneshot::channel();
            if let Some(previous) = self.last.insert(key, ended) {
                turn.after.push(previous);
            }
            turn._done.push(done);
        }
        if self.last.len() > self.prune_at {
            // Keep the keys whose newest task still runs; at most the pipeline's size remain.
            self.last
                .retain(|_, ended| matches!(ended.try_recv(), Err(TryRecvError::Empty)));
        }
        turn
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
        let first = order.turn(vec!["k".into()]);
        let mut second = order.turn(vec!["other".into(), "k".into()]);
        let mut other = order.turn(vec!["third".into()]);
        let mut unkeyed = order.turn(vec![]);
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
            drop(order.turn(vec![format!("k{i}")]));
        }
        assert!(order.last.len() <= 64, "{}", order.last.len());
        let held = order.turn(vec!["held".into()]);
        for i in 0..200 {
            drop(order.turn(vec![format!("j{i}")]));
        }
        assert!(order.last.contains_key("held"), "a running key is kept");
        drop(held);
    }
}
