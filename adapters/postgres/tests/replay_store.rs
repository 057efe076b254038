//! The PostgreSQL replay store against a real server: which rows a page selects for each filter, the
//! keyset paging, and what the move writes. Every test runs on a fresh database and reads the
//! table back.

mod common;

use std::collections::HashSet;

use chrono::{DateTime, Duration as Span, Utc};
use queuebox_ports::replay::{ReplaySelection, ReplayStore};
use queuebox_postgres::{PgReplayStore, PostgresDatabase};
use sqlx::Row;
use uuid::Uuid;

type Fixture = common::StoreFixture<PgReplayStore>;

impl Fixture {
    async fn new() -> Self {
        Self::open(PostgresDatabase::replay_store).await
    }

    /// Inserts one row in `state`, created at `created_at`, and returns its id.
    async fn insert(&mut self, topic: &str, state: &str, created_at: DateTime<Utc>) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO outbox (topic, payload, state, created_at) \
             VALUES ($1, '{\"n\":1}'::jsonb, $2, $3) RETURNING id",
        )
        .bind(topic)
        .bind(state)
        .bind(created_at)
        .fetch_one(&mut self.session)
        .await
        .expect("insert an outbox row")
    }

    /// Every page of `selection` with `limit` rows a page, as the replay walks it.
    async fn walk(&self, selection: &ReplaySelection, limit: u32) -> Vec<Vec<Uuid>> {
        let mut pages = Vec::new();
        let mut after = None;
        loop {
            let page = self
                .store
                .replay_candidates(selection, after, limit)
                .await
                .expect("page");
            let ids: Vec<Uuid> = page.iter().map(|row| row.id).collect();
            let full = ids.len() == limit as usize;
            if let Some(last) = ids.last() {
                after = Some(*last);
                pages.push(ids);
            }
            if !full {
                return pages;
            }
        }
    }

    /// The ids a selection picks, in one large page.
    async fn selected(&self, selection: &ReplaySelection) -> HashSet<Uuid> {
        self.walk(selection, 1_000)
            .await
            .into_iter()
            .flatten()
            .collect()
    }
}

fn set(ids: &[Uuid]) -> HashSet<Uuid> {
    ids.iter().copied().collect()
}

#[tokio::test]
async fn only_sent_and_dead_rows_are_candidates() {
    let mut f = Fixture::new().await;
    let now = Utc::now();
    let sent = f.insert("a", "sent", now).await;
    let dead = f.insert("a", "dead", now).await;
    f.insert("a", "pending", now).await;
    f.insert("a", "processing", now).await;
    let selection = ReplaySelection {
        topic: Some("a".into()),
        ..ReplaySelection::default()
    };
    assert_eq!(f.selected(&selection).await, set(&[sent, dead]));
    f.done().await;
}

