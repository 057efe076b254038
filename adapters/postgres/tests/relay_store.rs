//! The PostgreSQL relay store against a real server: the claim (order, one row per aggregate, the
//! block of an aggregate in flight, push rows only), the one-statement fenced forward into the outbox,
//! the fenced dead letter, the reclaim and the oldest-pending gauge. Every test runs on a fresh
//! database and checks its outcome by reading the tables back.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use queuebox_ports::inbox::{ForwardedRow, RelayRow, RelayStore};
use queuebox_postgres::{PgRelayStore, PostgresDatabase};
use sqlx::{AssertSqlSafe, Row};
use uuid::Uuid;

/// A long lease: no test row loses it by accident.
const LEASE: Duration = Duration::from_secs(300);

/// One inbox row to insert; `age_ms` puts `created_at` that far before the database clock.
struct Inbox<'a> {
    source: &'a str,
    aggregate: Option<&'a str>,
    event_type: Option<&'a str>,
    consumption: &'a str,
    age_ms: i64,
    headers: &'a str,
    correlation: Option<&'a str>,
}

impl<'a> Inbox<'a> {
    fn push(aggregate: Option<&'a str>, age_ms: i64) -> Self {
        Self {
            source: "stripe",
            aggregate,
            event_type: Some("charge.paid"),
            consumption: "push",
            age_ms,
            headers: "{}",
            correlation: None,
        }
    }
}

type Fixture = common::StoreFixture<PgRelayStore>;

impl Fixture {
    async fn new() -> Self {
        Self::open(PostgresDatabase::relay_store).await
    }

    async fn insert(&mut self, row: Inbox<'_>) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers, \
                                correlation_id, consumption, created_at) \
             VALUES ($1, $2, $3, $4, '{\"n\":1}'::jsonb, $5::jsonb, $6, $7, \
                     now() - $8 * interval '1 millisecond') RETURNING id",
        )
        .bind(row.source)
        .bind(Uuid::new_v4().to_string())
        .bind(row.aggregate)
        .bind(row.event_type)
        .bind(row.headers)
        .bind(row.correlation)
        .bind(row.consumption)
        .bind(row.age_ms)
        .fetch_one(&mut self.session)
        .await
        .expect("insert an inbox row")
    }

    async fn exec(&mut self, sql: &str) {
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&mut self.session)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
    }

    async fn claim(&self, limit: u32) -> Vec<RelayRow> {
        self.store.claim(limit, LEASE).await.expect("claim")
    }

    /// (state, claim token, seconds of lease left, processed_at set, last_error).
    async fn inbox_row(
        &mut self,
        id: Uuid,
    ) -> (String, Option<Uuid>, Option<f64>, bool, Option<String>) {
        let row = sqlx::query(
            "SELECT state, claim_token, EXTRACT(EPOCH FROM lease_expires_at - now())::float8 AS lease_left, \
                    processed_at IS NOT NULL AS processed, last_error FROM inbox WHERE id = $1",
        )
        .bind(id)
        .fetch_one(&mut self.session)
        .await
        .expect("read the inbox row");
        (
            row.get("state"),
            row.get("claim_token"),
            row.get("lease_left"),
            row.get("processed"),
            row.get("last_error"),
        )
    }

    /// The outbox rows, keyed by their x-inbox-id header.
    async fn outbox(&mut self) -> HashMap<Uuid, OutboxView> {
        let rows = sqlx::query(
            "SELECT topic, key, payload::text AS payload, headers::text AS headers, max_attempts, state, \
                    sequence FROM outbox",
        )
        .fetch_all(&mut self.session)
        .await
        .expect("read the outbox");
        rows.iter()
            .map(|row| {
                let headers: serde_json::Value =
                    serde_json::from_str(row.get::<&str, _>("headers")).expect("headers json");
                let inbox_id = headers["x-inbox-id"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .expect("x-inbox-id");
                (
                    inbox_id,
                    OutboxView {
                        topic: row.get("topic"),
                        key: row.get("key"),
                        payload: row.get("payload"),
                        headers,
                        max_attempts: row.get("max_attempts"),
                        state: row.get("state"),
                        sequence: row.get("sequence"),
                    },
                )
            })
            .collect()
    }
}

