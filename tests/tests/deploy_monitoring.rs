//! `deploy/monitoring/` against a real Prometheus: Debian's `prometheus` binary (or
//! `QB_PROMETHEUS`), on a loopback port with its own data directory, loads `alerts.yml` and scrapes
//! a QueueBox that runs with traffic on every path (`queuebox_tests::every_path`). Then every
//! dashboard query and every alert expression is evaluated through Prometheus' HTTP API, and each
//! is printed with the number of series it returned. Rows and webhooks flow; the RabbitMQ, Kafka
//! and NATS destinations each fail one row (no broker message is delivered in this run).
//!
//! The test fails when a query does not evaluate, names a metric Prometheus has no series of, or a
//! label none of its metrics has; when an alert rule does not load or its evaluation fails; and
//! when a query returns no series at all: the traffic creates every label value the queries select
//! (a publish failure of each destination kind, a `storage_failed` rejection). Alert expressions
//! are evaluated without their threshold, so a quiet alert still shows that its series exist.

use futures::FutureExt as _;
use queuebox_tests::database::TestDatabase;
use queuebox_tests::docs::{self, repo_root};
use queuebox_tests::every_path::{self, START};
use queuebox_tests::{free_port, http};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long Prometheus may take to start, scrape enough samples and evaluate every rule.
const PROMETHEUS: Duration = Duration::from_secs(60);
/// The scrape and rule evaluation interval of the test's Prometheus.
const INTERVAL: &str = "1s";
/// What the dashboard's `$__rate_interval` becomes: several scrapes at [`INTERVAL`].
const RATE_INTERVAL: &str = "30s";

fn repo_file(path: &str) -> PathBuf {
    repo_root().join(path)
}

fn read(path: &str) -> String {
    docs::read(&repo_file(path))
}

// ------------------------------------------------------------------------------------------------
// The queries
// ------------------------------------------------------------------------------------------------

/// A query of the dashboard or an alert rule.
struct Query {
    /// Where it comes from: a panel's title or an alert's name.
    origin: String,
    expr: String,
}

/// Every query of every panel of the dashboard, with `$__rate_interval` replaced.
fn dashboard_queries() -> Vec<Query> {
    let dashboard: Value = serde_json::from_str(&read(
        "deploy/monitoring/grafana/dashboards/queuebox-dashboard.json",
    ))
    .expect("the dashboard is JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a target has an expr");
            queries.push(Query {
                origin: format!("panel {:?}", panel["title"].as_str().unwrap_or_default()),
                expr: expr.replace("$__rate_interval", RATE_INTERVAL),
            });
        }
    }
    queries
}

/// The alert rules of `alerts.yml`: name and expression.
fn alert_rules() -> Vec<(String, String)> {
    let rules: serde_yaml::Value =
        serde_yaml::from_str(&read("deploy/monitoring/alerts.yml")).expect("alerts.yml is YAML");
    let mut alerts = Vec::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            alerts.push((
                rule["alert"].as_str().expect("an alert rule").to_owned(),
                rule["expr"].as_str().expect("an expr").trim().to_owned(),
            ));
        }
    }
    alerts
}

/// The expression without its final comparison at the outermost level (`a > 0.1` -> `a`), so
/// that it returns its series whether the alert fires or not.
fn without_threshold(expr: &str) -> String {
    let bytes = expr.as_bytes();
    let mut depth = 0i32;
    let mut cut = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'{' | b'[' => depth += 1,
            b')' | b'}' | b']' => depth -= 1,
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += usize::from(bytes[i] == b'\\') + 1;
                }
            }
            b'>' | b'<' | b'=' | b'!' if depth == 0 => {
                let next = bytes.get(i + 1).copied();
                if bytes[i] != b'=' && bytes[i] != b'!' || next == Some(b'=') {
                    cut = Some(i);
                    i += usize::from(next == Some(b'='));
                }
            }
            _ => {}
        }
        i += 1;
    }
    cut.map_or(expr, |at| &expr[..at]).trim().to_owned()
}

