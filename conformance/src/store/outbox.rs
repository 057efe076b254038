//! `OutboxStore`: the claim (token, lease, limit, per-key order), the fenced finish and renew, the
//! reclaim of expired leases and the pending gauges.

use super::{
    HOUR, LEASE, NewOutboxRow, StoreFixture, claim, claim_all, finish, json, outbox_state, sorted,
};
use queuebox_domain::outbox::OutboxState;
use queuebox_ports::outbox::{FencedFinish, Finish};
use std::collections::HashSet;
use std::time::Duration;
use uuid::Uuid;

fn retry(attempt: i32, delay: Duration) -> Finish {
    Finish::Retry {
        attempt,
        delay,
        error: "HTTP 503 from the destination".to_owned(),
    }
}

fn dead() -> Finish {
    Finish::Dead {
        error: "gave up after 5 attempts".to_owned(),
    }
}

/// A due row is claimed once: state `processing`, a fresh non-nil token the row holds, its
/// columns returned as stored; a second claim finds nothing.
pub async fn outbox_claim_takes_a_due_row_with_a_token_and_a_lease<F: StoreFixture>() {
    let fx = F::fresh().await;
    let mut row = NewOutboxRow::new("order.created", Some("cust-1"));
    row.aggregate_type = Some("order".to_owned());
    row.payload = r#"{"orderId": 42, "lines": [1, 2]}"#.to_owned();
    row.headers = vec![
        ("X-Tenant".to_owned(), "acme".to_owned()),
        ("X-Trace".to_owned(), "t-1".to_owned()),
    ];
    row.max_attempts = 9;
    let id = fx.insert_outbox_row(row.clone()).await;
    let before = outbox_state(&fx, id).await;
    assert_eq!(before.state, OutboxState::Pending);
    assert_eq!(before.claim_token, None);

    let claimed = claim(&fx, 10).await;
    assert_eq!(claimed.rows.len(), 1, "{claimed:?}");
    let got = &claimed.rows[0];
    assert_eq!(got.id, id);
    assert!(!got.claim_token.is_nil());
    assert_eq!(got.topic, row.topic);
    assert_eq!(got.key, row.key);
    assert_eq!(got.aggregate_type, row.aggregate_type);
    assert_eq!(json(&got.payload), json(&row.payload));
    assert_eq!(sorted(&got.headers), sorted(&row.headers));
    assert_eq!((got.attempt, got.max_attempts), (0, 9));

    let view = outbox_state(&fx, id).await;
    assert_eq!(view.state, OutboxState::Processing);
    assert_eq!(view.claim_token, Some(got.claim_token));
    assert!(
        claim(&fx, 10).await.rows.is_empty(),
        "a processing row was claimed twice"
    );

    // A second row gets a token of its own.
    let other = fx
        .insert_outbox_row(NewOutboxRow::new("order.created", Some("cust-2")))
        .await;
    let second = claim(&fx, 10).await;
    assert_eq!(second.rows.len(), 1, "{second:?}");
    assert_eq!(second.rows[0].id, other);
    assert_ne!(second.rows[0].claim_token, got.claim_token);
    fx.done().await;
}

/// A claim takes at most `limit` rows; the rest wait for the next claim, none is lost.
pub async fn outbox_claim_honours_the_limit<F: StoreFixture>() {
    let fx = F::fresh().await;
    let mut ids = HashSet::new();
    for i in 0..5 {
        let key = format!("k{i}");
        ids.insert(
            fx.insert_outbox_row(NewOutboxRow::new("t", Some(&key)))
                .await,
        );
    }
    let mut seen = HashSet::new();
    for expected in [2, 2, 1, 0] {
        let claimed = claim(&fx, 2).await;
        assert_eq!(claimed.rows.len(), expected, "{claimed:?}");
        for row in claimed.rows {
            assert!(seen.insert(row.id), "{} claimed twice", row.id);
        }
    }
    assert_eq!(seen, ids);
    fx.done().await;
}

