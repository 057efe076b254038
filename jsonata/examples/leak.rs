//! Leak check: evaluates three representative transform expressions (an envelope with
//! bindings, order summary with `$sum`, redaction with the transform operator)
//! ten million times in total, JSON text in and out (through `evaluate` and
//! `evaluate_json` in turn), and prints the resident
//! memory (VmRSS from /proc/self/status) every 500,000 evaluations. Resident
//! memory must stay flat after the first sample.
//!
//! `cargo run --release -p queuebox-jsonata --example leak -- [total] [every]`
use queuebox_jsonata::{Bindings, Expression, Limits};
use serde_json::{Value, json};
use std::time::Instant;

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

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let total = args.first().copied().unwrap_or(10_000_000);
    let every = args.get(1).copied().unwrap_or(500_000).max(1);
    let compiled: Vec<(Expression, &str)> = EXPRESSIONS
        .iter()
        .map(|(src, text)| (Expression::compile(src).expect("compile"), *text))
        .collect();
    let limits = Limits::default();
    let start = Instant::now();
    let mut out_bytes = 0usize;
    println!("evaluations,elapsed_s,vm_rss_kib");
    println!("0,0.0,{}", vm_rss_kib());
    for i in 0..total {
        let (expr, text) = &compiled[(i % 3) as usize];
        let mut bindings = Bindings::new();
        // a different message id every time, as in a real delivery stream
        bindings.insert("messageId".into(), json!(format!("msg-{i}")));
        bindings.insert("topic".into(), json!("order.created"));
        // both entry points, in turn: `evaluate` on a parsed payload, and
        // `evaluate_json` on the text
        out_bytes += if (i / 3).is_multiple_of(2) {
            let payload: Value = serde_json::from_str(text).expect("payload");
            let out = expr
                .evaluate(&payload, &bindings, &limits)
                .expect("evaluate")
                .unwrap_or(Value::Null);
            serde_json::to_string(&out).expect("serialise").len()
        } else {
            expr.evaluate_json(text, &bindings, &limits)
                .expect("evaluate")
                .map_or(0, |s| s.len())
        };
        if (i + 1) % every == 0 {
            println!(
                "{},{:.1},{}",
                i + 1,
                start.elapsed().as_secs_f64(),
                vm_rss_kib()
            );
        }
    }
    println!("# output bytes: {out_bytes}");
}
