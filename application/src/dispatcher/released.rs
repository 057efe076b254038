//! Keys whose head this replica has finished, waiting to be named in the next claim.
//!
//! A finished head (sent or dead) frees its key: the key's next row may go at once. The claim walk
//! would reach that key again only after a rotation over every ready key, so the claim loop hands
//! these keys to the next claim, which takes their new heads first (within half of its limit).
//!
//! The newest keys go first. With every key busy, more keys are freed between two claims than the
//! half of a claim takes; oldest-first would make a freed key queue behind about a thousand others
//! (a second, slower rotation), and a hot key would again wait seconds for each row.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;

/// The freed keys in the order they were freed, each at most once.
pub(crate) struct Released {
    keys: Mutex<Queue>,
    /// The most keys kept; beyond it the oldest are dropped (the walk still reaches them).
    capacity: usize,
}

#[derive(Default)]
struct Queue {
    order: VecDeque<String>,
    present: HashSet<String>,
}

impl Released {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            keys: Mutex::new(Queue::default()),
            capacity: capacity.max(1),
        }
    }

    /// Records that `key`'s head is finished.
    pub(crate) fn push(&self, key: String) {
        if let Ok(mut queue) = self.keys.lock() {
            if queue.present.contains(&key) {
                return;
            }
            if queue.order.len() >= self.capacity
                && let Some(oldest) = queue.order.pop_front()
            {
                queue.present.remove(&oldest);
            }
            queue.present.insert(key.clone());
            queue.order.push_back(key);
        }
    }

    /// Takes up to `most` keys, the most recently freed first.
    pub(crate) fn take(&self, most: usize) -> Vec<String> {
        self.keys
            .lock()
            .map(|mut queue| {
                let n = most.min(queue.order.len());
                let from = queue.order.len() - n;
                let taken: Vec<String> = queue.order.drain(from..).rev().collect();
                for key in &taken {
                    queue.present.remove(key);
                }
                taken
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_each_key_once_newest_first_and_drops_the_oldest_beyond_capacity() {
        let released = Released::new(3);
        for key in ["a", "b", "a", "c", "d"] {
            released.push(key.to_owned());
        }
        // "a" was dropped (oldest beyond three); the newest go first.
        assert_eq!(released.take(2), vec!["d".to_owned(), "c".to_owned()]);
        released.push("e".to_owned());
        assert_eq!(released.take(5), vec!["e".to_owned(), "b".to_owned()]);
        assert!(released.take(5).is_empty());
        // A taken key may be freed again.
        released.push("d".to_owned());
        assert_eq!(released.take(1), vec!["d".to_owned()]);
    }
}