/// Sent, retry and dead each apply under the fence and write their state; a retry with a delay
/// is not claimable before its time.
pub async fn outbox_fenced_finish_writes_sent_retry_and_dead<F: StoreFixture>() {
    let fx = F::fresh().await;
    let to_send = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("a")))
        .await;
    let to_retry = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("b")))
        .await;
    let to_kill = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("c")))
        .await;
    let claimed = claim(&fx, 10).await;
    assert_eq!(claimed.rows.len(), 3, "{claimed:?}");
    let token = |id: Uuid| {
        claimed
            .rows
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.claim_token)
            .expect("claimed")
    };
    let applied = fx
        .outbox()
        .finish(&[
            FencedFinish {
                id: to_send,
                claim_token: token(to_send),
                finish: Finish::Sent,
            },
            FencedFinish {
                id: to_retry,
                claim_token: token(to_retry),
                finish: retry(1, HOUR),
            },
            FencedFinish {
                id: to_kill,
                claim_token: token(to_kill),
                finish: dead(),
            },
        ])
        .await
        .expect("finish");
    assert_eq!(applied, [true, true, true]);

    let sent = outbox_state(&fx, to_send).await;
    assert_eq!(sent.state, OutboxState::Sent);
    let retried = outbox_state(&fx, to_retry).await;
    assert_eq!(retried.state, OutboxState::Pending);
    assert_eq!(retried.attempt, 1);
    assert_eq!(
        retried.last_error.as_deref(),
        Some("HTTP 503 from the destination")
    );
    let killed = outbox_state(&fx, to_kill).await;
    assert_eq!(killed.state, OutboxState::Dead);
    assert_eq!(
        killed.last_error.as_deref(),
        Some("gave up after 5 attempts")
    );

    assert!(
        claim(&fx, 10).await.rows.is_empty(),
        "a finished row or a retry before its time was claimed"
    );
    fx.done().await;
}

/// A finish under a token the row does not hold changes nothing, whatever the end state; nor
/// does one for an unknown id; the holder's own finish still applies afterwards.
pub async fn outbox_a_stale_token_is_refused_and_the_current_one_still_works<F: StoreFixture>() {
    let fx = F::fresh().await;
    let id = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("k")))
        .await;
    let row = claim(&fx, 1).await.rows.remove(0);
    for end in [
        Finish::Sent,
        retry(1, Duration::ZERO),
        dead(),
        Finish::Release,
    ] {
        assert!(
            !finish(&fx, id, Uuid::new_v4(), end.clone()).await,
            "{end:?} applied under a wrong token"
        );
    }
    let view = outbox_state(&fx, id).await;
    assert_eq!(view.state, OutboxState::Processing);
    assert_eq!(view.claim_token, Some(row.claim_token));
    assert_eq!((view.attempt, view.last_error), (0, None));
    assert!(!finish(&fx, Uuid::new_v4(), row.claim_token, Finish::Sent).await);

    // A batch answers each entry on its own: the stale write is refused, the current one applies.
    let applied = fx
        .outbox()
        .finish(&[
            FencedFinish {
                id,
                claim_token: Uuid::new_v4(),
                finish: dead(),
            },
            FencedFinish {
                id,
                claim_token: row.claim_token,
                finish: Finish::Sent,
            },
        ])
        .await
        .expect("finish");
    assert_eq!(applied, [false, true]);
    assert_eq!(outbox_state(&fx, id).await.state, OutboxState::Sent);
    assert!(fx.outbox().finish(&[]).await.expect("empty").is_empty());
    fx.done().await;
}

/// Once a claim has finished its row, the same token cannot write it again.
pub async fn outbox_a_second_finish_of_one_claim_is_refused<F: StoreFixture>() {
    let fx = F::fresh().await;
    let id = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("k")))
        .await;
    let row = claim(&fx, 1).await.rows.remove(0);
    assert!(finish(&fx, id, row.claim_token, retry(1, Duration::ZERO)).await);
    assert!(!finish(&fx, id, row.claim_token, Finish::Sent).await);
    assert!(!finish(&fx, id, row.claim_token, dead()).await);
    let view = outbox_state(&fx, id).await;
    assert_eq!((view.state, view.attempt), (OutboxState::Pending, 1));
    fx.done().await;
}