#[derive(Debug)]
struct OutboxView {
    topic: String,
    key: Option<String>,
    payload: String,
    headers: serde_json::Value,
    max_attempts: i32,
    state: String,
    sequence: i64,
}

/// The outbox row the relay would write for `row`, with a fixed topic.
fn forwarded(row: &RelayRow) -> ForwardedRow {
    let mut headers = row.headers.clone();
    headers.push(("x-inbox-id".to_owned(), row.id.to_string()));
    headers.push(("x-source".to_owned(), row.source.clone()));
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
        max_attempts: 9,
    }
}

fn ids(rows: &[RelayRow]) -> Vec<Uuid> {
    rows.iter().map(|r| r.id).collect()
}

/// The ids as a set: a claim orders nothing between aggregates, so tests compare what it took.
fn id_set(rows: &[RelayRow]) -> HashSet<Uuid> {
    rows.iter().map(|r| r.id).collect()
}

/// Forwards `rows` and asserts every fence held.
async fn forward_all(store: &PgRelayStore, rows: &[RelayRow]) {
    let writes: Vec<ForwardedRow> = rows.iter().map(forwarded).collect();
    assert_eq!(
        store.forward(&writes).await.expect("forward"),
        vec![true; writes.len()]
    );
}

#[tokio::test]
async fn the_claim_takes_the_oldest_row_of_each_aggregate_every_row_without_one_and_push_rows_only()
{
    let mut f = Fixture::new().await;
    let a1 = f.insert(Inbox::push(Some("A"), 9_000)).await;
    let b1 = f.insert(Inbox::push(Some("B"), 8_000)).await;
    let _a2 = f.insert(Inbox::push(Some("A"), 7_000)).await;
    let n1 = f.insert(Inbox::push(None, 6_000)).await;
    let n2 = f.insert(Inbox::push(None, 5_000)).await;
    let _b2 = f.insert(Inbox::push(Some("B"), 4_000)).await;
    // An empty aggregate orders nothing, like a missing one.
    let e1 = f.insert(Inbox::push(Some(""), 3_500)).await;
    let e2 = f.insert(Inbox::push(Some(""), 3_400)).await;
    // Inserted last but oldest: the head of C is its oldest row by created_at, not by insert order.
    let _c2 = f.insert(Inbox::push(Some("C"), 2_000)).await;
    let c1 = f.insert(Inbox::push(Some("C"), 10_000)).await;
    let mut pull = Inbox::push(Some("D"), 20_000);
    pull.consumption = "pull";
    let pull = f.insert(pull).await;
    let dead = f.insert(Inbox::push(Some("E"), 30_000)).await;
    f.exec(&format!(
        "UPDATE inbox SET state = 'dead' WHERE id = '{dead}'"
    ))
    .await;

    let claimed = f.claim(100).await;
    assert_eq!(claimed.len(), 7, "{:?}", ids(&claimed));
    assert_eq!(
        id_set(&claimed),
        HashSet::from([c1, a1, b1, n1, n2, e1, e2])
    );
    for row in &claimed {
        let (state, token, lease_left, _, _) = f.inbox_row(row.id).await;
        assert_eq!(state, "processing");
        assert_eq!(token, Some(row.claim_token));
        let left = lease_left.expect("a lease");
        assert!((295.0..=300.5).contains(&left), "lease left {left}");
    }
    assert_eq!(f.inbox_row(pull).await.0, "pending");
    // Everything else is blocked behind its aggregate's row in flight.
    assert!(f.claim(100).await.is_empty());
    f.done().await;
}

