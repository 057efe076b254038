//! The metrics reference (`docs/reference/metrics.md`) against the real binary: every metric family a
//! running QueueBox exports is a row of the page, with its type and label names, and every row of the
//! page is exported. Where a row lists a label's values (backticked, in parentheses), every value
//! seen in the scrape must be one of them. Every name constant of `ports/src/metrics.rs` (the one
//! place a metric name is spelt) must have its row as well.
//!
//! The binary runs (`queuebox_tests::every_path`) with every part that creates series: a
//! delivering HTTP destination, a failing one (publish failures, a retry and a dead row), a route
//! transform that refuses (transform failures), an HTTP source with a duplicate and a body that is
//! not JSON, a source whose filter drops a message, the relay, retention on both tables, and
//! PostgreSQL logical capture. That run creates every family of the page, so no family is checked
//! only against the code.
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
use queuebox_tests::database::TestDatabase;
use queuebox_tests::every_path::{self, START};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;

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

/// Runs the binary with traffic on every path and returns the scrape once every series is there.
async fn exercise(db: &TestDatabase, slot: &str, state_dir: &std::path::Path) -> String {
    let mut run = every_path::start(db, slot, state_dir).await;
    run.qb.terminate();
    run.qb.wait_exit(START).await;
    run.scrape
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
    // The slot and the database go whatever happened.
    let dropped = every_path::finish(db, &slot).await;
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
