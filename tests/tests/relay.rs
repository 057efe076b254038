//! The inbox relay end to end: two real `queuebox` processes share one PostgreSQL database and relay
//! thousands of push rows into the outbox. Every row must arrive once, and the rows of each aggregate
//! must enter the outbox in the order of their `created_at`.

use queuebox_tests::database::TestDatabase;
use queuebox_tests::free_port;
use queuebox_tests::process::{Launch, QueueBox};
use queuebox_tests::wait_until;
use sqlx::{Connection, PgConnection};
use std::time::{Duration, Instant};

const START: Duration = Duration::from_secs(30);
/// How long the two relays may take for the whole backlog.
const DRAIN: Duration = Duration::from_secs(120);
const ROWS: i64 = 5_000;
const AGGREGATES: i64 = 100;

/// `queuebox serve` on `port` with one HTTP push source `orders` whose topic is
/// `orders.<eventType>`. No route matches, so the dispatcher dead-letters each relayed outbox row at
/// once; the row and its `sequence` stay, which is all this test reads.
fn config(db: &TestDatabase, port: u16) -> String {
    format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         outbox:\n  pollIntervalMs: 50\n\
         inbox:\n  relay:\n    pollIntervalMs: 20\n    batchSize: 30\n    maxAttempts: 4\n\
         sources:\n  orders:\n    type: http\n    path: /orders\n    idempotencyKeyPath: $.id\n\
         \x20   eventTypePath: $.type\n    aggregateIdPath: $.orderId\n\
         \x20   topic: \"{{{{ source }}}}.{{{{ eventType }}}}\"\n",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
    )
}

async fn start(db: &TestDatabase) -> (QueueBox, u16) {
    let port = free_port();
    let mut qb = Launch::with_config(&config(db, port)).spawn(&[]);
    qb.wait_live(port, START).await;
    (qb, port)
}

