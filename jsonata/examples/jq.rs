//! Evaluate an expression from the command line: `cargo run --example jq -- '<expr>' '<json>'`.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let expr = args.get(1).cloned().unwrap_or_default();
    let data: Option<serde_json::Value> = args.get(2).and_then(|d| serde_json::from_str(d).ok());
    match queuebox_jsonata::Expression::compile(&expr) {
        Ok(e) => match e.evaluate_opt(
            data.as_ref(),
            &queuebox_jsonata::Bindings::new(),
            &queuebox_jsonata::Limits::default(),
        ) {
            Ok(Some(v)) => println!("{v}"),
            Ok(None) => println!("(undefined)"),
            Err(err) => println!("error: {err}"),
        },
        Err(err) => println!("compile error: {err}"),
    }
}
