//! The PostgreSQL outbox store against a real server: the key-walk claim, the fenced renew and
//! finish, the reclaim of expired leases and the pending gauges. Every test runs on a fresh database
//! and checks its outcome by reading the table back, not only by what the store returns.
//!
//! The port's contract is checked by the store conformance suite (`tests/conformance.rs`, bodies
//! in `conformance/src/store/outbox.rs`); this file keeps only what that suite does not: leases and
//! delays on the database clock, the key walk and its cursor, rows sharing one transaction's
//! `created_at`, the per-claim keyed/unkeyed alternation, the scan bound, mixed finish and renew
//! batches, the columns each finish writes, statement plans and settings, two replicas at once and
//! a renamed schema.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{TestDb, renamed_schema};
use queuebox_domain::mapping::SchemaNames;
use queuebox_ports::outbox::{
    Claim, ClaimRequest, ClaimedRow, FencedFinish, Finish, OutboxStore, PendingStats,
};
use queuebox_postgres::{PgOutboxStore, PostgresDatabase, Statements, connect};
use sqlx::{AssertSqlSafe, PgConnection, Row};
use uuid::Uuid;

/// A long lease: no test row loses it by accident.
const LONG_LEASE: Duration = Duration::from_secs(300);

/// How long any wait for a database condition may take before the test fails.
const WAIT: Duration = Duration::from_secs(10);

/// A fresh database with the bundled migrations, a store on it and a session to inspect it.
type Fixture = common::StoreFixture<PgOutboxStore>;

impl Fixture {
    async fn new() -> Self {
        Self::open(PostgresDatabase::outbox_store).await
    }

    /// Inserts one due row and returns its id.
    async fn insert(&mut self, topic: &str, key: Option<&str>, payload: &str) -> Uuid {
        self.insert_at(topic, key, payload, 0).await
    }

    /// Inserts one row due `delay_ms` after the database clock (negative: in the past).
    async fn insert_at(
        &mut self,
        topic: &str,
        key: Option<&str>,
        payload: &str,
        delay_ms: i64,
    ) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO outbox (topic, key, payload, max_attempts, scheduled_at) \
             VALUES ($1, $2, $3::jsonb, 5, now() + $4 * interval '1 millisecond') RETURNING id",
        )
        .bind(topic)
        .bind(key)
        .bind(payload)
        .bind(delay_ms)
        .fetch_one(&mut self.session)
        .await
        .expect("insert an outbox row")
    }

    /// Runs SQL on the inspection session.
    async fn exec(&mut self, sql: &str) {
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&mut self.session)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
    }

    async fn view(&mut self, id: Uuid) -> RowView {
        RowView::read(&mut self.session, "outbox", id).await
    }

    async fn claim(&self, limit: u32, cursor: &str) -> Claim {
        claim_with(&self.store, limit, LONG_LEASE, cursor).await
    }

    async fn finish(&self, writes: &[FencedFinish]) -> Vec<bool> {
        self.store.finish(writes).await.expect("finish")
    }

    async fn finish_sent(&self, row: &ClaimedRow) -> bool {
        self.finish(&[sent(row)]).await[0]
    }
}

async fn claim_with(store: &PgOutboxStore, limit: u32, lease: Duration, cursor: &str) -> Claim {
    claim_released(store, limit, lease, cursor, Vec::new()).await
}

async fn claim_released(
    store: &PgOutboxStore,
    limit: u32,
    lease: Duration,
    cursor: &str,
    released_keys: Vec<String>,
) -> Claim {
    store
        .claim(&ClaimRequest {
            limit,
            lease,
            key_cursor: cursor.to_owned(),
            released_keys,
        })
        .await
        .expect("claim")
}

fn sent(row: &ClaimedRow) -> FencedFinish {
    FencedFinish {
        id: row.id,
        claim_token: row.claim_token,
        finish: Finish::Sent,
    }
}

fn keys_of(claim: &Claim) -> Vec<Option<String>> {
    let mut keys: Vec<Option<String>> = claim.rows.iter().map(|r| r.key.clone()).collect();
    keys.sort();
    keys
}

fn ids_of(claim: &Claim) -> HashSet<Uuid> {
    claim.rows.iter().map(|r| r.id).collect()
}

/// One row as the table holds it; every time is relative to the database clock at the read.
#[derive(Debug)]
struct RowView {
    state: String,
    claim_token: Option<Uuid>,
    attempt: i32,
    last_error: Option<String>,
    /// lease_expires_at - now(), in seconds.
    lease_left: Option<f64>,
    /// now() - claimed_at, in seconds.
    claimed_ago: Option<f64>,
    /// now() - updated_at, in seconds.
    updated_ago: f64,
    /// scheduled_at - now(), in seconds.
    scheduled_in: f64,
    /// lease_expires_at - updated_at: the lease the last write granted, both on one clock reading.
    lease_granted: Option<f64>,
    /// scheduled_at - updated_at: the retry delay the last write set.
    delay_granted: f64,
}

impl RowView {
    async fn read(session: &mut PgConnection, table: &str, id: Uuid) -> Self {
        let sql = format!(
            "SELECT state, claim_token, attempt, last_error, \
                    EXTRACT(EPOCH FROM lease_expires_at - now())::float8 AS lease_left, \
                    EXTRACT(EPOCH FROM now() - claimed_at)::float8 AS claimed_ago, \
                    EXTRACT(EPOCH FROM now() - updated_at)::float8 AS updated_ago, \
                    EXTRACT(EPOCH FROM scheduled_at - now())::float8 AS scheduled_in, \
                    EXTRACT(EPOCH FROM lease_expires_at - updated_at)::float8 AS lease_granted, \
                    EXTRACT(EPOCH FROM scheduled_at - updated_at)::float8 AS delay_granted \
               FROM {table} WHERE id = $1"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_one(session)
            .await
            .expect("read the row back");
        Self {
            state: row.get("state"),
            claim_token: row.get("claim_token"),
            attempt: row.get("attempt"),
            last_error: row.get("last_error"),
            lease_left: row.get("lease_left"),
            claimed_ago: row.get("claimed_ago"),
            updated_ago: row.get("updated_ago"),
            scheduled_in: row.get("scheduled_in"),
            lease_granted: row.get("lease_granted"),
            delay_granted: row.get("delay_granted"),
        }
    }
}

fn close_to(actual: f64, expected: f64, tolerance: f64) -> bool {
    (actual - expected).abs() <= tolerance
}

/// Polls the database clock until the row's lease has passed (never a blind sleep).
async fn wait_until_lease_passed(session: &mut PgConnection, id: Uuid) {
    let deadline = Instant::now() + WAIT;
    loop {
        let passed: Option<bool> =
            sqlx::query_scalar("SELECT now() > lease_expires_at FROM outbox WHERE id = $1")
                .bind(id)
                .fetch_one(&mut *session)
                .await
                .expect("read the lease");
        if passed == Some(true) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the lease of {id} did not pass within {WAIT:?} ({passed:?})"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn count_where(session: &mut PgConnection, condition: &str) -> i64 {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT count(*) FROM outbox WHERE {condition}"
    )))
    .fetch_one(session)
    .await
    .expect("count rows")
}