#[tokio::test]
async fn the_claim_returns_the_stored_fields_and_honours_the_limit() {
    let mut f = Fixture::new().await;
    let mut first = Inbox::push(Some("A"), 3_000);
    first.headers = r#"{"X-B":"2","X-A":"1"}"#;
    first.correlation = Some("corr-1");
    let a = f.insert(first).await;
    let b = f.insert(Inbox::push(Some("B"), 2_000)).await;
    let c = f.insert(Inbox::push(Some("C"), 1_000)).await;
    // The walk goes through aggregates in key order: A and B first, C on the next claim.
    let claimed = f.claim(2).await;
    assert_eq!(ids(&claimed), [a, b]);
    let row = &claimed[0];
    assert_eq!(row.source, "stripe");
    assert_eq!(row.aggregate_id.as_deref(), Some("A"));
    assert_eq!(row.event_type.as_deref(), Some("charge.paid"));
    assert_eq!(row.payload, r#"{"n": 1}"#);
    // JSONB keeps no key order of its own, so compare the pairs as a set.
    let headers: HashSet<(String, String)> = row.headers.iter().cloned().collect();
    assert_eq!(
        headers,
        HashSet::from([
            ("X-B".to_owned(), "2".to_owned()),
            ("X-A".to_owned(), "1".to_owned())
        ])
    );
    assert_eq!(row.correlation_id.as_deref(), Some("corr-1"));
    assert_eq!(ids(&f.claim(2).await), [c]);
    f.done().await;
}

#[tokio::test]
async fn a_processing_row_blocks_its_aggregate_until_the_reclaim_returns_it() {
    let mut f = Fixture::new().await;
    let a1 = f.insert(Inbox::push(Some("A"), 2_000)).await;
    let a2 = f.insert(Inbox::push(Some("A"), 1_000)).await;
    assert_eq!(ids(&f.claim(10).await), [a1]);
    // The lease passes; the row is still processing, so A stays blocked until the reclaim.
    f.exec(&format!(
        "UPDATE inbox SET lease_expires_at = now() - interval '1 second' WHERE id = '{a1}'"
    ))
    .await;
    assert!(f.claim(10).await.is_empty());
    assert_eq!(f.store.reclaim_expired().await.expect("reclaim"), 1);
    let (state, token, _, _, _) = f.inbox_row(a1).await;
    assert_eq!((state.as_str(), token), ("pending", None));
    // The head goes again, with a new token; a2 still waits.
    let again = f.claim(10).await;
    assert_eq!(ids(&again), [a1]);
    assert_eq!(f.inbox_row(a2).await.0, "pending");
    f.done().await;
}

#[tokio::test]
async fn the_reclaim_moves_expired_push_claims_only() {
    let mut f = Fixture::new().await;
    let expired = f.insert(Inbox::push(Some("A"), 2_000)).await;
    let live = f.insert(Inbox::push(Some("B"), 2_000)).await;
    let mut pull = Inbox::push(Some("C"), 2_000);
    pull.consumption = "pull";
    let pull = f.insert(pull).await;
    let legacy = f.insert(Inbox::push(Some("D"), 2_000)).await;
    f.exec(&format!(
        "UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(), claimed_at = now(), \
                lease_expires_at = now() - interval '1 second' WHERE id IN ('{expired}', '{pull}'); \
         UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(), claimed_at = now(), \
                lease_expires_at = now() + interval '1 minute' WHERE id = '{live}'; \
         UPDATE inbox SET state = 'processing', claimed_at = now() - interval '6 minutes' WHERE id = '{legacy}'"
    ))
    .await;
    assert_eq!(f.store.reclaim_expired().await.expect("reclaim"), 2);
    assert_eq!(f.inbox_row(expired).await.0, "pending");
    assert_eq!(f.inbox_row(legacy).await.0, "pending");
    assert_eq!(f.inbox_row(live).await.0, "processing");
    assert_eq!(f.inbox_row(pull).await.0, "processing");
    f.done().await;
}

#[tokio::test]
async fn forward_writes_the_outbox_rows_and_marks_the_inbox_rows_processed() {
    let mut f = Fixture::new().await;
    let mut with_headers = Inbox::push(Some("A"), 2_000);
    with_headers.headers = r#"{"X-Custom":"kept"}"#;
    f.insert(with_headers).await;
    f.insert(Inbox::push(None, 1_000)).await;
    let claimed = f.claim(10).await;
    assert_eq!(claimed.len(), 2);
    let writes: Vec<ForwardedRow> = claimed.iter().map(forwarded).collect();
    assert_eq!(
        f.store.forward(&writes).await.expect("forward"),
        [true, true]
    );

    let outbox = f.outbox().await;
    assert_eq!(outbox.len(), 2);
    for row in &claimed {
        let (state, token, lease_left, processed, _) = f.inbox_row(row.id).await;
        assert_eq!(state, "processed");
        assert_eq!((token, lease_left), (None, None));
        assert!(processed, "processed_at is set");
        let out = &outbox[&row.id];
        assert_eq!(out.topic, "stripe.charge.paid");
        assert_eq!(out.key, row.aggregate_id);
        assert_eq!(out.payload, r#"{"n": 1}"#);
        assert_eq!(out.max_attempts, 9);
        assert_eq!(out.state, "pending");
        assert_eq!(out.headers["x-source"], "stripe");
    }
    let first = &outbox[&claimed[0].id];
    assert_eq!(
        first.headers,
        serde_json::json!({
            "X-Custom": "kept",
            "x-inbox-id": claimed[0].id.to_string(),
            "x-source": "stripe"
        })
    );
    // Both rows of one batch were inserted in input order.
    assert!(first.sequence < outbox[&claimed[1].id].sequence);
    f.done().await;
}

#[tokio::test]
async fn a_lost_fence_writes_no_outbox_row_for_that_row_only() {
    let mut f = Fixture::new().await;
    f.insert(Inbox::push(Some("A"), 3_000)).await;
    f.insert(Inbox::push(Some("B"), 2_000)).await;
    f.insert(Inbox::push(Some("C"), 1_000)).await;
    let claimed = f.claim(10).await;
    let (kept, stolen, expired) = (&claimed[0], &claimed[1], &claimed[2]);
    // Another replica took `stolen` over; the lease of `expired` passed.
    let thief = Uuid::new_v4();
    f.exec(&format!(
        "UPDATE inbox SET claim_token = '{thief}' WHERE id = '{}'; \
         UPDATE inbox SET lease_expires_at = now() - interval '1 second' WHERE id = '{}'",
        stolen.id, expired.id
    ))
    .await;
    let writes: Vec<ForwardedRow> = claimed.iter().map(forwarded).collect();
    assert_eq!(
        f.store.forward(&writes).await.expect("forward"),
        [true, false, false]
    );
    let outbox = f.outbox().await;
    assert_eq!(outbox.keys().copied().collect::<Vec<_>>(), [kept.id]);
    let (state, token, _, processed, _) = f.inbox_row(stolen.id).await;
    assert_eq!(
        (state.as_str(), token, processed),
        ("processing", Some(thief), false)
    );
    assert_eq!(f.inbox_row(expired.id).await.0, "processing");
    // A second forward of a row already forwarded changes nothing either.
    assert_eq!(
        f.store.forward(&writes[..1]).await.expect("forward"),
        [false]
    );
    assert_eq!(f.outbox().await.len(), 1);
    assert!(f.store.forward(&[]).await.expect("empty").is_empty());
    f.done().await;
}

#[tokio::test]
async fn mark_dead_is_fenced() {
    let mut f = Fixture::new().await;
    f.insert(Inbox::push(Some("A"), 1_000)).await;
    let row = f.claim(1).await.remove(0);
    assert!(
        !f.store
            .mark_dead(row.id, Uuid::new_v4(), "wrong token")
            .await
            .expect("dead")
    );
    assert_eq!(f.inbox_row(row.id).await.0, "processing");
    assert!(
        f.store
            .mark_dead(row.id, row.claim_token, "the topic rendered empty")
            .await
            .expect("dead")
    );
    let (state, token, lease_left, processed, last_error) = f.inbox_row(row.id).await;
    assert_eq!(state, "dead");
    assert_eq!((token, lease_left, processed), (None, None, false));
    assert_eq!(last_error.as_deref(), Some("the topic rendered empty"));
    // Dead rows are never claimed, and no longer block their aggregate.
    let next = f.insert(Inbox::push(Some("A"), 0)).await;
    assert_eq!(ids(&f.claim(10).await), [next]);
    f.done().await;
}

#[tokio::test]
async fn the_oldest_pending_age_reads_the_oldest_pending_row() {
    let mut f = Fixture::new().await;
    assert_eq!(
        f.store.oldest_pending_age().await.expect("age"),
        Duration::ZERO
    );
    f.insert(Inbox::push(Some("A"), 1_000)).await;
    let old = f.insert(Inbox::push(Some("B"), 42_000)).await;
    let age = f.store.oldest_pending_age().await.expect("age");
    assert!((42.0..43.0).contains(&age.as_secs_f64()), "age {age:?}");
    f.exec(&format!(
        "UPDATE inbox SET state = 'processed' WHERE id = '{old}'"
    ))
    .await;
    let age = f.store.oldest_pending_age().await.expect("age");
    assert!((1.0..2.0).contains(&age.as_secs_f64()), "age {age:?}");
    f.done().await;
}

/// Several relays claiming and forwarding at the same time keep every aggregate in order and forward
/// each row once: the claim lock and the fence at work.
#[tokio::test]
async fn concurrent_relays_keep_each_aggregate_in_created_at_order() {
    let mut f = Fixture::new().await;
    f.exec(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, created_at) \
         SELECT 'stripe', 'k-' || n, 'agg-' || (n % 20), 't', jsonb_build_object('n', n), \
                now() - interval '1 hour' + (n / 20) * interval '1 second' + (n % 7) * interval '1 millisecond' \
           FROM generate_series(1, 600) AS n ORDER BY random()",
    )
    .await;
    let stores: Vec<Arc<PgRelayStore>> =
        (0..4).map(|_| Arc::new(f.database.relay_store())).collect();
    let mut relays = tokio::task::JoinSet::new();
    for store in stores {
        relays.spawn(async move {
            let mut idle = 0;
            while idle < 20 {
                let rows = store.claim(7, LEASE).await.expect("claim");
                if rows.is_empty() {
                    idle += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                idle = 0;
                let mut seen = HashSet::new();
                for row in &rows {
                    assert!(
                        seen.insert(row.aggregate_id.clone()),
                        "two rows of one aggregate"
                    );
                }
                let writes: Vec<ForwardedRow> = rows.iter().map(forwarded).collect();
                let applied = store.forward(&writes).await.expect("forward");
                assert!(
                    applied.iter().all(|a| *a),
                    "a fence failed without a reclaim"
                );
            }
        });
    }
    let all = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(joined) = relays.join_next().await {
            joined.expect("a relay task failed");
        }
    })
    .await;
    assert!(all.is_ok(), "the relays did not finish in time");
    let out_of_order: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM ( \
            SELECT row_number() OVER (PARTITION BY o.key ORDER BY o.sequence) AS by_sequence, \
                   row_number() OVER (PARTITION BY o.key ORDER BY i.created_at) AS by_created \
              FROM outbox o JOIN inbox i ON i.id = (o.headers->>'x-inbox-id')::uuid) AS t \
          WHERE by_sequence <> by_created",
    )
    .fetch_one(&mut f.session)
    .await
    .expect("compare orders");
    let (outbox_rows, distinct, pending): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM outbox), (SELECT count(DISTINCT headers->>'x-inbox-id') FROM outbox), \
                (SELECT count(*) FROM inbox WHERE state <> 'processed')",
    )
    .fetch_one(&mut f.session)
    .await
    .expect("count");
    assert_eq!((outbox_rows, distinct, pending), (600, 600, 0));
    assert_eq!(out_of_order, 0);
    f.done().await;
}

