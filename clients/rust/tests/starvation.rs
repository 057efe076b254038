//! No starvation behind a busy aggregate: the measurement of the README as a test.
//!
//! Aggregate A owns the 1,000 oldest rows of the source; B..Z have one row each behind them. A
//! worker claims 10 rows at a time and completes what it claimed. The candidate-limited claim only
//! ever sees A's rows, so B..Z wait for A to drain; the aggregate walk reaches them at once.

mod common;

use std::collections::HashSet;
use std::time::Instant;

use common::{TestDb, contract_file, insert_row};
use queuebox_inbox::named::to_positional;
use sqlx::{PgPool, Row};
use uuid::Uuid;

const BATCH: i32 = 10;
const HEAD: i64 = 1000;

fn naive_claim() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/naive_claim.sql"
    );
    std::fs::read_to_string(path).expect("reading the naive claim")
}

async fn claim(pool: &PgPool, sql: &str) -> Vec<(Uuid, Uuid, Option<String>)> {
    let p = to_positional(sql);
    let mut query = sqlx::query(sqlx::AssertSqlSafe(p.sql));
    for name in &p.names {
        query = match name.as_str() {
            "source" => query.bind("orders"),
            "batch" => query.bind(BATCH),
            "lease_ms" => query.bind(60_000_i64),
            "cand_limit" => query.bind((3 * BATCH).clamp(50, 500)),
            other => panic!("unexpected parameter :{other}"),
        };
    }
    query
        .fetch_all(pool)
        .await
        .expect("claim")
        .iter()
        .map(|r| (r.get("id"), r.get("claim_token"), r.get("aggregate_id")))
        .collect()
}

async fn complete(pool: &PgPool, id: Uuid, token: Uuid) {
    let p = to_positional(&contract_file("complete.sql"));
    let done = sqlx::query(sqlx::AssertSqlSafe(p.sql))
        .bind(id)
        .bind(token)
        .execute(pool)
        .await
        .expect("complete");
    assert_eq!(done.rows_affected(), 1);
}

async fn seed(pool: &PgPool) {
    // A's burst first (oldest), then one row for each of B..Z.
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, created_at, scheduled_at)
         SELECT 'orders', 'a-' || g, 'A', '{}', 'pull',
                now() - interval '1 hour' + g * interval '1 millisecond',
                now() - interval '1 hour' + g * interval '1 millisecond'
           FROM generate_series(1, $1::int) g",
    )
    .bind(HEAD as i32)
    .execute(pool)
    .await
    .expect("seed A");
    for (n, letter) in ('B'..='Z').enumerate() {
        let key = format!("{letter}-1");
        insert_row(
            pool,
            "orders",
            &key,
            Some(&letter.to_string()),
            60_000 - n as i64,
        )
        .await;
    }
    sqlx::query("ANALYZE inbox")
        .execute(pool)
        .await
        .expect("analyze");
}

/// Claims and completes until every one of B..Z is processed; returns the number of claims.
async fn claims_until_b_to_z_done(pool: &PgPool, sql: &str, hold_a: bool) -> usize {
    let mut waiting: HashSet<String> = ('B'..='Z').map(|c| c.to_string()).collect();
    let mut claims = 0;
    while !waiting.is_empty() && claims < 2 * HEAD as usize {
        claims += 1;
        let claimed = claim(pool, sql).await;
        for (id, token, aggregate) in claimed {
            let aggregate = aggregate.unwrap_or_default();
            // With hold_a, A's row stays claimed, as if a slow handler held it the whole time.
            if hold_a && aggregate == "A" {
                continue;
            }
            waiting.remove(&aggregate);
            complete(pool, id, token).await;
        }
        if hold_a && claims > 50 {
            break; // A stays busy forever: waiting longer shows nothing new
        }
    }
    if waiting.is_empty() {
        claims
    } else {
        usize::MAX
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_to_z_do_not_wait_behind_a_burst_of_a() {
    let db = TestDb::new().await;
    seed(&db.pool).await;
    let started = Instant::now();
    let walked = claims_until_b_to_z_done(&db.pool, &contract_file("claim.sql"), false).await;
    println!(
        "aggregate walk: B..Z processed after {walked} claims ({:?})",
        started.elapsed()
    );
    assert!(walked <= 4, "B..Z took {walked} claims behind A");
    db.drop_db().await;

    let db = TestDb::new().await;
    seed(&db.pool).await;
    let started = Instant::now();
    let naive = claims_until_b_to_z_done(&db.pool, &naive_claim(), false).await;
    println!(
        "candidate-limited claim: B..Z processed after {naive} claims ({:?})",
        started.elapsed()
    );
    // The measurement this test exists for: the old shape makes B..Z wait for A to drain.
    assert!(
        naive > 900,
        "expected the naive claim to starve B..Z, took {naive} claims"
    );
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_to_z_proceed_while_a_is_held_by_a_slow_handler() {
    let db = TestDb::new().await;
    seed(&db.pool).await;
    let walked = claims_until_b_to_z_done(&db.pool, &contract_file("claim.sql"), true).await;
    println!("aggregate walk, A held: B..Z processed after {walked} claims");
    assert!(walked <= 4, "B..Z took {walked} claims behind a held A");
    db.drop_db().await;

    let db = TestDb::new().await;
    seed(&db.pool).await;
    let naive = claims_until_b_to_z_done(&db.pool, &naive_claim(), true).await;
    println!(
        "candidate-limited claim, A held: {}",
        if naive == usize::MAX {
            "B..Z never processed (stopped after 51 claims)".to_owned()
        } else {
            format!("{naive} claims")
        }
    );
    assert_eq!(
        naive,
        usize::MAX,
        "the naive claim should never reach B..Z while A is held"
    );
    db.drop_db().await;
}