/// After the lease has passed, neither a finish nor a renewal under the (right) token applies.
pub async fn outbox_finish_and_renew_after_the_lease_expired_are_refused<F: StoreFixture>() {
    let fx = F::fresh().await;
    let id = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("k")))
        .await;
    let row = claim(&fx, 1).await.rows.remove(0);
    fx.expire_outbox_lease(id).await;
    for end in [Finish::Sent, retry(1, Duration::ZERO), dead()] {
        assert!(
            !finish(&fx, id, row.claim_token, end.clone()).await,
            "{end:?} applied after the lease passed"
        );
    }
    let renewed = fx
        .outbox()
        .renew(&[(id, row.claim_token)], LEASE)
        .await
        .expect("renew");
    assert_eq!(renewed, [false], "an expired lease was revived");
    let view = outbox_state(&fx, id).await;
    assert_eq!(view.state, OutboxState::Processing);
    assert_eq!(view.claim_token, Some(row.claim_token));
    fx.done().await;
}

/// Renew answers per entry: a held lease is extended, a wrong token or unknown id is not.
pub async fn outbox_renew_extends_a_held_lease_only<F: StoreFixture>() {
    let fx = F::fresh().await;
    let id = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("k")))
        .await;
    let row = claim(&fx, 1).await.rows.remove(0);
    let renewed = fx
        .outbox()
        .renew(
            &[
                (id, row.claim_token),
                (id, Uuid::new_v4()),
                (Uuid::new_v4(), row.claim_token),
            ],
            LEASE,
        )
        .await
        .expect("renew");
    assert_eq!(renewed, [true, false, false]);
    // The renewed claim is still the row's: the reclaim leaves it, the token still finishes it.
    assert_eq!(fx.outbox().reclaim_expired().await.expect("reclaim"), 0);
    assert!(finish(&fx, id, row.claim_token, Finish::Sent).await);
    fx.done().await;
}

/// The reclaim returns exactly the rows whose lease passed to `pending`; the next claim takes
/// such a row with a new token, and the old token can no longer write it.
pub async fn outbox_reclaim_returns_an_expired_lease_to_pending<F: StoreFixture>() {
    let fx = F::fresh().await;
    let expired = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("a")))
        .await;
    let live = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("b")))
        .await;
    let claimed = claim(&fx, 10).await;
    assert_eq!(claimed.rows.len(), 2, "{claimed:?}");
    let old_token = claimed
        .rows
        .iter()
        .find(|r| r.id == expired)
        .map(|r| r.claim_token)
        .expect("claimed");
    fx.expire_outbox_lease(expired).await;
    // An expired row stays processing (and unclaimable) until the reclaim runs.
    assert!(claim(&fx, 10).await.rows.is_empty());

    assert_eq!(fx.outbox().reclaim_expired().await.expect("reclaim"), 1);
    let view = outbox_state(&fx, expired).await;
    assert_eq!(view.state, OutboxState::Pending);
    assert_eq!(outbox_state(&fx, live).await.state, OutboxState::Processing);
    assert_eq!(fx.outbox().reclaim_expired().await.expect("reclaim"), 0);

    let again = claim(&fx, 10).await;
    assert_eq!(again.rows.len(), 1, "{again:?}");
    assert_eq!(again.rows[0].id, expired);
    assert_ne!(again.rows[0].claim_token, old_token);
    assert!(!finish(&fx, expired, old_token, Finish::Sent).await);
    assert!(finish(&fx, expired, again.rows[0].claim_token, Finish::Sent).await);
    fx.done().await;
}

