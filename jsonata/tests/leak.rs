//! Evaluating many times must not grow resident memory: after a warm-up, the
//! three representative transform expressions (an envelope with bindings, order summary
//! with `$sum`, redaction with the transform operator) are evaluated many
//! times (JSON text in and out, through `evaluate` and `evaluate_json` in
//! turn) and VmRSS may grow by less than 2 MiB.
//! `examples/leak.rs` is the long version (ten million evaluations).
#![cfg(target_os = "linux")]

use queuebox_jsonata::{Bindings, Expression, Limits};
use serde_json::{Value, json};

const EXPRESSIONS: [(&str, &str); 3] = [
    (
        r#"{ "id": $messageId, "type": $topic, "data": $ }"#,
        r#"{"orderId":"1001"}"#,
    ),
    (
        r#"{ "orderId": id, "customer": customer.name, "total": items.(price * quantity) ~> $sum() }"#,
        r#"{"id":"1001","customer":{"name":"Ada"},"items":[{"price":10,"quantity":2},{"price":5,"quantity":3}]}"#,
    ),
    (
        r#"$ ~> |$|{}, ['password', 'secret', 'token']|"#,
        r#"{"user":"ada","email":"ada@example.com","password":"hunter2","secret":"s3cr3t","token":"abc123","profile":{"plan":"pro","seats":5}}"#,
    ),
];

/// Allowed growth of resident memory over the measured evaluations.
const BOUND_KIB: u64 = 2 * 1024;

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

fn evaluate(compiled: &[(Expression, &str)], i: u64, limits: &Limits) -> String {
    let (expr, text) = &compiled[(i % 3) as usize];
    let mut bindings = Bindings::new();
    bindings.insert("messageId".into(), json!(format!("msg-{i}")));
    bindings.insert("topic".into(), json!("order.created"));
    // both entry points, in turn
    if (i / 3).is_multiple_of(2) {
        let payload: Value = serde_json::from_str(text).expect("payload");
        let out = expr
            .evaluate(&payload, &bindings, limits)
            .expect("evaluate")
            .expect("defined result");
        serde_json::to_string(&out).expect("serialise")
    } else {
        expr.evaluate_json(text, &bindings, limits)
            .expect("evaluate")
            .expect("defined result")
    }
}

fn evaluate_many(compiled: &[(Expression, &str)], from: u64, count: u64) -> usize {
    let limits = Limits::default();
    (from..from + count)
        .map(|i| evaluate(compiled, i, &limits).len())
        .sum()
}

#[test]
fn resident_memory_stays_flat() {
    // debug builds are about twenty times slower (some 50 us an evaluation):
    // fewer iterations keep this test at a couple of seconds; a leak of more
    // than about 50 bytes an evaluation still fails it
    let (warm, measured) = if cfg!(debug_assertions) {
        (5_000, 40_000)
    } else {
        (20_000, 200_000)
    };
    let compiled: Vec<(Expression, &str)> = EXPRESSIONS
        .iter()
        .map(|(src, text)| (Expression::compile(src).expect("compile"), *text))
        .collect();
    // the outputs are checked once, so the loop measures working evaluations
    let limits = Limits::default();
    assert_eq!(
        evaluate(&compiled, 0, &limits),
        r#"{"id":"msg-0","type":"order.created","data":{"orderId":"1001"}}"#
    );
    assert_eq!(
        evaluate(&compiled, 1, &limits),
        r#"{"orderId":"1001","customer":"Ada","total":35}"#
    );
    assert_eq!(
        evaluate(&compiled, 2, &limits),
        r#"{"user":"ada","email":"ada@example.com","profile":{"plan":"pro","seats":5}}"#
    );
    for i in 0..3 {
        assert_eq!(
            evaluate(&compiled, i, &limits),
            evaluate(&compiled, i + 3, &limits).replace("msg-3", "msg-0")
        );
    }
    evaluate_many(&compiled, 0, warm);
    let before = vm_rss_kib();
    evaluate_many(&compiled, warm, measured);
    let after = vm_rss_kib();
    println!("VmRSS {before} KiB -> {after} KiB after {measured} evaluations");
    assert!(
        after < before + BOUND_KIB,
        "resident memory grew from {before} KiB to {after} KiB over {measured} evaluations"
    );
}
