//! Evaluator target. The input is an expression, optionally followed by a NUL
//! byte and a JSON document to evaluate it against (a fixed document is used
//! when there is none or it does not parse). Every expression that compiles is
//! evaluated with tight limits, against the document and against undefined
//! input, with bindings. Must never panic, abort, hang or leak.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queuebox_jsonata::{Bindings, Expression, Limits};
use serde_json::{Value, json};
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let (expr_bytes, doc_bytes) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let Ok(src) = std::str::from_utf8(expr_bytes) else {
        return;
    };
    let Ok(expr) = Expression::compile(src) else {
        return;
    };
    let doc = doc_bytes
        .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        .unwrap_or_else(|| {
            json!({
                "a": [1, 2, {"b": "c", "d": [true, null, 1.5]}],
                "s": "text",
                "o": {"x": {"y": {"z": 1}}},
                "items": [{"price": 10, "quantity": 2}, {"price": 5, "quantity": 3}],
                "password": "p", "secret": "s", "token": "t"
            })
        });
    let mut bindings = Bindings::new();
    bindings.insert(
        "messageId".into(),
        json!("6b1f0c1e-9a7d-4f0e-8a1c-2f3d4e5f6a7b"),
    );
    bindings.insert("topic".into(), json!("order.created"));
    bindings.insert("headers".into(), json!({"x-github-event": "push"}));
    // Tight limits keep each run short and its memory well under the fuzzer's
    // RSS limit (ASan multiplies allocation sizes); the limits themselves are
    // what is being exercised.
    let limits = Limits {
        timeout: Duration::from_millis(50),
        max_output_bytes: 1 << 20,
        max_items: 1_000_000,
        ..Limits::default()
    };
    let _ = expr.evaluate(&doc, &bindings, &limits);
    let _ = expr.evaluate_opt(None, &Bindings::new(), &limits);
});
