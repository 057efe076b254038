//! Keys whose head this replica has finished, waiting to be named in the next claim.
//!
//! A finished head (sent or dead) frees its key: the key's next row may go at once. The claim walk
//! would reach that key again only after a rotation over every ready key, so the claim loop hands
//! these keys to the next claim, which takes their new heads first (within half of its limit).
//!
//! With every key busy, more keys are freed between two claims than half a claim takes, so the keys
//! compete. A key keeps a streak: how many times in a row it was handed to a claim and freed again.
//! The longest streaks go first (then the newest), so a key with a long backlog (a hot key) keeps
//! one row in flight all the time, while keys that drain leave the streak; every other key still gets
//! its turn from the walk, which keeps the other half of each claim.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

/// The freed keys in the order they were freed, each at most once, with their streaks.
pub(crate) struct Released {
    keys: Mutex<Queue>,
    /// The most keys kept; beyond it the oldest are dropped (the walk still reaches them).
    capacity: usize,
}

#[derive(Default)]
struct Queue {
    /// (key, streak), oldest first.
    order: VecDeque<(String, u32)>,
    present: HashSet<String>,
    /// Keys handed to a claim and not freed since, with their streak.
    served: HashMap<String, u32>,
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
            let streak = queue.served.remove(&key).map_or(0, |s| s.saturating_add(1));
            if queue.order.len() >= self.capacity
                && let Some((oldest, _)) = queue.order.pop_front()
            {
                queue.present.remove(&oldest);
            }
            queue.present.insert(key.clone());
            queue.order.push_back((key, streak));
        }
    }

    /// Takes up to `most` keys: the longest streaks first, then the most recently freed.
    pub(crate) fn take(&self, most: usize) -> Vec<String> {
        let Ok(mut queue) = self.keys.lock() else {
            return Vec::new();
        };
        let n = most.min(queue.order.len());
        if n == 0 {
            return Vec::new();
        }
        let mut ranked: Vec<usize> = (0..queue.order.len()).collect();
        ranked.sort_unstable_by(|&a, &b| {
            queue.order[b]
                .1
                .cmp(&queue.order[a].1)
                .then_with(|| b.cmp(&a))
        });
        let mut chosen = vec![false; queue.order.len()];
        for &index in &ranked[..n] {
            chosen[index] = true;
        }
        let mut taken = Vec::with_capacity(n);
        let mut kept = VecDeque::with_capacity(queue.order.len() - n);
        for (index, entry) in queue.order.drain(..).enumerate() {
            if chosen[index] {
                taken.push(entry);
            } else {
                kept.push_back(entry);
            }
        }
        queue.order = kept;
        // Keys whose claim found no ready head are never freed again; forget them in bulk.
        if queue.served.len() > self.capacity.saturating_mul(4) {
            queue.served.clear();
        }
        // Newest first within a streak (a stable sort keeps the reversed queue order).
        taken.reverse();
        taken.sort_by_key(|entry| std::cmp::Reverse(entry.1));
        taken
            .into_iter()
            .map(|(key, streak)| {
                queue.present.remove(&key);
                queue.served.insert(key.clone(), streak);
                key
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn keeps_each_key_once_newest_first_and_drops_the_oldest_beyond_capacity() {
        let released = Released::new(3);
        for key in ["a", "b", "a", "c", "d"] {
            released.push(key.to_owned());
        }
        // "a" was dropped (oldest beyond three); the newest go first.
        assert_eq!(released.take(2), keys(&["d", "c"]));
        released.push("e".to_owned());
        assert_eq!(released.take(5), keys(&["e", "b"]));
        assert!(released.take(5).is_empty());
    }

    #[test]
    fn a_key_freed_again_after_each_claim_goes_before_keys_freed_once() {
        let released = Released::new(100);
        released.push("hot".to_owned());
        assert_eq!(released.take(1), keys(&["hot"]));
        // Many keys are freed after the hot key's row was claimed; the hot key is freed again.
        for round in 0..3 {
            released.push("hot".to_owned());
            for k in 0..10 {
                released.push(format!("k{round}-{k}"));
            }
            let taken = released.take(2);
            assert_eq!(taken[0], "hot", "round {round}: {taken:?}");
        }
    }
}
