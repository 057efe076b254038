//! Runs the official JSONata test suite (shared/conformance/jsonata/suite).
//!
//! `suite_report` fails on any failing case that is not listed in
//! `tests/known-failures.txt`; `suite_never_panics` fails if any case panics.
//! Both share one run of the suite.

use queuebox_jsonata::{Bindings, Expression, Limits};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Pass,
    Fail(String),
    Panic(String),
}

struct Run {
    results: Vec<(String, Outcome)>,
}

fn suite_dir() -> PathBuf {
    if let Ok(p) = std::env::var("QB_JSONATA_SUITE") {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance/jsonata/suite")
}

fn read_json(p: &Path) -> Value {
    let text =
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    // a few cases hold lone UTF-16 surrogates, which serde_json rejects: keep
    // them as JSONata escapes inside the expression instead
    serde_json::from_str(&text)
        .or_else(|_| {
            serde_json::from_str(&text.replace("\\uD8", "\\\\uD8").replace("\\uDC", "\\\\uDC"))
        })
        .unwrap_or_else(|e| panic!("bad JSON in {}: {e}", p.display()))
}

/// Numbers compare by value (the suite mixes 1 and 1.0); `unordered` compares as multisets.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            x == y || ((x - y).abs() <= 1e-13 * x.abs().max(y.abs()))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn same_unordered(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            let mut used = vec![false; y.len()];
            x.iter().all(|p| {
                for (i, q) in y.iter().enumerate() {
                    if !used[i] && same(p, q) {
                        used[i] = true;
                        return true;
                    }
                }
                false
            })
        }
        _ => same(a, b),
    }
}

fn run_case(
    dir: &Path,
    group_dir: &Path,
    case: &Value,
    datasets: &mut BTreeMap<String, Value>,
) -> Outcome {
    let expr_src = match (case.get("expr"), case.get("expr-file")) {
        (Some(Value::String(s)), _) => s.clone(),
        (_, Some(Value::String(f))) => {
            std::fs::read_to_string(group_dir.join(f)).unwrap_or_default()
        }
        _ => return Outcome::Fail("no expression".into()),
    };
    let input: Option<Value> = if let Some(d) = case.get("data") {
        Some(d.clone())
    } else {
        match case.get("dataset") {
            Some(Value::String(name)) => {
                let v = datasets
                    .entry(name.clone())
                    .or_insert_with(|| {
                        read_json(&dir.join("datasets").join(format!("{name}.json")))
                    })
                    .clone();
                Some(v)
            }
            _ => None,
        }
    };
    let bindings: Bindings = match case.get("bindings") {
        Some(Value::Object(m)) => m.clone(),
        _ => Bindings::new(),
    };
    let limits = Limits {
        timeout: Duration::from_millis(
            case.get("timelimit")
                .and_then(|v| v.as_u64())
                .unwrap_or(5000),
        ),
        max_depth: case
            .get("depth")
            .and_then(|v| v.as_u64())
            .map(|d| d as usize)
            .unwrap_or(Limits::default().max_depth),
        // the suite runs on a 16 MiB thread and recurses deeply (debug builds
        // use far more stack per level than release builds)
        max_stack_bytes: 12 * 1024 * 1024,
        ..Limits::default()
    };
    let expected_code = case.get("code").and_then(|c| c.as_str()).or_else(|| {
        case.get("error")
            .and_then(|e| e.get("code"))
            .and_then(|c| c.as_str())
    });
    let result = Expression::compile(&expr_src)
        .and_then(|e| e.evaluate_opt(input.as_ref(), &bindings, &limits));
    if let Some(differs) = text_path_differs(&expr_src, input.as_ref(), &bindings, &limits, &result)
    {
        return Outcome::Fail(differs);
    }
    match (result, expected_code) {
        (Err(e), Some(code)) if e.code == code => Outcome::Pass,
        (Err(e), Some(code)) => Outcome::Fail(format!("expected error {code}, got error {e}")),
        (Ok(v), Some(code)) => Outcome::Fail(format!("expected error {code}, got {v:?}")),
        (Err(e), None) => Outcome::Fail(format!("unexpected error {e}")),
        (Ok(v), None) => {
            if case
                .get("undefinedResult")
                .is_some_and(|u| u == &Value::Bool(true))
            {
                return if v.is_none() {
                    Outcome::Pass
                } else {
                    Outcome::Fail(format!("expected undefined, got {v:?}"))
                };
            }
            let Some(expected) = case.get("result") else {
                return Outcome::Fail("case has no expectation".into());
            };
            let unordered = case
                .get("unordered")
                .is_some_and(|u| u == &Value::Bool(true));
            match v {
                Some(v) if (unordered && same_unordered(&v, expected)) || same(&v, expected) => {
                    Outcome::Pass
                }
                other => Outcome::Fail(format!("expected {expected}, got {other:?}")),
            }
        }
    }
}

