//! Evaluations a second of three representative transform expressions (envelope, order summary,
//! redaction), compiled once, run the way the
//! dispatcher runs a destination transform: per evaluation a delivery context is built (`$messageId`,
//! `$topic`, `$attempt`, `$timestamp`), the compiled transform is applied to the payload's JSON text
//! through the `Transformer` port on a single-threaded tokio runtime, and the result is taken as
//! the payload to send. Beside it, the bare engine (`evaluate_json` with the same four bindings
//! built once) shows what the port and the per-message bindings add.
//!
//! `cargo run --release -p qb-bench-transform -- [seconds per workload]` (default 3).

use queuebox_jsonata::{Bindings, Expression, Limits};
use queuebox_ports::transform::{DeliveryContext, TransformContext, TransformLimits, Transformer};
use queuebox_transform::JsonataTransformer;
use serde_json::json;
use std::time::{Duration, Instant, SystemTime};
use uuid::Uuid;

/// (name, expression, payload JSON text): the three representative expressions and their payloads.
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

fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let budget = Duration::from_secs(seconds.max(1));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the runtime: {error}");
            std::process::exit(1);
        }
    };
    let transformer = JsonataTransformer::new();
    println!("workload\tport evals/s\tus/eval\tengine evals/s\tus/eval");
    for (name, expression, payload) in WORKLOADS {
        let Ok(compiled) = transformer.compile(expression, TransformLimits::DEFAULT) else {
            eprintln!("{name}: does not compile");
            std::process::exit(1);
        };
        let created_at = SystemTime::now();
        let port_rate = runtime.block_on(async {
            measure(budget, |i| {
                let context = TransformContext::Delivery(DeliveryContext {
                    message_id: Uuid::from_u128(i as u128),
                    topic: "order.created".to_owned(),
                    attempt: 0,
                    created_at,
                });
                let compiled = &compiled;
                async move {
                    let out = compiled.apply(payload, &context).await;
                    out.and_then(|o| o.into_payload()).map(|p| p.len())
                }
            })
            .await
        });
        let engine = Expression::compile(expression).unwrap_or_else(|e| {
            eprintln!("{name}: {e}");
            std::process::exit(1)
        });
        let mut bindings = Bindings::new();
        bindings.insert("messageId".into(), json!(Uuid::nil().to_string()));
        bindings.insert("topic".into(), json!("order.created"));
        bindings.insert("attempt".into(), json!(0));
        bindings.insert("timestamp".into(), json!("2026-11-30T16:00:00.000Z"));
        let limits = Limits {
            timeout: Duration::from_millis(100),
            max_depth: 100,
            ..Limits::default()
        };
        let engine_rate = runtime.block_on(async {
            measure(budget, |_| {
                let result = engine
                    .evaluate_json(payload, &bindings, &limits)
                    .map(|o| o.map_or(0, |p| p.len()))
                    .map_err(|e| e.to_string());
                async move { result }
            })
            .await
        });
        println!(
            "{name}\t{port_rate:.0}\t{:.2}\t{engine_rate:.0}\t{:.2}",
            1e6 / port_rate,
            1e6 / engine_rate
        );
    }
}

/// Runs `step(i)` for i = 0, 1, ... until `budget` has passed (checked every 256 steps) and
/// returns steps a second. A failed step ends the program: the numbers would mean nothing.
async fn measure<F, Fut, E>(budget: Duration, mut step: F) -> f64
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = Result<usize, E>>,
    E: std::fmt::Display,
{
    // Warm-up: caches, allocator, branch predictors.
    for i in 0..10_000 {
        if let Err(error) = step(i).await {
            eprintln!("evaluation failed: {error}");
            std::process::exit(1);
        }
    }
    let started = Instant::now();
    let mut done: u64 = 0;
    let mut bytes = 0usize;
    loop {
        for _ in 0..256 {
            match step(done).await {
                Ok(n) => bytes = bytes.wrapping_add(n),
                Err(error) => {
                    eprintln!("evaluation failed: {error}");
                    std::process::exit(1);
                }
            }
            done += 1;
        }
        if started.elapsed() >= budget {
            break;
        }
    }
    std::hint::black_box(bytes);
    done as f64 / started.elapsed().as_secs_f64()
}
