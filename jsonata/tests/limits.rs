//! Runaway expressions must stop with a limit error, within the time limit
//! plus a small margin, on an ordinary 2 MiB test thread (no stack overflow).

use queuebox_jsonata::{Bindings, Error, Expression, Limits};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Slack allowed past the time limit (debug builds on a shared machine).
const MARGIN: Duration = Duration::from_millis(400);

fn limits(timeout_ms: u64) -> Limits {
    Limits {
        timeout: Duration::from_millis(timeout_ms),
        ..Limits::default()
    }
}

fn run(expr: &str, data: &Value, lim: &Limits) -> (Result<Option<Value>, Error>, Duration) {
    let start = Instant::now();
    let r = Expression::compile(expr).and_then(|e| e.evaluate(data, &Bindings::new(), lim));
    (r, start.elapsed())
}

fn expect_code(expr: &str, data: &Value, lim: &Limits, code: &str) {
    let (r, took) = run(expr, data, lim);
    match r {
        Err(e) => assert_eq!(e.code, code, "{expr}: unexpected error {e}"),
        Ok(v) => panic!("{expr}: expected {code}, got {v:?}"),
    }
    assert!(
        took <= lim.timeout + MARGIN,
        "{expr}: took {took:?} (limit {:?})",
        lim.timeout
    );
}

#[test]
fn pad_to_huge_length_is_refused() {
    expect_code("$pad('x', 1e9)", &json!(null), &limits(1000), "U1002");
    expect_code(
        "$pad('x', -1e12, 'abc')",
        &json!(null),
        &limits(1000),
        "U1002",
    );
}

#[test]
fn catastrophic_regex_runs_in_linear_time() {
    let text = format!("{}!", "a".repeat(200_000));
    let lim = limits(1000);
    let (r, took) = run("$contains($, /^(a+)+$/)", &json!(text), &lim);
    assert_eq!(r, Ok(Some(json!(false))));
    assert!(took <= lim.timeout + MARGIN, "took {took:?}");
    let (r, _) = run("$replace($, /(a|aa)+$/, 'b')", &json!(text), &lim);
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn unsupported_regex_features_are_compile_errors() {
    for re in ["/(?=a)b/", "/(a)\\1/", "/(?<!a)b/"] {
        let e = Expression::compile(&format!("$match('ab', {re})")).expect_err(re);
        assert_eq!(e.code, "S0303", "{re}: {e}");
    }
}

#[test]
fn infinite_tail_recursion_hits_the_time_limit() {
    expect_code(
        "($f := function($n){ $f($n + 1) }; $f(0))",
        &json!(null),
        &limits(300),
        "U1001",
    );
    expect_code(
        "($inf := function(){ $inf() }; $inf())",
        &json!(null),
        &limits(300),
        "U1001",
    );
}

#[test]
fn infinite_recursion_hits_the_depth_limit() {
    expect_code(
        "($f := function($n){ 1 + $f($n + 1) }; $f(0))",
        &json!(null),
        &limits(5000),
        "U1001",
    );
    // the caller may ask for more depth than is safe: it is capped
    let lim = Limits {
        max_depth: usize::MAX,
        ..limits(5000)
    };
    expect_code(
        "($f := function($n){ [$f($n + 1)] }; $f(0))",
        &json!(null),
        &lim,
        "U1001",
    );
}

#[test]
fn deeply_nested_expressions_are_rejected_at_compile_time() {
    let n = 100_000;
    let cases = [
        format!("{}1{}", "(".repeat(n), ")".repeat(n)),
        format!("{}1{}", "[".repeat(n), "]".repeat(n)),
        format!("{}1", "-".repeat(n)),
        format!("1{}", "+1".repeat(n)),
        format!("a{}", ".a".repeat(n)),
        format!("{}1{}", "{'a':".repeat(n), "}".repeat(n)),
        format!("{}1", "$f(".repeat(n)),
    ];
    for src in &cases {
        let start = Instant::now();
        let e = Expression::compile(src).expect_err("must be rejected");
        assert!(e.code == "U1001" || e.code.starts_with('S'), "{}", e);
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}

#[test]
fn deeply_nested_input_data_is_rejected() {
    let mut v = json!(1);
    for _ in 0..1000 {
        v = json!([v]);
    }
    expect_code("$", &v, &limits(1000), "U1001");
    let mut o = json!(1);
    for _ in 0..1000 {
        o = json!({ "a": o });
    }
    expect_code("**", &o, &limits(1000), "U1001");
}

#[test]
fn deeply_nested_built_data_is_bounded() {
    // nesting built in a loop is not bounded by recursion depth
    expect_code(
        "$reduce([1..100000], function($a, $b){ [[$a]] }, [])",
        &json!(null),
        &limits(5000),
        "U1001",
    );
    expect_code(
        "$reduce([1..100000], function($a, $b){ {'a': $a} }, {})",
        &json!(null),
        &limits(5000),
        "U1001",
    );
}

#[test]
fn huge_ranges() {
    expect_code("[1..1e9]", &json!(null), &limits(1000), "D2014");
    expect_code(
        "$count([1..1e7].($ * 2))",
        &json!(null),
        &limits(300),
        "U1001",
    );
}

#[test]
fn string_building_loops() {
    // doubling: hits the size bound
    expect_code(
        "($s := function($x, $n){ $n = 0 ? $x : $s($x & $x, $n - 1) }; $s('ab', 100))",
        &json!(null),
        &limits(5000),
        "U1002",
    );
    // slow growth: hits the time bound
    expect_code(
        "($f := function($acc, $n){ $n = 0 ? $acc : $f($acc & 'x', $n - 1) }; $f('', 1e9))",
        &json!(null),
        &limits(300),
        "U1001",
    );
    expect_code(
        "$join([1..1e7].$string(), ',')",
        &json!(null),
        &limits(300),
        "U1001",
    );
}

#[test]
fn sorting_and_higher_order_loops_stop() {
    expect_code(
        "$sort([1..1e6], function($a, $b){ $a < $b })",
        &json!(null),
        &limits(300),
        "U1001",
    );
    expect_code("[1..1e6]^(-$)", &json!(null), &limits(100), "U1001");
    expect_code(
        "$map([1..1e7], function($v){ $v * 2 })",
        &json!(null),
        &limits(300),
        "U1001",
    );
}

#[test]
fn memory_use_is_bounded() {
    // each inner range is 1e7 elements: the element budget stops it quickly
    expect_code(
        "$count([1..1e7].[1..1e7])",
        &json!(null),
        &limits(20_000),
        "U1002",
    );
    let lim = Limits {
        max_items: 1000,
        ..limits(1000)
    };
    expect_code(
        "$map([1..100], function($v){ [1..100] })",
        &json!(null),
        &lim,
        "U1002",
    );
}

#[test]
fn output_size_is_bounded() {
    let lim = Limits {
        max_output_bytes: 10_000,
        ..limits(1000)
    };
    expect_code("[1..100000]", &json!(null), &lim, "U1002");
}

#[test]
fn evaluation_leaves_no_thread_busy() {
    // evaluation runs on the caller's thread; once it returns, nothing runs on
    let before = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    expect_code(
        "($inf := function(){ $inf() }; $inf())",
        &json!(null),
        &limits(100),
        "U1001",
    );
    assert!(before >= 1);
}
