//! The claim's short way (examples/pull/sql/postgresql/claim.sql): when the window of oldest due
//! rows and the expired leases already yield a whole batch that the aggregate walk could not
//! improve on, the walk is skipped. These tests hold it to that promise: on many generated inbox
//! states the claim returns exactly the rows of the full claim (`tests/fixtures/full_claim.sql`,
//! the claim as it was before, which always walks), and the walk is skipped only where it may be.

mod common;

use common::{TestDb, contract_file};
use queuebox_inbox::named::{Positional, to_positional};
use queuebox_inbox::{Schema, worker_statements};
use sqlx::{PgPool, Row};
use uuid::Uuid;

fn full_claim() -> Positional {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/full_claim.sql");
    to_positional(&std::fs::read_to_string(path).expect("reading the full claim"))
}

/// The claim of the SQL contract, and the worker's own rendering of it.
fn claims() -> [(&'static str, Positional); 2] {
    [
        ("claim.sql", to_positional(&contract_file("claim.sql"))),
        (
            "the worker's claim",
            worker_statements(&Schema::default())
                .expect("the default schema renders")
                .into_iter()
                .find_map(|(name, claim)| (name == "claim").then_some(claim))
                .expect("the worker has a claim"),
        ),
    ]
}

/// Binds the claim's parameters for `batch` on source `orders`; `prefix` goes before the SQL.
fn bound(
    p: &Positional,
    prefix: &str,
    batch: i32,
) -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let mut query = sqlx::query(sqlx::AssertSqlSafe(format!("{prefix}{}", p.sql)));
    for name in &p.names {
        query = match name.as_str() {
            "source" => query.bind("orders"),
            "batch" => query.bind(batch),
            "lease_ms" => query.bind(60_000_i64),
            "cand_limit" => query.bind((3 * batch).clamp(50, 500)),
            other => panic!("unexpected parameter :{other}"),
        };
    }
    query
}

/// The ids one claim takes, sorted; the claim is rolled back, so the inbox is left as it was.
async fn claimed_ids(pool: &PgPool, sql: &Positional, batch: i32) -> Vec<Uuid> {
    let mut tx = pool.begin().await.expect("begin");
    let mut ids: Vec<Uuid> = bound(sql, "", batch)
        .fetch_all(&mut *tx)
        .await
        .expect("claim")
        .iter()
        .map(|r| r.get("id"))
        .collect();
    tx.rollback().await.expect("rollback");
    ids.sort();
    ids
}

/// How many times the claim ran the aggregate walk's first step (0 = the walk was skipped).
async fn walk_runs(pool: &PgPool, sql: &Positional, batch: i32) -> u64 {
    let mut tx = pool.begin().await.expect("begin");
    let plan: serde_json::Value = bound(sql, "EXPLAIN (ANALYZE, FORMAT JSON) ", batch)
        .fetch_one(&mut *tx)
        .await
        .expect("explain the claim")
        .get(0);
    tx.rollback().await.expect("rollback");
    recursive_union_loops(&plan).expect("the claim's plan has the walk's Recursive Union")
}

fn recursive_union_loops(node: &serde_json::Value) -> Option<u64> {
    match node {
        serde_json::Value::Object(map) => {
            if map.get("Node Type").and_then(|t| t.as_str()) == Some("Recursive Union") {
                return map.get("Actual Loops").and_then(|l| l.as_u64());
            }
            map.values().find_map(recursive_union_loops)
        }
        serde_json::Value::Array(items) => items.iter().find_map(recursive_union_loops),
        _ => None,
    }
}

/// A small deterministic generator (64-bit LCG), so that a failure names a state to replay.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Fills the inbox with a generated mix: pending rows (due, or due in an hour), rows in flight
/// under a live lease, rows whose lease ran out, processed rows, rows without an aggregate, and
/// rows of another source. Times are seconds away from now, so the two claims of a comparison,
/// a few milliseconds apart, see every row the same way.
async fn seed(pool: &PgPool, seed: u64) {
    let mut rng = Lcg(seed);
    let rows = 20 + rng.below(200);
    let aggregates = 1 + rng.below(40);
    // Some states put most rows on one aggregate, the case the walk exists for.
    let skew = rng.below(3) == 0;
    let (mut sources, mut keys, mut aggs, mut states) = (vec![], vec![], vec![], vec![]);
    let (mut due_s, mut created_s, mut lease_s) = (vec![], vec![], vec![]);
    for n in 0..rows {
        let agg = match rng.below(10) {
            0 => None,
            _ if skew && rng.below(4) != 0 => Some("hot".to_owned()),
            _ => Some(format!("a{}", rng.below(aggregates))),
        };
        let (state, due, lease): (&str, i64, Option<i64>) = match rng.below(20) {
            0..=12 => ("pending", -(1 + rng.below(600) as i64), None),
            13 => ("pending", 3600, None),
            14 | 15 => ("processing", -(1 + rng.below(600) as i64), Some(3600)),
            16 | 17 => (
                "processing",
                -(1 + rng.below(600) as i64),
                Some(-(1 + rng.below(600) as i64)),
            ),
            _ => ("processed", -(1 + rng.below(600) as i64), None),
        };
        sources.push(if rng.below(15) == 0 {
            "other"
        } else {
            "orders"
        });
        keys.push(format!("k-{n}"));
        aggs.push(agg);
        states.push(state);
        due_s.push(due);
        created_s.push(-(1 + rng.below(600) as i64));
        lease_s.push(lease);
    }
    sqlx::query("TRUNCATE inbox")
        .execute(pool)
        .await
        .expect("truncate");
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, state,
                            scheduled_at, created_at, claim_token, lease_expires_at)
         SELECT s, k, a, '{}', 'pull', st, now() + d * interval '1 second',
                now() + c * interval '1 second',
                CASE WHEN st = 'processing' THEN gen_random_uuid() END,
                now() + l * interval '1 second'
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::int8[],
                       $7::int8[]) AS u(s, k, a, st, d, c, l)",
    )
    .bind(&sources)
    .bind(&keys)
    .bind(&aggs)
    .bind(&states)
    .bind(&due_s)
    .bind(&created_s)
    .bind(&lease_s)
    .execute(pool)
    .await
    .expect("seed the inbox");
    sqlx::query("ANALYZE inbox")
        .execute(pool)
        .await
        .expect("analyze");
}

