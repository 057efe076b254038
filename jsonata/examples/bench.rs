//! Throughput of three representative transform expressions (an envelope with
//! bindings, an order summary with `$sum`, a redaction with the transform operator),
//! the way QueueBox runs a transform: compiled once; per evaluation the
//! payload's JSON text is parsed, bindings are built, the expression is
//! evaluated and the result is serialised back to JSON text. Single-threaded.
//! Two ways: `text` is `Expression::evaluate_json` (text in, text out);
//! `value` is `serde_json::from_str`, `Expression::evaluate` and
//! `serde_json::to_string`.
//!
//! `cargo run --release -p queuebox-jsonata --example bench -- [iterations] [rounds] [name]`
//! (defaults 200000, 3 and all three workloads; `QB_BENCH_MODE=text|value`
//! runs one way only). Prints every round and the median, in
//! evaluations per second. `bench/jsonata-js/bench.js` runs the same
//! workloads on jsonata-js for comparison.
use queuebox_jsonata::{Bindings, Expression, Limits};
use serde_json::{Value, json};
use std::time::Instant;

/// (name, expression, payload JSON text). Keep in step with bench/jsonata-js/bench.js.
const WORKLOADS: [(&str, &str, &str); 3] = [
    (
        "envelope",
        r#"{ "id": $messageId, "type": $topic, "data": $ }"#,
        r#"{"orderId":"1001"}"#,
    ),
    (
        "order-summary",
        r#"{ "orderId": id, "customer": customer.name, "total": items.(price * quantity) ~> $sum() }"#,
        r#"{"id":"1001","customer":{"name":"Ada"},"items":[{"price":10,"quantity":2},{"price":5,"quantity":3}]}"#,
    ),
    (
        "redact",
        r#"$ ~> |$|{}, ['password', 'secret', 'token']|"#,
        r#"{"user":"ada","email":"ada@example.com","password":"hunter2","secret":"s3cr3t","token":"abc123","profile":{"plan":"pro","seats":5}}"#,
    ),
];

fn message_ids() -> Vec<Value> {
    (0..1024)
        .map(|i| json!(format!("6b1f0c1e-9a7d-4f0e-8a1c-{i:012x}")))
        .collect()
}

fn bindings_for(id: &Value) -> Bindings {
    let mut bindings = Bindings::new();
    bindings.insert("messageId".into(), id.clone());
    bindings.insert("topic".into(), json!("order.created"));
    bindings
}

fn run_value(expr: &Expression, text: &str, id: &Value, limits: &Limits) -> String {
    let payload: Value = serde_json::from_str(text).expect("payload");
    let out = expr
        .evaluate(&payload, &bindings_for(id), limits)
        .expect("evaluate")
        .unwrap_or(Value::Null);
    serde_json::to_string(&out).expect("serialise")
}

fn run_text(expr: &Expression, text: &str, id: &Value, limits: &Limits) -> String {
    expr.evaluate_json(text, &bindings_for(id), limits)
        .expect("evaluate")
        .unwrap_or_else(|| "null".into())
}

type Runner = fn(&Expression, &str, &Value, &Limits) -> String;

fn main() {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<usize> = raw.iter().filter_map(|a| a.parse().ok()).collect();
    let only = raw.iter().find(|a| a.parse::<usize>().is_err());
    let n = args.first().copied().unwrap_or(200_000);
    let rounds = args.get(1).copied().unwrap_or(3).max(1);
    let ids = message_ids();
    let limits = Limits::default();
    println!("queuebox-jsonata, {n} evaluations per round, {rounds} rounds, JSON text in and out");
    let runners: [(&str, Runner); 2] = [("text", run_text), ("value", run_value)];
    for (name, src, text) in WORKLOADS {
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let expr = Expression::compile(src).expect("compile");
        for (mode, run) in runners {
            if std::env::var("QB_BENCH_MODE").is_ok_and(|m| m != mode) {
                continue;
            }
            let first = run(&expr, text, &ids[0], &limits);
            assert_eq!(first, run_value(&expr, text, &ids[0], &limits));
            if mode == "text" {
                println!("{name}: {first}");
            }
            // warm-up
            for i in 0..n / 10 {
                std::hint::black_box(run(&expr, text, &ids[i % ids.len()], &limits));
            }
            let mut rates = Vec::new();
            for _ in 0..rounds {
                let start = Instant::now();
                for i in 0..n {
                    std::hint::black_box(run(&expr, text, &ids[i % ids.len()], &limits));
                }
                rates.push(n as f64 / start.elapsed().as_secs_f64());
            }
            let shown: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
            rates.sort_by(f64::total_cmp);
            println!(
                "{name} ({mode}): median {:.0} evals/s (rounds: {})",
                rates[rates.len() / 2],
                shown.join(", ")
            );
        }
    }
}
