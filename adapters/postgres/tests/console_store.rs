//! The console's reads against a real server: counts, the dead lists with every filter and the
//! keyset paging, one row with a cut payload, the lookups, and the inbox requeue. The ignored test
//! fills a million outbox rows and prints each statement's plan and time (docs/operations/console.md
//! quotes its numbers): `cargo test -p queuebox-postgres --test console_store -- --ignored --nocapture`.

mod common;

use chrono::{Duration as Span, Utc};
use queuebox_domain::mapping::SchemaNames;
use queuebox_ports::console::{ConsoleStore, DeadFilter, PageCursor, Table};
use queuebox_postgres::{ConsoleStatements, PgConsoleStore, PostgresDatabase};
use sqlx::Row;
use std::time::{Duration, Instant};
use uuid::Uuid;

type Fixture = common::StoreFixture<PgConsoleStore>;

async fn fixture() -> Fixture {
    Fixture::open(|db: &PostgresDatabase| db.console_store().expect("console statements")).await
}

impl Fixture {
    async fn outbox(
        &mut self,
        topic: &str,
        key: &str,
        state: &str,
        error: Option<&str>,
        age_min: i64,
    ) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO outbox (topic, key, payload, headers, state, last_error, created_at, updated_at) \
             VALUES ($1, $2, '{\"n\":1}'::jsonb, '{\"x-a\":\"1\"}'::jsonb, $3, $4, now() - $5 * interval '1 minute', \
                     now() - $5 * interval '1 minute') RETURNING id",
        )
        .bind(topic)
        .bind(key)
        .bind(state)
        .bind(error)
        .bind(age_min)
        .fetch_one(&mut self.session)
        .await
        .expect("insert an outbox row")
    }

    async fn inbox(&mut self, source: &str, key: &str, state: &str, correlation: &str) -> Uuid {
        sqlx::query_scalar(
            "INSERT INTO inbox (source, idempotency_key, payload, state, correlation_id, last_error) \
             VALUES ($1, $2, '{}'::jsonb, $3, $4, CASE WHEN $3 = 'dead' THEN 'transform failed' END) RETURNING id",
        )
        .bind(source)
        .bind(key)
        .bind(state)
        .bind(correlation)
        .fetch_one(&mut self.session)
        .await
        .expect("insert an inbox row")
    }
}

