//! `RetentionStore`: a sweep deletes finished rows of its own state past the policy, in batches of
//! at most the limit, and never a row in another state, whatever its age.

use super::replay::one_row_per_state;
use super::{HOUR, LEASE, StoreFixture, inbox_message, inbox_state, store_inbox};
use queuebox_ports::inbox::{Consumption, ForwardedRow};
use queuebox_ports::retention::{FinishedInbox, FinishedOutbox, Sweep};
use std::collections::BTreeSet;
use uuid::Uuid;

/// Runs batches of `limit` until one comes back short; returns each batch's count.
async fn drain<F: StoreFixture>(fx: &F, sweep: Sweep, limit: u32) -> Vec<u64> {
    let mut batches = Vec::new();
    loop {
        let deleted = fx
            .retention()
            .delete_batch(&sweep, limit)
            .await
            .expect("delete batch");
        assert!(
            deleted <= u64::from(limit),
            "a batch over its limit: {deleted}"
        );
        batches.push(deleted);
        if deleted < u64::from(limit) {
            return batches;
        }
        assert!(batches.len() < 100, "the sweep never ends: {batches:?}");
    }
}

async fn outbox_present<F: StoreFixture>(fx: &F, ids: &[Uuid]) -> BTreeSet<Uuid> {
    let mut present = BTreeSet::new();
    for id in ids {
        if fx.outbox_row(*id).await.is_some() {
            present.insert(*id);
        }
    }
    present
}

async fn inbox_present<F: StoreFixture>(fx: &F, ids: &[Uuid]) -> BTreeSet<Uuid> {
    let mut present = BTreeSet::new();
    for id in ids {
        if fx.inbox_row(*id).await.is_some() {
            present.insert(*id);
        }
    }
    present
}

/// The outbox age sweep deletes `sent` (or `dead`) rows last changed longer ago than the age, a
/// batch at a time; recent finished rows and active rows of any age stay.
pub async fn retention_outbox_age_deletes_only_finished_rows_past_the_policy<F: StoreFixture>() {
    let fx = F::fresh().await;
    let mut all = Vec::new();
    let mut old_sent = Vec::new();
    let mut old_dead = Vec::new();
    let mut kept = Vec::new();
    for _ in 0..3 {
        let [sent, dead, pending, processing] = one_row_per_state(&fx, "t").await;
        old_sent.push(sent);
        old_dead.push(dead);
        kept.extend([pending, processing]);
        all.extend([sent, dead, pending, processing]);
    }
    // Finished, but within the age.
    let [fresh_sent, fresh_dead, fresh_pending, fresh_processing] =
        one_row_per_state(&fx, "t").await;
    // Backdated only now: a backdated retry would fall due and be claimed by the next group.
    for id in &all {
        fx.backdate_outbox_row(*id, HOUR * 2).await;
    }
    kept.extend([fresh_sent, fresh_dead, fresh_pending, fresh_processing]);
    all.extend([fresh_sent, fresh_dead, fresh_pending, fresh_processing]);

    let age = |state| Sweep::OutboxOlderThan {
        state,
        max_age: HOUR,
    };
    assert_eq!(drain(&fx, age(FinishedOutbox::Sent), 2).await, [2, 1]);
    let mut expected: BTreeSet<Uuid> = all.iter().copied().collect();
    for id in &old_sent {
        expected.remove(id);
    }
    assert_eq!(outbox_present(&fx, &all).await, expected);

    assert_eq!(drain(&fx, age(FinishedOutbox::Dead), 10).await, [3]);
    assert_eq!(
        outbox_present(&fx, &all).await,
        kept.iter().copied().collect::<BTreeSet<_>>()
    );
    fx.done().await;
}

