//! Measure native stack use: `cargo run --example stack -- <kind> <n> <stack_kb>`.
use queuebox_jsonata::{Bindings, Expression, Limits};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let kind = a.get(1).cloned().unwrap_or_default();
    let n: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(100);
    let kb: usize = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(2048);
    let h = std::thread::Builder::new()
        .stack_size(kb * 1024)
        .spawn(move || {
            let src = match kind.as_str() {
                "paren" => format!("{}1{}", "(".repeat(n), ")".repeat(n)),
                "array" => format!("{}1{}", "[".repeat(n), "]".repeat(n)),
                "plus" => format!("1{}", "+1".repeat(n)),
                "neg" => format!("{}1", "-".repeat(n)),
                "rec" => format!("($f := function($n){{ $n = 0 ? 0 : 1 + $f($n - 1) }}; $f({n}))"),
                _ => "1".into(),
            };
            let lim = Limits {
                max_depth: 100_000,
                ..Limits::default()
            };
            let r = if std::env::var("COMPILE_ONLY").is_ok() {
                Expression::compile(&src).map(|_| None)
            } else {
                Expression::compile(&src).and_then(|e| e.evaluate_opt(None, &Bindings::new(), &lim))
            };
            println!("{:?}", r.map_err(|e| e.code));
        });
    if let Ok(h) = h {
        let _ = h.join();
    }
}