/// Release puts the row back to `pending` at once, with its attempt count unchanged.
pub async fn outbox_release_returns_the_row_at_once_without_an_attempt<F: StoreFixture>() {
    let fx = F::fresh().await;
    let id = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("k")))
        .await;
    let first = claim(&fx, 1).await.rows.remove(0);
    assert!(finish(&fx, id, first.claim_token, retry(2, Duration::ZERO)).await);
    let second = claim(&fx, 1).await.rows.remove(0);
    assert_eq!((second.id, second.attempt), (id, 2));
    assert!(finish(&fx, id, second.claim_token, Finish::Release).await);
    let view = outbox_state(&fx, id).await;
    assert_eq!((view.state, view.attempt), (OutboxState::Pending, 2));
    let third = claim(&fx, 1).await;
    assert_eq!(third.rows.len(), 1, "a released row waits: {third:?}");
    assert_eq!((third.rows[0].id, third.rows[0].attempt), (id, 2));
    fx.done().await;
}

/// A key's next row is not claimable while an earlier row of the key is processing; finishing
/// the head releases the next row, in insert order. Other keys are not held up.
pub async fn outbox_rows_of_one_key_go_one_at_a_time_in_insert_order<F: StoreFixture>() {
    let fx = F::fresh().await;
    let k1 = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("k")))
        .await;
    let k2 = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("k")))
        .await;
    let k3 = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("k")))
        .await;
    let other = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("j")))
        .await;

    let first = claim(&fx, 10).await;
    let ids: HashSet<Uuid> = first.rows.iter().map(|r| r.id).collect();
    assert_eq!(
        ids,
        HashSet::from([k1, other]),
        "only the head of k: {first:?}"
    );
    assert!(claim(&fx, 10).await.rows.is_empty(), "k2 passed its head");
    let head = first.rows.iter().find(|r| r.id == k1).expect("k1");

    assert!(finish(&fx, k1, head.claim_token, Finish::Sent).await);
    let second = claim(&fx, 10).await;
    assert_eq!(second.rows.len(), 1, "{second:?}");
    assert_eq!(second.rows[0].id, k2);
    assert!(second.rows[0].sequence > head.sequence);
    assert!(claim(&fx, 10).await.rows.is_empty(), "k3 passed k2");

    assert!(finish(&fx, k2, second.rows[0].claim_token, Finish::Sent).await);
    let third = claim(&fx, 10).await;
    assert_eq!(third.rows.len(), 1, "{third:?}");
    assert_eq!(third.rows[0].id, k3);
    fx.done().await;
}

/// A retried row stays its key's head (pending, waiting for its time) and holds the key; when it
/// falls due it comes back before the next row; dead releases the key.
pub async fn outbox_a_retry_holds_its_key_and_dead_releases_it<F: StoreFixture>() {
    let fx = F::fresh().await;
    // Key `held`: the head retries in an hour, and nothing of the key moves meanwhile.
    let h1 = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("held")))
        .await;
    let _h2 = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("held")))
        .await;
    let head = claim(&fx, 10).await.rows.remove(0);
    assert_eq!(head.id, h1);
    assert!(finish(&fx, h1, head.claim_token, retry(1, HOUR)).await);
    for _ in 0..2 {
        let claimed = claim(&fx, 10).await;
        assert!(
            claimed.rows.is_empty(),
            "a row passed a waiting retry of its key: {claimed:?}"
        );
    }

    // Key `k`: a retry due now comes back first, with its attempt; dead lets the next row go.
    let k1 = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("k")))
        .await;
    let k2 = fx
        .insert_outbox_row(NewOutboxRow::new("t", Some("k")))
        .await;
    let first = claim(&fx, 10).await;
    assert_eq!(first.rows.len(), 1, "{first:?}");
    assert_eq!(first.rows[0].id, k1);
    assert!(finish(&fx, k1, first.rows[0].claim_token, retry(1, Duration::ZERO)).await);
    let again = claim(&fx, 10).await;
    assert_eq!(again.rows.len(), 1, "{again:?}");
    assert_eq!((again.rows[0].id, again.rows[0].attempt), (k1, 1));
    assert!(finish(&fx, k1, again.rows[0].claim_token, dead()).await);
    let next = claim(&fx, 10).await;
    assert_eq!(next.rows.len(), 1, "{next:?}");
    assert_eq!(next.rows[0].id, k2);
    fx.done().await;
}

