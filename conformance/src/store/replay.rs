//! `ReplayStore`: candidates are `sent` and `dead` rows of the selection in id order, and the move
//! back to `pending` touches no row in another state.

use super::{HOUR, NewOutboxRow, StoreFixture, claim, finish, outbox_state};
use queuebox_domain::outbox::OutboxState;
use queuebox_ports::outbox::Finish;
use queuebox_ports::replay::ReplaySelection;
use std::collections::HashSet;
use uuid::Uuid;

/// One row of `topic` in each state: (sent, dead, pending, processing).
pub(crate) async fn one_row_per_state<F: StoreFixture>(fx: &F, topic: &str) -> [Uuid; 4] {
    let mut ids = Vec::new();
    for _ in 0..4 {
        let key = Uuid::new_v4().to_string();
        ids.push(
            fx.insert_outbox_row(NewOutboxRow::new(topic, Some(&key)))
                .await,
        );
    }
    let (sent, dead, pending, processing) = (ids[0], ids[1], ids[2], ids[3]);
    let mut tokens = std::collections::HashMap::new();
    loop {
        let claimed = claim(fx, 100).await;
        if claimed.rows.is_empty() {
            break;
        }
        for row in claimed.rows {
            tokens.insert(row.id, row.claim_token);
        }
    }
    for id in [sent, dead, pending, processing] {
        assert!(tokens.contains_key(&id), "{id} was not claimed");
    }
    assert!(finish(fx, sent, tokens[&sent], Finish::Sent).await);
    let gave_up = Finish::Dead {
        error: "gave up".to_owned(),
    };
    assert!(finish(fx, dead, tokens[&dead], gave_up).await);
    let later = Finish::Retry {
        attempt: 1,
        delay: HOUR,
        error: "HTTP 503".to_owned(),
    };
    assert!(finish(fx, pending, tokens[&pending], later).await);
    [sent, dead, pending, processing]
}

/// Walks every page of `selection` with `limit` rows a page; returns the ids in walk order.
async fn walk<F: StoreFixture>(fx: &F, selection: &ReplaySelection, limit: u32) -> Vec<Uuid> {
    let mut ids = Vec::new();
    let mut after = None;
    for _ in 0..100 {
        let page = fx
            .replay()
            .replay_candidates(selection, after, limit)
            .await
            .expect("candidates");
        assert!(page.len() <= limit as usize, "a page over its limit");
        let full = page.len() == limit as usize;
        ids.extend(page.iter().map(|c| c.id));
        match page.last() {
            Some(last) if full => after = Some(last.id),
            _ => return ids,
        }
    }
    panic!("the walk never ended: {ids:?}")
}

fn topic(name: &str) -> ReplaySelection {
    ReplaySelection {
        topic: Some(name.to_owned()),
        ..ReplaySelection::default()
    }
}

/// Only `sent` and `dead` rows are candidates; pages walk them in id order, each once.
pub async fn replay_candidates_are_sent_and_dead_rows_only_in_id_order<F: StoreFixture>() {
    let fx = F::fresh().await;
    let mut finished = Vec::new();
    for _ in 0..3 {
        let [sent, dead, _, _] = one_row_per_state(&fx, "replay.t").await;
        finished.extend([sent, dead]);
    }
    let page = fx
        .replay()
        .replay_candidates(&topic("replay.t"), None, 100)
        .await
        .expect("candidates");
    assert!(page.iter().all(|c| c.topic == "replay.t"), "{page:?}");
    let got: HashSet<Uuid> = page.iter().map(|c| c.id).collect();
    assert_eq!(got, finished.iter().copied().collect::<HashSet<_>>());

    let walked = walk(&fx, &topic("replay.t"), 2).await;
    let mut expected = finished.clone();
    expected.sort();
    assert_eq!(walked, expected, "pages in id order, each row once");
    fx.done().await;
}

