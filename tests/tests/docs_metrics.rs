//! The metrics reference (`docs/reference/metrics.md`) against the real binary: every metric family a
//! running QueueBox exports is a row of the page, with its type and label names, and every row of the
//! page is exported. Where a row lists a label's values (backticked, in parentheses), every value
//! seen in the scrape must be one of them. Every name constant of `ports/src/metrics.rs` (the one
//! place a metric name is spelt) must have its row as well.
//!
//! The binary runs with every part that creates series: a delivering HTTP destination, a failing
//! one (publish failures, a retry and a dead row), a route transform that refuses (transform
//! failures), an HTTP source with a duplicate and a body that is not JSON, a source whose filter
//! drops a message, the relay, retention on both tables, and PostgreSQL logical capture. That run
//! creates every family of the page, so no family is checked only against the code.
//!
//! A RabbitMQ, a Kafka and a NATS destination are configured (no route sends to them): their
//! metrics are registered at start, which puts the `destination_type` values `rabbitmq`, `kafka`
//! and `nats` in the scrape. Broker sources are left out: they add no family, label or value (only
//! health components), and their own tests cover their outcomes. Label values this run does not
//! produce, so checked only by reading the code when the page was written: `kind` = `timeout`,
//! `unreachable`, `auth`, `invalid_message`, `other` (each needs its own fault); `reason` =
//! `transform_failed`, `storage_failed`; `strategy` = `Fail`, `Skip`; `status_class`
//! other than `2xx` and `5xx`. A value the code gains shows up here only once a run produces it.

use futures::FutureExt as _;
use queuebox_tests::database::{TestDatabase, capture_account, drop_replication_slot};
use queuebox_tests::process::Launch;
use queuebox_tests::receiver::{Policy, Receiver};
use queuebox_tests::{free_port, http, scrape};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const START: Duration = Duration::from_secs(30);
/// How long the traffic may take to create every expected series.
const SERIES: Duration = Duration::from_secs(60);

fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_file(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

// ------------------------------------------------------------------------------------------------
// The page
// ------------------------------------------------------------------------------------------------

/// One row of a metric table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Family {
    /// `counter`, `gauge` or `summary`.
    kind: String,
    labels: BTreeSet<String>,
    /// The values a row lists for a label; a label listed without backticked values is absent.
    values: BTreeMap<String, BTreeSet<String>>,
}

fn is_metric_name(text: &str) -> bool {
    (text.starts_with("queuebox") || text.starts_with("hikaricp_"))
        && text
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_owned()).collect()
}

/// The label names of a Labels cell (backticked words outside parentheses, or `none`), and the
/// values listed for each (backticked words inside the parentheses after a name).
fn parse_labels(cell: &str) -> (BTreeSet<String>, BTreeMap<String, BTreeSet<String>>) {
    let mut labels = BTreeSet::new();
    let mut values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut depth = 0usize;
    let mut current: Option<String> = None;
    let mut chars = cell.chars();
    while let Some(c) = chars.next() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            '`' => {
                let token: String = chars.by_ref().take_while(|&c| c != '`').collect();
                if depth == 0 {
                    labels.insert(token.clone());
                    current = Some(token);
                } else if let Some(label) = &current {
                    values.entry(label.clone()).or_default().insert(token);
                }
            }
            _ => {}
        }
    }
    (labels, values)
}

/// Every row of the page's metric tables (tables whose header has `Metric`, `Type` and `Labels`),
/// by family name. A name on two rows fails the test.
fn documented(page: &str) -> BTreeMap<String, Family> {
    let mut families = BTreeMap::new();
    let mut columns: Option<(usize, usize, usize)> = None;
    for line in page.lines() {
        if !line.trim_start().starts_with('|') {
            columns = None;
            continue;
        }
        let row = cells(line);
        let find = |name: &str| row.iter().position(|c| c == name);
        if let (Some(metric), Some(kind), Some(labels)) =
            (find("Metric"), find("Type"), find("Labels"))
        {
            columns = Some((metric, kind, labels));
            continue;
        }
        let Some((metric, kind, labels)) = columns else {
            continue;
        };
        let name = row
            .get(metric)
            .map(|c| c.trim_matches('`'))
            .unwrap_or_default();
        if !is_metric_name(name) {
            continue;
        }
        let (label_names, values) = parse_labels(row.get(labels).map_or("", String::as_str));
        let family = Family {
            kind: row.get(kind).cloned().unwrap_or_default(),
            labels: label_names,
            values,
        };
        assert!(
            families.insert(name.to_owned(), family).is_none(),
            "{name} has two rows in the metrics reference"
        );
    }
    families
}