// ------------------------------------------------------------------------------------------------
// 1. The claim itself
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn claim_moves_a_due_row_to_processing_with_a_token_and_a_lease_on_the_database_clock() {
    let mut fx = Fixture::new().await;
    let id = fx.insert("order.created", Some("k"), "{}").await;
    // Give the row distinctive columns, and an old updated_at so the claim visibly moves it.
    let row_sql = format!(
        "UPDATE outbox SET payload = '{{\"orderId\": 42, \"lines\": [1, 2]}}', \
                headers = '{{\"X-Tenant\": \"acme\", \"X-Num\": 7}}', aggregate_type = 'order', \
                attempt = 2, max_attempts = 9, updated_at = now() - interval '1 hour', \
                created_at = '2026-09-01T12:30:05.042Z' \
          WHERE id = '{id}'"
    );
    fx.exec(&row_sql).await;
    let sequence: i64 = sqlx::query_scalar("SELECT sequence FROM outbox WHERE id = $1")
        .bind(id)
        .fetch_one(&mut fx.session)
        .await
        .expect("sequence");

    let lease = Duration::from_secs(30);
    let claim = claim_with(&fx.store, 10, lease, "").await;
    assert_eq!(claim.rows.len(), 1, "{claim:?}");
    let row = &claim.rows[0];
    assert_eq!(row.id, id);
    assert_eq!(row.topic, "order.created");
    assert_eq!(row.key.as_deref(), Some("k"));
    assert_eq!(row.aggregate_type.as_deref(), Some("order"));
    let payload: serde_json::Value = serde_json::from_str(&row.payload).expect("payload is JSON");
    assert_eq!(payload, serde_json::json!({"orderId": 42, "lines": [1, 2]}));
    let mut headers = row.headers.clone();
    headers.sort();
    assert_eq!(
        headers,
        vec![
            ("X-Num".to_owned(), "7".to_owned()),
            ("X-Tenant".to_owned(), "acme".to_owned())
        ]
    );
    assert_eq!(row.attempt, 2);
    assert_eq!(row.max_attempts, 9);
    assert_eq!(row.sequence, sequence);
    assert_eq!(
        queuebox_domain::timestamp::iso_utc_millis(row.created_at),
        "2026-09-01T12:30:05.042Z"
    );

    let view = fx.view(id).await;
    assert_eq!(view.state, "processing");
    assert_eq!(view.claim_token, Some(row.claim_token));
    assert!(!row.claim_token.is_nil());
    // The lease is exactly the requested length on the claim's own clock reading ...
    let granted = view.lease_granted.expect("a lease");
    assert!(close_to(granted, 30.0, 0.001), "lease granted {granted}");
    // ... and that reading is the database's current time, not an hour-old updated_at.
    assert!(view.updated_ago < 5.0, "updated_at did not move: {view:?}");
    let claimed_ago = view.claimed_ago.expect("claimed_at set");
    assert!((0.0..5.0).contains(&claimed_ago), "{view:?}");
    let lease_left = view.lease_left.expect("lease");
    assert!(lease_left > 25.0 && lease_left <= 30.0, "{view:?}");

    // A second claim finds nothing: the row is taken.
    assert!(fx.claim(10, "").await.rows.is_empty());
    fx.done().await;
}

#[tokio::test]
async fn a_row_scheduled_in_the_future_waits_until_its_time() {
    let mut fx = Fixture::new().await;
    let keyed = fx.insert_at("t", Some("k"), "{}", 3_600_000).await;
    let unkeyed = fx.insert_at("t", None, "{}", 3_600_000).await;
    for _ in 0..2 {
        // Twice, so both the unkeyed-first and the keyed-first order of the claim are covered.
        assert!(fx.claim(10, "").await.rows.is_empty());
    }
    assert_eq!(fx.view(keyed).await.state, "pending");
    assert_eq!(fx.view(unkeyed).await.state, "pending");

    // Time passes (the schedule moves into the past): both are claimed.
    fx.exec("UPDATE outbox SET scheduled_at = now() - interval '1 millisecond'")
        .await;
    let claim = fx.claim(10, "").await;
    assert_eq!(ids_of(&claim), HashSet::from([keyed, unkeyed]));
    assert_eq!(fx.view(keyed).await.state, "processing");
    assert_eq!(fx.view(unkeyed).await.state, "processing");
    fx.done().await;
}

// ------------------------------------------------------------------------------------------------
// 3. Order per key
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn rows_of_one_key_go_one_at_a_time_in_insert_order() {
    let mut fx = Fixture::new().await;
    // One transaction: the three rows share created_at, only sequence orders them.
    fx.exec(
        "BEGIN;
         INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'k', '{\"step\":1}');
         INSERT INTO outbox (topic, key, payload) VALUES ('order.paid', 'k', '{\"step\":2}');
         INSERT INTO outbox (topic, key, payload) VALUES ('order.shipped', 'k', '{\"step\":3}');
         INSERT INTO outbox (topic, key, payload) VALUES ('order.closed', 'k', '{\"step\":4}');
         COMMIT;",
    )
    .await;
    let step = |row: &ClaimedRow| -> i64 {
        serde_json::from_str::<serde_json::Value>(&row.payload).expect("json")["step"]
            .as_i64()
            .expect("step")
    };

    let first = fx.claim(10, "").await;
    assert_eq!(first.rows.len(), 1, "only the head of k: {first:?}");
    let head = first.rows[0].clone();
    assert_eq!(step(&head), 1);

    // While the head is processing, k yields nothing.
    assert!(fx.claim(10, "").await.rows.is_empty());
    assert!(fx.claim(10, "").await.rows.is_empty());

    // Sent releases the next row.
    assert!(fx.finish_sent(&head).await);
    let second = fx.claim(10, "").await;
    assert_eq!(second.rows.len(), 1, "{second:?}");
    let second = second.rows[0].clone();
    assert_eq!(step(&second), 2);
    assert!(second.sequence > head.sequence);

    // A retry puts the row back to pending with a later schedule: it still heads k and holds it.
    let retried = fx
        .finish(&[FencedFinish {
            id: second.id,
            claim_token: second.claim_token,
            finish: Finish::Retry {
                attempt: 1,
                delay: Duration::from_secs(60),
                error: "HTTP 503".into(),
            },
        }])
        .await;
    assert_eq!(retried, vec![true]);
    assert_eq!(fx.view(second.id).await.state, "pending");
    for _ in 0..2 {
        let claim = fx.claim(10, "").await;
        assert!(
            claim.rows.is_empty(),
            "step 3 passed a waiting retry: {claim:?}"
        );
    }

    // The retry falls due: the same row comes back, with its attempt, before step 3.
    let due = format!(
        "UPDATE outbox SET scheduled_at = now() - interval '1 millisecond' WHERE id = '{}'",
        second.id
    );
    fx.exec(&due).await;
    let again = fx.claim(10, "").await;
    assert_eq!(again.rows.len(), 1, "{again:?}");
    let again = again.rows[0].clone();
    assert_eq!(again.id, second.id);
    assert_eq!(again.attempt, 1);
    assert_ne!(
        again.claim_token, second.claim_token,
        "a new claim, a new token"
    );

    // Dead releases the key: step 3 goes next.
    let dead = fx
        .finish(&[FencedFinish {
            id: again.id,
            claim_token: again.claim_token,
            finish: Finish::Dead {
                error: "gave up".into(),
            },
        }])
        .await;
    assert_eq!(dead, vec![true]);
    let third = fx.claim(10, "").await;
    assert_eq!(third.rows.len(), 1, "{third:?}");
    assert_eq!(step(&third.rows[0]), 3);
    fx.done().await;
}

#[tokio::test]
async fn rows_without_a_key_null_or_empty_take_part_in_no_order() {
    let mut fx = Fixture::new().await;
    let mut expected = HashSet::new();
    for _ in 0..3 {
        expected.insert(fx.insert("t", None, "{}").await);
        expected.insert(fx.insert("t", Some(""), "{}").await);
    }
    let claim = fx.claim(100, "").await;
    assert_eq!(ids_of(&claim), expected, "all six in one claim");
    assert_eq!(
        count_where(&mut fx.session, "state = 'processing'").await,
        6
    );
    // Same again with the claim serving keyed rows first this time (the order flips per claim).
    fx.exec("UPDATE outbox SET state = 'sent'").await;
    let mut expected = HashSet::new();
    for _ in 0..3 {
        expected.insert(fx.insert("t", None, "{}").await);
        expected.insert(fx.insert("t", Some(""), "{}").await);
    }
    let claim = fx.claim(100, "").await;
    assert_eq!(ids_of(&claim), expected);
    fx.done().await;
}

// ------------------------------------------------------------------------------------------------
// 4. Limit, batches across keys, the cursor
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_limit_caps_a_claim_and_a_batch_takes_one_head_per_key() {
    let mut fx = Fixture::new().await;
    // 8 keys of 3 rows each, plus 4 unkeyed rows.
    fx.exec(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 't', 'key-' || k, '{}'::jsonb FROM generate_series(1, 8) k, generate_series(1, 3) n
          ORDER BY k, n;
         INSERT INTO outbox (topic, key, payload) SELECT 't', NULL, '{}'::jsonb FROM generate_series(1, 4);",
    )
    .await;

    let small = fx.claim(3, "").await;
    assert_eq!(small.rows.len(), 3, "{small:?}");
    assert_eq!(
        count_where(&mut fx.session, "state = 'processing'").await,
        3
    );
    fx.exec("UPDATE outbox SET state = 'pending', claim_token = NULL, lease_expires_at = NULL")
        .await;

    for _ in 0..2 {
        // Both halves of the keyed/unkeyed alternation.
        let claim = fx.claim(100, "").await;
        let keyed: Vec<&ClaimedRow> = claim.rows.iter().filter(|r| r.key.is_some()).collect();
        let unkeyed = claim.rows.len() - keyed.len();
        assert_eq!(keyed.len(), 8, "one head per key: {claim:?}");
        let distinct: HashSet<_> = keyed.iter().map(|r| r.key.clone()).collect();
        assert_eq!(distinct.len(), 8);
        assert_eq!(unkeyed, 4);
        // Each is the lowest sequence of its key among the unfinished rows.
        for row in &keyed {
            let lowest: i64 = sqlx::query_scalar(
                "SELECT min(sequence) FROM outbox WHERE key = $1 AND state IN ('pending', 'processing')",
            )
            .bind(row.key.as_deref())
            .fetch_one(&mut fx.session)
            .await
            .expect("min");
            assert_eq!(row.sequence, lowest, "{row:?}");
        }
        let writes: Vec<FencedFinish> = claim.rows.iter().map(sent).collect();
        assert!(fx.finish(&writes).await.iter().all(|applied| *applied));
        fx.insert_many_unkeyed(4).await;
    }
    fx.done().await;
}