#[tokio::test]
async fn counts_lists_filters_rows_lookups_and_requeue() {
    let mut f = fixture().await;
    let a1 = f
        .outbox("orders", "k1", "dead", Some("HTTP 503 from receiver"), 30)
        .await;
    let a2 = f
        .outbox("orders", "k2", "dead", Some("timeout after 5000 ms"), 20)
        .await;
    let a3 = f
        .outbox("orders", "k3", "dead", Some("HTTP 50% off_sale"), 10)
        .await;
    let b1 = f
        .outbox("users", "k1", "dead", Some("HTTP 503 from receiver"), 5)
        .await;
    f.outbox("orders", "k4", "pending", None, 40).await;
    f.outbox("orders", "k5", "sent", None, 1).await;
    f.outbox("users", "k6", "processing", None, 1).await;

    let counts = f.store.outbox_counts().await.expect("counts");
    let find = |topic: &str, state: &str| {
        counts
            .iter()
            .find(|c| c.topic == topic && c.state == state)
            .map(|c| c.count)
    };
    assert_eq!(find("orders", "dead"), Some(3));
    assert_eq!(find("orders", "pending"), Some(1));
    assert_eq!(find("users", "processing"), Some(1));
    assert_eq!(find("orders", "sent"), None, "sent rows are never counted");
    assert_eq!(
        f.store.outbox_topics().await.expect("topics"),
        ["orders", "users"]
    );
    let pending = counts
        .iter()
        .find(|c| c.state == "pending")
        .expect("pending");
    assert!(
        pending
            .oldest_age_seconds
            .is_some_and(|s| s >= 40.0 * 60.0 - 5.0),
        "{pending:?}"
    );

    let ids = |rows: Vec<queuebox_ports::console::RowSummary>| {
        rows.into_iter().map(|r| r.id).collect::<Vec<_>>()
    };
    let all = f
        .store
        .dead_page(Table::Outbox, &DeadFilter::default(), None, 10)
        .await
        .expect("page");
    assert_eq!(ids(all), vec![b1, a3, a2, a1], "newest change first");
    let orders = DeadFilter {
        groups: Some(vec!["orders".into()]),
        ..DeadFilter::default()
    };
    assert_eq!(
        ids(f
            .store
            .dead_page(Table::Outbox, &orders, None, 10)
            .await
            .expect("page")),
        vec![a3, a2, a1]
    );
    assert_eq!(
        f.store
            .dead_count(Table::Outbox, &orders)
            .await
            .expect("count"),
        3
    );
    let by_error = DeadFilter {
        error_text: Some("http 503".into()),
        ..DeadFilter::default()
    };
    assert_eq!(
        ids(f
            .store
            .dead_page(Table::Outbox, &by_error, None, 10)
            .await
            .expect("page")),
        vec![b1, a1]
    );
    // The wildcards of the error text are literal.
    let percent = DeadFilter {
        error_text: Some("50%".into()),
        ..DeadFilter::default()
    };
    assert_eq!(
        ids(f
            .store
            .dead_page(Table::Outbox, &percent, None, 10)
            .await
            .expect("page")),
        vec![a3]
    );
    let by_key = DeadFilter {
        key: Some("k1".into()),
        ..DeadFilter::default()
    };
    assert_eq!(
        f.store
            .dead_count(Table::Outbox, &by_key)
            .await
            .expect("count"),
        2
    );
    let recent = DeadFilter {
        created_from: Some(Utc::now() - Span::minutes(15)),
        ..DeadFilter::default()
    };
    assert_eq!(
        ids(f
            .store
            .dead_page(Table::Outbox, &recent, None, 10)
            .await
            .expect("page")),
        vec![b1, a3]
    );
    let older = DeadFilter {
        created_to: Some(Utc::now() - Span::minutes(15)),
        ..DeadFilter::default()
    };
    assert_eq!(
        f.store
            .dead_count(Table::Outbox, &older)
            .await
            .expect("count"),
        2
    );
    let none = DeadFilter {
        groups: Some(vec![]),
        ..DeadFilter::default()
    };
    assert_eq!(
        f.store
            .dead_count(Table::Outbox, &none)
            .await
            .expect("count"),
        0
    );

    // Keyset paging: two pages of two, no row twice, none lost.
    let first = f
        .store
        .dead_page(Table::Outbox, &DeadFilter::default(), None, 2)
        .await
        .expect("page");
    let last = first.last().expect("row");
    let cursor = PageCursor {
        at: last.changed_at,
        id: last.id,
    };
    let second = f
        .store
        .dead_page(Table::Outbox, &DeadFilter::default(), Some(cursor), 2)
        .await
        .expect("page");
    assert_eq!([ids(first), ids(second)].concat(), vec![b1, a3, a2, a1]);

    // One row, its payload cut.
    let big: Uuid = sqlx::query_scalar(
        "INSERT INTO outbox (topic, payload, state) VALUES ('big', jsonb_build_object('s', repeat('x', 10000)), 'dead') RETURNING id",
    )
    .fetch_one(&mut f.session)
    .await
    .expect("insert");
    let row = f
        .store
        .row(Table::Outbox, big, 100)
        .await
        .expect("row")
        .expect("found");
    assert_eq!(row.payload.chars().count(), 100);
    assert_eq!(row.payload_bytes, 10_009);
    let row = f
        .store
        .row(Table::Outbox, a1, 1000)
        .await
        .expect("row")
        .expect("found");
    assert_eq!(
        (row.payload.as_str(), row.headers.as_str()),
        ("{\"n\": 1}", "{\"x-a\": \"1\"}")
    );
    assert!(
        f.store
            .row(Table::Inbox, a1, 10)
            .await
            .expect("row")
            .is_none()
    );

    // Inbox: list, lookups, requeue.
    let d1 = f.inbox("stripe", "evt_1", "dead", "corr-1").await;
    let p1 = f.inbox("github", "evt_1", "processed", "corr-1").await;
    f.inbox("github", "evt_2", "pending", "corr-2").await;
    let inbox_counts = f.store.inbox_counts().await.expect("counts");
    assert!(inbox_counts.iter().any(|c| c.source == "stripe"
        && c.state == "dead"
        && c.count == 1
        && c.consumption == "push"));
    assert!(!inbox_counts.iter().any(|c| c.state == "processed"));
    let mut by_key = ids(f.store.inbox_by_key("evt_1").await.expect("lookup"));
    by_key.sort();
    let mut expected = vec![d1, p1];
    expected.sort();
    assert_eq!(by_key, expected);
    assert_eq!(
        f.store
            .inbox_by_correlation("corr-1", 10)
            .await
            .expect("lookup")
            .len(),
        2
    );
    assert!(
        f.store
            .inbox_by_key("nope")
            .await
            .expect("lookup")
            .is_empty()
    );
    let dead_inbox = f
        .store
        .dead_page(Table::Inbox, &DeadFilter::default(), None, 10)
        .await
        .expect("page");
    assert_eq!(ids(dead_inbox), vec![d1]);
    assert_eq!(
        f.store.requeue_inbox(&[d1, p1]).await.expect("requeue"),
        1,
        "only the dead row moves"
    );
    let row = sqlx::query("SELECT state, attempt, last_error FROM inbox WHERE id = $1")
        .bind(d1)
        .fetch_one(&mut f.session)
        .await
        .expect("read");
    assert_eq!(row.get::<String, _>("state"), "pending");
    assert_eq!(row.get::<Option<String>, _>("last_error"), None);
    f.done().await;
}