// ------------------------------------------------------------------------------------------------
// The scrape
// ------------------------------------------------------------------------------------------------

/// The labels of a sample line's `{...}`, in order.
fn sample_labels(text: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    let mut rest = text;
    while let Some((name, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                }
                '"' => {
                    end = i + 1;
                    break;
                }
                _ => value.push(c),
            }
        }
        labels.push((name.trim_start_matches(',').trim().to_owned(), value));
        rest = &after[end..];
    }
    labels
}

/// The families of a scrape with their type, label names and label values (`quantile` of a
/// summary left out: the exporter adds it).
fn scraped(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(declared) = line.strip_prefix("# TYPE ") {
            let mut parts = declared.split_whitespace();
            if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                families.entry(name.to_owned()).or_default().kind = kind.to_owned();
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let series = line.rsplit_once(' ').map_or(line, |(series, _)| series);
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, sample_labels(labels.trim_end_matches('}'))),
            None => (series, Vec::new()),
        };
        let family = if families.contains_key(name) {
            name.to_owned()
        } else {
            ["_sum", "_count"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .filter(|base| families.get(*base).is_some_and(|f| f.kind == "summary"))
                .unwrap_or_else(|| panic!("sample {line:?} has no # TYPE line"))
                .to_owned()
        };
        let entry = families.entry(family).or_default();
        for (label, value) in labels {
            if entry.kind == "summary" && label == "quantile" {
                continue;
            }
            entry.labels.insert(label.clone());
            entry.values.entry(label).or_default().insert(value);
        }
    }
    families
}

/// What differs between the page and the scrape; empty when they agree.
fn differences(page: &BTreeMap<String, Family>, scrape: &BTreeMap<String, Family>) -> Vec<String> {
    let mut problems = Vec::new();
    for (name, exported) in scrape {
        let Some(row) = page.get(name) else {
            problems.push(format!(
                "{name} ({}, labels {:?}) is exported but has no row",
                exported.kind, exported.labels
            ));
            continue;
        };
        if row.kind != exported.kind {
            problems.push(format!(
                "{name}: the page says {}, the scrape says {}",
                row.kind, exported.kind
            ));
        }
        if row.labels != exported.labels {
            problems.push(format!(
                "{name}: the page lists labels {:?}, the scrape has {:?}",
                row.labels, exported.labels
            ));
        }
        for (label, listed) in &row.values {
            let seen = exported.values.get(label).cloned().unwrap_or_default();
            let unlisted: Vec<_> = seen.difference(listed).collect();
            if !unlisted.is_empty() {
                problems.push(format!(
                    "{name}: label {label} has values {unlisted:?} the page does not list ({listed:?})"
                ));
            }
        }
    }
    for name in page.keys() {
        if !scrape.contains_key(name) {
            problems.push(format!("{name} has a row but is not exported"));
        }
    }
    problems
}

/// The metric names spelt in `ports/src/metrics.rs` (`pub const X: &str = "name";`).
fn name_constants() -> BTreeSet<String> {
    read("ports/src/metrics.rs")
        .lines()
        .filter(|line| line.starts_with("pub const ") && line.contains(": &str = \""))
        .filter_map(|line| line.split('"').nth(1))
        .filter(|name| is_metric_name(name))
        .map(str::to_owned)
        .collect()
}

// ------------------------------------------------------------------------------------------------
// The run
// ------------------------------------------------------------------------------------------------