#[tokio::test]
async fn each_filter_selects_its_rows_and_filters_combine_with_and() {
    let mut f = Fixture::new().await;
    let t0 = Utc::now() - Span::hours(10);
    let at = |hours: i64| t0 + Span::hours(hours);
    let a1 = f.insert("order.created", "sent", at(1)).await;
    let a2 = f.insert("order.created", "dead", at(2)).await;
    let b3 = f.insert("order.paid", "dead", at(3)).await;
    let c4 = f.insert("invoice.sent", "sent", at(4)).await;
    let c5 = f.insert("invoice.sent", "dead", at(5)).await;

    let ids = ReplaySelection {
        ids: Some(vec![a1, c5, Uuid::new_v4()]),
        ..ReplaySelection::default()
    };
    assert_eq!(f.selected(&ids).await, set(&[a1, c5]));

    let topic = ReplaySelection {
        topic: Some("order.created".into()),
        ..ReplaySelection::default()
    };
    assert_eq!(f.selected(&topic).await, set(&[a1, a2]));

    let topics = ReplaySelection {
        topics: Some(vec!["order.paid".into(), "invoice.sent".into()]),
        ..ReplaySelection::default()
    };
    assert_eq!(f.selected(&topics).await, set(&[b3, c4, c5]));

    // Both bounds are strict: a row created exactly at the bound is outside.
    let after = ReplaySelection {
        created_after: Some(at(3)),
        ..ReplaySelection::default()
    };
    assert_eq!(f.selected(&after).await, set(&[c4, c5]));
    let before = ReplaySelection {
        created_before: Some(at(3)),
        ..ReplaySelection::default()
    };
    assert_eq!(f.selected(&before).await, set(&[a1, a2]));
    let window = ReplaySelection {
        created_after: Some(at(1)),
        created_before: Some(at(5)),
        ..ReplaySelection::default()
    };
    assert_eq!(f.selected(&window).await, set(&[a2, b3, c4]));

    // AND: topic and topics narrow each other; ids and a window narrow each other.
    let topic_and_topics = ReplaySelection {
        topic: Some("order.created".into()),
        topics: Some(vec!["order.created".into(), "order.paid".into()]),
        ..ReplaySelection::default()
    };
    assert_eq!(f.selected(&topic_and_topics).await, set(&[a1, a2]));
    let disjoint = ReplaySelection {
        topic: Some("order.created".into()),
        topics: Some(vec!["order.paid".into()]),
        ..ReplaySelection::default()
    };
    assert!(f.selected(&disjoint).await.is_empty());
    let ids_in_window = ReplaySelection {
        ids: Some(vec![a1, a2, c5]),
        created_after: Some(at(1)),
        topics: Some(vec!["order.created".into(), "invoice.sent".into()]),
        ..ReplaySelection::default()
    };
    assert_eq!(f.selected(&ids_in_window).await, set(&[a2, c5]));

    // An empty list matches nothing; it never means "no filter".
    let no_ids = ReplaySelection {
        ids: Some(vec![]),
        ..ReplaySelection::default()
    };
    assert!(f.selected(&no_ids).await.is_empty());
    f.done().await;
}

#[tokio::test]
async fn pages_walk_the_selection_in_id_order_once() {
    let mut f = Fixture::new().await;
    let now = Utc::now();
    let mut expected = Vec::new();
    for n in 0..25 {
        let state = if n % 2 == 0 { "sent" } else { "dead" };
        expected.push(f.insert("bulk", state, now).await);
        // Rows between them that a page must step over.
        f.insert("bulk", "pending", now).await;
        f.insert("other", "sent", now).await;
    }
    expected.sort();
    let selection = ReplaySelection {
        topic: Some("bulk".into()),
        ..ReplaySelection::default()
    };
    let pages = f.walk(&selection, 10).await;
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, [10, 10, 5]);
    let walked: Vec<Uuid> = pages.into_iter().flatten().collect();
    assert_eq!(walked, expected, "every row once, in id order");
    f.done().await;
}

#[tokio::test]
async fn the_nil_uuid_row_is_on_the_first_page() {
    let mut f = Fixture::new().await;
    sqlx::query("INSERT INTO outbox (id, topic, payload, state) VALUES ($1, 'a', '{}', 'dead')")
        .bind(Uuid::nil())
        .execute(&mut f.session)
        .await
        .expect("insert");
    let other = f.insert("a", "dead", Utc::now()).await;
    let selection = ReplaySelection {
        topic: Some("a".into()),
        ..ReplaySelection::default()
    };
    assert_eq!(
        f.walk(&selection, 1).await,
        vec![vec![Uuid::nil()], vec![other]]
    );
    f.done().await;
}

