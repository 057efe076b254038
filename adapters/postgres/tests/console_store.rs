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
    f.outbox("invoices", "k7", "sent", None, 1).await;

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
        f.store.outbox_dead_topics().await.expect("topics"),
        ["orders", "users"],
        "the topics of dead rows only: invoices has a sent row and no dead one"
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

/// `%text%`; the texts of this test hold no LIKE wildcard.
fn pattern(filter: &DeadFilter) -> Option<String> {
    filter.error_text.as_ref().map(|text| format!("%{text}%"))
}

/// A dead-page statement with the parameters the store binds for `filter` and `after`.
fn page_query(sql: String, filter: &DeadFilter, after: Option<PageCursor>) -> Query {
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(after.map(|c| c.at))
        .bind(after.map(|c| c.id))
        .bind(filter.groups.clone())
        .bind(filter.key.clone())
        .bind(filter.created_from)
        .bind(filter.created_to)
        .bind(pattern(filter))
        .bind(51_i32)
}

/// A dead-count statement with the parameters the store binds for `filter`.
fn count_query(sql: String, filter: &DeadFilter) -> Query {
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(filter.groups.clone())
        .bind(filter.key.clone())
        .bind(filter.created_from)
        .bind(filter.created_to)
        .bind(pattern(filter))
}

/// The median and the slowest of seven runs of `run`.
async fn time<F, Fut>(mut run: F) -> (Duration, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        run().await;
        times.push(start.elapsed());
    }
    times.sort();
    (times[3], times[6])
}