impl Fixture {
    async fn insert_many_unkeyed(&mut self, n: i32) {
        self.exec(&format!(
            "INSERT INTO outbox (topic, key, payload) SELECT 't', NULL, '{{}}'::jsonb FROM generate_series(1, {n})"
        ))
        .await;
    }
}

#[tokio::test]
async fn the_cursor_gives_every_ready_key_its_turn_before_any_repeats() {
    let mut fx = Fixture::new().await;
    // 5 keys, 4 rows each: every key stays ready after its head is sent.
    fx.exec(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 't', k, '{}'::jsonb FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e']) k, generate_series(1, 4) n
          ORDER BY k, n",
    )
    .await;
    let mut cursor = String::new();
    let mut order: Vec<String> = Vec::new();
    for _ in 0..5 {
        let claim = fx.claim(2, &cursor).await;
        assert_eq!(claim.rows.len(), 2, "{claim:?}");
        for row in &claim.rows {
            order.push(row.key.clone().expect("keyed"));
            assert!(fx.finish_sent(row).await);
        }
        cursor = claim.next_key_cursor.clone();
    }
    // Ten claimed heads: the keys in key order, twice, the wrap happening inside the third claim.
    assert_eq!(
        order,
        ["a", "b", "c", "d", "e", "a", "b", "c", "d", "e"],
        "each key once before any key repeats"
    );
    fx.done().await;
}

#[tokio::test]
async fn the_walk_wraps_to_keys_before_the_cursor_in_the_same_claim() {
    let mut fx = Fixture::new().await;
    fx.insert("t", Some("a"), "{}").await;
    fx.insert("t", Some("b"), "{}").await;
    fx.insert("t", Some("y"), "{}").await;
    // Cursor "m": the walk finds "y", reaches the end with room left, and wraps to "a" and "b".
    let claim = fx.claim(10, "m").await;
    assert_eq!(
        keys_of(&claim),
        vec![Some("a".into()), Some("b".into()), Some("y".into())]
    );
    // The wrapped walk ran out of keys too, so the next walk starts from the first key.
    assert_eq!(claim.next_key_cursor, "");

    // A cursor past every key: still all ready keys in one claim.
    fx.insert("t", Some("c"), "{}").await;
    let claim = fx.claim(10, "zzz").await;
    assert_eq!(keys_of(&claim), vec![Some("c".into())]);

    // A wrapped walk that fills the batch hands back the key it stopped at.
    fx.insert("t", Some("d"), "{}").await;
    fx.insert("t", Some("e"), "{}").await;
    fx.insert("t", Some("f"), "{}").await;
    let claim = fx.claim(2, "x").await;
    assert_eq!(keys_of(&claim), vec![Some("d".into()), Some("e".into())]);
    assert_eq!(claim.next_key_cursor, "e");
    let claim = fx.claim(2, &claim.next_key_cursor).await;
    assert_eq!(keys_of(&claim), vec![Some("f".into())]);

    // The wrap and the walk before it are one statement: after the wrap the walk stops at the
    // cursor instead of meeting the keys after it again (whose heads it would count as ready a
    // second time and so end at the limit, handing back a cursor, with two rows claimed).
    fx.insert("t", Some("g"), "{}").await;
    fx.insert("t", Some("z"), "{}").await;
    let claim = fx.claim(3, "m").await;
    assert_eq!(keys_of(&claim), vec![Some("g".into()), Some("z".into())]);
    assert_eq!(claim.next_key_cursor, "", "the walk ended at the cursor");
    fx.done().await;
}

// ------------------------------------------------------------------------------------------------
// 5. Fairness: hot keys, blocked keys, the scan bound
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_hot_key_does_not_starve_the_other_keys() {
    let mut fx = Fixture::new().await;
    // The hot key sorts first, so every other key lies "behind" its 5,000 rows.
    fx.exec(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 't', 'a-hot', jsonb_build_object('n', n) FROM generate_series(1, 5000) n ORDER BY n;
         INSERT INTO outbox (topic, key, payload)
         SELECT 't', 'other-' || lpad(k::text, 2, '0'), '{}'::jsonb
           FROM generate_series(1, 10) k, generate_series(1, 10) n ORDER BY k, n;",
    )
    .await;
    let claim = fx.claim(100, "").await;
    assert_eq!(claim.rows.len(), 11, "1 hot head + 10 others: {claim:?}");
    let keys: HashSet<_> = claim.rows.iter().map(|r| r.key.clone()).collect();
    assert_eq!(keys.len(), 11);
    let hot = claim
        .rows
        .iter()
        .find(|r| r.key.as_deref() == Some("a-hot"))
        .expect("the hot head");
    let hot_first: i64 = sqlx::query_scalar("SELECT min(sequence) FROM outbox WHERE key = 'a-hot'")
        .fetch_one(&mut fx.session)
        .await
        .expect("min");
    assert_eq!(hot.sequence, hot_first);
    assert_eq!(
        count_where(&mut fx.session, "state = 'processing'").await,
        11
    );
    fx.done().await;
}

#[tokio::test]
async fn a_hot_key_moves_on_as_soon_as_its_head_is_finished_and_the_walk_keeps_its_pace() {
    // One key holds most of the backlog; 40 other keys wait too. The claimer finishes each batch
    // and names the keys it freed in its next claim, as the dispatcher does. The hot key must get a
    // row in every claim after its first (not one per rotation over all 41 keys), its rows in
    // order, and the walk must still give every other key its turn within the rotation that the
    // other half of each claim allows.
    let mut fx = Fixture::new().await;
    fx.exec(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 't', 'm-hot', jsonb_build_object('n', n) FROM generate_series(1, 200) n ORDER BY n;
         INSERT INTO outbox (topic, key, payload)
         SELECT 't', 'other-' || lpad(k::text, 2, '0'), '{}'::jsonb
           FROM generate_series(1, 40) k, generate_series(1, 5) n ORDER BY k, n;",
    )
    .await;
    let limit: u32 = 6;
    let mut cursor = String::new();
    let mut released: Vec<String> = Vec::new();
    let mut streaks: HashMap<String, u32> = HashMap::new();
    let mut hot_sequences: Vec<i64> = Vec::new();
    let mut claims_with_hot = 0;
    let mut first_turn: HashMap<String, usize> = HashMap::new();
    let claims = 20;
    for round in 0..claims {
        // The store probes the first half of the named keys; only those can extend a streak.
        released.truncate(limit.div_ceil(2) as usize);
        let claim = claim_released(&fx.store, limit, LONG_LEASE, &cursor, released.clone()).await;
        cursor = claim.next_key_cursor.clone();
        assert!(claim.rows.len() <= limit as usize);
        let keys: HashSet<_> = claim.rows.iter().map(|r| r.key.clone()).collect();
        assert_eq!(keys.len(), claim.rows.len(), "one row per key: {claim:?}");
        for row in &claim.rows {
            let key = row.key.clone().expect("keyed");
            if key == "m-hot" {
                hot_sequences.push(row.sequence);
            }
            first_turn.entry(key).or_insert(round);
        }
        if claim.rows.iter().any(|r| r.key.as_deref() == Some("m-hot")) {
            claims_with_hot += 1;
        }
        let writes: Vec<FencedFinish> = claim.rows.iter().map(sent).collect();
        assert_eq!(fx.finish(&writes).await, vec![true; writes.len()]);
        // The dispatcher names the freed keys longest streak first (a key named in the last claim
        // and freed again), as `Released` does. The walk runs beside the freed keys' probe and may
        // lock the hot key's head first; the streak still carries the key into the next claim.
        let mut freed: Vec<(String, u32)> = claim
            .rows
            .iter()
            .filter_map(|r| r.key.clone())
            .map(|key| {
                let streak = if released.contains(&key) {
                    streaks.get(&key).copied().unwrap_or(0) + 1
                } else {
                    0
                };
                (key, streak)
            })
            .collect();
        freed.sort_by_key(|(_, streak)| std::cmp::Reverse(*streak));
        streaks = freed.iter().cloned().collect();
        released = freed.into_iter().map(|(key, _)| key).collect();
    }
    assert!(
        claims_with_hot >= claims - 1,
        "the hot key got a row in only {claims_with_hot} of {claims} claims"
    );
    let mut sorted = hot_sequences.clone();
    sorted.sort_unstable();
    assert_eq!(hot_sequences, sorted, "the hot key's rows left in order");
    // At least half of each claim (3 rows) goes to the walk over the 41 keys: every key's first
    // turn comes within ceil(41 / 3) = 14 claims.
    for k in 1..=40 {
        let key = format!("other-{k:02}");
        let round = first_turn.get(&key).copied();
        assert!(
            round.is_some_and(|round| round < 14),
            "{key} waited too long: first claimed in round {round:?}"
        );
    }
    fx.done().await;
}