#[tokio::test]
async fn the_move_resets_delivery_columns_and_keeps_identity_and_content() {
    let mut f = Fixture::new().await;
    let dead: Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, key, payload, headers, state, attempt, max_attempts, \
             scheduled_at, created_at, updated_at, claimed_at, claim_token, lease_expires_at, last_error) \
         VALUES ('order.created', 'k1', '{\"total\":5}', '{\"X-Tenant\":\"acme\"}', 'dead', 5, 5, \
             now() + interval '1 hour', now() - interval '2 hours', now() - interval '1 hour', \
             now() - interval '1 hour', gen_random_uuid(), now() + interval '1 hour', 'HTTP 500') \
         RETURNING id",
    )
    .fetch_one(&mut f.session)
    .await
    .expect("insert a dead row");
    let before = sqlx::query("SELECT sequence, created_at FROM outbox WHERE id = $1")
        .bind(dead)
        .fetch_one(&mut f.session)
        .await
        .expect("read");
    let sequence: i64 = before.get("sequence");
    let created_at: DateTime<Utc> = before.get("created_at");

    assert_eq!(f.store.move_to_pending(&[dead]).await.expect("move"), 1);

    let row = sqlx::query(
        "SELECT id, state, attempt, max_attempts, key, payload::text AS payload, \
                headers::text AS headers, sequence, created_at, last_error, claimed_at IS NULL AS no_claim, \
                claim_token IS NULL AS no_token, lease_expires_at IS NULL AS no_lease, \
                scheduled_at <= now() AND scheduled_at > now() - interval '1 minute' AS due_now, \
                updated_at > now() - interval '1 minute' AS updated_now \
           FROM outbox WHERE id = $1",
    )
    .bind(dead)
    .fetch_one(&mut f.session)
    .await
    .expect("read back");
    assert_eq!(row.get::<Uuid, _>("id"), dead);
    assert_eq!(row.get::<String, _>("state"), "pending");
    assert_eq!(row.get::<i32, _>("attempt"), 0);
    assert_eq!(row.get::<i32, _>("max_attempts"), 5);
    assert_eq!(row.get::<Option<String>, _>("key").as_deref(), Some("k1"));
    assert_eq!(row.get::<String, _>("payload"), r#"{"total": 5}"#);
    assert_eq!(row.get::<String, _>("headers"), r#"{"X-Tenant": "acme"}"#);
    assert_eq!(row.get::<i64, _>("sequence"), sequence);
    assert_eq!(row.get::<DateTime<Utc>, _>("created_at"), created_at);
    assert_eq!(row.get::<Option<String>, _>("last_error"), None);
    for cleared in ["no_claim", "no_token", "no_lease", "due_now", "updated_now"] {
        assert!(row.get::<bool, _>(cleared), "{cleared}");
    }
    f.done().await;
}

#[tokio::test]
async fn the_move_leaves_rows_that_are_no_longer_sent_or_dead() {
    let mut f = Fixture::new().await;
    let now = Utc::now();
    let sent = f.insert("a", "sent", now).await;
    let pending = f.insert("a", "pending", now).await;
    let processing = f.insert("a", "processing", now).await;
    sqlx::query(
        "UPDATE outbox SET attempt = 2, last_error = 'boom', claim_token = gen_random_uuid() \
         WHERE id = ANY($1)",
    )
    .bind([pending, processing].as_slice())
    .execute(&mut f.session)
    .await
    .expect("prepare");

    let moved = f
        .store
        .move_to_pending(&[sent, pending, processing, Uuid::new_v4()])
        .await
        .expect("move");
    assert_eq!(moved, 1);

    let rows = sqlx::query("SELECT id, state, attempt, last_error FROM outbox ORDER BY id")
        .fetch_all(&mut f.session)
        .await
        .expect("read back");
    for row in rows {
        let id: Uuid = row.get("id");
        let state: String = row.get("state");
        let attempt: i32 = row.get("attempt");
        let last_error: Option<String> = row.get("last_error");
        if id == sent {
            assert_eq!((state.as_str(), attempt), ("pending", 0));
        } else if id == pending {
            assert_eq!(
                (state.as_str(), attempt, last_error.as_deref()),
                ("pending", 2, Some("boom"))
            );
        } else {
            assert_eq!(
                (state.as_str(), attempt, last_error.as_deref()),
                ("processing", 2, Some("boom"))
            );
        }
    }
    f.done().await;
}