type Query = sqlx::query::Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// A dead-page statement with its eight parameters: cursor, groups, error pattern; the other
/// filters unset.
fn page(
    sql: sqlx::AssertSqlSafe<String>,
    cursor: Option<(chrono::DateTime<Utc>, Uuid)>,
    groups: Option<Vec<String>>,
    error: Option<String>,
) -> Query {
    sqlx::query(sql)
        .bind(cursor.map(|c| c.0))
        .bind(cursor.map(|c| c.1))
        .bind(groups)
        .bind(None::<String>)
        .bind(None::<chrono::DateTime<Utc>>)
        .bind(None::<chrono::DateTime<Utc>>)
        .bind(error)
        .bind(51_i32)
}

/// A dead-count statement with its five parameters.
fn count(
    sql: sqlx::AssertSqlSafe<String>,
    groups: Option<Vec<String>>,
    error: Option<String>,
) -> Query {
    sqlx::query(sql)
        .bind(groups)
        .bind(None::<String>)
        .bind(None::<chrono::DateTime<Utc>>)
        .bind(None::<chrono::DateTime<Utc>>)
        .bind(error)
}

/// The median of five runs of `run`.
async fn median<F, Fut>(mut run: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        run().await;
        times.push(start.elapsed());
    }
    times.sort();
    times[2]
}

