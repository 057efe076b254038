//! The rows this dispatcher holds a claim on, for lease renewal and for the count of work in hand.

use std::collections::HashMap;
use std::sync::Mutex;
use uuid::Uuid;

/// Claimed rows not yet finished, by id, with their token and whether the claim was found lost.
#[derive(Default)]
pub(crate) struct Held {
    rows: Mutex<HashMap<Uuid, (Uuid, bool)>>,
}

impl Held {
    pub(crate) fn insert(&self, id: Uuid, token: Uuid) {
        if let Ok(mut rows) = self.rows.lock() {
            rows.insert(id, (token, false));
        }
    }

    pub(crate) fn remove(&self, id: &Uuid) {
        if let Ok(mut rows) = self.rows.lock() {
            rows.remove(id);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.rows.lock().map(|rows| rows.len()).unwrap_or(0)
    }

    /// The (id, token) pairs still believed held, for one renewal statement.
    pub(crate) fn live(&self) -> Vec<(Uuid, Uuid)> {
        self.rows
            .lock()
            .map(|rows| {
                rows.iter()
                    .filter(|(_, (_, lost))| !lost)
                    .map(|(id, (token, _))| (*id, *token))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Records that a renewal found the claim gone: the row's work is dropped if it has not started.
    pub(crate) fn mark_lost(&self, id: &Uuid) {
        if let Ok(mut rows) = self.rows.lock()
            && let Some(entry) = rows.get_mut(id)
        {
            entry.1 = true;
        }
    }

    pub(crate) fn is_lost(&self, id: &Uuid) -> bool {
        self.rows
            .lock()
            .map(|rows| rows.get(id).is_some_and(|(_, lost)| *lost))
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_rows_and_lost_claims() {
        let held = Held::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        held.insert(a, Uuid::new_v4());
        held.insert(b, Uuid::new_v4());
        assert_eq!(held.len(), 2);
        held.mark_lost(&a);
        assert!(held.is_lost(&a));
        assert!(!held.is_lost(&b));
        assert_eq!(held.live().len(), 1);
        held.remove(&a);
        assert_eq!(held.len(), 1);
    }
}
