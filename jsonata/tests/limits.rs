//! Runaway expressions must stop with a limit error, within the time limit
//! plus a small margin, on an ordinary 2 MiB test thread (no stack overflow).

use queuebox_jsonata::{Bindings, Error, Expression, Limits};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Slack allowed past the time limit: the clock is read often, but after the
/// deadline the evaluation still unwinds and frees what it built (slower in
/// debug builds, and CI machines are shared).
const MARGIN: Duration = Duration::from_millis(if cfg!(debug_assertions) { 750 } else { 250 });

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
    println!(
        "limit: {code} after {took:>12?} (timeout {:?}) for {expr}",
        lim.timeout
    );
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

#[test]
fn pathological_inputs_to_built_ins_stay_fast() {
    let lim = limits(2000);
    for e in [
        "$formatInteger(1e30, 'I')",
        "$parseInteger($join([1..5000].'trillion', ' '), 'w')",
        "$fromMillis(0, $join([1..20000].'[x', ''))",
        "$fromMillis(0, '[Y,999999999]')",
        "$formatInteger(1, $join([1..200000].'0', ''))",
        "$formatNumber(1, $join([1..200000].'0', ''))",
        "$formatNumber(1e300, $join([1..100000].'0', ','))",
        "$count([1..200000]{'k': $}.k)",
        "$count(([1..200000]@$v){'k': $v}.k)",
        "$formatInteger(1e300, $join([1..100000].'0', ','))",
        "$toMillis($join([1..100000].'one', ' '), $join([1..100000].'[Yw]', ' '))",
        "(function($a)<n+n+n+n+n+n+n+n+n+n+n+n+s>{1})(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)",
        "$formatNumber(1e300, '#,##0.' & $join([1..20000].'#', ''))",
        "$eval('function($a)<' & $join([1..100000].'n', '') & '>{1}')",
    ] {
        let (r, took) = run(e, &json!(null), &lim);
        assert!(took < Duration::from_secs(2), "{e}: took {took:?} -> {r:?}");
    }
}

#[test]
fn scopes_are_released_after_calls() {
    // more calls than the per-evaluation scope cap (1M): only works because
    // each call's scope is freed when it returns
    let lim = limits(60_000);
    let (r, _) = run(
        "$count($map([1..1100000], function($v){ $v }))",
        &json!(null),
        &lim,
    );
    assert_eq!(r, Ok(Some(json!(1_100_000))));
    // closures that escape keep their scopes alive and still work
    let (r, _) = run(
        "($mk := function($n){ function(){ $n } }; $map([1..5], function($i){ $mk($i) }) ~> $map(function($f){ $f() }))",
        &json!(null),
        &lim,
    );
    assert_eq!(r, Ok(Some(json!([1, 2, 3, 4, 5]))));
}

#[test]
fn deeply_nested_functions_are_dropped_and_called_safely() {
    let lim = limits(10_000);
    let partials =
        "($f := function($g, $n){ $n = 0 ? $g : $f($g(?), $n - 1) }; $f($string, 30000))";
    let chains =
        "($f := function($g, $n){ $n = 0 ? $g : $f($g ~> $string, $n - 1) }; $f($string, 30000))";
    let captured = "($f := function($g, $n){ $n = 0 ? $g : $f($g.(function(){ 1 }), $n - 1) }; $f($string, 30000))";
    for src in [partials, chains, captured] {
        // building (and dropping) 30 000 nested functions must not overflow
        let (r, _) = run(src, &json!(null), &lim);
        assert!(
            matches!(r, Ok(_) | Err(Error { code: "U1001", .. })),
            "{src}: {r:?}"
        );
    }
    // calling them recurses: the depth/stack guard stops it
    expect_code(&format!("({partials})('x')"), &json!(null), &lim, "U1001");
    expect_code(&format!("({chains})('x')"), &json!(null), &lim, "U1001");
}