/// The outbox count sweep keeps the newest `keep` rows of its state and deletes the older ones;
/// other states are untouched.
pub async fn retention_outbox_count_keeps_the_newest_finished_rows<F: StoreFixture>() {
    let fx = F::fresh().await;
    let mut sent = Vec::new();
    let mut others = Vec::new();
    // Sent rows last changed 1..=5 minutes ago, newest first.
    for minutes in 1..=5u32 {
        let [s, d, p, q] = one_row_per_state(&fx, "t").await;
        let by = std::time::Duration::from_secs(60 * u64::from(minutes));
        fx.backdate_outbox_row(s, by).await;
        sent.push(s);
        others.extend([d, p, q]);
    }
    let sweep = Sweep::OutboxBeyondNewest {
        state: FinishedOutbox::Sent,
        keep: 2,
    };
    assert_eq!(drain(&fx, sweep, 2).await, [2, 1]);
    let mut all = sent.clone();
    all.extend(&others);
    let mut expected: BTreeSet<Uuid> = others.iter().copied().collect();
    expected.extend(&sent[..2]);
    assert_eq!(outbox_present(&fx, &all).await, expected);
    // Nothing beyond the count is left.
    assert_eq!(drain(&fx, sweep, 10).await, [0]);
    fx.done().await;
}

/// The inbox age sweep deletes `processed` (or `dead`) rows received longer ago than the age;
/// pending and processing rows of any age and recent finished rows stay.
pub async fn retention_inbox_age_deletes_only_finished_rows_past_the_policy<F: StoreFixture>() {
    let fx = F::fresh().await;
    let message = |consumption| {
        let key = Uuid::new_v4().to_string();
        let aggregate = Uuid::new_v4().to_string();
        inbox_message("stripe", &key, Some(&aggregate), consumption)
    };
    // Push rows: two forwarded (processed), one left processing.
    let mut push = Vec::new();
    for _ in 0..3 {
        push.push(store_inbox(&fx, &message(Consumption::Push)).await);
    }
    let claimed = fx.relay().claim(10, LEASE).await.expect("relay claim");
    assert_eq!(claimed.len(), 3);
    let forward: Vec<ForwardedRow> = claimed
        .iter()
        .filter(|row| row.id != push[2])
        .map(|row| ForwardedRow {
            inbox_id: row.id,
            claim_token: row.claim_token,
            topic: "t".to_owned(),
            key: row.aggregate_id.clone(),
            payload: row.payload.clone(),
            headers: Vec::new(),
            max_attempts: 5,
        })
        .collect();
    assert_eq!(
        fx.relay().forward(&forward).await.expect("forward"),
        [true, true]
    );
    let (old_processed, fresh_processed, processing) = (push[0], push[1], push[2]);
    let mut refused = message(Consumption::Pull);
    refused.dead_reason = Some("not JSON".to_owned());
    let old_dead = store_inbox(&fx, &refused).await;
    let pending = store_inbox(&fx, &message(Consumption::Pull)).await;
    for id in [old_processed, processing, old_dead, pending] {
        fx.backdate_inbox_row(id, HOUR * 2).await;
    }
    let all = [
        old_processed,
        fresh_processed,
        processing,
        old_dead,
        pending,
    ];

    let age = |state| Sweep::InboxOlderThan {
        state,
        max_age: HOUR,
    };
    assert_eq!(drain(&fx, age(FinishedInbox::Processed), 10).await, [1]);
    assert_eq!(drain(&fx, age(FinishedInbox::Dead), 10).await, [1]);
    assert_eq!(
        inbox_present(&fx, &all).await,
        BTreeSet::from([fresh_processed, processing, pending])
    );
    assert_eq!(
        inbox_state(&fx, processing).await.state,
        super::InboxState::Processing
    );
    // The outbox age sweep never touches the inbox.
    let outbox_sweep = Sweep::OutboxOlderThan {
        state: FinishedOutbox::Sent,
        max_age: std::time::Duration::ZERO,
    };
    drain(&fx, outbox_sweep, 10).await;
    assert_eq!(inbox_present(&fx, &all).await.len(), 3);
    fx.done().await;
}
