//! Retention end to end: the real `queuebox` binary on a real database deletes the finished rows its
//! policies select, leaves pending and processing rows whatever their age, leaves a DISABLED table
//! alone, and shows the cleanup metrics on `/metrics` and the `retention-service` component on
//! `/health/ready` (only when `retention.enabled`).

use queuebox_tests::database::TestDatabase;
use queuebox_tests::process::{Launch, QueueBox};
use queuebox_tests::{free_port, wait_until};
use sqlx::PgConnection;
use std::collections::BTreeSet;
use std::time::Duration;

const START: Duration = Duration::from_secs(30);
/// Cleanups run every second; this bounds the wait for the first one that sees the rows.
const CLEANED: Duration = Duration::from_secs(30);

/// `queuebox serve` with a `retention` block (and nothing else but the database).
fn config(db: &TestDatabase, port: u16, retention: &str) -> String {
    format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         {retention}",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
    )
}

async fn start(db: &TestDatabase, retention: &str) -> (QueueBox, u16) {
    let port = free_port();
    let mut qb = Launch::with_config(&config(db, port, retention)).spawn(&[]);
    qb.wait_live(port, START).await;
    (qb, port)
}

async fn get_text(url: String) -> String {
    queuebox_tests::http()
        .get(url)
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("body")
}

async fn ready(port: u16) -> serde_json::Value {
    let text = get_text(format!("http://127.0.0.1:{port}/health/ready")).await;
    serde_json::from_str(&text).unwrap_or_else(|error| panic!("{error}: {text}"))
}

/// The value of the scrape line that starts with `series ` (name and labels exactly as rendered).
fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| {
        line.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
    })
}

/// Inserts outbox rows as (topic, state, minutes since the last change). A pending row is due only
/// tomorrow and a processing row holds a live lease, so the dispatcher leaves both as they are.
async fn outbox_rows(sql: &mut PgConnection, rows: &[(&str, &str, i64)]) {
    for (topic, state, minutes) in rows {
        sqlx::query(
            "INSERT INTO outbox (topic, payload, state, updated_at, created_at, scheduled_at, \
                                 claim_token, claimed_at, lease_expires_at) \
             VALUES ($1, '{}'::jsonb, $2, now() - $3 * interval '1 minute', \
                     now() - $3 * interval '1 minute', now() + interval '1 day', \
                     CASE WHEN $2 = 'processing' THEN gen_random_uuid() END, \
                     CASE WHEN $2 = 'processing' THEN now() END, \
                     CASE WHEN $2 = 'processing' THEN now() + interval '1 hour' END)",
        )
        .bind(topic)
        .bind(state)
        .bind(minutes)
        .execute(&mut *sql)
        .await
        .expect("insert an outbox row");
    }
}

/// Inserts inbox rows as (idempotency key, state, minutes since receipt), all of the pull kind so the
/// relay leaves a pending one alone; a processing row holds a live lease.
async fn inbox_rows(sql: &mut PgConnection, rows: &[(&str, &str, i64)]) {
    for (key, state, minutes) in rows {
        sqlx::query(
            "INSERT INTO inbox (source, idempotency_key, payload, state, consumption, created_at, \
                                claim_token, lease_expires_at) \
             VALUES ('orders', $1, '{}'::jsonb, $2, 'pull', now() - $3 * interval '1 minute', \
                     CASE WHEN $2 = 'processing' THEN gen_random_uuid() END, \
                     CASE WHEN $2 = 'processing' THEN now() + interval '1 hour' END)",
        )
        .bind(key)
        .bind(state)
        .bind(minutes)
        .execute(&mut *sql)
        .await
        .expect("insert an inbox row");
    }
}

