//! `RelayStore`: the claim of push rows (one per aggregate in flight), the fenced forward into the
//! outbox, the fenced dead letter and the reclaim. Rows arrive through the inbox port; forwarded
//! rows are read back through the outbox port.

use super::{
    InboxState, LEASE, StoreFixture, claim_all, inbox_message, inbox_state, json, sorted,
    store_inbox,
};
use queuebox_ports::inbox::{Consumption, ForwardedRow, RelayRow};
use std::collections::HashSet;
use std::time::Duration;
use uuid::Uuid;

async fn relay_claim<F: StoreFixture>(fx: &F, limit: u32) -> Vec<RelayRow> {
    fx.relay().claim(limit, LEASE).await.expect("relay claim")
}

fn ids(rows: &[RelayRow]) -> HashSet<Uuid> {
    rows.iter().map(|r| r.id).collect()
}

/// The outbox row the relay would write for `row`.
fn forwarded(row: &RelayRow) -> ForwardedRow {
    let mut headers = row.headers.clone();
    headers.push(("x-inbox-id".to_owned(), row.id.to_string()));
    ForwardedRow {
        inbox_id: row.id,
        claim_token: row.claim_token,
        topic: format!(
            "{}.{}",
            row.source,
            row.event_type.clone().unwrap_or_default()
        ),
        key: row.aggregate_id.clone(),
        payload: row.payload.clone(),
        headers,
        max_attempts: 7,
    }
}