/// `evaluate_json` (JSON text in and out) must give exactly what `evaluate`
/// gives, serialised: same text, or an error with the same code. Cases whose
/// result depends on the clock or on chance, and limit errors, are skipped.
fn text_path_differs(
    src: &str,
    input: Option<&Value>,
    bindings: &Bindings,
    limits: &Limits,
    by_value: &Result<Option<Value>, queuebox_jsonata::Error>,
) -> Option<String> {
    let input = input?;
    if ["$now", "$millis", "$random"]
        .iter()
        .any(|f| src.contains(f))
    {
        return None;
    }
    let text = serde_json::to_string(input).ok()?;
    let by_text = Expression::compile(src).and_then(|e| e.evaluate_json(&text, bindings, limits));
    match (by_value, by_text) {
        (Ok(a), Ok(b)) => {
            let a = a
                .as_ref()
                .map(|v| serde_json::to_string(v).unwrap_or_default());
            (a != b).then(|| format!("evaluate_json gave {b:?}, evaluate gave {a:?}"))
        }
        (Err(a), Err(b)) if a.code == b.code || a.is_limit() || b.is_limit() => None,
        (Err(a), _) if a.is_limit() => None,
        (_, Err(b)) if b.is_limit() => None,
        (a, b) => Some(format!("evaluate_json gave {b:?}, evaluate gave {a:?}")),
    }
}

fn run_suite() -> Run {
    let dir = suite_dir();
    assert!(
        dir.join("groups").is_dir(),
        "JSONata test suite not found at {} (set QB_JSONATA_SUITE to override)",
        dir.display()
    );
    let mut datasets = BTreeMap::new();
    let mut results = Vec::new();
    let mut groups: Vec<PathBuf> = std::fs::read_dir(dir.join("groups"))
        .expect("groups dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    groups.sort();
    let only = std::env::var("QB_JSONATA_ONLY").ok();
    for g in groups {
        let gname = g
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&g)
            .expect("group dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for f in files {
            let stem = f
                .file_stem()
                .and_then(|n| n.to_str())
                .unwrap_or("")
                .to_string();
            let cases = match read_json(&f) {
                Value::Array(a) => a
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| (format!("{gname}/{stem}[{i}]"), c))
                    .collect::<Vec<_>>(),
                c => vec![(format!("{gname}/{stem}"), c)],
            };
            for (id, case) in cases {
                if let Some(o) = &only
                    && !id.starts_with(o.as_str())
                {
                    continue;
                }
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    run_case(&dir, &g, &case, &mut datasets)
                }))
                .unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Outcome::Panic(msg)
                });
                results.push((id, outcome));
            }
        }
    }
    Run { results }
}

fn suite() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        // the suite includes deliberately deep recursion; give it the stack a
        // service worker thread would have
        std::thread::Builder::new()
            .stack_size(16 * 1024 * 1024)
            .spawn(run_suite)
            .expect("spawn")
            .join()
            .expect("suite thread")
    })
}

fn known_failures() -> BTreeSet<String> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/known-failures.txt");
    std::fs::read_to_string(p)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

#[test]
fn suite_report() {
    let run = suite();
    let known = known_failures();
    let total = run.results.len();
    let passed = run
        .results
        .iter()
        .filter(|(_, o)| *o == Outcome::Pass)
        .count();
    let mut by_group: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (id, o) in &run.results {
        let g = id.split('/').next().unwrap_or("").to_string();
        let e = by_group.entry(g).or_default();
        e.1 += 1;
        if *o == Outcome::Pass {
            e.0 += 1;
        }
    }
    let verbose = std::env::var("QB_JSONATA_VERBOSE").is_ok();
    let mut unexpected = Vec::new();
    let mut now_passing = Vec::new();
    for (id, o) in &run.results {
        match o {
            Outcome::Pass => {
                if known.contains(id) {
                    now_passing.push(id.clone());
                }
            }
            other => {
                if verbose {
                    println!("FAIL {id}: {other:?}");
                }
                if !known.contains(id) {
                    unexpected.push(format!("{id}: {other:?}"));
                }
            }
        }
    }
    if std::env::var("QB_JSONATA_WRITE_KNOWN").is_ok() {
        let mut lines: Vec<String> = run
            .results
            .iter()
            .filter(|(_, o)| *o != Outcome::Pass)
            .map(|(id, _)| id.clone())
            .collect();
        lines.sort();
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/known-failures.txt");
        let header = "# Suite cases that fail today (group/case). Goal: empty this file.\n";
        std::fs::write(p, format!("{header}{}\n", lines.join("\n"))).expect("write known failures");
    }
    for (g, (p, t)) in &by_group {
        if p != t {
            println!("  {g}: {p}/{t}");
        }
    }
    println!(
        "JSONata suite: {passed} of {total} cases pass ({} known failures listed)",
        known.len()
    );
    if !now_passing.is_empty() {
        println!(
            "{} listed known failures now pass (remove them): {:?}",
            now_passing.len(),
            now_passing
        );
    }
    assert!(
        unexpected.is_empty(),
        "{} cases fail that are not in known-failures.txt:\n{}",
        unexpected.len(),
        unexpected.join("\n")
    );
}

#[test]
fn suite_never_panics() {
    let run = suite();
    let panics: Vec<_> = run
        .results
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Panic(_)))
        .collect();
    println!(
        "JSONata suite: {} cases, {} panics",
        run.results.len(),
        panics.len()
    );
    assert!(panics.is_empty(), "cases panicked: {panics:?}");
}