async fn names(sql: &mut PgConnection, query: &'static str) -> BTreeSet<String> {
    sqlx::query_scalar(query)
        .fetch_all(sql)
        .await
        .unwrap_or_else(|error| panic!("{query}: {error}"))
        .into_iter()
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn outbox_age_deletes_old_finished_rows_and_a_disabled_inbox_keeps_everything() {
    let db = TestDatabase::create().await;
    let (mut qb, port) = start(
        &db,
        "retention:\n  enabled: true\n\
         \x20 outbox:\n    policy: AGE\n    maxAge: 1h\n    cleanupInterval: 1s\n    batchSize: 2\n\
         \x20 inbox:\n    policy: DISABLED\n",
    )
    .await;
    let mut sql = db.connect().await;
    outbox_rows(
        &mut sql,
        &[
            ("old-sent-1", "sent", 120),
            ("old-sent-2", "sent", 120),
            ("old-sent-3", "sent", 90),
            ("old-sent-4", "sent", 61),
            ("old-sent-5", "sent", 10_000),
            ("old-dead-1", "dead", 120),
            ("old-dead-2", "dead", 120),
            ("young-sent", "sent", 30),
            ("young-dead", "dead", 50),
            ("old-pending", "pending", 10_000),
            ("old-processing", "processing", 10_000),
        ],
    )
    .await;
    inbox_rows(
        &mut sql,
        &[
            ("old-processed", "processed", 100_000),
            ("old-dead", "dead", 100_000),
        ],
    )
    .await;

    // Seven old finished rows, deleted two a batch. The deleted counter grows batch by batch and
    // the last-run gauge is set when the run ends, so a scrape can fall between the two: wait for
    // both.
    let scrape = wait_until("the outbox cleanup", CLEANED, || async {
        let scrape = get_text(format!("http://127.0.0.1:{port}/metrics")).await;
        let deleted = sample(
            &scrape,
            r#"queuebox_cleanup_messages_deleted_total{table="outbox"}"#,
        );
        let last_run = sample(
            &scrape,
            r#"queuebox_cleanup_last_run_timestamp{table="outbox"}"#,
        );
        (deleted == Some(7.0) && last_run.is_some_and(|t| t > 0.0)).then_some(scrape)
    })
    .await;
    assert_eq!(
        names(&mut sql, "SELECT topic FROM outbox").await,
        set(&["young-sent", "young-dead", "old-pending", "old-processing"])
    );
    assert_eq!(
        names(&mut sql, "SELECT idempotency_key FROM inbox").await,
        set(&["old-processed", "old-dead"]),
        "the inbox policy is DISABLED"
    );

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let last_run = sample(
        &scrape,
        r#"queuebox_cleanup_last_run_timestamp{table="outbox"}"#,
    )
    .unwrap_or_else(|| panic!("no last-run gauge:\n{scrape}"));
    assert!(
        (now - 120.0..=now + 5.0).contains(&last_run),
        "{last_run} is not a recent Unix time"
    );
    assert!(
        scrape.contains(r#"queuebox_cleanup_duration_seconds_count{table="outbox"}"#),
        "{scrape}"
    );
    assert!(
        sample(
            &scrape,
            r#"queuebox_cleanup_duration_seconds_max{table="outbox"}"#
        )
        .is_some(),
        "{scrape}"
    );
    assert!(
        !scrape.contains(r#"table="inbox""#),
        "a DISABLED table has no cleanup metrics:\n{scrape}"
    );

    let health = ready(port).await;
    assert_eq!(health["status"], "healthy", "{health}");
    assert_eq!(
        health["components"]["retention-service"],
        serde_json::json!({"status": "up"}),
        "{health}"
    );

    qb.terminate();
    assert!(qb.wait_exit(START).await.success(), "{}", qb.log());
    db.drop_database().await;
}

#[tokio::test]
async fn outbox_count_keeps_the_newest_rows_and_inbox_age_deletes_old_finished_rows() {
    let db = TestDatabase::create().await;
    let (mut qb, port) = start(
        &db,
        "retention:\n  enabled: true\n\
         \x20 outbox:\n    policy: COUNT\n    maxCount: 2\n    cleanupInterval: 1s\n    batchSize: 1\n\
         \x20 inbox:\n    policy: AGE\n    maxAge: 1d\n    cleanupInterval: 1s\n    batchSize: 1\n",
    )
    .await;
    let mut sql = db.connect().await;
    outbox_rows(
        &mut sql,
        &[
            ("sent-newest", "sent", 1),
            ("sent-second", "sent", 2),
            ("sent-third", "sent", 3),
            ("sent-fourth", "sent", 4),
            ("dead-newest", "dead", 1_000),
            ("dead-second", "dead", 2_000),
            ("dead-third", "dead", 3_000),
            ("old-pending", "pending", 100_000),
            ("old-processing", "processing", 100_000),
        ],
    )
    .await;
    inbox_rows(
        &mut sql,
        &[
            ("old-processed", "processed", 1_441),
            ("old-dead", "dead", 100_000),
            ("young-processed", "processed", 1_400),
            ("old-pending", "pending", 100_000),
            ("old-processing", "processing", 100_000),
        ],
    )
    .await;

    wait_until("both cleanups", CLEANED, || async {
        let scrape = get_text(format!("http://127.0.0.1:{port}/metrics")).await;
        let outbox = sample(
            &scrape,
            r#"queuebox_cleanup_messages_deleted_total{table="outbox"}"#,
        );
        let inbox = sample(
            &scrape,
            r#"queuebox_cleanup_messages_deleted_total{table="inbox"}"#,
        );
        (outbox == Some(3.0) && inbox == Some(2.0)).then_some(())
    })
    .await;
    assert_eq!(
        names(&mut sql, "SELECT topic FROM outbox").await,
        set(&[
            "sent-newest",
            "sent-second",
            "dead-newest",
            "dead-second",
            "old-pending",
            "old-processing"
        ])
    );
    assert_eq!(
        names(&mut sql, "SELECT idempotency_key FROM inbox").await,
        set(&["young-processed", "old-pending", "old-processing"])
    );
    assert_eq!(
        ready(port).await["components"]["retention-service"]["status"],
        "up"
    );

    qb.terminate();
    assert!(qb.wait_exit(START).await.success(), "{}", qb.log());
    db.drop_database().await;
}

#[tokio::test]
async fn without_retention_enabled_nothing_is_deleted_and_no_component_shows() {
    let db = TestDatabase::create().await;
    // Table policies are set, but `retention.enabled` is false, so none applies.
    let (mut qb, port) = start(
        &db,
        "retention:\n  enabled: false\n\
         \x20 outbox:\n    policy: AGE\n    maxAge: 1s\n    cleanupInterval: 1s\n",
    )
    .await;
    let mut sql = db.connect().await;
    outbox_rows(&mut sql, &[("old-sent", "sent", 10_000)]).await;
    let health = ready(port).await;
    assert_eq!(health["status"], "healthy", "{health}");
    assert!(
        health["components"].get("retention-service").is_none(),
        "{health}"
    );
    let scrape = get_text(format!("http://127.0.0.1:{port}/metrics")).await;
    assert!(!scrape.contains("queuebox_cleanup_"), "{scrape}");

    // No cleanup was started (the service logs its start before its first run), and the row stays.
    qb.terminate();
    assert!(qb.wait_exit(START).await.success(), "{}", qb.log());
    assert!(
        !qb.log().contains("retention cleanup started"),
        "{}",
        qb.log()
    );
    assert_eq!(
        names(&mut sql, "SELECT topic FROM outbox").await,
        set(&["old-sent"])
    );
    db.drop_database().await;
}