#[tokio::test]
#[ignore = "fills a million rows (about a minute); run by hand for the plans"]
async fn plans_and_times_at_one_million_outbox_rows() {
    let mut f = fixture().await;
    // 1,000,000 outbox rows over 50 topics: 940k sent, 30k pending, 30k dead (with errors); and
    // 1,000,000 inbox rows over 5 sources: 980k processed, 10k pending, 10k dead.
    f.db.exec(
        "INSERT INTO outbox (topic, key, payload, headers, state, last_error, created_at, updated_at) \
         SELECT 'topic.' || (g % 50), 'key-' || (g % 10000), jsonb_build_object('n', g, 'text', repeat('p', 200)), \
                '{\"content-type\":\"application/json\"}'::jsonb, \
                CASE WHEN g % 100 < 94 THEN 'sent' WHEN g % 100 < 97 THEN 'pending' ELSE 'dead' END, \
                CASE WHEN g % 100 >= 97 THEN 'HTTP ' || (500 + g % 4) || ' from receiver: upstream failed' END, \
                now() - (g || ' seconds')::interval, now() - (g || ' seconds')::interval \
           FROM generate_series(1, 1000000) AS g",
    )
    .await;
    f.db.exec(
        "INSERT INTO inbox (source, idempotency_key, payload, state, correlation_id, last_error, created_at) \
         SELECT 'source' || (g % 5), 'evt-' || g, jsonb_build_object('n', g), \
                CASE WHEN g % 100 < 98 THEN 'processed' WHEN g % 100 < 99 THEN 'pending' ELSE 'dead' END, \
                'corr-' || g, CASE WHEN g % 100 = 99 THEN 'no route' END, now() - (g || ' seconds')::interval \
           FROM generate_series(1, 1000000) AS g",
    )
    .await;
    f.db.exec("VACUUM ANALYZE outbox").await;
    f.db.exec("VACUUM ANALYZE inbox").await;

    let statements = ConsoleStatements::render(&SchemaNames::default()).expect("render");
    let sql = |name: &str| {
        statements
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s.to_owned())
            .expect("statement")
    };
    let some_id: Uuid = sqlx::query_scalar("SELECT id FROM outbox WHERE state = 'dead' LIMIT 1")
        .fetch_one(&mut f.session)
        .await
        .expect("id");
    let cursor_at = Utc::now() - Span::hours(100);
    let topics = vec!["topic.7".to_owned(), "topic.8".to_owned()];

    // The EXPLAIN output of each statement with representative values.
    let mut report = String::new();
    let e = |name: &str| {
        sqlx::AssertSqlSafe(format!(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {}",
            sql(name)
        ))
    };
    let later = Some((cursor_at, Uuid::max()));
    let narrow_groups = Some(topics.clone());
    let narrow_error = Some("%HTTP 503%".to_owned());
    let plans = [
        (
            "console_outbox_counts",
            sqlx::query(e("console_outbox_counts")),
        ),
        (
            "console_inbox_counts",
            sqlx::query(e("console_inbox_counts")),
        ),
        (
            "console_outbox_dead_page (no filter)",
            page(e("console_outbox_dead_page"), None, None, None),
        ),
        (
            "console_outbox_dead_page (two topics, error text)",
            page(
                e("console_outbox_dead_page"),
                None,
                narrow_groups.clone(),
                narrow_error.clone(),
            ),
        ),
        (
            "console_outbox_dead_page (a later page, cursor 100 h back)",
            page(e("console_outbox_dead_page"), later, None, None),
        ),
        (
            "console_outbox_dead_count (two topics, error text)",
            count(e("console_outbox_dead_count"), narrow_groups, narrow_error),
        ),
        (
            "console_outbox_dead_count (no filter: every dead row)",
            count(e("console_outbox_dead_count"), None, None),
        ),
        (
            "console_inbox_dead_page (one source)",
            page(
                e("console_inbox_dead_page"),
                None,
                Some(vec!["source4".to_owned()]),
                None,
            ),
        ),
        (
            "console_outbox_row",
            sqlx::query(e("console_outbox_row"))
                .bind(some_id)
                .bind(65_536_i32),
        ),
        (
            "console_inbox_by_key",
            sqlx::query(e("console_inbox_by_key")).bind("evt-777"),
        ),
        (
            "console_inbox_by_correlation",
            sqlx::query(e("console_inbox_by_correlation"))
                .bind("corr-777")
                .bind(100_i32),
        ),
    ];
    for (title, query) in plans {
        report.push_str(&format!("-- {title}\n"));
        for row in query.fetch_all(&mut f.session).await.expect("explain") {
            report.push_str(&row.get::<String, _>(0));
            report.push('\n');
        }
        report.push('\n');
    }

    // The times the console sees, through the store (median of five).
    let store = &f.store;
    let all = DeadFilter::default();
    let narrow = DeadFilter {
        groups: Some(topics.clone()),
        error_text: Some("HTTP 503".into()),
        ..DeadFilter::default()
    };
    let inbox_source = DeadFilter {
        groups: Some(vec!["source4".into()]),
        ..DeadFilter::default()
    };
    let mut times = vec![
        (
            "outbox_counts",
            median(|| async {
                store.outbox_counts().await.expect("q");
            })
            .await,
        ),
        (
            "outbox_topics",
            median(|| async {
                store.outbox_topics().await.expect("q");
            })
            .await,
        ),
        (
            "inbox_counts",
            median(|| async {
                store.inbox_counts().await.expect("q");
            })
            .await,
        ),
        (
            "dead_page outbox, no filter",
            median(|| async {
                store
                    .dead_page(Table::Outbox, &all, None, 51)
                    .await
                    .expect("q");
            })
            .await,
        ),
        (
            "dead_page outbox, two topics + error text",
            median(|| async {
                store
                    .dead_page(Table::Outbox, &narrow, None, 51)
                    .await
                    .expect("q");
            })
            .await,
        ),
        (
            "dead_page outbox, later page",
            median(|| async {
                store
                    .dead_page(
                        Table::Outbox,
                        &all,
                        Some(PageCursor {
                            at: cursor_at,
                            id: Uuid::max(),
                        }),
                        51,
                    )
                    .await
                    .expect("q");
            })
            .await,
        ),
        (
            "dead_count outbox, two topics + error text",
            median(|| async {
                store.dead_count(Table::Outbox, &narrow).await.expect("q");
            })
            .await,
        ),
        (
            "dead_count outbox, every dead row",
            median(|| async {
                store.dead_count(Table::Outbox, &all).await.expect("q");
            })
            .await,
        ),
        (
            "dead_page inbox, one source",
            median(|| async {
                store
                    .dead_page(Table::Inbox, &inbox_source, None, 51)
                    .await
                    .expect("q");
            })
            .await,
        ),
        (
            "row outbox",
            median(|| async {
                store.row(Table::Outbox, some_id, 65_536).await.expect("q");
            })
            .await,
        ),
        (
            "inbox_by_key",
            median(|| async {
                store.inbox_by_key("evt-777").await.expect("q");
            })
            .await,
        ),
        (
            "inbox_by_correlation",
            median(|| async {
                store
                    .inbox_by_correlation("corr-777", 100)
                    .await
                    .expect("q");
            })
            .await,
        ),
    ];
    report.push_str("-- median of five, through the store\n");
    for (name, time) in &times {
        report.push_str(&format!("{name}: {:.1} ms\n", time.as_secs_f64() * 1000.0));
    }
    println!("{report}");
    if let Some(path) = std::env::var_os("QB_CONSOLE_PLANS") {
        std::fs::write(path, &report).expect("write the plans");
    }
    times.retain(|(_, time)| *time >= Duration::from_millis(300));
    f.done().await;
    assert!(times.is_empty(), "over 300 ms: {times:?}");
}