#[tokio::test]
async fn the_walk_passes_keys_whose_heads_are_in_flight() {
    let mut fx = Fixture::new().await;
    // 300 keys of 2 rows; claim all 300 heads and keep them in flight.
    fx.exec(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 't', 'blocked-' || lpad(k::text, 4, '0'), '{}'::jsonb
           FROM generate_series(1, 300) k, generate_series(1, 2) n ORDER BY k, n",
    )
    .await;
    let held = fx.claim(300, "").await;
    assert_eq!(held.rows.len(), 300);
    // Ready keys that sort after every blocked key.
    fx.exec(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 't', 'ready-' || k, '{}'::jsonb FROM generate_series(1, 5) k",
    )
    .await;
    let claim = fx.claim(10, "").await;
    assert_eq!(keys_of(&claim).len(), 5, "{claim:?}");
    assert!(
        claim
            .rows
            .iter()
            .all(|r| r.key.as_deref().is_some_and(|k| k.starts_with("ready-"))),
        "no second row of a blocked key: {claim:?}"
    );
    fx.done().await;
}

/// Runs the released-keys claim statement by itself for `keys`, with a long lease.
async fn run_released_claim(
    session: &mut PgConnection,
    keys: &[String],
) -> Vec<sqlx::postgres::PgRow> {
    let statements = Statements::render(&SchemaNames::default()).expect("render");
    let lease = i64::try_from(LONG_LEASE.as_millis()).expect("lease in ms");
    sqlx::query(AssertSqlSafe(
        statements.outbox_claim_released.as_str().to_owned(),
    ))
    .bind(keys.to_vec())
    .bind(lease)
    .fetch_all(session)
    .await
    .expect("released claim")
}