async fn forwarded(port: u16) -> f64 {
    let scrape = queuebox_tests::http()
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics body");
    scrape
        .lines()
        .find_map(|line| {
            line.strip_prefix(r#"queuebox_inbox_messages_total{status="forwarded"} "#)
                .and_then(|value| value.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

async fn count(sql: &mut PgConnection, query: &'static str) -> i64 {
    sqlx::query_scalar(query)
        .fetch_one(sql)
        .await
        .unwrap_or_else(|error| panic!("{query}: {error}"))
}

#[tokio::test]
async fn two_relays_forward_every_row_once_and_keep_each_aggregate_in_created_at_order() {
    let db = TestDatabase::create().await;
    let (first, first_port) = start(&db).await;
    let (second, second_port) = start(&db).await;
    let mut sql = db.connect().await;

    // One transaction, so both relays see the whole backlog at once. Each aggregate's rows are one
    // second apart plus a jitter below a second: strictly increasing per aggregate, interleaved
    // across aggregates, and stored in random physical order with random ids.
    sqlx::query(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers, \
                            correlation_id, created_at) \
         SELECT 'orders', 'evt-' || n, 'order-' || (n % $2), 'order.step', \
                jsonb_build_object('id', 'evt-' || n, 'n', n), \
                jsonb_build_object('X-Inbox-Id', 'forged', 'X-Trace', 't-' || n), 'corr-' || n, \
                now() - interval '2 hours' + (n / $2) * interval '1 second' \
                    + floor(random() * 900) * interval '1 millisecond' \
           FROM generate_series(1, $1) AS n \
          ORDER BY random()",
    )
    .bind(ROWS)
    .bind(AGGREGATES)
    .execute(&mut sql)
    .await
    .expect("insert the inbox backlog");

    let started = Instant::now();
    wait_until("every inbox row processed", DRAIN, || async {
        let mut check = db.connect().await;
        let left = count(
            &mut check,
            "SELECT count(*) FROM inbox WHERE state <> 'processed'",
        )
        .await;
        let _ = check.close().await;
        (left == 0).then_some(())
    })
    .await;
    let took = started.elapsed();
    eprintln!(
        "relayed {ROWS} rows over {AGGREGATES} aggregates with two processes in {took:?} ({:.0} rows/s)",
        ROWS as f64 / took.as_secs_f64()
    );

    assert_eq!(count(&mut sql, "SELECT count(*) FROM outbox").await, ROWS);
    assert_eq!(
        count(
            &mut sql,
            "SELECT count(DISTINCT headers->>'x-inbox-id') FROM outbox"
        )
        .await,
        ROWS,
        "one outbox row per inbox row"
    );
    // Every outbox row matches its inbox row field by field; the forged header was replaced.
    let mismatched = count(
        &mut sql,
        "SELECT count(*) FROM outbox o \
           LEFT JOIN inbox i ON i.id::text = o.headers->>'x-inbox-id' \
          WHERE i.id IS NULL \
             OR o.topic <> 'orders.order.step' \
             OR o.key IS DISTINCT FROM i.aggregate_id \
             OR o.payload <> i.payload \
             OR o.max_attempts <> 4 \
             OR o.headers->>'x-source' <> 'orders' \
             OR o.headers->>'x-idempotency-key' <> i.idempotency_key \
             OR o.headers->>'X-Correlation-Id' <> i.correlation_id \
             OR o.headers->>'X-Trace' IS DISTINCT FROM i.headers->>'X-Trace' \
             OR o.headers ? 'X-Inbox-Id'",
    )
    .await;
    assert_eq!(
        mismatched, 0,
        "outbox rows that do not match their inbox row"
    );
    let out_of_order = count(
        &mut sql,
        "SELECT count(*) FROM ( \
            SELECT row_number() OVER (PARTITION BY o.key ORDER BY o.sequence) AS by_sequence, \
                   row_number() OVER (PARTITION BY o.key ORDER BY i.created_at) AS by_created \
              FROM outbox o JOIN inbox i ON i.id::text = o.headers->>'x-inbox-id') AS t \
          WHERE by_sequence <> by_created",
    )
    .await;
    assert_eq!(
        out_of_order, 0,
        "outbox rows out of their aggregate's created_at order"
    );

    // Both processes took part, and together they counted every row once.
    let (a, b) = (forwarded(first_port).await, forwarded(second_port).await);
    assert!(
        a > 0.0 && b > 0.0,
        "one relay did all the work: {a} and {b}"
    );
    assert_eq!(a + b, ROWS as f64);

    for mut qb in [first, second] {
        qb.terminate();
        let status = qb.wait_exit(Duration::from_secs(30)).await;
        assert!(status.success(), "exit {status}; log:\n{}", qb.log());
    }
    let _ = sql.close().await;
    db.drop_database().await;
}

#[tokio::test]
async fn the_relay_reports_its_health_and_can_be_turned_off() {
    let db = TestDatabase::create().await;
    let (mut on, on_port) = start(&db).await;
    let ready = |port: u16| async move {
        queuebox_tests::http()
            .get(format!("http://127.0.0.1:{port}/health/ready"))
            .send()
            .await
            .expect("GET /health/ready")
            .json::<serde_json::Value>()
            .await
            .expect("health body")
    };
    let body = wait_until("the relay up", START, || async {
        let body = ready(on_port).await;
        (body["components"]["inbox-relay"]["status"] == "up").then_some(body)
    })
    .await;
    assert_eq!(body["status"], "healthy");
    on.terminate();
    on.wait_exit(Duration::from_secs(30)).await;

    let port = free_port();
    let yaml = config(&db, port).replace("    pollIntervalMs: 20\n", "    enabled: false\n");
    let mut off = Launch::with_config(&yaml).spawn(&[]);
    off.wait_live(port, START).await;
    let body = ready(port).await;
    assert!(
        body["components"].get("inbox-relay").is_none(),
        "no relay component when disabled: {body}"
    );
    off.terminate();
    off.wait_exit(Duration::from_secs(30)).await;
    db.drop_database().await;
}