/// An aggregate stuck behind a claim (a crashed replica's, until the reclaim) must not hold back the
/// others, however many of its rows wait ahead of theirs.
#[tokio::test]
async fn a_stuck_aggregate_with_a_long_backlog_does_not_stall_the_others() {
    let mut f = Fixture::new().await;
    f.exec(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, created_at) \
         SELECT 'stripe', 'stuck-' || n, 'stuck', 't', '{}', now() - interval '1 hour' + n * interval '1 millisecond' \
           FROM generate_series(1, 2500) AS n",
    )
    .await;
    let head = f.claim(10).await;
    assert_eq!(head.len(), 1, "one row of the stuck aggregate");
    let b = f.insert(Inbox::push(Some("B"), 1_000)).await;
    let n = f.insert(Inbox::push(None, 500)).await;
    assert_eq!(id_set(&f.claim(10).await), HashSet::from([b, n]));
    f.done().await;
}

/// Bursts: each aggregate's rows are consecutive, so the oldest rows hold few aggregates. The walk
/// goes from aggregate to aggregate, not through the rows, so every claim comes back full while
/// enough aggregates are ready, in each aggregate's order.
#[tokio::test]
async fn bursts_of_few_aggregates_still_fill_every_claim_in_each_aggregates_order() {
    let mut f = Fixture::new().await;
    // 40 aggregates of 250 consecutive rows: the oldest 1,000 rows hold 4 aggregates.
    f.exec(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, created_at) \
         SELECT 'stripe', 'k-' || n, 'a-' || lpad(((n - 1) / 250)::text, 2, '0'), 't', '{}', \
                now() - interval '1 hour' + n * interval '1 millisecond' \
           FROM generate_series(1, 10000) AS n",
    )
    .await;
    let mut last_seen: HashMap<String, i64> = HashMap::new();
    for claim in 0..6 {
        let rows = f.claim(40).await;
        assert_eq!(rows.len(), 40, "claim {claim}");
        for row in &rows {
            let aggregate = row
                .aggregate_id
                .clone()
                .expect("every row has an aggregate");
            let n: i64 = row.idempotency_key[2..].parse().expect("k-<n>");
            // Each aggregate's rows go one by one, in created_at order, none skipped.
            let expected = last_seen.get(&aggregate).map_or_else(
                || {
                    let index: i64 = aggregate[2..].parse().expect("a-<nn>");
                    index * 250 + 1
                },
                |before| before + 1,
            );
            assert_eq!(n, expected, "{aggregate}");
            last_seen.insert(aggregate, n);
        }
        forward_all(&f.store, &rows).await;
    }
    f.done().await;
}

