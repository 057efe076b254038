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

const BUILTINS: [&str; 64] = [
    "string",
    "length",
    "substring",
    "substringBefore",
    "substringAfter",
    "uppercase",
    "lowercase",
    "trim",
    "pad",
    "contains",
    "split",
    "join",
    "match",
    "replace",
    "eval",
    "base64encode",
    "base64decode",
    "encodeUrlComponent",
    "encodeUrl",
    "decodeUrlComponent",
    "decodeUrl",
    "formatNumber",
    "formatBase",
    "formatInteger",
    "parseInteger",
    "number",
    "abs",
    "floor",
    "ceil",
    "round",
    "power",
    "sqrt",
    "random",
    "sum",
    "max",
    "min",
    "average",
    "boolean",
    "not",
    "exists",
    "count",
    "append",
    "sort",
    "reverse",
    "shuffle",
    "distinct",
    "zip",
    "keys",
    "lookup",
    "spread",
    "merge",
    "sift",
    "each",
    "error",
    "assert",
    "type",
    "map",
    "filter",
    "single",
    "reduce",
    "now",
    "millis",
    "fromMillis",
    "toMillis",
];

const ARGS: [&str; 16] = [
    "()",
    "null",
    "0",
    "-1",
    "1e308",
    "-1e308",
    "0.5",
    "9007199254740993",
    "''",
    "'[Y0001]-[M01]'",
    "'#,##0.0e0;w'",
    "[1, 'a', [2]]",
    "{'a': {'b': 1}}",
    "function($x, $y){ $x }",
    "/a+/",
    "[1..3]",
];

#[test]
fn builtins_with_extreme_arguments_never_panic() {
    let limits = Limits {
        timeout: Duration::from_millis(50),
        ..Limits::default()
    };
    let data = json!({"a": 1});
    let mut panics = Vec::new();
    let mut runs = 0;
    for f in BUILTINS {
        for a in ARGS {
            for b in ARGS {
                for c in ["", ", 2", ", -1e308", ", 'x'", ", function($v){ $v }"] {
                    let src = format!("${f}({a}, {b}{c})");
                    runs += 1;
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        if let Ok(x) = Expression::compile(&src) {
                            let _ = x.evaluate(&data, &Bindings::new(), &limits);
                        }
                    }));
                    if r.is_err() {
                        panics.push(src);
                    }
                }
            }
        }
    }
    println!("robustness: {runs} built-in calls, {} panics", panics.len());
    assert!(panics.is_empty(), "panicked on: {panics:#?}");
}

/// Random expressions from a small grammar: exercises combinations the suite
/// does not (parent operators in odd places, bindings on any step, ...).
fn gen_expr(rng: &mut Rng, depth: usize) -> String {
    if depth == 0 {
        const LEAVES: [&str; 16] = [
            "a", "b", "$", "$$", "%", "*", "**", "1", "'s'", "true", "null", "$v", "[1,2]", "{}",
            "/x/", "()",
        ];
        return LEAVES[rng.below(LEAVES.len())].to_string();
    }
    let d = depth - 1;
    match rng.below(22) {
        0 => format!("{}.{}", gen_expr(rng, d), gen_expr(rng, d)),
        1 => format!("{}[{}]", gen_expr(rng, d), gen_expr(rng, d)),
        2 => format!("{}@$v", gen_expr(rng, d)),
        3 => format!("{}#$i", gen_expr(rng, d)),
        4 => format!("{}^({})", gen_expr(rng, d), gen_expr(rng, d)),
        5 => format!(
            "{}{{{}: {}}}",
            gen_expr(rng, d),
            gen_expr(rng, d),
            gen_expr(rng, d)
        ),
        6 => format!(
            "({} ? {} : {})",
            gen_expr(rng, d),
            gen_expr(rng, d),
            gen_expr(rng, d)
        ),
        7 => format!("({}; {})", gen_expr(rng, d), gen_expr(rng, d)),
        8 => format!("($v := {}; {})", gen_expr(rng, d), gen_expr(rng, d)),
        9 => format!("function($v){{{}}}({})", gen_expr(rng, d), gen_expr(rng, d)),
        10 => format!(
            "{} ~> $map(function($v){{{}}})",
            gen_expr(rng, d),
            gen_expr(rng, d)
        ),
        11 => format!(
            "{} ~> |{}|{{'k': {}}}|",
            gen_expr(rng, d),
            gen_expr(rng, d),
            gen_expr(rng, d)
        ),
        12 => format!("[{}, {}]", gen_expr(rng, d), gen_expr(rng, d)),
        13 => format!("{{'x': {}}}", gen_expr(rng, d)),
        14 => format!("{} & {}", gen_expr(rng, d), gen_expr(rng, d)),
        15 => format!("{} + {}", gen_expr(rng, d), gen_expr(rng, d)),
        16 => format!("{} = {}", gen_expr(rng, d), gen_expr(rng, d)),
        17 => format!("{} in {}", gen_expr(rng, d), gen_expr(rng, d)),
        18 => format!("$string({})", gen_expr(rng, d)),
        19 => format!("$sort({})", gen_expr(rng, d)),
        20 => format!("{}[]", gen_expr(rng, d)),
        _ => format!(
            "$reduce({}, function($a, $b){{[$a, $b]}})",
            gen_expr(rng, d)
        ),
    }
}

#[test]
fn generated_expressions_never_panic() {
    let rounds: usize = std::env::var("QB_JSONATA_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let data = json!({"a": [{"b": 1, "a": {"b": 2}}, {"b": [3, 4]}], "b": "x"});
    let limits = Limits {
        timeout: Duration::from_millis(50),
        ..Limits::default()
    };
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut panics = Vec::new();
    let n = rounds * 1500;
    for _ in 0..n {
        let depth = 1 + rng.below(4);
        let src = gen_expr(&mut rng, depth);
        let r = catch_unwind(AssertUnwindSafe(|| {
            if let Ok(x) = Expression::compile(&src) {
                let _ = x.evaluate(&data, &Bindings::new(), &limits);
            }
        }));
        if r.is_err() {
            panics.push(src);
        }
    }
    println!(
        "robustness: {n} generated expressions, {} panics",
        panics.len()
    );
    assert!(panics.is_empty(), "panicked on: {panics:#?}");
}
