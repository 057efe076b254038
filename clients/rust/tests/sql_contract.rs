//! The statements of examples/pull/sql/postgresql (the five of the contract and the optional
//! release), loaded as files and bound by name.

mod common;

use common::{TestDb, contract_file, insert_row, row_state};
use queuebox_inbox::named::to_positional;
use sqlx::{PgPool, Row};
use uuid::Uuid;

#[derive(Clone)]
enum V {
    Text(&'static str),
    Int(i32),
    Big(i64),
    Id(Uuid),
}

/// Runs a contract file with the values bound by parameter name.
async fn run(pool: &PgPool, file: &str, values: &[(&str, V)]) -> Vec<sqlx::postgres::PgRow> {
    let p = to_positional(&contract_file(file));
    let mut query = sqlx::query(sqlx::AssertSqlSafe(p.sql));
    for name in &p.names {
        let (_, value) = values
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{file} needs :{name}"));
        query = match value.clone() {
            V::Text(v) => query.bind(v),
            V::Int(v) => query.bind(v),
            V::Big(v) => query.bind(v),
            V::Id(v) => query.bind(v),
        };
    }
    query
        .fetch_all(pool)
        .await
        .unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Runs an UPDATE file and returns how many rows it changed.
async fn affected(pool: &PgPool, file: &str, values: &[(&str, V)]) -> u64 {
    let p = to_positional(&contract_file(file));
    let mut query = sqlx::query(sqlx::AssertSqlSafe(p.sql));
    for name in &p.names {
        let (_, value) = values
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{file} needs :{name}"));
        query = match value.clone() {
            V::Text(v) => query.bind(v),
            V::Int(v) => query.bind(v),
            V::Big(v) => query.bind(v),
            V::Id(v) => query.bind(v),
        };
    }
    query
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{file}: {e}"))
        .rows_affected()
}

async fn claim(
    pool: &PgPool,
    source: &'static str,
    batch: i32,
) -> Vec<(Uuid, Uuid, Option<String>)> {
    run(
        pool,
        "claim.sql",
        &[
            ("source", V::Text(source)),
            ("batch", V::Int(batch)),
            ("lease_ms", V::Big(30_000)),
            ("cand_limit", V::Int((3 * batch).clamp(50, 500))),
        ],
    )
    .await
    .iter()
    .map(|r| (r.get("id"), r.get("claim_token"), r.get("aggregate_id")))
    .collect()
}

fn ids(claimed: &[(Uuid, Uuid, Option<String>)]) -> Vec<Uuid> {
    let mut ids: Vec<Uuid> = claimed.iter().map(|c| c.0).collect();
    ids.sort();
    ids
}

fn token_of(claimed: &[(Uuid, Uuid, Option<String>)], id: Uuid) -> Uuid {
    claimed
        .iter()
        .find(|c| c.0 == id)
        .map(|c| c.1)
        .expect("row in the claim")
}

fn fenced(id: Uuid, token: Uuid) -> Vec<(&'static str, V)> {
    vec![("id", V::Id(id)), ("token", V::Id(token))]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_renew_complete_retry_dead_cycle() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    let x1 = insert_row(pool, "orders", "x1", Some("X"), 5000).await;
    let x2 = insert_row(pool, "orders", "x2", Some("X"), 4000).await;
    let y1 = insert_row(pool, "orders", "y1", Some("Y"), 3000).await;
    let n1 = insert_row(pool, "orders", "n1", None, 2000).await;
    let other = insert_row(pool, "payments", "p1", Some("X"), 1000).await;
    // A push row of the same source is the relay's, never a pull claim's.
    sqlx::query("UPDATE inbox SET consumption = 'push' WHERE id = $1")
        .bind(n1)
        .execute(pool)
        .await
        .expect("make push row");

    // One row per aggregate: X's head and Y; not x2, not the push row, not the other source.
    let first = claim(pool, "orders", 10).await;
    let mut want = vec![x1, y1];
    want.sort();
    assert_eq!(ids(&first), want);
    let x1_token = token_of(&first, x1);
    let y1_token = token_of(&first, y1);
    let x1_state = row_state(pool, x1).await;
    assert_eq!(x1_state.state, "processing");
    assert!(x1_state.lease_left_ms.is_some_and(|ms| ms > 25_000.0));

    // X is busy on orders: nothing more there. The same aggregate on payments is not blocked.
    assert!(claim(pool, "orders", 10).await.is_empty());
    assert_eq!(ids(&claim(pool, "payments", 10).await), vec![other]);

    // Renew is fenced on the token.
    let mut renew = fenced(x1, Uuid::new_v4());
    renew.push(("lease_ms", V::Big(60_000)));
    assert_eq!(affected(pool, "renew.sql", &renew).await, 0);
    let mut renew = fenced(x1, x1_token);
    renew.push(("lease_ms", V::Big(60_000)));
    assert_eq!(affected(pool, "renew.sql", &renew).await, 1);
    assert!(
        row_state(pool, x1)
            .await
            .lease_left_ms
            .is_some_and(|ms| ms > 55_000.0)
    );

    // Complete: once, and only with the token.
    assert_eq!(
        affected(pool, "complete.sql", &fenced(x1, Uuid::new_v4())).await,
        0
    );
    assert_eq!(
        affected(pool, "complete.sql", &fenced(x1, x1_token)).await,
        1
    );
    assert_eq!(
        affected(pool, "complete.sql", &fenced(x1, x1_token)).await,
        0
    );
    let done = row_state(pool, x1).await;
    assert_eq!(done.state, "processed");
    assert!(done.processed && done.claim_token.is_none() && done.lease_left_ms.is_none());

    // X is free again: its next row comes.
    let next = claim(pool, "orders", 10).await;
    assert_eq!(ids(&next), vec![x2]);
    let x2_token = token_of(&next, x2);

    // Retry: attempt raised, scheduled_at moved by the delay, error kept, claim cleared.
    let mut retry = fenced(x2, x2_token);
    retry.extend([("delay_ms", V::Big(60_000)), ("error", V::Text("boom"))]);
    assert_eq!(affected(pool, "retry.sql", &retry).await, 1);
    let retried = row_state(pool, x2).await;
    assert_eq!(
        (
            retried.state.as_str(),
            retried.attempt,
            retried.last_error.as_deref()
        ),
        ("pending", 1, Some("boom"))
    );
    assert!(retried.claim_token.is_none() && retried.lease_left_ms.is_none());
    assert!(
        retried.due_in_ms > 55_000.0,
        "scheduled_at moved: {}",
        retried.due_in_ms
    );
    assert_eq!(
        affected(pool, "retry.sql", &retry).await,
        0,
        "the token is spent"
    );
    // Not due yet: not claimable.
    assert!(claim(pool, "orders", 10).await.is_empty());

    // Dead.
    let mut dead = fenced(y1, y1_token);
    dead.push(("error", V::Text("poison")));
    assert_eq!(affected(pool, "dead.sql", &dead).await, 1);
    let y = row_state(pool, y1).await;
    assert_eq!(
        (y.state.as_str(), y.last_error.as_deref()),
        ("dead", Some("poison"))
    );
    assert!(y.claim_token.is_none() && y.lease_left_ms.is_none());
    assert!(
        claim(pool, "orders", 10).await.is_empty(),
        "a dead row is never claimed"
    );

    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_taken_over_with_a_new_token() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    let z1 = insert_row(pool, "orders", "z1", Some("Z"), 3000).await;
    let z2 = insert_row(pool, "orders", "z2", Some("Z"), 2000).await;
    let first = claim(pool, "orders", 10).await;
    assert_eq!(ids(&first), vec![z1]);
    let old = token_of(&first, z1);

    // The owner stalls: its lease runs out.
    sqlx::query("UPDATE inbox SET lease_expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(z1)
        .execute(pool)
        .await
        .expect("expire lease");

    // The takeover returns the expired row (Z's head), not z2, with a new token.
    let again = claim(pool, "orders", 10).await;
    assert_eq!(ids(&again), vec![z1]);
    let new = token_of(&again, z1);
    assert_ne!(new, old);
    assert_eq!(row_state(pool, z2).await.state, "pending");

    // The old owner is fenced out of every write.
    let mut renew = fenced(z1, old);
    renew.push(("lease_ms", V::Big(30_000)));
    assert_eq!(affected(pool, "renew.sql", &renew).await, 0);
    assert_eq!(affected(pool, "complete.sql", &fenced(z1, old)).await, 0);
    let mut dead = fenced(z1, old);
    dead.push(("error", V::Text("late")));
    assert_eq!(affected(pool, "dead.sql", &dead).await, 0);
    assert_eq!(affected(pool, "complete.sql", &fenced(z1, new)).await, 1);

    // An expired lease fences its own owner too, before any takeover.
    let z2_claim = claim(pool, "orders", 10).await;
    let z2_token = token_of(&z2_claim, z2);
    sqlx::query("UPDATE inbox SET lease_expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(z2)
        .execute(pool)
        .await
        .expect("expire lease");
    assert_eq!(
        affected(pool, "complete.sql", &fenced(z2, z2_token)).await,
        0
    );

    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_without_an_aggregate_take_part_in_no_ordering() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    for n in 0..5 {
        insert_row(pool, "orders", &format!("n{n}"), None, 1000 - n).await;
    }
    assert_eq!(claim(pool, "orders", 3).await.len(), 3);
    assert_eq!(claim(pool, "orders", 3).await.len(), 2);
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_hands_an_unstarted_row_back_under_the_fence() {
    let db = TestDb::new().await;
    let pool = &db.pool;
    let a1 = insert_row(pool, "orders", "a1", Some("A"), 5000).await;
    let a2 = insert_row(pool, "orders", "a2", Some("A"), 4000).await;
    let claimed = claim(pool, "orders", 10).await;
    assert_eq!(ids(&claimed), vec![a1]);
    let token = token_of(&claimed, a1);

    assert_eq!(
        affected(pool, "release.sql", &fenced(a1, Uuid::new_v4())).await,
        0,
        "a stranger's token releases nothing"
    );
    assert_eq!(affected(pool, "release.sql", &fenced(a1, token)).await, 1);
    let row = row_state(pool, a1).await;
    assert_eq!(
        (row.state.as_str(), row.attempt, row.claim_token),
        ("pending", 0, None)
    );
    assert_eq!(
        affected(pool, "release.sql", &fenced(a1, token)).await,
        0,
        "a released claim is gone"
    );
    // The aggregate's head is back in line, before a2.
    assert_eq!(ids(&claim(pool, "orders", 10).await), vec![a1]);
    assert_eq!(row_state(pool, a2).await.state, "pending");
    db.drop_db().await;
}