/// How [`insert_series`] gives its rows an aggregate.
enum Spread {
    /// `a-0`, `a-1`, ... `a-(n-1)`, in turn.
    RoundRobin(i32),
    /// The same aggregate for every row.
    One(&'static str),
}

/// Inserts `rows` due pending rows of `orders`, keys `<prefix>1..`, the first `age_ms` old and
/// each next one `step_ms` younger.
async fn insert_series(
    pool: &PgPool,
    prefix: &str,
    spread: Spread,
    rows: i32,
    age_ms: i64,
    step_ms: i64,
) {
    let (aggregate, modulo) = match spread {
        Spread::RoundRobin(n) => ("a-", n),
        Spread::One(name) => (name, 0),
    };
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption,
                            created_at, scheduled_at)
         SELECT 'orders', $1 || g, CASE WHEN $3 > 0 THEN $2 || (g % $3) ELSE $2 END, '{}',
                'pull', now() - ($5 - g * $6) * interval '1 millisecond',
                now() - ($5 - g * $6) * interval '1 millisecond'
           FROM generate_series(1, $4) g",
    )
    .bind(prefix)
    .bind(aggregate)
    .bind(modulo)
    .bind(rows)
    .bind(age_ms)
    .bind(step_ms)
    .execute(pool)
    .await
    .expect("insert a series of rows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_takes_the_same_rows_as_the_full_claim() {
    let db = TestDb::new().await;
    let (full, claims) = (full_claim(), claims());
    let (mut compared, mut skipped, mut walked) = (0, 0, 0);
    for state in 1..=60_u64 {
        seed(&db.pool, state).await;
        for batch in [1, 3, 10, 40] {
            let expected = claimed_ids(&db.pool, &full, batch).await;
            for (name, claim) in &claims {
                let got = claimed_ids(&db.pool, claim, batch).await;
                assert_eq!(got, expected, "{name}, state {state}, batch {batch}");
                compared += 1;
                if walk_runs(&db.pool, claim, batch).await == 0 {
                    skipped += 1;
                } else {
                    walked += 1;
                }
            }
        }
    }
    // Both ways were taken, so both were compared.
    assert!(
        skipped > 0 && walked > 0,
        "{compared} claims: {skipped} skipped the walk, {walked} walked"
    );
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_walk_runs_only_when_the_oldest_rows_cannot_fill_the_batch() {
    let db = TestDb::new().await;
    // 60 aggregates, two rows each, round robin: the 50 oldest rows are 50 aggregates.
    insert_series(&db.pool, "k-", Spread::RoundRobin(60), 120, 3_600_000, 1).await;
    for (name, claim) in &claims() {
        assert_eq!(
            walk_runs(&db.pool, claim, 10).await,
            0,
            "{name}, round robin"
        );
        assert_eq!(claimed_ids(&db.pool, claim, 10).await.len(), 10);
    }

    // One aggregate owns the 50 oldest rows: the window yields one row, so the claim walks.
    insert_series(&db.pool, "hot-", Spread::One("hot"), 50, 7_200_000, 1).await;
    for (name, claim) in &claims() {
        assert!(walk_runs(&db.pool, claim, 10).await > 0, "{name}, burst");
        assert_eq!(claimed_ids(&db.pool, claim, 10).await.len(), 10);
    }
    db.drop_db().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_behind_the_window_does_not_displace_an_older_head() {
    let db = TestDb::new().await;
    // The window (the 50 oldest due rows) is all `hot`, so ranking it yields hot's head only.
    // Behind it: `y`'s only row, then `x`'s row whose lease ran out. With a batch of 2, the
    // window and the expired lease alone would fill the batch with hot and x; but y's head is
    // older than x's row, so the claim must walk and take hot and y.
    insert_series(&db.pool, "hot-", Spread::One("hot"), 60, 7_200_000, 1_000).await;
    let y = common::insert_row(&db.pool, "orders", "y-1", Some("y"), 1_800_000).await;
    let x = common::insert_row(&db.pool, "orders", "x-1", Some("x"), 900_000).await;
    sqlx::query(
        "UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(),
                          lease_expires_at = now() - interval '1 minute'
          WHERE id = $1",
    )
    .bind(x)
    .execute(&db.pool)
    .await
    .expect("expire x's lease");
    let hot_head: Uuid = sqlx::query_scalar("SELECT id FROM inbox WHERE idempotency_key = 'hot-1'")
        .fetch_one(&db.pool)
        .await
        .expect("hot's head");

    let mut expected = vec![hot_head, y];
    expected.sort();
    assert_eq!(claimed_ids(&db.pool, &full_claim(), 2).await, expected);
    for (name, claim) in &claims() {
        assert_eq!(claimed_ids(&db.pool, claim, 2).await, expected, "{name}");
        assert!(walk_runs(&db.pool, claim, 2).await > 0, "{name}");
    }
    db.drop_db().await;
}