fn config(
    db: &TestDatabase,
    port: u16,
    ok: &str,
    failing: &str,
    slot: &str,
    state: &str,
) -> String {
    let (capture_user, capture_password) = capture_account();
    format!(
        "server:\n  httpPort: {port}\n\
         database:\n  url: {url}\n  username: {user}\n  password: {password}\n  startupTimeoutMs: 10000\n\
         outbox:\n  pollIntervalMs: 100\n  pendingGaugeIntervalMs: 100\n  retryBaseDelayMs: 100\n\
         \x20 capture:\n    mode: postgres-logical\n    enabled: true\n    stateDirectory: {state}\n\
         \x20   slot: {slot}\n    publication: queuebox_outbox\n    reconciliationIntervalMs: 200\n\
         \x20   connection:\n      username: {capture_user}\n      password: {capture_password}\n\
         inbox:\n  relay:\n    pollIntervalMs: 100\n    pendingGaugeIntervalMs: 100\n\
         destinations:\n\
         \x20 ok:\n    type: http\n    baseUrl: {ok}\n    path: /events\n    timeoutMs: 2000\n\
         \x20 failing:\n    type: http\n    baseUrl: {failing}\n    path: /events\n    timeoutMs: 2000\n\
         \x20 amqp:\n    type: rabbitmq\n    url: {amqp}\n    exchange: qb.docs.metrics\n\
         \x20 records:\n    type: kafka\n    bootstrapServers: {kafka}\n    topic: qb-docs-metrics\n\
         \x20 stream:\n    type: nats\n    servers: {nats}\n    subject: qb.docs.metrics\n\
         routes:\n\
         \x20 - topicPattern: \"fail.*\"\n    destination: failing\n\
         \x20 - topicPattern: \"refused.*\"\n    destination: ok\n    transform:\n      expression: '$error(\"refused\")'\n      onError: Dead\n\
         \x20 - topicPattern: \"**\"\n    destination: ok\n\
         sources:\n\
         \x20 orders:\n    type: http\n    path: /orders\n    idempotencyKeyPath: $.id\n    topic: inbox.orders\n\
         \x20 filtered:\n    type: http\n    path: /filtered\n    idempotencyKeyPath: $.id\n    consumption: pull\n\
         \x20   filter:\n      require:\n        - header: x-env\n          equals: prod\n\
         retention:\n  enabled: true\n\
         \x20 outbox:\n    policy: AGE\n    maxAge: 1h\n    cleanupInterval: 1s\n\
         \x20 inbox:\n    policy: AGE\n    maxAge: 1h\n    cleanupInterval: 1s\n",
        url = db.jdbc_url(),
        user = db.user,
        password = db.password,
        amqp = service("QB_TEST_AMQP_URL"),
        kafka = service("QB_TEST_KAFKA_BOOTSTRAP"),
        nats = service("QB_TEST_NATS_URL"),
    )
}

fn service(variable: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| {
        panic!("{variable} is not set: start the services first with `eval \"$(bash scripts/services.sh)\"`")
    })
}

/// Series the traffic creates (name and labels as the exporter renders them, or a bare family
/// name), each with a value above zero where a value follows.
const TRAFFIC_SERIES: [&str; 14] = [
    "queuebox_outbox_messages_total{status=\"sent\"}",
    "queuebox_outbox_messages_total{status=\"dead\"}",
    "queuebox_outbox_publish_failures_total{destination=\"failing\",destination_type=\"http\",kind=\"rejected\"}",
    "queuebox_http_publish_responses_total{status_class=\"2xx\"}",
    "queuebox_http_publish_responses_total{status_class=\"5xx\"}",
    "queuebox_transform_failures_total{strategy=\"Dead\"}",
    "queuebox_inbox_messages_total{status=\"new\"}",
    "queuebox_inbox_messages_total{status=\"duplicate\"}",
    "queuebox_inbox_messages_total{status=\"forwarded\"}",
    "queuebox_inbox_rejections_total{reason=\"extraction_failed\"}",
    "queuebox_inbox_filtered_total{source=\"filtered\"}",
    "queuebox_cleanup_last_run_timestamp{table=\"outbox\"}",
    "queuebox_cleanup_last_run_timestamp{table=\"inbox\"}",
    "queuebox_capture_changes_total{kind=\"insert\"}",
];

/// Families or series that must be present, whatever their value: the pending gauges after their
/// first count, and the broker destinations' kinds (registered at start; no route sends to them).
const PRESENT: [&str; 6] = [
    "queuebox_outbox_messages_pending",
    "queuebox_outbox_oldest_pending_age_seconds",
    "queuebox_outbox_queue_depth",
    "queuebox_outbox_publish_duration_seconds_max{destination_type=\"rabbitmq\"}",
    "queuebox_outbox_publish_duration_seconds_max{destination_type=\"kafka\"}",
    "queuebox_outbox_publish_duration_seconds_max{destination_type=\"nats\"}",
];

fn missing(text: &str) -> Vec<&'static str> {
    let positive = |series: &str| {
        text.lines().any(|line| {
            line.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
                .and_then(|value| value.trim().parse::<f64>().ok())
                .is_some_and(|value| value > 0.0)
        })
    };
    let present = |family: &str| {
        text.lines().any(|line| {
            line.starts_with(&format!("{family} ")) || line.starts_with(&format!("{family}{{"))
        })
    };
    TRAFFIC_SERIES
        .iter()
        .copied()
        .filter(|series| !positive(series))
        .chain(PRESENT.iter().copied().filter(|family| !present(family)))
        .collect()
}

async fn post(port: u16, path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    let mut request = http()
        .post(format!("http://127.0.0.1:{port}/inbox{path}"))
        .header("Content-Type", "application/json")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("POST").status().as_u16()
}