/// Rows without a key, or with an empty key, take part in no order: one claim takes them all.
pub async fn outbox_rows_without_a_key_null_or_empty_are_unordered<F: StoreFixture>() {
    let fx = F::fresh().await;
    let mut ids = HashSet::new();
    for key in [None, None, Some(""), Some("")] {
        ids.insert(fx.insert_outbox_row(NewOutboxRow::new("t", key)).await);
    }
    let claimed = claim(&fx, 10).await;
    let got: HashSet<Uuid> = claimed.rows.iter().map(|r| r.id).collect();
    assert_eq!(got, ids, "{claimed:?}");
    fx.done().await;
}

/// The gauges count pending rows (not processing or finished ones) per topic and age the oldest.
pub async fn outbox_pending_stats_count_pending_rows_and_age_the_oldest<F: StoreFixture>() {
    let fx = F::fresh().await;
    let empty = fx.outbox().pending_stats().await.expect("stats");
    assert_eq!(
        (empty.pending, empty.oldest_pending_age),
        (0, Duration::ZERO)
    );
    let old = fx
        .insert_outbox_row(NewOutboxRow::new("a", Some("1")))
        .await;
    fx.insert_outbox_row(NewOutboxRow::new("a", Some("2")))
        .await;
    fx.insert_outbox_row(NewOutboxRow::new("b", Some("3")))
        .await;
    fx.backdate_outbox_row(old, HOUR).await;
    let stats = fx.outbox().pending_stats().await.expect("stats");
    assert_eq!(stats.pending, 3);
    let mut by_topic = stats.pending_by_topic.clone();
    by_topic.sort();
    assert_eq!(by_topic, [("a".to_owned(), 2), ("b".to_owned(), 1)]);
    assert!(
        stats.oldest_pending_age >= HOUR && stats.oldest_pending_age < HOUR * 2,
        "{stats:?}"
    );

    // Claimed and finished rows are not pending.
    let rows = claim_all(&fx).await;
    assert_eq!(rows.len(), 3);
    let after = fx.outbox().pending_stats().await.expect("stats");
    assert_eq!(after.pending, 0, "{after:?}");
    fx.done().await;
}

/// The next deadline is the earliest due time still ahead among pending rows: a retry's, here.
/// Rows already due, claimed or finished do not count.
pub async fn outbox_next_deadline_is_the_earliest_future_retry<F: StoreFixture>() {
    let fx = F::fresh().await;
    assert_eq!(fx.outbox().next_deadline().await.expect("deadline"), None);
    let due = fx.insert_outbox_row(NewOutboxRow::new("t", None)).await;
    assert_eq!(
        fx.outbox().next_deadline().await.expect("deadline"),
        None,
        "a row due now is no deadline"
    );
    let later = fx.insert_outbox_row(NewOutboxRow::new("t", None)).await;
    let soon = fx.insert_outbox_row(NewOutboxRow::new("t", None)).await;
    let rows = claim_all(&fx).await;
    assert_eq!(rows.len(), 3);
    let token = |id: Uuid| {
        rows.iter()
            .find(|r| r.id == id)
            .expect("claimed")
            .claim_token
    };
    assert!(finish(&fx, later, token(later), retry(1, HOUR)).await);
    assert!(finish(&fx, soon, token(soon), retry(1, Duration::from_secs(60))).await);
    assert!(finish(&fx, due, token(due), Finish::Sent).await);
    let deadline = fx
        .outbox()
        .next_deadline()
        .await
        .expect("deadline")
        .expect("a retry waits");
    assert!(
        deadline > Duration::from_secs(50) && deadline <= Duration::from_secs(60),
        "{deadline:?}"
    );
    fx.done().await;
}
