//! `InboxStore`: one row per (source, idempotency key), alone, in a group and under concurrency.

use super::{InboxState, StoreFixture, inbox_message, inbox_state, store_inbox};
use queuebox_ports::inbox::{Consumption, NewInboxMessage, Stored};
use uuid::Uuid;

fn pull(key: &str) -> NewInboxMessage {
    inbox_message("stripe", key, Some("cus_1"), Consumption::Pull)
}

/// A new message becomes a pending row with the id the caller chose; the same key again in the
/// same source is a duplicate and writes nothing; the same key in another source is a new row.
pub async fn inbox_insert_stores_a_new_message_once_and_reports_a_duplicate<F: StoreFixture>() {
    let fx = F::fresh().await;
    let first = pull("evt_1");
    let id = store_inbox(&fx, &first).await;
    assert_eq!(id, first.id, "the row takes the id the caller chose");
    let view = inbox_state(&fx, id).await;
    assert_eq!(view.state, InboxState::Pending);

    let repeat = pull("evt_1");
    assert_eq!(
        fx.inbox().insert(&repeat).await.expect("repeat"),
        Stored::Duplicate
    );
    assert_eq!(
        fx.inbox_row(repeat.id).await,
        None,
        "a duplicate wrote a row"
    );

    let elsewhere = inbox_message("github", "evt_1", None, Consumption::Push);
    assert_eq!(store_inbox(&fx, &elsewhere).await, elsewhere.id);
    fx.done().await;
}

/// A message refused at receipt (`dead_reason`) is stored dead at once with its reason, and still
/// takes its key: a repeat is a duplicate.
pub async fn inbox_insert_with_a_dead_reason_stores_the_row_dead<F: StoreFixture>() {
    let fx = F::fresh().await;
    let mut refused = pull("evt_dead");
    refused.dead_reason = Some("the body is not JSON".to_owned());
    let id = store_inbox(&fx, &refused).await;
    let view = inbox_state(&fx, id).await;
    assert_eq!(view.state, InboxState::Dead);
    assert_eq!(view.last_error.as_deref(), Some("the body is not JSON"));
    assert_eq!(
        fx.inbox().insert(&pull("evt_dead")).await.expect("repeat"),
        Stored::Duplicate
    );
    fx.done().await;
}

/// A group answers each message in the order given: new rows with their own ids, a duplicate
/// for a key already stored, and exactly one new row for two messages of one key in the group.
pub async fn inbox_insert_many_reports_duplicates_inside_the_group_and_against_stored_rows<
    F: StoreFixture,
>() {
    let fx = F::fresh().await;
    let stored = pull("k0");
    store_inbox(&fx, &stored).await;
    let group = [pull("k1"), pull("k2"), pull("k1"), pull("k0"), pull("k3")];
    let outcomes = fx.inbox().insert_many(&group).await.expect("group insert");
    assert_eq!(outcomes.len(), group.len(), "{outcomes:?}");
    assert_eq!(outcomes[1], Stored::New(group[1].id));
    assert_eq!(outcomes[3], Stored::Duplicate);
    assert_eq!(outcomes[4], Stored::New(group[4].id));
    let k1_row = match (&outcomes[0], &outcomes[2]) {
        (Stored::New(id), Stored::Duplicate) => {
            assert_eq!(*id, group[0].id);
            *id
        }
        (Stored::Duplicate, Stored::New(id)) => {
            assert_eq!(*id, group[2].id);
            *id
        }
        other => {
            panic!("two messages of one key: expected one new row and one duplicate, got {other:?}")
        }
    };
    for id in [k1_row, group[1].id, group[4].id] {
        assert_eq!(inbox_state(&fx, id).await.state, InboxState::Pending);
    }
    let loser = if k1_row == group[0].id {
        group[2].id
    } else {
        group[0].id
    };
    assert_eq!(fx.inbox_row(loser).await, None);
    assert_eq!(fx.inbox_row(group[3].id).await, None);
    assert!(
        fx.inbox()
            .insert_many(&[])
            .await
            .expect("empty group")
            .is_empty()
    );
    fx.done().await;
}

/// Concurrent inserts of one key store one row; every other insert reports a duplicate.
pub async fn inbox_concurrent_inserts_of_one_key_store_one_row<F: StoreFixture>() {
    let fx = F::fresh().await;
    let messages: Vec<NewInboxMessage> = (0..8).map(|_| pull("evt_race")).collect();
    let store = fx.inbox();
    let outcomes =
        futures::future::join_all(messages.iter().map(|message| store.insert(message))).await;
    let mut new: Vec<Uuid> = Vec::new();
    for outcome in outcomes {
        match outcome.expect("insert") {
            Stored::New(id) => new.push(id),
            Stored::Duplicate => {}
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    assert_eq!(new.len(), 1, "one row per key: {new:?}");
    assert_eq!(inbox_state(&fx, new[0]).await.state, InboxState::Pending);
    fx.done().await;
}