/// The walk resumes after the aggregate where the last one stopped: with room for one row a claim,
/// every aggregate gets its turn before any gets a second one, although A's three rows are the oldest.
#[tokio::test]
async fn successive_claims_rotate_over_the_ready_aggregates() {
    let mut f = Fixture::new().await;
    f.exec(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, created_at) \
         SELECT 'stripe', 'k-' || n, chr(65 + n / 3), 't', '{}', \
                now() - interval '1 hour' + n * interval '1 millisecond' \
           FROM generate_series(0, 8) AS n",
    )
    .await;
    let mut order = Vec::new();
    for _ in 0..9 {
        let rows = f.claim(1).await;
        assert_eq!(rows.len(), 1);
        order.push(rows[0].aggregate_id.clone().expect("an aggregate"));
        forward_all(&f.store, &rows).await;
    }
    assert_eq!(order.join(""), "ABCABCABC");
    assert!(f.claim(1).await.is_empty());
    f.done().await;
}

/// A row that commits late can carry a created_at older than the row of its aggregate already in
/// flight: it is then the oldest pending row of the aggregate, and still waits for the forward.
#[tokio::test]
async fn an_older_row_that_arrives_while_its_aggregate_is_in_flight_waits() {
    let mut f = Fixture::new().await;
    let a1 = f.insert(Inbox::push(Some("A"), 1_000)).await;
    let claimed = f.claim(10).await;
    assert_eq!(ids(&claimed), [a1]);
    let a0 = f.insert(Inbox::push(Some("A"), 5_000)).await;
    assert!(f.claim(10).await.is_empty());
    forward_all(&f.store, &claimed).await;
    assert_eq!(ids(&f.claim(10).await), [a0]);
    f.done().await;
}
