//! Cheap in-tree fuzzing: every suite expression, cut and mutated in
//! deterministic ways, must compile-or-fail and evaluate-or-fail without
//! panicking. (A cargo-fuzz target lives in `jsonata/fuzz/`.)

use queuebox_jsonata::{Bindings, Expression, Limits};
use serde_json::{Value, json};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn suite_dir() -> PathBuf {
    if let Ok(p) = std::env::var("QB_JSONATA_SUITE") {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance/jsonata/suite")
}

fn expressions() -> Vec<String> {
    let dir = suite_dir().join("groups");
    assert!(
        dir.is_dir(),
        "JSONata test suite not found at {}",
        dir.display()
    );
    let mut out = Vec::new();
    let mut groups: Vec<_> = std::fs::read_dir(&dir)
        .expect("groups")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    groups.sort();
    for g in groups {
        let mut files: Vec<_> = std::fs::read_dir(&g)
            .expect("group")
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .collect();
        files.sort();
        for f in files {
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            if f.extension().is_some_and(|x| x == "jsonata") {
                out.push(text);
                continue;
            }
            let Ok(v) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            let cases = match v {
                Value::Array(a) => a,
                c => vec![c],
            };
            for c in cases {
                if let Some(Value::String(e)) = c.get("expr") {
                    out.push(e.clone());
                }
            }
        }
    }
    out
}

/// A small deterministic PRNG (xorshift) so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const TOKENS: [&str; 24] = [
    "(", ")", "[", "]", "{", "}", ".", "..", "*", "**", "%", "#$i", "@$o", "$", "$$", "~>", "?",
    ":", ";", ",", "|", "^(", "\"", "/a+/",
];

fn mutate(src: &str, rng: &mut Rng) -> String {
    let mut chars: Vec<char> = src.chars().collect();
    for _ in 0..1 + rng.below(3) {
        let pos = rng.below(chars.len() + 1);
        match rng.below(4) {
            0 => {
                chars.truncate(pos);
            }
            1 => {
                if pos < chars.len() {
                    chars.remove(pos);
                }
            }
            2 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                for (i, c) in t.chars().enumerate() {
                    chars.insert((pos + i).min(chars.len()), c);
                }
            }
            _ => {
                let other = rng.below(chars.len().max(1));
                if pos < chars.len() && other < chars.len() {
                    chars.swap(pos, other);
                }
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn mutated_suite_expressions_never_panic() {
    let exprs = expressions();
    let data = json!({"Account": {"Order": [{"Product": [{"Price": 1, "Quantity": 2}]}]}, "a": [1, 2, {"b": "c"}], "s": "text"});
    let limits = Limits {
        timeout: Duration::from_millis(50),
        ..Limits::default()
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let rounds: usize = std::env::var("QB_JSONATA_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let mut panics = Vec::new();
    let mut runs = 0;
    for _ in 0..rounds {
        for e in &exprs {
            let m = mutate(e, &mut rng);
            runs += 1;
            let r = catch_unwind(AssertUnwindSafe(|| {
                if let Ok(x) = Expression::compile(&m) {
                    let _ = x.evaluate(&data, &Bindings::new(), &limits);
                    let _ = x.evaluate_opt(None, &Bindings::new(), &limits);
                }
            }));
            if r.is_err() {
                panics.push(m);
            }
        }
    }
    println!(
        "robustness: {runs} mutated expressions, {} panics",
        panics.len()
    );
    assert!(panics.is_empty(), "panicked on: {panics:#?}");
}
