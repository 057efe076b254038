//! The writes after a claim (renew, complete, retry, dead, release) find their row by its id.
//!
//! Their fence also says `state = 'processing'`, and an index on the state, or one partial on
//! processing rows, looks like a way in whenever the statistics say that almost no row is
//! processing (the usual picture: statistics taken on a backlog before the workers start). That
//! way in walks the entries of every row that has been processing since the last vacuum, dead
//! ones included, once per handled row: on a 50,000-row backlog, 30 buffers and 0.5 ms instead of
//! 5 buffers and 0.1 ms by the primary key. These tests build that picture and check the plans.

mod common;

use common::{TestDb, contract_file};
use queuebox_inbox::named::{Positional, to_positional};
use queuebox_inbox::{Schema, worker_statements};
use sqlx::{PgPool, Row};
use uuid::Uuid;

const FENCED: [&str; 5] = ["renew", "complete", "retry", "dead", "release"];

/// A backlog analysed while nothing was processing, then 600 rows claimed and completed one by
/// one (autovacuum off, so their dead index entries stay), and one row claimed now.
async fn busy_history(pool: &PgPool) -> (Uuid, Uuid) {
    sqlx::query("ALTER TABLE inbox SET (autovacuum_enabled = false)")
        .execute(pool)
        .await
        .expect("autovacuum off");
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption,
                            created_at, scheduled_at)
         SELECT 'orders', 'k-' || g, 'a-' || (g % 100), '{}', 'pull',
                now() - interval '1 hour' + g * interval '1 millisecond',
                now() - interval '1 hour' + g * interval '1 millisecond'
           FROM generate_series(1, 3000) g",
    )
    .execute(pool)
    .await
    .expect("seed");
    sqlx::query("VACUUM ANALYZE inbox")
        .execute(pool)
        .await
        .expect("analyze");
    for _ in 0..600 {
        sqlx::query(
            "WITH next AS (SELECT id FROM inbox WHERE state = 'pending'
                            ORDER BY created_at LIMIT 1)
             UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(),
                              claimed_at = now(), lease_expires_at = now() + interval '1 minute'
               FROM next WHERE inbox.id = next.id",
        )
        .execute(pool)
        .await
        .expect("claim one");
        sqlx::query(
            "UPDATE inbox SET state = 'processed', processed_at = now(), claim_token = NULL,
                              lease_expires_at = NULL
              WHERE state = 'processing'",
        )
        .execute(pool)
        .await
        .expect("complete it");
    }
    sqlx::query_as(
        "WITH next AS (SELECT id FROM inbox WHERE state = 'pending' ORDER BY created_at LIMIT 1)
         UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(),
                          claimed_at = now(), lease_expires_at = now() + interval '1 minute'
           FROM next WHERE inbox.id = next.id
         RETURNING inbox.id, inbox.claim_token",
    )
    .fetch_one(pool)
    .await
    .expect("claim the row to write to")
}

/// The name of the index that the plan of `statement` reads `inbox` through (None: no index).
async fn index_used(
    pool: &PgPool,
    statement: &Positional,
    id: Uuid,
    token: Uuid,
) -> Option<String> {
    let mut query = sqlx::query(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (FORMAT JSON) {}",
        statement.sql
    )));
    for name in &statement.names {
        query = match name.as_str() {
            "id" => query.bind(id),
            "token" => query.bind(token),
            "lease_ms" | "delay_ms" => query.bind(30_000_i64),
            "error" => query.bind("boom"),
            other => panic!("unexpected parameter :{other}"),
        };
    }
    let plan: serde_json::Value = query.fetch_one(pool).await.expect("explain").get(0);
    index_name(&plan)
}

fn index_name(node: &serde_json::Value) -> Option<String> {
    match node {
        serde_json::Value::Object(map) => map
            .get("Index Name")
            .and_then(|n| n.as_str())
            .map(str::to_owned)
            .or_else(|| map.values().find_map(index_name)),
        serde_json::Value::Array(items) => items.iter().find_map(index_name),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_writes_find_their_row_by_the_primary_key() {
    let db = TestDb::new().await;
    let (id, token) = busy_history(&db.pool).await;
    let worker = worker_statements(&Schema::default()).expect("the default schema renders");
    for name in FENCED {
        let contract = to_positional(&contract_file(&format!("{name}.sql")));
        let ours = &worker
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("the worker has no {name}"))
            .1;
        for (whose, statement) in [("contract", &contract), ("worker", ours)] {
            assert_eq!(
                index_used(&db.pool, statement, id, token).await.as_deref(),
                Some("inbox_pkey"),
                "{whose} {name}"
            );
        }
    }
    db.drop_db().await;
}