/// What a query names: metrics with their matchers (`label`, `value`; `=` matchers only carry a
/// value), and the labels of `by`/`without` clauses.
#[derive(Debug, Default, PartialEq)]
struct Names {
    metrics: BTreeMap<String, Vec<(String, Option<String>)>>,
    grouping: BTreeSet<String>,
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

fn names(expr: &str) -> Names {
    let chars: Vec<char> = expr.chars().collect();
    let mut found = Names::default();
    let mut i = 0;
    let skip_space = |mut j: usize| {
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        j
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '[' {
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (is_ident(chars[i]) || chars[i] == '.') {
                i += 1;
            }
        } else if is_ident(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let after = skip_space(i);
            let next = chars.get(after).copied();
            if (word == "by" || word == "without") && next == Some('(') {
                let close = (after..chars.len())
                    .find(|&j| chars[j] == ')')
                    .expect("a closed grouping");
                let list: String = chars[after + 1..close].iter().collect();
                found.grouping.extend(
                    list.split(',')
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(str::to_owned),
                );
                i = close + 1;
            } else if next != Some('(')
                && (word.starts_with("queuebox") || word.starts_with("hikaricp_") || word == "up")
            {
                let mut matchers = Vec::new();
                if next == Some('{') {
                    let close = (after..chars.len())
                        .find(|&j| chars[j] == '}')
                        .expect("closed matchers");
                    let inner: String = chars[after + 1..close].iter().collect();
                    for matcher in inner.split(',').filter(|m| !m.trim().is_empty()) {
                        let label: String = matcher
                            .trim()
                            .chars()
                            .take_while(|&c| is_ident(c))
                            .collect();
                        let rest = matcher.trim()[label.len()..].trim_start();
                        let value = (rest.starts_with('=') && !rest.starts_with("=~"))
                            .then(|| rest[1..].trim().trim_matches('"').to_owned());
                        matchers.push((label, value));
                    }
                    i = close + 1;
                }
                found.metrics.entry(word).or_default().extend(matchers);
            }
        } else {
            i += 1;
        }
    }
    found
}

// ------------------------------------------------------------------------------------------------
// Prometheus
// ------------------------------------------------------------------------------------------------

fn prometheus_binary() -> PathBuf {
    let binary =
        std::env::var("QB_PROMETHEUS").map_or_else(|_| "/usr/bin/prometheus".into(), PathBuf::from);
    assert!(
        binary.is_file(),
        "no Prometheus at {}: install Debian's package (apt-get install prometheus) or set QB_PROMETHEUS",
        binary.display()
    );
    binary
}

/// A Prometheus process with its own data directory; killed when dropped.
struct Prometheus {
    child: tokio::process::Child,
    url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target_port: u16) -> Self {
        let dir = tempfile::tempdir().expect("Prometheus directory");
        let rules = repo_file("deploy/monitoring/alerts.yml");
        // The job of deploy/monitoring/prometheus.yml (the rules name it), at the test's pace.
        let config = format!(
            "global:\n  scrape_interval: {INTERVAL}\n  evaluation_interval: {INTERVAL}\n\
             rule_files:\n  - {rules}\n\
             scrape_configs:\n  - job_name: queuebox\n    metrics_path: /metrics\n\
             \x20   static_configs:\n      - targets: [\"127.0.0.1:{target_port}\"]\n",
            rules = rules.display()
        );
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config).expect("write prometheus.yml");
        let port = free_port();
        let log = dir.path().join("prometheus.log");
        let out = std::fs::File::create(&log).expect("Prometheus log");
        let child = tokio::process::Command::new(prometheus_binary())
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone().expect("log handle"))
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .expect("start prometheus");
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET <path>` as JSON, or `None` while Prometheus does not answer.
    async fn get(&self, path: &str) -> Option<Value> {
        let response = http()
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .ok()?;
        serde_json::from_str(&response.text().await.ok()?).ok()
    }

    /// An instant query through `POST /api/v1/query`: the result vector, or Prometheus' error.
    async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let answer: Value = serde_json::from_str(
            &http()
                .post(format!("{}/api/v1/query", self.url))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(format!("query={}", form_encode(expr)))
                .send()
                .await
                .map_err(|e| e.to_string())?
                .text()
                .await
                .map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
        if answer["status"] != "success" {
            return Err(format!("{}: {}", answer["errorType"], answer["error"]));
        }
        match &answer["data"]["result"] {
            Value::Array(series) => Ok(series.clone()),
            scalar => Ok(vec![scalar.clone()]),
        }
    }
}

fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every series Prometheus holds of QueueBox's job: metric name -> label -> values.
async fn series_labels(
    prometheus: &Prometheus,
) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let answer = prometheus
        .get("/api/v1/series?match%5B%5D=%7Bjob%3D%22queuebox%22%7D")
        .await
        .expect("the series API answers");
    let mut metrics: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for series in answer["data"].as_array().expect("series") {
        let labels = series.as_object().expect("a label set");
        let name = labels["__name__"].as_str().expect("a name").to_owned();
        let entry = metrics.entry(name).or_default();
        for (label, value) in labels {
            if label != "__name__" {
                entry
                    .entry(label.clone())
                    .or_default()
                    .insert(value.as_str().unwrap_or_default().to_owned());
            }
        }
    }
    metrics
}

/// What is wrong with a query's answer of `count` series; `None` when nothing is. Every query must
/// return a series: the traffic of `every_path` creates each label value a query selects.
fn judge(
    query: &Query,
    count: usize,
    known: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
) -> Option<String> {
    let named = names(&query.expr);
    let mut problems = Vec::new();
    let mut labels: BTreeSet<&String> = BTreeSet::new();
    let mut unseen_values = Vec::new();
    for (metric, matchers) in &named.metrics {
        let Some(series) = known.get(metric) else {
            problems.push(format!("metric {metric} has no series"));
            continue;
        };
        labels.extend(series.keys());
        for (label, value) in matchers {
            match (series.get(label), value) {
                (None, _) => problems.push(format!("{metric} has no label {label}")),
                (Some(values), Some(value)) if !values.contains(value) => {
                    unseen_values.push(format!("{metric}{{{label}=\"{value}\"}}"));
                }
                _ => {}
            }
        }
    }
    for label in &named.grouping {
        if !labels.contains(label) {
            problems.push(format!("no metric of the query has label {label}"));
        }
    }
    if named.metrics.is_empty() {
        problems.push("names no metric".to_owned());
    }
    if count == 0 {
        if unseen_values.is_empty() {
            problems.push("returned no series, and every label value it selects exists".to_owned());
        } else {
            problems.push(format!(
                "returned no series: no series has {} (the traffic must create it)",
                unseen_values.join(", ")
            ));
        }
    }
    (!problems.is_empty())
        .then(|| format!("{} `{}`: {}", query.origin, query.expr, problems.join("; ")))
}

async fn evaluate(prometheus: &Prometheus) {
    // Enough samples for rate() over RATE_INTERVAL, and one evaluation of every rule.
    let ready = format!("{}/-/ready", prometheus.url);
    let started = std::time::Instant::now();
    while !http()
        .get(&ready)
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(
            started.elapsed() < PROMETHEUS,
            "Prometheus not ready within {PROMETHEUS:?}; its log:\n{}",
            prometheus.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let samples = format!("count_over_time(up{{job=\"queuebox\"}}[{RATE_INTERVAL}]) >= 10");
    let started = std::time::Instant::now();
    loop {
        let up = prometheus.query(&samples).await;
        if up.as_ref().is_ok_and(|series| !series.is_empty()) {
            break;
        }
        assert!(
            started.elapsed() < PROMETHEUS,
            "Prometheus did not scrape QueueBox ten times within {PROMETHEUS:?} ({up:?}); its log:\n{}",
            prometheus.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let up = prometheus
        .query("up{job=\"queuebox\"}")
        .await
        .expect("query up");
    assert_eq!(up.len(), 1, "one target: {up:?}");
    assert_eq!(up[0]["value"][1], "1", "QueueBox's scrape is up: {up:?}");

    // The rules load, and each evaluates without an error.
    let rules = prometheus
        .get("/api/v1/rules")
        .await
        .expect("the rules API answers");
    let loaded: Vec<(String, String, String)> = rules["data"]["groups"]
        .as_array()
        .expect("rule groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_owned(),
                r["health"].as_str().unwrap_or_default().to_owned(),
                r["lastError"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let alerts = alert_rules();
    assert_eq!(
        loaded
            .iter()
            .map(|(name, ..)| name.clone())
            .collect::<Vec<_>>(),
        alerts
            .iter()
            .map(|(name, _)| name.clone())
            .collect::<Vec<_>>(),
        "Prometheus loaded other rules than alerts.yml holds; its log:\n{}",
        prometheus.log()
    );
    let unhealthy: Vec<_> = loaded
        .iter()
        .filter(|(_, health, _)| health != "ok")
        .collect();
    assert!(
        unhealthy.is_empty(),
        "rules that do not evaluate: {unhealthy:?}"
    );

    let known = series_labels(prometheus).await;
    let mut queries = dashboard_queries();
    let panels = queries.len();
    for (name, expr) in &alerts {
        queries.push(Query {
            origin: format!("alert {name}"),
            expr: without_threshold(expr),
        });
    }
    let mut problems = Vec::new();
    println!("series  query");
    for query in &queries {
        match prometheus.query(&query.expr).await {
            Err(error) => problems.push(format!("{} `{}`: {error}", query.origin, query.expr)),
            Ok(series) => {
                println!(
                    "{:>6}  {}: {}",
                    series.len(),
                    query.origin,
                    query.expr.split_whitespace().collect::<Vec<_>>().join(" "),
                );
                problems.extend(judge(query, series.len(), &known));
            }
        }
    }
    println!(
        "{panels} dashboard queries and {} alert expressions, each evaluated above",
        alerts.len()
    );
    assert!(
        problems.is_empty(),
        "queries that fail:\n  {}",
        problems.join("\n  ")
    );
}

async fn run(db: &TestDatabase, slot: &str, state: &Path) {
    let mut queuebox = every_path::start(db, slot, state).await;
    let mut prometheus = Prometheus::start(queuebox.port);
    evaluate(&prometheus).await;
    let _ = prometheus.child.start_kill();
    let _ = prometheus.child.wait().await;
    queuebox.qb.terminate();
    queuebox.qb.wait_exit(START).await;
}

#[tokio::test]
async fn prometheus_evaluates_every_dashboard_query_and_alert_against_a_running_queuebox() {
    let db = TestDatabase::create().await;
    let slot = format!("qb_{}", uuid::Uuid::new_v4().simple());
    let state = tempfile::tempdir().expect("state directory");
    let outcome = AssertUnwindSafe(run(&db, &slot, &state.path().join("capture")))
        .catch_unwind()
        .await;
    let dropped = every_path::finish(db, &slot).await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    dropped.unwrap_or_else(|error| panic!("{error}"));
}

#[test]
fn the_threshold_goes_and_the_names_are_read() {
    assert_eq!(without_threshold("max(a) > 300"), "max(a)");
    assert_eq!(
        without_threshold("max(a{s=\"x>y\"}) == 1"),
        "max(a{s=\"x>y\"})"
    );
    assert_eq!(
        without_threshold("time() - max by (t) (b) > 2 * 3600"),
        "time() - max by (t) (b)"
    );
    assert_eq!(without_threshold("up{job=\"q\"} == 0"), "up{job=\"q\"}");
    let named = names(
        "sum by (destination, kind) (rate(queuebox_x_total{kind=\"a\", d=~\"b\"}[5m])) / sum(up)",
    );
    assert_eq!(
        named.metrics["queuebox_x_total"],
        vec![
            ("kind".to_owned(), Some("a".to_owned())),
            ("d".to_owned(), None)
        ]
    );
    assert!(named.metrics.contains_key("up"));
    assert_eq!(
        named.grouping,
        BTreeSet::from(["destination".to_owned(), "kind".to_owned()])
    );
    // a query naming a metric nobody exports is a problem, and so is a label it does not have
    let known = BTreeMap::from([(
        "queuebox_x_total".to_owned(),
        BTreeMap::from([("kind".to_owned(), BTreeSet::from(["a".to_owned()]))]),
    )]);
    let query = |expr: &str| Query {
        origin: "test".to_owned(),
        expr: expr.to_owned(),
    };
    assert!(judge(&query("sum(queuebox_y_total)"), 0, &known).is_some());
    assert!(judge(&query("sum by (kinds) (queuebox_x_total)"), 1, &known).is_some());
    // an empty answer is a problem, whether or not its label value exists yet
    assert!(judge(&query("sum(queuebox_x_total)"), 0, &known).is_some());
    let unseen = judge(&query("sum(queuebox_x_total{kind=\"b\"})"), 0, &known)
        .expect("an empty answer is a problem");
    assert!(
        unseen.contains("no series has queuebox_x_total{kind=\"b\"}"),
        "{unseen}"
    );
    assert_eq!(
        judge(&query("sum by (kind) (queuebox_x_total)"), 1, &known),
        None
    );
}
