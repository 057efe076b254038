//! The rows this dispatcher holds a claim on, for lease renewal and for the count of work in hand.
//!
//! Every operation names the claim by row id AND claim token. A row whose retry was just written can
//! be claimed again by this same dispatcher (with a new token) before the old claim's bookkeeping is
//! done: before the finisher's release of the old claim runs, or before the answer of a renewal that
//! still carried the old token arrives. Matched on the id alone, such a late step hit the new claim:
//! a renewal's refusal of the old (finished) token marked the new claim lost, its work was dropped
//! and counted as a lost claim, and the row waited a whole lease for the reclaim.

use std::collections::HashMap;
use std::sync::Mutex;
use uuid::Uuid;

/// Where a held claim is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Claimed, queued or publishing.
    Working,
    /// Its finish is handed to the finisher; the fence of that write decides whether the claim held.
    Finishing,
    /// A renewal found the claim gone before its finish was handed over.
    Lost,
}

/// What a renewal's refusal of one claim means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The claim was lost while its row was still being worked on: its work is dropped if it has not
    /// started, and the finish fence refuses it if it has.
    Lost,
    /// The claim's finish is written or being written: the row ended normally (or its fence will tell
    /// that it did not, and count it).
    Finishing,
    /// This dispatcher no longer holds that claim (finished, or the row claimed again with a new
    /// token): nothing to do.
    Ended,
}

/// Claimed rows not yet finished, by id, with their token and stage.
#[derive(Default)]
pub(crate) struct Held {
    rows: Mutex<HashMap<Uuid, (Uuid, Stage)>>,
}

impl Held {
    /// Records a new claim; it replaces an older claim of the same row.
    pub(crate) fn insert(&self, id: Uuid, token: Uuid) {
        if let Ok(mut rows) = self.rows.lock() {
            rows.insert(id, (token, Stage::Working));
        }
    }

    /// Forgets the claim once its finish is written, unless the row is already claimed again.
    pub(crate) fn remove(&self, id: &Uuid, token: &Uuid) {
        if let Ok(mut rows) = self.rows.lock()
            && rows.get(id).is_some_and(|(held, _)| held == token)
        {
            rows.remove(id);
        }
    }

    /// Records that the claim's finish is handed to the finisher.
    pub(crate) fn finishing(&self, id: &Uuid, token: &Uuid) {
        if let Ok(mut rows) = self.rows.lock()
            && let Some((held, stage)) = rows.get_mut(id)
            && held == token
            && *stage == Stage::Working
        {
            *stage = Stage::Finishing;
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
                    .filter(|(_, (_, stage))| *stage != Stage::Lost)
                    .map(|(id, (token, _))| (*id, *token))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Records that a renewal refused the claim (`id`, `token`), and says what that means. Only a
    /// claim still held with that token and still being worked on is marked lost.
    pub(crate) fn refused(&self, id: &Uuid, token: &Uuid) -> Refusal {
        let Ok(mut rows) = self.rows.lock() else {
            return Refusal::Ended;
        };
        match rows.get_mut(id) {
            Some((held, stage)) if held == token => match stage {
                Stage::Working | Stage::Lost => {
                    *stage = Stage::Lost;
                    Refusal::Lost
                }
                Stage::Finishing => Refusal::Finishing,
            },
            _ => Refusal::Ended,
        }
    }

    /// Whether a renewal found this claim lost.
    pub(crate) fn is_lost(&self, id: &Uuid, token: &Uuid) -> bool {
        self.rows
            .lock()
            .map(|rows| {
                rows.get(id)
                    .is_some_and(|(held, stage)| held == token && *stage == Stage::Lost)
            })
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
        let (token_a, token_b) = (Uuid::new_v4(), Uuid::new_v4());
        held.insert(a, token_a);
        held.insert(b, token_b);
        assert_eq!(held.len(), 2);
        assert_eq!(held.refused(&a, &token_a), Refusal::Lost);
        assert!(held.is_lost(&a, &token_a));
        assert!(!held.is_lost(&b, &token_b));
        assert_eq!(held.live(), vec![(b, token_b)]);
        held.remove(&a, &token_a);
        assert_eq!(held.len(), 1);
    }

    #[test]
    fn a_late_refusal_of_a_finished_claim_leaves_the_rows_new_claim_alone() {
        let held = Held::default();
        let (row, old, new) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        held.insert(row, old);
        let renewing = held.live();
        // While the renewal runs, the old claim's retry is written and the row is claimed again.
        held.finishing(&row, &old);
        held.remove(&row, &old);
        held.insert(row, new);
        assert_eq!(renewing, vec![(row, old)]);
        assert_eq!(held.refused(&row, &old), Refusal::Ended);
        assert!(!held.is_lost(&row, &new));
        assert_eq!(held.live(), vec![(row, new)]);
    }

    #[test]
    fn the_late_release_of_a_finished_claim_keeps_the_rows_new_claim() {
        let held = Held::default();
        let (row, old, new) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        held.insert(row, old);
        held.finishing(&row, &old);
        // The row is claimed again before the finisher releases the old claim.
        held.insert(row, new);
        held.remove(&row, &old);
        assert_eq!(held.live(), vec![(row, new)]);
        assert_eq!(held.len(), 1);
    }

    #[test]
    fn a_refusal_of_a_claim_whose_finish_is_under_way_is_left_to_the_fence() {
        let held = Held::default();
        let (row, token) = (Uuid::new_v4(), Uuid::new_v4());
        held.insert(row, token);
        held.finishing(&row, &token);
        assert_eq!(held.refused(&row, &token), Refusal::Finishing);
        assert!(!held.is_lost(&row, &token));
        // Still renewed until the finish is written: the finisher may have to wait for the database.
        assert_eq!(held.live(), vec![(row, token)]);
    }
}
