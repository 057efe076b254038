//! The database going away under a running QueueBox: a dropped session, a PostgreSQL restart, and
//! the fail-over of a multi-host `database.url` to the next writable host when the current one
//! crashes or turns read-only. Restarts and fail-overs run on the pair of clusters of
//! `scripts/services.sh` (a primary and a synchronous standby of their own, see
//! `queuebox_tests::pair`), never on the main cluster other tests share.
//!
//! Each test feeds both directions: webhooks into the inbox (the relay forwards them into the
//! outbox) and rows inserted into the outbox, all delivered to an HTTP receiver. "Nothing lost"
//! means: every inbox row `processed`, every outbox row `sent`, and every outbox row id reached the
//! receiver at least once.

use queuebox_tests::database::TestDatabase;
use queuebox_tests::free_port;
use queuebox_tests::pair::{Node, Pair};
use queuebox_tests::process::{Launch, QueueBox};
use queuebox_tests::receiver::{Policy, Receiver};
use queuebox_tests::wait_until;
use sqlx::{Connection, PgConnection};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const START: Duration = Duration::from_secs(30);
/// How long a recovery (reconnect, fail-over, redelivery of expired claims) may take.
const RECOVER: Duration = Duration::from_secs(90);

/// `serve` with a push source `orders` (relayed into the outbox as `orders.<type>`) and one route
/// of every topic to the receiver. Claims expire after 3 s, so a claim whose finish the outage
/// swallowed comes back quickly.
fn config(url: &str, user: &str, password: &str, port: u16, receiver: &Receiver) -> String {
    format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 20000\n\
         outbox:\n  pollIntervalMs: 100\n  claimTimeoutMs: 3000\n  retryBaseDelayMs: 100\n\
         inbox:\n  relay:\n    pollIntervalMs: 100\n    claimTimeoutMs: 3000\n\
         sources:\n  orders:\n    type: http\n    path: /orders\n    idempotencyKeyPath: $.id\n\
         \x20   eventTypePath: $.type\n    topic: \"{{{{ source }}}}.{{{{ eventType }}}}\"\n\
         destinations:\n  hook:\n    type: http\n    baseUrl: {base}\n    path: /events\n\
         routes:\n  - topicPattern: \"**\"\n    destination: hook\n",
        base = receiver.url(),
    )
}

/// Posts webhooks `<prefix>-<n>` for each `n` of `range`; each must be stored (202).
async fn post_orders(port: u16, prefix: &str, range: std::ops::Range<u32>) {
    let client = queuebox_tests::http();
    for n in range {
        let response = client
            .post(format!("http://127.0.0.1:{port}/inbox/orders"))
            .json(&serde_json::json!({"id": format!("{prefix}-{n}"), "type": "created"}))
            .send()
            .await
            .expect("POST /inbox/orders");
        assert_eq!(response.status(), 202, "webhook {prefix}-{n}");
    }
}

/// Inserts `count` outbox rows in one transaction of their own, as an application would.
async fn insert_rows(url: &str, topic: &str, count: i64) {
    let mut connection = PgConnection::connect(url).await.expect("connect");
    sqlx::query(
        "INSERT INTO outbox (topic, key, payload) \
         SELECT $1, 'k' || (n % 5), jsonb_build_object('n', n) FROM generate_series(1, $2) n",
    )
    .bind(topic)
    .bind(count)
    .execute(&mut connection)
    .await
    .expect("insert outbox rows");
    let _ = connection.close().await;
}