/// Starts the binary on `db` with every part that creates series, sends the traffic, waits until
/// the series it creates are exported and returns the scrape. The process is killed when this
/// returns or panics.
async fn exercise(db: &TestDatabase, slot: &str, state_dir: &std::path::Path) -> String {
    let ok = Receiver::start(Policy::status(200)).await;
    let failing = Receiver::start(Policy::status(500)).await;
    let port = free_port();
    let yaml = config(
        db,
        port,
        &ok.url(),
        &failing.url(),
        slot,
        &state_dir.display().to_string(),
    );
    let launch = Launch::with_config(&yaml);
    let (status, _, stderr) = launch.run(&["migrate"], START).await;
    assert!(status.success(), "migrate failed: {stderr}");
    db.execute("CREATE PUBLICATION queuebox_outbox FOR TABLE outbox WITH (publish = 'insert')")
        .await;
    let mut qb = launch.spawn(&[]);
    qb.wait_live(port, START).await;
    qb.wait_for_log("capture streaming", START).await;

    db.execute(
        "INSERT INTO outbox (topic, payload) VALUES ('order.created', '{\"n\": 1}');\n\
         INSERT INTO outbox (topic, payload, max_attempts) VALUES ('fail.created', '{\"n\": 2}', 1);\n\
         INSERT INTO outbox (topic, payload) VALUES ('refused.created', '{\"n\": 3}');",
    )
    .await;
    assert_eq!(post(port, "/orders", &[], r#"{"id": "evt-1"}"#).await, 202);
    assert_eq!(post(port, "/orders", &[], r#"{"id": "evt-1"}"#).await, 200);
    assert_eq!(post(port, "/orders", &[], "not json").await, 400);
    assert_eq!(
        post(port, "/filtered", &[("x-env", "dev")], r#"{"id": "f-1"}"#).await,
        202
    );

    let started = Instant::now();
    let text = loop {
        let text = scrape(port).await;
        let absent = missing(&text);
        if absent.is_empty() {
            break text;
        }
        assert!(
            started.elapsed() < SERIES,
            "after {SERIES:?} the scrape still lacks {absent:?}; log:\n{}\nscrape:\n{text}",
            qb.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    qb.terminate();
    qb.wait_exit(START).await;
    text
}

#[tokio::test]
async fn every_exported_metric_family_is_documented_and_every_documented_one_is_exported() {
    let page = documented(&read("docs/reference/metrics.md"));

    let db = TestDatabase::create().await;
    let slot = format!("qb_{}", uuid::Uuid::new_v4().simple());
    let state = tempfile::tempdir().expect("state directory");
    let run = AssertUnwindSafe(exercise(&db, &slot, &state.path().join("capture")))
        .catch_unwind()
        .await;
    // The slot and the database go whatever happened: a slot left behind holds WAL on the
    // shared server.
    let capture_url = {
        let (user, password) = capture_account();
        format!("postgres://{user}:{password}@{}/{}", db.host_port, db.name)
    };
    let dropped = drop_replication_slot(&capture_url, &slot, START).await;
    db.drop_database().await;
    let text = run.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    if let Err(error) = dropped {
        panic!("{error}");
    }

    let exported = scraped(&text);
    let problems = differences(&page, &exported);
    assert!(
        problems.is_empty(),
        "docs/reference/metrics.md and the scrape disagree:\n  {}\nscrape:\n{text}",
        problems.join("\n  ")
    );

    // The code: every name constant has its row, also one this run would not create.
    let constants = name_constants();
    let undocumented: Vec<_> = constants
        .iter()
        .filter(|n| !page.contains_key(*n))
        .collect();
    assert!(
        undocumented.is_empty(),
        "names in ports/src/metrics.rs without a row in docs/reference/metrics.md: {undocumented:?}"
    );

    // The check itself: a page without one of its rows, or with a row nothing exports, fails.
    let (lost, _) = page.iter().next().expect("a row");
    let mut fewer = page.clone();
    fewer.remove(lost);
    assert!(
        differences(&fewer, &exported)
            .iter()
            .any(|p| p.starts_with(lost.as_str())),
        "a lost row went unnoticed"
    );
    let mut more = page.clone();
    more.insert("queuebox_bogus_total".to_owned(), Family::default());
    assert_eq!(
        differences(&more, &exported),
        vec!["queuebox_bogus_total has a row but is not exported".to_owned()]
    );
}

#[test]
fn the_labels_cell_reads_names_and_listed_values() {
    let (labels, values) = parse_labels("`destination` (its name), `kind` (`rejected`, `timeout`)");
    assert_eq!(
        labels,
        BTreeSet::from(["destination".to_owned(), "kind".to_owned()])
    );
    assert_eq!(
        values.len(),
        1,
        "a label without backticked values has no list"
    );
    assert_eq!(values["kind"].len(), 2);
    assert!(parse_labels("none").0.is_empty());
}
