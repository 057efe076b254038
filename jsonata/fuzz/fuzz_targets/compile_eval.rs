//! Any byte string: compile it as an expression and, if it compiles, evaluate
//! it against a fixed document with tight limits. Must never panic or abort.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queuebox_jsonata::{Bindings, Expression, Limits};
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    let Ok(expr) = Expression::compile(src) else { return };
    let doc = serde_json::json!({
        "a": [1, 2, {"b": "c", "d": [true, null, 1.5]}],
        "s": "text",
        "o": {"x": {"y": {"z": 1}}}
    });
    let limits = Limits {
        timeout: Duration::from_millis(20),
        max_output_bytes: 1 << 20,
        ..Limits::default()
    };
    let _ = expr.evaluate(&doc, &Bindings::new(), &limits);
    let _ = expr.evaluate_opt(None, &Bindings::new(), &limits);
});