/// Ids, topic, topics and the creation window each narrow the selection, and they combine.
pub async fn replay_selection_filters_combine<F: StoreFixture>() {
    let fx = F::fresh().await;
    let [a_sent, a_dead, _, _] = one_row_per_state(&fx, "order.created").await;
    let [b_sent, b_dead, _, _] = one_row_per_state(&fx, "order.paid").await;
    let [c_sent, c_dead, _, _] = one_row_per_state(&fx, "invoice.sent").await;
    fx.backdate_outbox_row(a_sent, HOUR * 3).await;
    fx.backdate_outbox_row(b_sent, HOUR * 3).await;
    let set = |ids: &[Uuid]| ids.iter().copied().collect::<HashSet<_>>();
    let selected = |selection: ReplaySelection| {
        let fx = &fx;
        async move {
            walk(fx, &selection, 100)
                .await
                .into_iter()
                .collect::<HashSet<_>>()
        }
    };

    let by_ids = ReplaySelection {
        ids: Some(vec![a_sent, c_sent, Uuid::new_v4()]),
        ..ReplaySelection::default()
    };
    assert_eq!(selected(by_ids).await, set(&[a_sent, c_sent]));
    assert_eq!(
        selected(topic("order.created")).await,
        set(&[a_sent, a_dead])
    );
    let topics = ReplaySelection {
        topics: Some(vec!["order.paid".to_owned(), "invoice.sent".to_owned()]),
        ..ReplaySelection::default()
    };
    assert_eq!(
        selected(topics).await,
        set(&[b_sent, b_dead, c_sent, c_dead])
    );
    let an_hour_ago = chrono::Utc::now() - chrono::Duration::hours(1);
    let old = ReplaySelection {
        created_before: Some(an_hour_ago),
        ..ReplaySelection::default()
    };
    assert_eq!(selected(old).await, set(&[a_sent, b_sent]));
    let recent_order = ReplaySelection {
        topics: Some(vec!["order.created".to_owned(), "order.paid".to_owned()]),
        created_after: Some(an_hour_ago),
        ..ReplaySelection::default()
    };
    assert_eq!(selected(recent_order).await, set(&[a_dead, b_dead]));
    let none = ReplaySelection {
        ids: Some(vec![]),
        topic: Some("order.created".to_owned()),
        ..ReplaySelection::default()
    };
    assert_eq!(
        selected(none).await,
        set(&[]),
        "an empty id list matches no row"
    );
    fx.done().await;
}

/// The move puts `sent` and `dead` rows back to `pending` with attempt 0 and no error, so the
/// next claim takes them again; a `pending` or `processing` row in the list stays as it was.
pub async fn replay_move_to_pending_moves_only_sent_and_dead_rows<F: StoreFixture>() {
    let fx = F::fresh().await;
    let [sent, dead, pending, processing] = one_row_per_state(&fx, "replay.t").await;
    let pending_before = outbox_state(&fx, pending).await;
    let processing_before = outbox_state(&fx, processing).await;
    let moved = fx
        .replay()
        .move_to_pending(&[sent, dead, pending, processing, Uuid::new_v4()])
        .await
        .expect("move");
    assert_eq!(moved, 2);
    for id in [sent, dead] {
        let view = outbox_state(&fx, id).await;
        assert_eq!(view.state, OutboxState::Pending, "{id}");
        assert_eq!(
            (view.attempt, view.last_error, view.claim_token),
            (0, None, None)
        );
    }
    assert_eq!(outbox_state(&fx, pending).await, pending_before);
    assert_eq!(outbox_state(&fx, processing).await, processing_before);
    // Moving again finds nothing left to move.
    assert_eq!(
        fx.replay()
            .move_to_pending(&[sent, dead])
            .await
            .expect("move"),
        0
    );
    let again: HashSet<Uuid> = claim(&fx, 100).await.rows.iter().map(|r| r.id).collect();
    assert_eq!(again, HashSet::from([sent, dead]));
    fx.done().await;
}