/// Stores a push message of `aggregate` that looks `age` old; returns its id.
async fn push_row<F: StoreFixture>(fx: &F, aggregate: Option<&str>, age: Duration) -> Uuid {
    let key = Uuid::new_v4().to_string();
    let id = store_inbox(
        fx,
        &inbox_message("stripe", &key, aggregate, Consumption::Push),
    )
    .await;
    fx.backdate_inbox_row(id, age).await;
    id
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The claim takes the oldest pending push row of each aggregate and every push row without
/// one; never a pull row or a dead row; nothing more while each aggregate has a row in flight.
pub async fn relay_claims_one_row_per_aggregate_and_push_rows_only<F: StoreFixture>() {
    let fx = F::fresh().await;
    let a1 = push_row(&fx, Some("A"), secs(90)).await;
    let a2 = push_row(&fx, Some("A"), secs(80)).await;
    let b1 = push_row(&fx, Some("B"), secs(70)).await;
    let n1 = push_row(&fx, None, secs(60)).await;
    let n2 = push_row(&fx, None, secs(50)).await;
    // Stored after its aggregate's other row but older: the head is the oldest row.
    let c2 = push_row(&fx, Some("C"), secs(40)).await;
    let c1 = push_row(&fx, Some("C"), secs(100)).await;
    let pull = store_inbox(
        &fx,
        &inbox_message("stripe", "pull-1", Some("P"), Consumption::Pull),
    )
    .await;
    let mut refused = inbox_message("stripe", "dead-1", Some("D"), Consumption::Push);
    refused.dead_reason = Some("not JSON".to_owned());
    let dead = store_inbox(&fx, &refused).await;

    let claimed = relay_claim(&fx, 100).await;
    assert_eq!(ids(&claimed), HashSet::from([a1, b1, n1, n2, c1]));
    for row in &claimed {
        let view = inbox_state(&fx, row.id).await;
        assert_eq!(view.state, InboxState::Processing, "{}", row.id);
        assert_eq!(view.claim_token, Some(row.claim_token));
        assert!(!row.claim_token.is_nil());
    }
    let row = claimed.iter().find(|r| r.id == a1).expect("a1");
    assert_eq!(row.source, "stripe");
    assert_eq!(row.aggregate_id.as_deref(), Some("A"));
    assert_eq!(row.event_type.as_deref(), Some("charge.paid"));
    assert_eq!(json(&row.payload), json(r#"{"amount":12}"#));
    assert_eq!(
        sorted(&row.headers),
        [("x-tenant".to_owned(), "acme".to_owned())]
    );
    assert_eq!(row.correlation_id.as_deref(), Some("corr-1"));
    for waiting in [a2, c2, pull] {
        assert_eq!(inbox_state(&fx, waiting).await.state, InboxState::Pending);
    }
    assert_eq!(inbox_state(&fx, dead).await.state, InboxState::Dead);
    let more = relay_claim(&fx, 100).await;
    assert!(
        more.is_empty(),
        "a second row of an aggregate in flight: {more:?}"
    );

    // The limit caps a claim.
    let fx2 = F::fresh().await;
    for i in 0..3 {
        push_row(&fx2, Some(&format!("agg-{i}")), secs(10 - i)).await;
    }
    assert_eq!(relay_claim(&fx2, 2).await.len(), 2);
    assert_eq!(relay_claim(&fx2, 2).await.len(), 1);
    fx2.done().await;
    fx.done().await;
}

/// A forward under a held fence inserts the outbox row (topic, key, payload, headers, attempts as
/// given, state pending) and marks the inbox row processed; the aggregate's next row follows.
pub async fn relay_fenced_forward_writes_the_outbox_row_and_marks_the_inbox_row_processed<
    F: StoreFixture,
>() {
    let fx = F::fresh().await;
    let a1 = push_row(&fx, Some("A"), secs(30)).await;
    let a2 = push_row(&fx, Some("A"), secs(20)).await;
    let n1 = push_row(&fx, None, secs(10)).await;
    let claimed = relay_claim(&fx, 10).await;
    assert_eq!(ids(&claimed), HashSet::from([a1, n1]));
    let writes: Vec<ForwardedRow> = claimed.iter().map(forwarded).collect();
    assert_eq!(
        fx.relay().forward(&writes).await.expect("forward"),
        [true, true]
    );
    for row in &claimed {
        assert_eq!(inbox_state(&fx, row.id).await.state, InboxState::Processed);
    }

    let stats = fx.outbox().pending_stats().await.expect("stats");
    assert_eq!(stats.pending, 2, "{stats:?}");
    let outbox = claim_all(&fx).await;
    assert_eq!(outbox.len(), 2, "{outbox:?}");
    for write in &writes {
        let row = outbox
            .iter()
            .find(|r| {
                r.headers
                    .iter()
                    .any(|(n, v)| n == "x-inbox-id" && *v == write.inbox_id.to_string())
            })
            .unwrap_or_else(|| panic!("no outbox row for {}", write.inbox_id));
        assert_eq!(row.topic, "stripe.charge.paid");
        assert_eq!(row.key, write.key);
        assert_eq!(json(&row.payload), json(&write.payload));
        assert_eq!(sorted(&row.headers), sorted(&write.headers));
        assert_eq!((row.attempt, row.max_attempts), (0, 7));
    }

    // A's head is done: its next row is claimable now.
    assert_eq!(ids(&relay_claim(&fx, 10).await), HashSet::from([a2]));
    fx.done().await;
}

/// A forward whose fence fails (a token the row does not hold, a lease that passed, a row already
/// forwarded) writes no outbox row and leaves the inbox row as it was; the others of the batch go.
pub async fn relay_a_lost_fence_writes_nothing<F: StoreFixture>() {
    let fx = F::fresh().await;
    push_row(&fx, Some("A"), secs(30)).await;
    push_row(&fx, Some("B"), secs(20)).await;
    push_row(&fx, Some("C"), secs(10)).await;
    let claimed = relay_claim(&fx, 10).await;
    assert_eq!(claimed.len(), 3);
    let (kept, stolen, expired) = (&claimed[0], &claimed[1], &claimed[2]);
    fx.expire_inbox_lease(expired.id).await;
    let mut writes: Vec<ForwardedRow> = claimed.iter().map(forwarded).collect();
    writes[1].claim_token = Uuid::new_v4();
    assert_eq!(
        fx.relay().forward(&writes).await.expect("forward"),
        [true, false, false]
    );
    assert_eq!(inbox_state(&fx, kept.id).await.state, InboxState::Processed);
    for row in [stolen, expired] {
        let view = inbox_state(&fx, row.id).await;
        assert_eq!(view.state, InboxState::Processing, "{}", row.id);
        assert_eq!(view.claim_token, Some(row.claim_token));
    }
    assert_eq!(
        fx.outbox().pending_stats().await.expect("stats").pending,
        1,
        "only the kept row reached the outbox"
    );
    // Forwarding the same row again writes nothing either.
    assert_eq!(
        fx.relay().forward(&writes[..1]).await.expect("forward"),
        [false]
    );
    let outbox = claim_all(&fx).await;
    assert_eq!(outbox.len(), 1, "{outbox:?}");
    assert!(fx.relay().forward(&[]).await.expect("empty").is_empty());
    fx.done().await;
}

/// Mark dead applies only under the row's fence, stores the reason, and releases the aggregate.
pub async fn relay_mark_dead_is_fenced_and_releases_the_aggregate<F: StoreFixture>() {
    let fx = F::fresh().await;
    let a1 = push_row(&fx, Some("A"), secs(20)).await;
    let a2 = push_row(&fx, Some("A"), secs(10)).await;
    let row = relay_claim(&fx, 10).await.remove(0);
    assert_eq!(row.id, a1);
    assert!(
        !fx.relay()
            .mark_dead(a1, Uuid::new_v4(), "wrong token")
            .await
            .expect("mark dead")
    );
    assert_eq!(inbox_state(&fx, a1).await.state, InboxState::Processing);
    assert!(
        fx.relay()
            .mark_dead(a1, row.claim_token, "the topic rendered empty")
            .await
            .expect("mark dead")
    );
    let view = inbox_state(&fx, a1).await;
    assert_eq!(view.state, InboxState::Dead);
    assert_eq!(view.last_error.as_deref(), Some("the topic rendered empty"));
    assert!(
        !fx.relay()
            .mark_dead(a1, row.claim_token, "again")
            .await
            .expect("mark dead"),
        "a second dead letter of one claim applied"
    );
    assert_eq!(ids(&relay_claim(&fx, 10).await), HashSet::from([a2]));
    assert_eq!(fx.outbox().pending_stats().await.expect("stats").pending, 0);
    fx.done().await;
}

/// A claim whose lease passed keeps its aggregate blocked until the reclaim returns it to
/// pending; then it is claimed again with a new token, ahead of the aggregate's next row.
pub async fn relay_reclaim_returns_an_expired_claim_to_pending<F: StoreFixture>() {
    let fx = F::fresh().await;
    let a1 = push_row(&fx, Some("A"), secs(20)).await;
    let a2 = push_row(&fx, Some("A"), secs(10)).await;
    let b1 = push_row(&fx, Some("B"), secs(10)).await;
    let first = relay_claim(&fx, 10).await;
    assert_eq!(ids(&first), HashSet::from([a1, b1]));
    let old_token = first.iter().find(|r| r.id == a1).expect("a1").claim_token;
    fx.expire_inbox_lease(a1).await;
    assert!(relay_claim(&fx, 10).await.is_empty());

    assert_eq!(fx.relay().reclaim_expired().await.expect("reclaim"), 1);
    assert_eq!(inbox_state(&fx, a1).await.state, InboxState::Pending);
    assert_eq!(inbox_state(&fx, b1).await.state, InboxState::Processing);
    let again = relay_claim(&fx, 10).await;
    assert_eq!(ids(&again), HashSet::from([a1]));
    assert_ne!(again[0].claim_token, old_token);
    assert_eq!(inbox_state(&fx, a2).await.state, InboxState::Pending);
    let mut stale = forwarded(&again[0]);
    stale.claim_token = old_token;
    assert_eq!(
        fx.relay().forward(&[stale]).await.expect("forward"),
        [false]
    );
    fx.done().await;
}