/// The status of `/health/ready` and its body.
async fn readiness(port: u16) -> Option<(u16, serde_json::Value)> {
    let response = queuebox_tests::http()
        .get(format!("http://127.0.0.1:{port}/health/ready"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    Some((status, response.json().await.ok()?))
}

async fn wait_ready(port: u16, wanted: u16, deadline: Duration) -> serde_json::Value {
    wait_until(&format!("/health/ready {wanted}"), deadline, || async {
        readiness(port)
            .await
            .and_then(|(status, body)| (status == wanted).then_some(body))
    })
    .await
}

/// Waits until `url`'s database holds `outbox` rows, all `sent`, and `inbox` rows, all
/// `processed`, and the receiver has seen every outbox row id; returns the outbox ids.
async fn wait_settled(
    url: &str,
    outbox: i64,
    inbox: i64,
    receiver: &Receiver,
    qb: &QueueBox,
) -> BTreeSet<String> {
    let what = format!("{outbox} outbox rows sent and {inbox} inbox rows processed");
    let settled = tokio::time::timeout(RECOVER, async {
        loop {
            if let Some(ids) = settled(url, outbox, inbox, receiver).await {
                return ids;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    match settled {
        Ok(ids) => ids,
        Err(_) => panic!(
            "timed out after {RECOVER:?} waiting for {what}: {}; log:\n{}",
            describe(url).await,
            qb.log()
        ),
    }
}

async fn settled(
    url: &str,
    outbox: i64,
    inbox: i64,
    receiver: &Receiver,
) -> Option<BTreeSet<String>> {
    let mut connection = PgConnection::connect(url).await.ok()?;
    let (total, sent): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE state = 'sent') FROM outbox")
            .fetch_one(&mut connection)
            .await
            .ok()?;
    let (inbox_total, processed): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE state = 'processed') FROM inbox")
            .fetch_one(&mut connection)
            .await
            .ok()?;
    let ids: Vec<String> = sqlx::query_scalar("SELECT id::text FROM outbox")
        .fetch_all(&mut connection)
        .await
        .ok()?;
    let _ = connection.close().await;
    if (total, sent, inbox_total, processed) != (outbox, outbox, inbox, inbox) {
        return None;
    }
    let delivered = delivered(receiver);
    let ids: BTreeSet<String> = ids.into_iter().collect();
    ids.is_subset(&delivered).then_some(ids)
}

async fn describe(url: &str) -> String {
    let Ok(mut connection) = PgConnection::connect(url).await else {
        return "the database does not answer".to_owned();
    };
    let outbox: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, count(*) FROM outbox GROUP BY 1 ORDER BY 1")
            .fetch_all(&mut connection)
            .await
            .unwrap_or_default();
    let inbox: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, count(*) FROM inbox GROUP BY 1 ORDER BY 1")
            .fetch_all(&mut connection)
            .await
            .unwrap_or_default();
    format!("outbox {outbox:?}, inbox {inbox:?}")
}

/// The `X-Message-Id` of every request the receiver answered 2xx.
fn delivered(receiver: &Receiver) -> BTreeSet<String> {
    receiver
        .requests()
        .iter()
        .filter(|r| r.succeeded())
        .filter_map(|r| r.header("x-message-id").map(str::to_owned))
        .collect()
}

/// How many sessions of `application_name = 'queuebox'` `url`'s server has on its database.
async fn queuebox_sessions(url: &str) -> i64 {
    let mut connection = PgConnection::connect(url).await.expect("connect");
    let count = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = 'queuebox'",
    )
    .fetch_one(&mut connection)
    .await
    .expect("count sessions");
    let _ = connection.close().await;
    count
}

/// Stops QueueBox, which must exit cleanly; `QB_TEST_SHOW_LOG=1` prints its log first.
async fn stop(mut qb: QueueBox) {
    if std::env::var("QB_TEST_SHOW_LOG").is_ok() {
        eprintln!("{}", qb.log());
    }
    qb.terminate();
    let status = qb.wait_exit(START).await;
    assert!(status.success(), "exit {status}; log:\n{}", qb.log());
}

#[tokio::test]
async fn sessions_ended_under_a_running_queuebox_are_replaced_and_nothing_is_lost() {
    // Ending sessions needs no restart, so this runs on the shared main cluster, on its own database.
    let db = TestDatabase::create().await;
    let receiver = Receiver::start(Policy::status(200)).await;
    let port = free_port();
    let yaml = config(&db.jdbc_url(), &db.user, &db.password, port, &receiver);
    let mut qb = Launch::with_config(&yaml).spawn(&[]);
    qb.wait_live(port, START).await;
    post_orders(port, "before", 0..10).await;
    insert_rows(&db.url, "direct.before", 20).await;
    wait_settled(&db.url, 30, 10, &receiver, &qb).await;

    // Rows arrive, and every QueueBox session is cut while they flow: the ones in use fail their
    // statement, the idle ones fail their check at the next acquire.
    insert_rows(&db.url, "direct.during", 30).await;
    let mut admin = db.connect().await;
    let ended: i64 = sqlx::query_scalar(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = 'queuebox'",
    )
    .fetch_one(&mut admin)
    .await
    .expect("end QueueBox's sessions");
    let _ = admin.close().await;
    assert!(ended > 0, "QueueBox had no session to end");

    post_orders(port, "after", 0..10).await;
    insert_rows(&db.url, "direct.after", 10).await;
    wait_settled(&db.url, 80, 20, &receiver, &qb).await;
    assert_eq!(wait_ready(port, 200, START).await["status"], "healthy");
    stop(qb).await;
    db.drop_database().await;
}

#[tokio::test]
async fn a_postgresql_restart_turns_readiness_down_and_back_up_and_loses_nothing() {
    let (pair, _guard) = Pair::lock().await;
    let name = pair.create_database().await;
    let url = pair.url(Node::Primary, &name);
    let receiver = Receiver::start(Policy::status(200)).await;
    let port = free_port();
    let jdbc = format!("jdbc:postgresql://{}/{name}", pair.primary);
    let yaml = config(&jdbc, &pair.user, &pair.password, port, &receiver);
    let mut qb = Launch::with_config(&yaml).spawn(&[]);
    qb.wait_live(port, START).await;
    wait_ready(port, 200, START).await;
    post_orders(port, "before", 0..10).await;
    insert_rows(&url, "direct.before", 20).await;
    wait_settled(&url, 30, 10, &receiver, &qb).await;

    // Rows committed just before the restart; some are still being claimed or sent when it hits.
    post_orders(port, "last", 0..10).await;
    insert_rows(&url, "direct.last", 30).await;
    let stopped = Instant::now();
    pair.stop(Node::Primary, "fast").await;
    let down = wait_ready(port, 503, START).await;
    assert_eq!(down["components"]["database"]["status"], "down", "{down}");
    let restarted = Instant::now();
    pair.start(Node::Primary).await;
    let up = wait_ready(port, 200, RECOVER).await;
    assert_eq!(up["components"]["database"]["status"], "up", "{up}");
    eprintln!(
        "measured: readiness 503 {:?} after the stop began; 200 {:?} after the start began",
        restarted - stopped,
        restarted.elapsed()
    );

    post_orders(port, "after", 0..10).await;
    insert_rows(&url, "direct.after", 10).await;
    wait_settled(&url, 90, 30, &receiver, &qb).await;
    stop(qb).await;
}

#[tokio::test]
async fn a_multi_host_url_moves_to_the_promoted_standby_when_the_primary_crashes() {
    let (pair, _guard) = Pair::lock().await;
    let name = pair.create_database().await;
    let receiver = Receiver::start(Policy::status(200)).await;
    let port = free_port();
    let jdbc = format!(
        "jdbc:postgresql://{},{}/{name}?targetServerType=primary",
        pair.primary, pair.standby
    );
    let yaml = config(&jdbc, &pair.user, &pair.password, port, &receiver);
    let mut qb = Launch::with_config(&yaml).spawn(&[]);
    qb.wait_live(port, START).await;
    let primary = pair.url(Node::Primary, &name);
    let standby = pair.url(Node::Standby, &name);
    post_orders(port, "before", 0..10).await;
    insert_rows(&primary, "direct.before", 20).await;
    wait_settled(&primary, 30, 10, &receiver, &qb).await;

    // Committed on the primary (and, synchronously, on the standby) right before the crash.
    post_orders(port, "last", 0..10).await;
    insert_rows(&primary, "direct.last", 30).await;
    pair.stop(Node::Primary, "immediate").await;
    pair.promote_standby().await;
    let promoted = Instant::now();

    qb.wait_for_log("database fail-over", RECOVER).await;
    let moved = promoted.elapsed();
    let up = wait_ready(port, 200, RECOVER).await;
    assert_eq!(up["components"]["database"]["status"], "up", "{up}");
    eprintln!(
        "measured: moved {moved:?} and ready {:?} after the promotion",
        promoted.elapsed()
    );
    post_orders(port, "after", 0..10).await;
    insert_rows(&standby, "direct.after", 10).await;
    wait_settled(&standby, 90, 30, &receiver, &qb).await;
    assert!(queuebox_sessions(&standby).await > 0);
    stop(qb).await;
}

#[tokio::test]
async fn a_host_that_turns_read_only_is_left_for_the_next_writable_one() {
    let (pair, _guard) = Pair::lock().await;
    let name = pair.create_database().await;
    let receiver = Receiver::start(Policy::status(200)).await;
    let port = free_port();
    // The standby is listed first: the start passes over it (read-only) and takes the primary.
    let jdbc = format!("jdbc:postgresql://{},{}/{name}", pair.standby, pair.primary);
    let yaml = config(&jdbc, &pair.user, &pair.password, port, &receiver);
    let mut qb = Launch::with_config(&yaml).spawn(&[]);
    qb.wait_live(port, START).await;
    assert!(
        qb.log().contains("skipping a read-only database host"),
        "{}",
        qb.log()
    );
    let primary = pair.url(Node::Primary, &name);
    let standby = pair.url(Node::Standby, &name);
    post_orders(port, "before", 0..10).await;
    insert_rows(&primary, "direct.before", 20).await;
    wait_settled(&primary, 30, 10, &receiver, &qb).await;

    // A planned switch-over: the primary is fenced read-only (its open sessions included), then
    // the standby is promoted. Until then no host accepts writes and QueueBox keeps looking.
    post_orders(port, "last", 0..10).await;
    insert_rows(&primary, "direct.last", 30).await;
    pair.read_only(Node::Primary, true).await;
    pair.promote_standby().await;
    let promoted = Instant::now();

    qb.wait_for_log("database fail-over", RECOVER).await;
    let moved = promoted.elapsed();
    wait_ready(port, 200, RECOVER).await;
    eprintln!(
        "measured: moved {moved:?} and ready {:?} after the promotion",
        promoted.elapsed()
    );
    post_orders(port, "after", 0..10).await;
    insert_rows(&standby, "direct.after", 10).await;
    // The rows the primary had not finished when it was fenced are on the standby too (synchronous
    // replication), and are finished there.
    wait_settled(&standby, 90, 30, &receiver, &qb).await;
    assert!(queuebox_sessions(&standby).await > 0);
    stop(qb).await;
}