#[tokio::test]
async fn the_released_claim_takes_each_named_key_s_due_free_head_once() {
    // The statement locks the heads at the address its probe read them at: it must still take only
    // a key's head, once even when the key is named twice, and pass a head in flight, a head not yet
    // due, a key with no row and a head another session holds locked or is rewriting.
    let mut fx = Fixture::new().await;
    fx.exec(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 't', k, jsonb_build_object('n', n)
           FROM unnest(ARRAY['twice', 'busy', 'locked']) k, generate_series(1, 3) n ORDER BY k, n;
         INSERT INTO outbox (topic, key, payload, scheduled_at)
         VALUES ('t', 'later', '{}', now() + interval '1 hour');
         UPDATE outbox SET state = 'processing', claim_token = gen_random_uuid(),
                lease_expires_at = now() + interval '5 minutes'
          WHERE key = 'busy' AND payload->>'n' = '1';",
    )
    .await;
    let mut other = fx.db.session().await;
    sqlx::raw_sql(
        "BEGIN; SELECT 1 FROM outbox WHERE key = 'locked' AND payload->>'n' = '1' FOR UPDATE",
    )
    .execute(&mut other)
    .await
    .expect("lock the head of 'locked' in another session");
    let named = ["twice", "busy", "twice", "later", "locked", "absent"].map(str::to_owned);
    let rows = run_released_claim(&mut fx.session, &named).await;
    let claimed: Vec<(String, String)> = rows
        .iter()
        .map(|row| {
            let key: String = row.get("key");
            let payload: String = row.get("payload");
            (key, payload)
        })
        .collect();
    assert_eq!(
        claimed,
        vec![("twice".to_owned(), r#"{"n": 1}"#.to_owned())],
        "only the head of 'twice', once"
    );
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut other)
        .await
        .expect("release the lock");
    // A head another session is rewriting is skipped; once the rewrite commits, the head is taken
    // at its new address.
    sqlx::raw_sql(
        "BEGIN; UPDATE outbox SET updated_at = now() WHERE key = 'locked' AND payload->>'n' = '1'",
    )
    .execute(&mut other)
    .await
    .expect("rewrite the head of 'locked'");
    let rows = run_released_claim(&mut fx.session, &["locked".to_owned()]).await;
    assert!(rows.is_empty(), "a head being rewritten is skipped");
    sqlx::raw_sql("COMMIT")
        .execute(&mut other)
        .await
        .expect("commit the rewrite");
    let rows = run_released_claim(&mut fx.session, &["locked".to_owned()]).await;
    let payloads: Vec<String> = rows.iter().map(|row| row.get("payload")).collect();
    assert_eq!(
        payloads,
        vec![r#"{"n": 1}"#.to_owned()],
        "the rewritten head, at its new address"
    );
    assert_eq!(
        count_where(&mut fx.session, "state = 'processing'").await,
        3
    );
    drop(other);
    fx.done().await;
}

#[tokio::test]
async fn the_scan_bound_ends_a_walk_and_the_cursor_carries_on_past_it() {
    let mut fx = Fixture::new().await;
    // 2,100 keys whose heads are in flight (more than the store's scan bound of 2,000), then 3
    // ready keys after them.
    fx.exec(
        "INSERT INTO outbox (topic, key, payload, state, claim_token, claimed_at, lease_expires_at)
         SELECT 't', 'blocked-' || lpad(k::text, 5, '0'), '{}'::jsonb, 'processing',
                gen_random_uuid(), now(), now() + interval '1 hour'
           FROM generate_series(1, 2100) k;
         INSERT INTO outbox (topic, key, payload)
         SELECT 't', 'ready-' || k, '{}'::jsonb FROM generate_series(1, 3) k;",
    )
    .await;
    let mut cursor = String::new();
    let mut claimed = Vec::new();
    let mut claims = 0;
    while claimed.is_empty() {
        let claim = fx.claim(10, &cursor).await;
        claims += 1;
        assert!(claims <= 3, "the cursor did not move past the blocked keys");
        if claim.rows.is_empty() {
            assert!(
                claim.next_key_cursor > cursor,
                "a bounded walk that claimed nothing must move the cursor on: {:?} -> {:?}",
                cursor,
                claim.next_key_cursor
            );
        }
        cursor = claim.next_key_cursor.clone();
        claimed = claim.rows;
    }
    // The first walk stops at the bound; the second carries on and finds the ready keys.
    assert_eq!(claims, 2);
    assert_eq!(claimed.len(), 3, "{claimed:?}");
    fx.done().await;
}

// ------------------------------------------------------------------------------------------------
// 6. Fences
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn finish_after_the_lease_expired_is_refused() {
    let mut fx = Fixture::new().await;
    let id = fx.insert("t", Some("k"), "{}").await;
    let claim = claim_with(&fx.store, 1, Duration::from_millis(1), "").await;
    let row = claim.rows[0].clone();
    wait_until_lease_passed(&mut fx.session, id).await;
    assert_eq!(fx.finish(&[sent(&row)]).await, vec![false]);
    let view = fx.view(id).await;
    assert_eq!(view.state, "processing", "unchanged: {view:?}");
    assert_eq!(view.claim_token, Some(row.claim_token));
    // A renewal cannot revive an expired lease either.
    let renewed = fx
        .store
        .renew(&[(row.id, row.claim_token)], LONG_LEASE)
        .await
        .expect("renew");
    assert_eq!(renewed, vec![false]);
    assert!(fx.view(id).await.lease_left.expect("lease") < 0.0);
    fx.done().await;
}

#[tokio::test]
async fn renew_extends_a_live_lease_and_refuses_a_wrong_token() {
    let mut fx = Fixture::new().await;
    let id = fx.insert("t", Some("k"), "{}").await;
    let other = fx.insert("t", Some("j"), "{}").await;
    let claim = claim_with(&fx.store, 10, Duration::from_secs(10), "").await;
    let row = claim
        .rows
        .iter()
        .find(|r| r.id == id)
        .expect("claimed")
        .clone();
    let other_row = claim
        .rows
        .iter()
        .find(|r| r.id == other)
        .expect("claimed")
        .clone();
    let before = fx.view(id).await.lease_left.expect("lease");
    assert!(before <= 10.0);

    let renewed = fx
        .store
        .renew(
            &[(row.id, row.claim_token), (other_row.id, Uuid::new_v4())],
            Duration::from_secs(120),
        )
        .await
        .expect("renew");
    assert_eq!(renewed, vec![true, false]);
    let after = fx.view(id).await.lease_left.expect("lease");
    assert!(
        after > 110.0 && after <= 120.0,
        "lease moved forward: {after}"
    );
    let untouched = fx.view(other).await.lease_left.expect("lease");
    assert!(untouched <= 10.0, "wrong token left the lease: {untouched}");
    // A renewed row keeps its claim: state and token unchanged.
    let view = fx.view(id).await;
    assert_eq!(view.state, "processing");
    assert_eq!(view.claim_token, Some(row.claim_token));
    // Nothing to renew is no error.
    assert!(
        fx.store
            .renew(&[], LONG_LEASE)
            .await
            .expect("renew")
            .is_empty()
    );
    fx.done().await;
}

#[tokio::test]
async fn a_second_finish_of_the_same_claim_is_refused() {
    let mut fx = Fixture::new().await;
    let id = fx.insert("t", Some("k"), "{}").await;
    let row = fx.claim(1, "").await.rows.remove(0);
    assert!(fx.finish_sent(&row).await);
    let dead_after_sent = fx
        .finish(&[FencedFinish {
            id,
            claim_token: row.claim_token,
            finish: Finish::Dead {
                error: "late".into(),
            },
        }])
        .await;
    assert_eq!(dead_after_sent, vec![false]);
    let view = fx.view(id).await;
    assert_eq!(view.state, "sent");
    assert_eq!(view.last_error, None);
    // Renewing a finished claim fails too.
    assert_eq!(
        fx.store
            .renew(&[(row.id, row.claim_token)], LONG_LEASE)
            .await
            .expect("renew"),
        vec![false]
    );
    fx.done().await;
}

#[tokio::test]
async fn a_batch_finish_reports_each_entry_on_its_own() {
    let mut fx = Fixture::new().await;
    for key in ["a", "b", "c", "d"] {
        fx.insert("t", Some(key), "{}").await;
    }
    let claim = fx.claim(10, "").await;
    let rows: HashMap<String, ClaimedRow> = claim
        .rows
        .iter()
        .map(|r| (r.key.clone().expect("keyed"), r.clone()))
        .collect();
    assert_eq!(rows.len(), 4);
    let (a, b, c, d) = (&rows["a"], &rows["b"], &rows["c"], &rows["d"]);
    let writes = vec![
        sent(a),
        FencedFinish {
            id: b.id,
            claim_token: Uuid::new_v4(),
            finish: Finish::Sent,
        },
        FencedFinish {
            id: c.id,
            claim_token: c.claim_token,
            finish: Finish::Retry {
                attempt: 1,
                delay: Duration::from_secs(5),
                error: "timeout".into(),
            },
        },
        FencedFinish {
            id: Uuid::new_v4(),
            claim_token: d.claim_token,
            finish: Finish::Sent,
        },
        FencedFinish {
            id: d.id,
            claim_token: d.claim_token,
            finish: Finish::Dead {
                error: "no route".into(),
            },
        },
    ];
    assert_eq!(
        fx.finish(&writes).await,
        vec![true, false, true, false, true]
    );
    assert_eq!(fx.view(a.id).await.state, "sent");
    assert_eq!(fx.view(b.id).await.state, "processing");
    assert_eq!(fx.view(c.id).await.state, "pending");
    assert_eq!(fx.view(d.id).await.state, "dead");
    // An empty batch is no error.
    assert!(fx.finish(&[]).await.is_empty());
    fx.done().await;
}

#[tokio::test]
async fn a_batch_with_a_stale_and_a_current_claim_of_one_row_reports_only_the_current_one() {
    // A row whose claim was lost (reclaimed, then claimed again) can reach one finish batch twice:
    // the old owner's write and the new owner's. Only the write under the current token applies,
    // and only it may report true; the old owner must learn that it lost the claim.
    let mut fx = Fixture::new().await;
    let id = fx.insert("t", Some("k"), "{}").await;
    let stale = claim_with(&fx.store, 1, Duration::from_millis(1), "")
        .await
        .rows
        .remove(0);
    wait_until_lease_passed(&mut fx.session, id).await;
    assert_eq!(fx.store.reclaim_expired().await.expect("reclaim"), 1);
    let current = fx.claim(1, "").await.rows.remove(0);
    assert_eq!(current.id, id);
    assert_ne!(current.claim_token, stale.claim_token);

    let applied = fx.finish(&[sent(&stale), sent(&current)]).await;
    assert_eq!(applied, vec![false, true]);
    assert_eq!(fx.view(id).await.state, "sent");

    // The same for a renewal batch.
    let id2 = fx.insert("t", Some("k2"), "{}").await;
    let stale = claim_with(&fx.store, 1, Duration::from_millis(1), "")
        .await
        .rows
        .remove(0);
    wait_until_lease_passed(&mut fx.session, id2).await;
    assert_eq!(fx.store.reclaim_expired().await.expect("reclaim"), 1);
    let current = fx.claim(1, "").await.rows.remove(0);
    assert_eq!(current.id, id2);
    let renewed = fx
        .store
        .renew(
            &[
                (stale.id, stale.claim_token),
                (current.id, current.claim_token),
            ],
            LONG_LEASE,
        )
        .await
        .expect("renew");
    assert_eq!(renewed, vec![false, true]);
    fx.done().await;
}

/// Reads `synchronous_commit` as the session sees it now.
async fn synchronous_commit(session: &mut PgConnection) -> String {
    sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(session)
        .await
        .expect("show synchronous_commit")
}

/// The claim statement `name` (`unkeyed`, `keyed` or `released`), bound to take up to ten due rows
/// (`released`: the head of the key `released`).
fn claim_statement(
    statements: &Statements,
    name: &str,
    lease: i64,
) -> sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let query = |sql: &str| sqlx::query(AssertSqlSafe(sql.to_owned()));
    match name {
        "unkeyed" => query(statements.outbox_claim_unkeyed.as_str())
            .bind(10_i32)
            .bind(lease),
        "keyed" => query(statements.outbox_claim_keyed.as_str())
            .bind("")
            .bind(10_i32)
            .bind(lease)
            .bind(100_i32),
        "released" => query(statements.outbox_claim_released.as_str())
            .bind(vec!["released".to_owned()])
            .bind(lease),
        other => panic!("no claim statement named {other}"),
    }
}

#[tokio::test]
async fn every_claim_statement_commits_without_waiting_for_its_flush_and_only_itself() {
    // Why a claim may skip the flush is written in outbox_claim_unkeyed.sql. Inside an explicit
    // transaction the statement's SET LOCAL is visible until the rollback; in autocommit it ends with
    // the statement, so the pooled session keeps its own setting for the finish that follows.
    let mut fx = Fixture::new().await;
    fx.insert("t", None, "{}").await;
    fx.insert("t", Some("walked"), "{}").await;
    fx.insert("t", Some("released"), "{}").await;
    let own = synchronous_commit(&mut fx.session).await;
    assert_ne!(own, "off", "the test server must flush commits by default");
    let statements = Statements::render(&SchemaNames::default()).expect("render");
    let lease = i64::try_from(LONG_LEASE.as_millis()).expect("lease in ms");
    let claim = |name: &str| claim_statement(&statements, name, lease);
    for name in ["unkeyed", "keyed", "released"] {
        fx.exec("BEGIN").await;
        let rows = claim(name)
            .fetch_all(&mut fx.session)
            .await
            .unwrap_or_else(|error| panic!("claim {name}: {error}"));
        let inside = synchronous_commit(&mut fx.session).await;
        fx.exec("ROLLBACK").await;
        assert_eq!(inside, "off", "the {name} claim waits for its flush");
        let claimed = rows
            .iter()
            .filter(|row| {
                row.try_get::<Option<Uuid>, _>("id")
                    .ok()
                    .flatten()
                    .is_some()
            })
            .count();
        assert!(claimed >= 1, "the {name} claim took no row");
    }
    // Run for real, after the checks above: a claim here takes the rows the next statement needs.
    for name in ["unkeyed", "keyed", "released"] {
        claim(name)
            .fetch_all(&mut fx.session)
            .await
            .unwrap_or_else(|error| panic!("claim {name}: {error}"));
        assert_eq!(
            synchronous_commit(&mut fx.session).await,
            own,
            "the {name} claim changed the session's setting"
        );
    }
    fx.done().await;
}

#[tokio::test]
async fn the_finish_probes_rows_by_id_even_when_statistics_say_nothing_is_processing() {
    // The table (large enough that a full scan costs more than the probes) is analyzed while no row
    // is processing, as after a quiet night: with the state
    // written as a constant the planner read every entry of the partial index of processing rows
    // (dead ones included) instead of probing the ids of the batch. The statement must not be able
    // to choose that index whatever the statistics say.
    let mut fx = Fixture::new().await;
    fx.exec(
        "INSERT INTO outbox (topic, key, payload) \
         SELECT 't', 'k' || (g % 50), '{}'::jsonb FROM generate_series(1, 50000) g",
    )
    .await;
    fx.exec("ANALYZE outbox").await;
    let claimed = fx.claim(40, "").await;
    assert_eq!(claimed.rows.len(), 40);
    let statements = Statements::render(&SchemaNames::default()).expect("render");
    let sql = format!("EXPLAIN {}", statements.outbox_finish.as_str());
    let ids: Vec<Uuid> = claimed.rows.iter().map(|row| row.id).collect();
    let tokens: Vec<Uuid> = claimed.rows.iter().map(|row| row.claim_token).collect();
    let states = vec!["sent"; ids.len()];
    let none_i32: Vec<Option<i32>> = vec![None; ids.len()];
    let none_i64: Vec<Option<i64>> = vec![None; ids.len()];
    let none_text: Vec<Option<String>> = vec![None; ids.len()];
    let plan: Vec<String> = sqlx::query_scalar(AssertSqlSafe(sql))
        .bind(&ids)
        .bind(&tokens)
        .bind(&states)
        .bind(&none_i32)
        .bind(&none_i64)
        .bind(&none_text)
        .fetch_all(&mut fx.session)
        .await
        .expect("explain the finish");
    let plan = plan.join("\n");
    assert!(
        !plan.contains("idx_outbox_processing_claimed"),
        "the finish scans the processing index:\n{plan}"
    );
    assert!(
        plan.contains("outbox_pkey"),
        "the finish does not probe ids:\n{plan}"
    );
    // And the statement still does its job.
    let writes: Vec<FencedFinish> = claimed.rows.iter().map(sent).collect();
    assert_eq!(fx.finish(&writes).await, vec![true; writes.len()]);
    fx.done().await;
}

#[tokio::test]
async fn retry_dead_and_sent_write_their_columns() {
    let mut fx = Fixture::new().await;
    let retry_id = fx.insert("t", Some("r"), "{}").await;
    let dead_id = fx.insert("t", Some("d"), "{}").await;
    let sent_id = fx.insert("t", Some("s"), "{}").await;
    fx.exec(&format!(
        "UPDATE outbox SET attempt = 2 WHERE id = '{dead_id}'"
    ))
    .await;
    let claim = fx.claim(10, "").await;
    let by_id: HashMap<Uuid, ClaimedRow> = claim.rows.iter().map(|r| (r.id, r.clone())).collect();
    assert_eq!(by_id.len(), 3);

    let applied = fx
        .finish(&[
            FencedFinish {
                id: retry_id,
                claim_token: by_id[&retry_id].claim_token,
                finish: Finish::Retry {
                    attempt: 1,
                    delay: Duration::from_millis(7_500),
                    error: "HTTP 502 from https://example.test".into(),
                },
            },
            FencedFinish {
                id: dead_id,
                claim_token: by_id[&dead_id].claim_token,
                finish: Finish::Dead {
                    error: "no route".into(),
                },
            },
            sent(&by_id[&sent_id]),
        ])
        .await;
    assert_eq!(applied, vec![true, true, true]);

    let retry = fx.view(retry_id).await;
    assert_eq!(retry.state, "pending");
    assert_eq!(retry.attempt, 1);
    assert_eq!(
        retry.last_error.as_deref(),
        Some("HTTP 502 from https://example.test")
    );
    assert_eq!(retry.claim_token, None);
    assert_eq!(retry.lease_left, None);
    // scheduled_at is the delay after the finish's own clock reading.
    assert!(
        close_to(retry.delay_granted, 7.5, 0.001),
        "delay {}",
        retry.delay_granted
    );
    assert!(
        retry.scheduled_in > 2.5 && retry.scheduled_in <= 7.5,
        "{retry:?}"
    );

    let dead = fx.view(dead_id).await;
    assert_eq!(dead.state, "dead");
    assert_eq!(dead.attempt, 2, "dead keeps the attempt");
    assert_eq!(dead.last_error.as_deref(), Some("no route"));
    assert_eq!(dead.claim_token, None);
    assert_eq!(dead.lease_left, None);

    let done = fx.view(sent_id).await;
    assert_eq!(done.state, "sent");
    assert_eq!(done.last_error, None);
    assert_eq!(done.claim_token, None);
    assert_eq!(done.attempt, 0);
    assert!(done.updated_ago < 5.0);
    fx.done().await;
}

#[tokio::test]
async fn a_failure_reason_with_a_nul_byte_does_not_fail_the_batch() {
    // A receiver's answer can carry a NUL byte, and the reason quotes the answer. PostgreSQL text
    // cannot hold NUL, so storing it verbatim would fail the whole finish batch, leaving every row in
    // it processing until its lease expires (and then delivered again).
    let mut fx = Fixture::new().await;
    let failing = fx.insert("t", Some("a"), "{}").await;
    let fine = fx.insert("t", Some("b"), "{}").await;
    let claim = fx.claim(10, "").await;
    let by_id: HashMap<Uuid, ClaimedRow> = claim.rows.iter().map(|r| (r.id, r.clone())).collect();
    let applied = fx
        .finish(&[
            FencedFinish {
                id: failing,
                claim_token: by_id[&failing].claim_token,
                finish: Finish::Retry {
                    attempt: 1,
                    delay: Duration::from_secs(1),
                    error: "answered HTTP 500: bin\0ary".into(),
                },
            },
            sent(&by_id[&fine]),
        ])
        .await;
    assert_eq!(applied, vec![true, true]);
    let view = fx.view(failing).await;
    assert_eq!(view.state, "pending");
    // The NUL is dropped, the rest of the reason kept.
    assert_eq!(
        view.last_error.as_deref(),
        Some("answered HTTP 500: binary")
    );
    assert_eq!(fx.view(fine).await.state, "sent");
    fx.done().await;
}

// ------------------------------------------------------------------------------------------------
// 7. Reclaim
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn reclaim_returns_expired_claims_to_pending_and_leaves_live_ones() {
    let mut fx = Fixture::new().await;
    let expiring = fx.insert("t", Some("x"), "{}").await;
    let stale = claim_with(&fx.store, 1, Duration::from_millis(1), "")
        .await
        .rows
        .remove(0);
    assert_eq!(stale.id, expiring);
    // A later row of the crashed claim's key, and a live claim of another key.
    let follower = fx.insert("t", Some("x"), "{}").await;
    let live_id = fx.insert("t", Some("y"), "{}").await;
    let live = fx.claim(1, "").await.rows.remove(0);
    assert_eq!(live.id, live_id, "x is held by its head");
    wait_until_lease_passed(&mut fx.session, expiring).await;
    // An expired but not yet reclaimed head still holds its key.
    assert!(fx.claim(10, "").await.rows.is_empty());

    assert_eq!(fx.store.reclaim_expired().await.expect("reclaim"), 1);
    let view = fx.view(expiring).await;
    assert_eq!(view.state, "pending");
    assert_eq!(view.claim_token, None);
    assert_eq!(view.lease_left, None);
    let view = fx.view(live_id).await;
    assert_eq!(view.state, "processing");
    assert_eq!(view.claim_token, Some(live.claim_token));
    // Nothing more to reclaim.
    assert_eq!(fx.store.reclaim_expired().await.expect("reclaim"), 0);

    // The old owner has lost the row; the next claim takes it under a new token.
    assert_eq!(fx.finish(&[sent(&stale)]).await, vec![false]);
    let again = fx.claim(10, "").await;
    assert_eq!(
        again.rows.len(),
        1,
        "the reclaimed head, not its follower: {again:?}"
    );
    assert_eq!(again.rows[0].id, expiring);
    assert_ne!(again.rows[0].claim_token, stale.claim_token);
    assert_eq!(fx.finish(&[sent(&stale)]).await, vec![false]);
    assert!(fx.finish_sent(&again.rows[0]).await);
    assert!(fx.finish_sent(&live).await);
    assert_eq!(fx.view(follower).await.state, "pending");
    let last = fx.claim(10, "").await;
    assert_eq!(ids_of(&last), HashSet::from([follower]));
    fx.done().await;
}

#[tokio::test]
async fn reclaim_counts_a_claim_without_a_lease_from_its_claim_time() {
    let mut fx = Fixture::new().await;
    // Rows claimed by a release that set no lease: one claimed long ago, one just now.
    let old = fx.insert("t", Some("old"), "{}").await;
    let recent = fx.insert("t", Some("recent"), "{}").await;
    fx.exec(&format!(
        "UPDATE outbox SET state = 'processing', claimed_at = now() - interval '6 minutes' WHERE id = '{old}';
         UPDATE outbox SET state = 'processing', claimed_at = now() WHERE id = '{recent}';"
    ))
    .await;
    assert_eq!(fx.store.reclaim_expired().await.expect("reclaim"), 1);
    assert_eq!(fx.view(old).await.state, "pending");
    assert_eq!(fx.view(recent).await.state, "processing");
    fx.done().await;
}

// ------------------------------------------------------------------------------------------------
// 8. Pending gauges
// ------------------------------------------------------------------------------------------------

#[tokio::test]
async fn pending_stats_count_per_topic_and_age_the_oldest_pending_row() {
    let mut fx = Fixture::new().await;
    assert_eq!(
        fx.store.pending_stats().await.expect("stats"),
        PendingStats::default(),
        "an empty table reads zero"
    );

    fx.exec(
        "INSERT INTO outbox (topic, key, payload, created_at) VALUES
            ('orders', NULL, '{}', now() - interval '1 hour'),
            ('orders', 'k', '{}', now()),
            ('orders', 'j', '{}', now()),
            ('payments', NULL, '{}', now() - interval '10 minutes');
         -- Rows in other states count nowhere, however old.
         INSERT INTO outbox (topic, key, payload, state, created_at) VALUES
            ('orders', NULL, '{}', 'sent', now() - interval '3 days'),
            ('refunds', NULL, '{}', 'dead', now() - interval '3 days'),
            ('refunds', NULL, '{}', 'processing', now() - interval '3 days');",
    )
    .await;
    let stats = fx.store.pending_stats().await.expect("stats");
    assert_eq!(stats.pending, 4);
    let mut by_topic = stats.pending_by_topic.clone();
    by_topic.sort();
    assert_eq!(
        by_topic,
        vec![("orders".to_owned(), 3), ("payments".to_owned(), 1)]
    );
    let age = stats.oldest_pending_age.as_secs_f64();
    assert!(
        (3600.0..3700.0).contains(&age),
        "the oldest pending row is an hour old: {age}"
    );

    // Nothing pending: zero again.
    fx.exec("UPDATE outbox SET state = 'sent' WHERE state = 'pending'")
        .await;
    let stats = fx.store.pending_stats().await.expect("stats");
    assert_eq!(stats.pending, 0);
    assert_eq!(stats.oldest_pending_age, Duration::ZERO);
    assert!(stats.pending_by_topic.is_empty());
    fx.done().await;
}

// ------------------------------------------------------------------------------------------------
// 9. Two replicas at once
// ------------------------------------------------------------------------------------------------

/// What the two claimers saw, shared between them.
#[derive(Default)]
struct Ledger {
    /// The row of each key some claimer holds right now.
    in_flight: HashMap<String, Uuid>,
    /// Every claimed row id, with the number of times it was claimed.
    claimed: HashMap<Uuid, u32>,
    /// The sequences of each key, in the order they were claimed.
    order: HashMap<String, Vec<i64>>,
    /// Problems seen (reported at the end, so the other task is not left spinning).
    violations: Vec<String>,
}

async fn claim_until_done(
    store: PgOutboxStore,
    mut session: PgConnection,
    ledger: Arc<Mutex<Ledger>>,
    total: usize,
    deadline: Instant,
) -> usize {
    let mut cursor = String::new();
    let mut mine = 0;
    loop {
        {
            let ledger = ledger.lock().expect("ledger");
            if ledger.claimed.len() >= total || !ledger.violations.is_empty() {
                return mine;
            }
        }
        if Instant::now() > deadline {
            return mine;
        }
        let claim = claim_with(&store, 16, LONG_LEASE, &cursor).await;
        cursor = claim.next_key_cursor.clone();
        if claim.rows.is_empty() {
            // The other claimer holds the ready heads; give it the turn.
            tokio::task::yield_now().await;
            continue;
        }
        mine += claim.rows.len();
        let mut problems = Vec::new();
        {
            let mut ledger = ledger.lock().expect("ledger");
            for row in &claim.rows {
                let key = row.key.clone().expect("every row is keyed");
                *ledger.claimed.entry(row.id).or_default() += 1;
                if let Some(held) = ledger.in_flight.insert(key.clone(), row.id) {
                    problems.push(format!(
                        "key {key}: {} claimed while {held} in flight",
                        row.id
                    ));
                }
                ledger.order.entry(key).or_default().push(row.sequence);
            }
        }
        // Race-free check in the database: a rightly claimed row has every earlier row of its key
        // finished, and finished is final (this test only sends), so none may be unfinished now.
        let ids: Vec<Uuid> = claim.rows.iter().map(|r| r.id).collect();
        let jumped: Vec<String> = sqlx::query_scalar(
            "SELECT r.id::text || ' passed ' || e.id::text || ' (' || e.state || ')'
               FROM outbox r
               JOIN outbox e ON e.key = r.key AND e.sequence < r.sequence
                            AND e.state IN ('pending', 'processing')
              WHERE r.id = ANY($1)",
        )
        .bind(&ids)
        .fetch_all(&mut session)
        .await
        .expect("check the earlier rows");
        problems.extend(jumped);
        // Hold the rows for a round trip, as a publish would: a renewal, which must keep them all.
        let held: Vec<(Uuid, Uuid)> = claim.rows.iter().map(|r| (r.id, r.claim_token)).collect();
        let renewed = store.renew(&held, LONG_LEASE).await.expect("renew");
        if !renewed.iter().all(|kept| *kept) {
            problems.push(format!("a fresh claim failed to renew: {renewed:?}"));
        }
        // Out of the ledger before the finish commits: the database still holds the claim, so no
        // other claimer can rightly take the next row of the key in between (no false alarm).
        {
            let mut ledger = ledger.lock().expect("ledger");
            for row in &claim.rows {
                ledger.in_flight.remove(row.key.as_deref().expect("keyed"));
            }
        }
        let writes: Vec<FencedFinish> = claim.rows.iter().map(sent).collect();
        let applied = store.finish(&writes).await.expect("finish");
        if !applied.iter().all(|a| *a) {
            problems.push(format!("a finish under a fresh claim failed: {applied:?}"));
        }
        if !problems.is_empty() {
            ledger.lock().expect("ledger").violations.extend(problems);
        }
    }
}

#[tokio::test]
async fn a_claim_with_freed_keys_completes_on_a_pool_of_one_connection() {
    // The freed keys' heads and the walk are claimed side by side, each on a pooled connection;
    // with one connection in the pool they take turns, and the claim must still finish and keep
    // the head rule.
    let mut fx = Fixture::new().await;
    fx.exec(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 't', 'k-' || k, jsonb_build_object('n', n)
           FROM generate_series(1, 4) k, generate_series(1, 3) n ORDER BY n, k;
         INSERT INTO outbox (topic, payload) SELECT 't', '{}' FROM generate_series(1, 2);",
    )
    .await;
    let mut options = fx.db.options(false, SchemaNames::default());
    options.pool_size = 1;
    let single = connect(&options)
        .await
        .expect("connect with one connection");
    single.prepare().await.expect("prepare");
    let store = single.outbox_store();
    // Two claims, so the unkeyed rows come once before the walk and once after it.
    let first = tokio::time::timeout(WAIT, claim_with(&store, 4, LONG_LEASE, ""))
        .await
        .expect("the first claim finished on one connection");
    let writes: Vec<FencedFinish> = first.rows.iter().map(sent).collect();
    assert_eq!(
        store.finish(&writes).await.expect("finish"),
        vec![true; writes.len()]
    );
    let freed: Vec<String> = first.rows.iter().filter_map(|r| r.key.clone()).collect();
    assert!(
        !freed.is_empty(),
        "the first claim took keyed rows: {first:?}"
    );
    let second = tokio::time::timeout(
        WAIT,
        claim_released(&store, 6, LONG_LEASE, &first.next_key_cursor, freed.clone()),
    )
    .await
    .expect("the claim with freed keys finished on one connection");
    // Which part reaches a freed key first may vary; what may not: one row a key, each key's second
    // row (its head now), and the two rows without a key, which this claim takes before the walk.
    let keys = keys_of(&second);
    let keyed: Vec<_> = keys.iter().flatten().collect();
    let distinct: HashSet<_> = keyed.iter().collect();
    assert_eq!(distinct.len(), keyed.len(), "one row a key: {second:?}");
    assert!(
        keyed.len() >= 3,
        "the freed keys' heads were taken: {second:?}"
    );
    for row in second.rows.iter().filter(|r| r.key.is_some()) {
        assert_eq!(row.payload, r#"{"n": 2}"#, "only heads: {second:?}");
    }
    assert_eq!(keys.iter().filter(|k| k.is_none()).count(), 2, "{second:?}");
    drop(store);
    single.close().await;
    fx.done().await;
}

#[tokio::test]
async fn after_a_walk_round_every_key_the_freed_keys_heads_come_with_the_walk() {
    // A walk that went round every key without filling its share hands back an empty cursor; a
    // claim from it leaves the freed keys' probe out (its walk goes round them anyway). Their new
    // heads must still be claimed, heads only, claim after claim.
    let mut fx = Fixture::new().await;
    fx.exec(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 't', k, jsonb_build_object('n', n)
           FROM unnest(ARRAY['a', 'b', 'c']) k, generate_series(1, 3) n ORDER BY n, k;",
    )
    .await;
    let first = claim_with(&fx.store, 10, LONG_LEASE, "").await;
    assert_eq!(first.rows.len(), 3, "{first:?}");
    assert_eq!(first.next_key_cursor, "", "the walk went round");
    let writes: Vec<FencedFinish> = first.rows.iter().map(sent).collect();
    assert_eq!(fx.finish(&writes).await, vec![true; 3]);
    let freed: Vec<String> = first.rows.iter().filter_map(|r| r.key.clone()).collect();
    for n in 2..=3 {
        let claim = claim_released(&fx.store, 10, LONG_LEASE, "", freed.clone()).await;
        assert_eq!(
            keys_of(&claim),
            vec![Some("a".into()), Some("b".into()), Some("c".into())]
        );
        for row in &claim.rows {
            assert_eq!(
                row.payload,
                format!(r#"{{"n": {n}}}"#),
                "heads only: {claim:?}"
            );
        }
        let writes: Vec<FencedFinish> = claim.rows.iter().map(sent).collect();
        assert_eq!(fx.finish(&writes).await, vec![true; 3]);
    }
    fx.done().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_claiming_at_once_share_the_rows_without_breaking_key_order() {
    let mut fx = Fixture::new().await;
    const KEYS: usize = 50;
    const ROWS: usize = 2_000;
    fx.exec(&format!(
        "INSERT INTO outbox (topic, key, payload)
         SELECT 't', 'key-' || lpad((n % {KEYS})::text, 2, '0'), jsonb_build_object('n', n)
           FROM generate_series(0, {ROWS} - 1) n ORDER BY n"
    ))
    .await;
    // A second replica: its own pool, its own store.
    let second = connect(&fx.db.options(false, SchemaNames::default()))
        .await
        .expect("connect the second replica");
    second.prepare().await.expect("prepare");

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let deadline = Instant::now() + Duration::from_secs(120);
    let one = tokio::spawn(claim_until_done(
        fx.database.outbox_store(),
        fx.db.session().await,
        Arc::clone(&ledger),
        ROWS,
        deadline,
    ));
    let two = tokio::spawn(claim_until_done(
        second.outbox_store(),
        fx.db.session().await,
        Arc::clone(&ledger),
        ROWS,
        deadline,
    ));
    let (one, two) = (one.await.expect("task one"), two.await.expect("task two"));

    // Both tasks are done: take the ledger out of its lock.
    let ledger = std::mem::take(&mut *ledger.lock().expect("ledger"));
    assert!(ledger.violations.is_empty(), "{:?}", ledger.violations);
    assert_eq!(
        ledger.claimed.len(),
        ROWS,
        "every row claimed (within the deadline)"
    );
    let twice: Vec<_> = ledger.claimed.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "rows claimed more than once: {twice:?}");
    assert_eq!(one + two, ROWS);
    assert!(one > 0 && two > 0, "both replicas took part: {one} + {two}");
    // Each key went out in insert order.
    assert_eq!(ledger.order.len(), KEYS);
    for (key, sequences) in &ledger.order {
        assert_eq!(sequences.len(), ROWS / KEYS, "{key}");
        assert!(
            sequences.windows(2).all(|w| w[0] < w[1]),
            "{key} out of order: {sequences:?}"
        );
    }
    assert_eq!(
        count_where(&mut fx.session, "state = 'sent'").await,
        ROWS as i64
    );
    second.close().await;
    fx.done().await;
}

// ------------------------------------------------------------------------------------------------
// 10. A renamed schema
// ------------------------------------------------------------------------------------------------

/// The documentation's renamed tables (spec page "Use custom tables"), created by hand.
const RENAMED_TABLES: &str = "
CREATE TABLE qb_outbox (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(), topic VARCHAR(255) NOT NULL, key VARCHAR(255),
    aggregate_type VARCHAR(255), body JSONB NOT NULL, headers JSONB NOT NULL DEFAULT '{}',
    state VARCHAR(50) NOT NULL DEFAULT 'pending', attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    scheduled_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
    created_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
    claimed_at TIMESTAMPTZ, claim_token UUID, lease_expires_at TIMESTAMPTZ, last_error TEXT,
    sequence BIGINT GENERATED BY DEFAULT AS IDENTITY);
CREATE INDEX qb_outbox_pending_scheduled ON qb_outbox (state, scheduled_at) WHERE state = 'pending';
CREATE INDEX qb_outbox_processing_claimed ON qb_outbox (claimed_at) WHERE state = 'processing';
CREATE INDEX qb_outbox_key_sequence ON qb_outbox (key, sequence) WHERE state IN ('pending', 'processing');
CREATE INDEX qb_outbox_topic ON qb_outbox (topic);
CREATE TABLE qb_inbox (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(), source VARCHAR(255) NOT NULL,
    dedup_key VARCHAR(255) NOT NULL, aggregate_id VARCHAR(255), event_type VARCHAR(255),
    payload JSONB NOT NULL, headers JSONB NOT NULL DEFAULT '{}',
    state VARCHAR(50) NOT NULL DEFAULT 'pending',
    consumption VARCHAR(4) NOT NULL DEFAULT 'push' CHECK (consumption IN ('push', 'pull')),
    attempt INT NOT NULL DEFAULT 0, last_error TEXT,
    scheduled_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
    created_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP, processed_at TIMESTAMPTZ,
    claimed_at TIMESTAMPTZ, claim_token UUID, lease_expires_at TIMESTAMPTZ,
    correlation_id VARCHAR(128),
    CONSTRAINT qb_inbox_source_idempotency UNIQUE (source, dedup_key));
";

#[tokio::test]
async fn claim_and_finish_work_on_a_renamed_schema() {
    let db = TestDb::create().await;
    db.exec(RENAMED_TABLES).await;
    db.exec(
        "INSERT INTO qb_outbox (topic, key, body, headers) VALUES
            ('order.created', 'k', '{\"step\": 1}', '{\"X-Tenant\": \"acme\"}'),
            ('order.paid', 'k', '{\"step\": 2}', '{}'),
            ('ping', NULL, '{\"n\": 0}', '{}');",
    )
    .await;
    let database = connect(&db.options(false, renamed_schema()))
        .await
        .expect("connect");
    database.prepare().await.expect("the guard passes");
    let store = database.outbox_store();
    let mut session = db.session().await;

    let stats = store.pending_stats().await.expect("stats");
    assert_eq!(stats.pending, 3);

    let claim = claim_with(&store, 10, LONG_LEASE, "").await;
    assert_eq!(
        claim.rows.len(),
        2,
        "the head of k and the unkeyed row: {claim:?}"
    );
    let head = claim
        .rows
        .iter()
        .find(|r| r.key.as_deref() == Some("k"))
        .expect("head of k")
        .clone();
    let body: serde_json::Value = serde_json::from_str(&head.payload).expect("json");
    assert_eq!(
        body,
        serde_json::json!({"step": 1}),
        "read from the body column"
    );
    assert_eq!(
        head.headers,
        vec![("X-Tenant".to_owned(), "acme".to_owned())]
    );
    let view = RowView::read(&mut session, "qb_outbox", head.id).await;
    assert_eq!(view.state, "processing");
    assert_eq!(view.claim_token, Some(head.claim_token));

    assert_eq!(
        store
            .renew(&[(head.id, head.claim_token)], LONG_LEASE)
            .await
            .expect("renew"),
        vec![true]
    );
    let writes: Vec<FencedFinish> = claim.rows.iter().map(sent).collect();
    assert_eq!(
        store.finish(&writes).await.expect("finish"),
        vec![true, true]
    );
    assert_eq!(
        RowView::read(&mut session, "qb_outbox", head.id)
            .await
            .state,
        "sent"
    );
    let next = claim_with(&store, 10, LONG_LEASE, "").await;
    assert_eq!(next.rows.len(), 1);
    let body: serde_json::Value = serde_json::from_str(&next.rows[0].payload).expect("json");
    assert_eq!(body, serde_json::json!({"step": 2}));
    assert_eq!(store.reclaim_expired().await.expect("reclaim"), 0);

    drop(store);
    drop(session);
    database.close().await;
    db.drop_now().await;
}