/// What one view asks the store: a dead page or count of a table with a filter, or another read.
#[derive(Clone)]
enum Ask {
    Page(Table, DeadFilter, Option<PageCursor>),
    Count(Table, DeadFilter),
    OutboxCounts,
    InboxCounts,
    Topics,
    Row(Table, Uuid),
    ByKey(&'static str),
    ByCorrelation(&'static str),
}

/// The two statements that fill the tables with `rows` rows each. States are picked by `g % 997`
/// and topics, keys and sources by other moduli, so every topic has rows of every state, spread
/// over the whole table. Outbox: 94 % sent, 2.5 % pending, 0.5 % processing and 3 % dead rows over
/// 50 topics and 10,000 keys, 200-byte payloads; inbox: 98 % processed, 0.8 % pending, 0.2 %
/// processing and 1 % dead rows over 5 sources. Row g was created g seconds ago.
fn seed(rows: u32) -> [String; 2] {
    [
        format!(
            "INSERT INTO outbox (topic, key, payload, headers, state, last_error, created_at, \
                                 updated_at, claimed_at, lease_expires_at) \
             SELECT 'topic.' || (g % 50), 'key-' || (g % 10000), \
                    jsonb_build_object('n', g, 'text', repeat('p', 200)), \
                    '{{\"content-type\":\"application/json\"}}'::jsonb, \
                    CASE WHEN g % 997 < 937 THEN 'sent' WHEN g % 997 < 962 THEN 'pending' \
                         WHEN g % 997 < 967 THEN 'processing' ELSE 'dead' END, \
                    CASE WHEN g % 997 >= 967 THEN 'HTTP ' || (500 + g % 4) || ' from receiver: upstream failed' END, \
                    now() - g * interval '1 second', now() - g * interval '1 second', \
                    CASE WHEN g % 997 BETWEEN 962 AND 966 THEN now() END, \
                    CASE WHEN g % 997 BETWEEN 962 AND 966 THEN now() + interval '1 day' END \
               FROM generate_series(1, {rows}) AS g"
        ),
        format!(
            "INSERT INTO inbox (source, idempotency_key, payload, state, correlation_id, last_error, \
                                created_at) \
             SELECT 'source' || (g % 5), 'evt-' || g, jsonb_build_object('n', g), \
                    CASE WHEN g % 997 < 977 THEN 'processed' WHEN g % 997 < 985 THEN 'pending' \
                         WHEN g % 997 < 987 THEN 'processing' ELSE 'dead' END, \
                    'corr-' || g, CASE WHEN g % 997 >= 987 THEN 'no route' END, \
                    now() - g * interval '1 second' \
               FROM generate_series(1, {rows}) AS g"
        ),
    ]
}

/// A fixture whose tables hold `rows` rows each (see [`seed`]), analysed, and what each view asks
/// of them with representative values.
async fn seeded(rows: u32) -> (Fixture, Vec<(&'static str, Ask)>) {
    let mut f = fixture().await;
    for statement in seed(rows) {
        f.db.exec(&statement).await;
    }
    f.db.exec("VACUUM ANALYZE outbox").await;
    f.db.exec("VACUUM ANALYZE inbox").await;
    let outbox_id: Uuid = sqlx::query_scalar("SELECT id FROM outbox WHERE state = 'dead' LIMIT 1")
        .fetch_one(&mut f.session)
        .await
        .expect("id");
    let inbox_id: Uuid = sqlx::query_scalar("SELECT id FROM inbox WHERE state = 'dead' LIMIT 1")
        .fetch_one(&mut f.session)
        .await
        .expect("id");
    let filter = |change: &dyn Fn(&mut DeadFilter)| {
        let mut filter = DeadFilter::default();
        change(&mut filter);
        filter
    };
    let topics = |n: usize| Some((0..n).map(|i| format!("topic.{i}")).collect::<Vec<_>>());
    let no_match = || Some("no such failure".to_owned());
    let cases = vec![
        ("overview: outbox counts", Ask::OutboxCounts),
        ("overview: inbox counts", Ask::InboxCounts),
        ("destination filter: the topics", Ask::Topics),
        (
            "dead outbox page, no filter",
            Ask::Page(Table::Outbox, DeadFilter::default(), None),
        ),
        (
            "dead outbox page, one topic",
            Ask::Page(Table::Outbox, filter(&|f| f.groups = topics(1)), None),
        ),
        (
            "dead outbox page, a destination of 25 topics",
            Ask::Page(Table::Outbox, filter(&|f| f.groups = topics(25)), None),
        ),
        (
            "dead outbox page, two topics and error text",
            Ask::Page(
                Table::Outbox,
                filter(&|f| {
                    f.groups = topics(2);
                    f.error_text = Some("HTTP 503".into());
                }),
                None,
            ),
        ),
        (
            "dead outbox page, one key",
            Ask::Page(
                Table::Outbox,
                filter(&|f| f.key = Some("key-977".into())),
                None,
            ),
        ),
        (
            "dead outbox page, error text matching nothing",
            Ask::Page(Table::Outbox, filter(&|f| f.error_text = no_match()), None),
        ),
        (
            "dead outbox page, created in the last hour",
            Ask::Page(
                Table::Outbox,
                filter(&|f| f.created_from = Some(Utc::now() - Span::hours(1))),
                None,
            ),
        ),
        (
            "dead outbox page, created over 250 h ago",
            Ask::Page(
                Table::Outbox,
                filter(&|f| f.created_to = Some(Utc::now() - Span::hours(250))),
                None,
            ),
        ),
        (
            "dead outbox page, a later page (cursor 100 h back)",
            Ask::Page(
                Table::Outbox,
                DeadFilter::default(),
                Some(PageCursor {
                    at: Utc::now() - Span::hours(100),
                    id: Uuid::max(),
                }),
            ),
        ),
        (
            "replay confirmation: dead outbox count, no filter",
            Ask::Count(Table::Outbox, DeadFilter::default()),
        ),
        (
            "replay confirmation: dead outbox count, two topics and error text",
            Ask::Count(
                Table::Outbox,
                filter(&|f| {
                    f.groups = topics(2);
                    f.error_text = Some("HTTP 503".into());
                }),
            ),
        ),
        (
            "replay confirmation: dead outbox count, error text matching nothing",
            Ask::Count(Table::Outbox, filter(&|f| f.error_text = no_match())),
        ),
        (
            "dead inbox page, no filter",
            Ask::Page(Table::Inbox, DeadFilter::default(), None),
        ),
        (
            "dead inbox page, one source",
            Ask::Page(
                Table::Inbox,
                filter(&|f| f.groups = Some(vec!["source4".into()])),
                None,
            ),
        ),
        (
            "dead inbox page, error text matching nothing",
            Ask::Page(Table::Inbox, filter(&|f| f.error_text = no_match()), None),
        ),
        (
            "replay confirmation: dead inbox count, one source",
            Ask::Count(
                Table::Inbox,
                filter(&|f| f.groups = Some(vec!["source4".into()])),
            ),
        ),
        ("detail: outbox row", Ask::Row(Table::Outbox, outbox_id)),
        ("detail: inbox row", Ask::Row(Table::Inbox, inbox_id)),
        ("lookup: idempotency key", Ask::ByKey("evt-777")),
        ("lookup: correlation id", Ask::ByCorrelation("corr-777")),
    ];
    (f, cases)
}

/// The EXPLAIN of what `ask` runs, with `options`, bound to the values the store binds.
fn explain(statements: &ConsoleStatements, options: &str, ask: &Ask) -> Query {
    let sql = |name: &str| {
        statements
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| format!("EXPLAIN ({options}) {s}"))
            .expect("statement")
    };
    let plain = |name: &str| sqlx::query(sqlx::AssertSqlSafe(sql(name)));
    let (page, count) = match ask {
        Ask::Page(Table::Inbox, ..) | Ask::Count(Table::Inbox, _) => {
            ("console_inbox_dead_page", "console_inbox_dead_count")
        }
        _ => ("console_outbox_dead_page", "console_outbox_dead_count"),
    };
    match ask {
        Ask::Page(_, filter, after) => page_query(sql(page), filter, *after),
        Ask::Count(_, filter) => count_query(sql(count), filter),
        Ask::OutboxCounts => plain("console_outbox_counts"),
        Ask::InboxCounts => plain("console_inbox_counts"),
        Ask::Topics => plain("console_outbox_dead_topics"),
        Ask::Row(Table::Outbox, id) => plain("console_outbox_row").bind(*id).bind(65_536_i32),
        Ask::Row(Table::Inbox, id) => plain("console_inbox_row").bind(*id).bind(65_536_i32),
        Ask::ByKey(key) => plain("console_inbox_by_key").bind(*key),
        Ask::ByCorrelation(id) => plain("console_inbox_by_correlation")
            .bind(*id)
            .bind(100_i32),
    }
    .persistent(false)
}

/// The plan of each view's statements on 100,000 rows a table: none reads a whole table except the
/// correlation-id lookup (no index holds correlation ids, by choice: see console.md), and the ones
/// that have an index use it. The overview's outbox count reads each state through the partial
/// index of that state, so no index is kept for it on the delivery path. Deterministic (the
/// planner's choice, not a time).
#[tokio::test]
async fn every_view_is_planned_on_its_index() {
    let (mut f, cases) = seeded(100_000).await;
    let statements = ConsoleStatements::render(&SchemaNames::default()).expect("render");
    let expected: [(&str, &[&str]); 10] = [
        (
            "overview: outbox counts",
            &[
                "on idx_outbox_pending_scheduled",
                "using idx_outbox_processing_claimed",
                "Index Only Scan using idx_outbox_dead_topic",
            ],
        ),
        (
            "dead outbox page, no filter",
            &["Index Scan Backward using idx_outbox_finished_updated"],
        ),
        ("dead outbox page, one topic", &["idx_outbox_dead_topic"]),
        (
            "replay confirmation: dead outbox count, no filter",
            &["Index Only Scan using idx_outbox_dead_topic"],
        ),
        (
            "dead inbox page, no filter",
            &["Index Scan Backward using idx_inbox_state_created"],
        ),
        ("detail: outbox row", &["Index Scan using outbox_pkey"]),
        ("detail: inbox row", &["Index Scan using inbox_pkey"]),
        (
            "replay confirmation: dead inbox count, one source",
            &["idx_inbox_state_created"],
        ),
        (
            "lookup: idempotency key",
            &["Index Scan using uq_inbox_source_idempotency"],
        ),
        ("lookup: correlation id", &["Seq Scan on inbox"]),
    ];
    let mut wrong = Vec::new();
    for (title, ask) in &cases {
        let plan: Vec<String> = explain(&statements, "COSTS OFF", ask)
            .fetch_all(&mut f.session)
            .await
            .expect("explain")
            .iter()
            .map(|row| row.get::<String, _>(0))
            .collect();
        let plan = plan.join("\n");
        let wanted = expected
            .iter()
            .find(|(t, _)| t == title)
            .map_or(&[][..], |(_, i)| *i);
        let sequential_expected = wanted.iter().any(|i| i.starts_with("Seq Scan"));
        let sequential = plan.contains("Seq Scan") && !sequential_expected;
        // The dead inbox count checks the sources on the dead rows: intersecting them with every
        // row of a source from the unique index reads an entry per processed row.
        let unwanted = title.starts_with("replay confirmation: dead inbox count")
            && plan.contains("uq_inbox_source_idempotency");
        if sequential || unwanted || wanted.iter().any(|index| !plan.contains(index)) {
            wrong.push(format!("-- {title} (wanted {wanted:?})\n{plan}"));
        }
    }
    f.done().await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

#[tokio::test]
#[ignore = "fills a million rows in each table (one to two minutes); run by hand for the plans"]
async fn plans_and_times_at_one_million_outbox_rows() {
    let (mut f, cases) = seeded(1_000_000).await;
    let statements = ConsoleStatements::render(&SchemaNames::default()).expect("render");
    let mut report = String::new();
    let mut slow = Vec::new();
    for (title, ask) in &cases {
        report.push_str(&format!("-- {title}\n"));
        for row in explain(&statements, "ANALYZE, BUFFERS, COSTS OFF", ask)
            .fetch_all(&mut f.session)
            .await
            .expect("explain")
        {
            report.push_str(&row.get::<String, _>(0));
            report.push('\n');
        }
        // The time the console sees, through the store.
        let store = &f.store;
        let (median, max) = time(|| {
            let ask = ask.clone();
            async move {
                match ask {
                    Ask::Page(table, filter, after) => {
                        store.dead_page(table, &filter, after, 51).await.map(drop)
                    }
                    Ask::Count(table, filter) => store.dead_count(table, &filter).await.map(drop),
                    Ask::OutboxCounts => store.outbox_counts().await.map(drop),
                    Ask::InboxCounts => store.inbox_counts().await.map(drop),
                    Ask::Topics => store.outbox_dead_topics().await.map(drop),
                    Ask::Row(table, id) => store.row(table, id, 65_536).await.map(drop),
                    Ask::ByKey(key) => store.inbox_by_key(key).await.map(drop),
                    Ask::ByCorrelation(id) => store.inbox_by_correlation(id, 100).await.map(drop),
                }
                .expect("store read");
            }
        })
        .await;
        let line = format!(
            "through the store, 7 runs: median {:.1} ms, max {:.1} ms\n\n",
            median.as_secs_f64() * 1000.0,
            max.as_secs_f64() * 1000.0
        );
        report.push_str(&line);
        if median >= Duration::from_millis(300) {
            slow.push((*title, median));
        }
    }
    println!("{report}");
    if let Some(path) = std::env::var_os("QB_CONSOLE_PLANS") {
        std::fs::write(path, &report).expect("write the plans");
    }
    f.done().await;
    assert!(slow.is_empty(), "median over 300 ms: {slow:?}");
}
