//! A property of the HTTP inbox, checked on generated bodies against the real binary and
//! PostgreSQL: while the database is up, no body gets a 5xx; a 202 means exactly one stored row
//! whose payload equals what was sent (as JSON values, compared by PostgreSQL); a 200 means the
//! key was stored before; a 4xx stores nothing.
//!
//! The generator writes JSON text itself, so it can send what a serializer never writes: every
//! escape, surrogate pairs and lone surrogates, characters of every plane, U+0000, numbers far
//! beyond a float, deep nesting, duplicate member names, and every scalar as the key. The seed is
//! fixed so a failure repeats; `QB_TEST_SEED` picks another.

use queuebox_tests::inbox::{Answer, Inbox};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;

const SOURCES: &str = "  gen:\n    type: http\n    path: /gen\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n";
const CASES: usize = 400;
const MAX_BODY: usize = 1_000_000;

/// A JSON text writer over a seeded generator.
struct Gen {
    rng: StdRng,
    /// Containers left for the body being written, so a body stays small enough to send
    /// hundreds of (a deep body is written as plain brackets, outside this budget).
    containers: usize,
}

impl Gen {
    fn chance(&mut self, percent: u32) -> bool {
        self.rng.random_range(0..100) < percent
    }

    /// A character of any plane (never a surrogate, which `char` cannot hold).
    fn any_char(&mut self) -> char {
        loop {
            let plane = self.rng.random_range(0..6);
            let code = match plane {
                0 => self.rng.random_range(0x20..0x7f),
                1 => self.rng.random_range(0x80..0x800),
                2 => self.rng.random_range(0x800..0x10000),
                3 => self.rng.random_range(0x10000..0x20000),
                4 => self.rng.random_range(0x20000..0x110000),
                _ => self.rng.random_range(0..0x20),
            };
            if let Some(c) = char::from_u32(code) {
                return c;
            }
        }
    }

    /// A JSON string literal with escapes of every kind mixed in.
    fn string(&mut self, out: &mut String) {
        let len = if self.chance(3) {
            self.rng.random_range(1_000..20_000)
        } else {
            self.rng.random_range(0..24)
        };
        out.push('"');
        for _ in 0..len {
            match self.rng.random_range(0..40) {
                0 => out.push_str("\\\""),
                1 => out.push_str("\\\\"),
                2 => out.push_str("\\/"),
                3 => out.push_str(["\\b", "\\f", "\\n", "\\r", "\\t"][self.rng.random_range(0..5)]),
                4 => {
                    let code: u32 = self.rng.random_range(0..0x10000);
                    let _ = write!(out, "\\u{code:04x}");
                }
                5 => {
                    // A surrogate pair, written as two escapes.
                    let c = char::from_u32(self.rng.random_range(0x10000..0x110000))
                        .unwrap_or('\u{1F600}');
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        let _ = write!(out, "\\u{:04X}", unit);
                    }
                }
                6 if self.chance(10) => out.push_str("\\u0000"),
                _ => {
                    let c = self.any_char();
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(out, "\\u{:04x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
            }
        }
        out.push('"');
    }

    fn number(&mut self, out: &mut String) {
        match self.rng.random_range(0..8) {
            0 => {
                let _ = write!(out, "{}", self.rng.random::<i64>());
            }
            1 => {
                // An integer beyond 64 bits.
                let digits = self.rng.random_range(20..60);
                out.push(char::from(b'1' + self.rng.random_range(0..9u8)));
                for _ in 0..digits {
                    out.push(char::from(b'0' + self.rng.random_range(0..10u8)));
                }
            }
            2 => {
                let exponent: i32 = self.rng.random_range(-400..400);
                let _ = write!(
                    out,
                    "{}.{}e{exponent}",
                    self.rng.random_range(1..10),
                    self.rng.random_range(0..1000)
                );
            }
            3 => out.push_str(
                ["-0", "0", "0.0", "-0.0e0", "1E+2", "1e-20000"][self.rng.random_range(0..6)],
            ),
            _ => {
                let _ = write!(out, "{}", self.rng.random::<f64>() * 1e6);
            }
        }
    }

    fn scalar(&mut self, out: &mut String) {
        match self.rng.random_range(0..6) {
            0 => out.push_str("null"),
            1 => out.push_str(if self.chance(50) { "true" } else { "false" }),
            2 | 3 => self.number(out),
            _ => self.string(out),
        }
    }

    fn value(&mut self, out: &mut String, depth: usize, max_depth: usize) {
        if depth >= max_depth || self.containers == 0 || self.chance(35) {
            self.scalar(out);
            return;
        }
        self.containers -= 1;
        let len = self.rng.random_range(0..5);
        if self.chance(50) {
            out.push('[');
            for i in 0..len {
                if i > 0 {
                    out.push(',');
                }
                self.value(out, depth + 1, max_depth);
            }
            out.push(']');
        } else {
            out.push('{');
            let mut names = Vec::new();
            for i in 0..len {
                if i > 0 {
                    out.push(',');
                }
                // Now and then a member name repeats.
                if !names.is_empty() && self.chance(15) {
                    let name: &String = &names[self.rng.random_range(0..names.len())];
                    out.push_str(name);
                } else {
                    let mut name = String::new();
                    self.string(&mut name);
                    out.push_str(&name);
                    names.push(name);
                }
                out.push(':');
                self.value(out, depth + 1, max_depth);
            }
            out.push('}');
        }
    }

    /// One body: usually an object with an `id` of any scalar kind, sometimes something else.
    fn body(&mut self, case: usize) -> String {
        let mut out = String::new();
        self.containers = 40;
        let max_depth = if self.chance(5) {
            self.rng.random_range(100..160)
        } else {
            6
        };
        if self.chance(5) {
            self.value(&mut out, 0, max_depth);
            return out;
        }
        out.push_str("{\"id\":");
        match self.rng.random_range(0..6) {
            0 => {
                let _ = write!(out, "{case}");
            }
            1 => self.scalar(&mut out),
            _ => {
                // A string key unique to the case, with generated text after it.
                let mut text = String::new();
                self.string(&mut text);
                let _ = write!(out, "\"case-{case}-{}", &text[1..]);
            }
        }
        out.push_str(",\"data\":");
        if max_depth > 6 {
            out.push_str(&"[".repeat(max_depth));
            out.push_str(&"]".repeat(max_depth));
        } else {
            self.value(&mut out, 0, max_depth);
        }
        out.push('}');
        out
    }
}

#[tokio::test]
async fn generated_bodies_get_no_5xx_and_every_2xx_is_exactly_what_was_sent() {
    let seed: u64 = std::env::var("QB_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_201);
    let mut generator = Gen {
        rng: StdRng::seed_from_u64(seed),
        containers: 0,
    };
    let inbox = Inbox::start_with_cap(SOURCES, &[], MAX_BODY).await;
    let (mut new, mut duplicate, mut refused) = (0, 0, 0);
    let mut reasons: std::collections::BTreeMap<String, usize> = Default::default();
    for case in 0..CASES {
        let body = generator.body(case);
        let before = inbox.count().await;
        let answer: Answer = inbox.post("/inbox/gen", &[], &body).await;
        let context = || {
            let shown: String = body.chars().take(300).collect();
            format!("seed {seed} case {case}: {answer:?}\nbody: {shown}")
        };
        assert!(
            answer.status < 500,
            "a 5xx while the database is up; {}",
            context()
        );
        assert!(
            serde_json::from_str::<serde_json::Value>(&answer.text).is_ok(),
            "every answer is JSON; {}",
            context()
        );
        match answer.status {
            202 => {
                new += 1;
                let id = answer.message_id();
                let (rows, equal): (i64, Option<bool>) = sqlx::query_as(
                    "SELECT count(*), bool_and(payload = $2::jsonb) FROM inbox WHERE id = $1",
                )
                .bind(id)
                .bind(&body)
                .fetch_one(&inbox.sql)
                .await
                .unwrap_or_else(|e| panic!("compare the payload ({e}); {}", context()));
                assert_eq!(rows, 1, "{}", context());
                assert_eq!(
                    equal,
                    Some(true),
                    "the stored payload differs; {}",
                    context()
                );
                assert_eq!(inbox.count().await, before + 1, "{}", context());
            }
            200 => {
                duplicate += 1;
                assert_eq!(answer.json()["status"], "duplicate", "{}", context());
                assert_eq!(inbox.count().await, before, "{}", context());
            }
            400..=499 => {
                refused += 1;
                // The reason without what follows a colon or a number, to group them.
                let error = answer.json()["error"].as_str().unwrap_or("").to_owned();
                let kind: String = error
                    .split([':', '(', '$'])
                    .next()
                    .unwrap_or("")
                    .chars()
                    .filter(|c| !c.is_ascii_digit())
                    .collect();
                *reasons
                    .entry(format!("{} {}", answer.status, kind.trim()))
                    .or_default() += 1;
                assert_eq!(
                    inbox.count().await,
                    before,
                    "a 4xx stored a row; {}",
                    context()
                );
            }
            other => panic!("unexpected status {other}; {}", context()),
        }
    }
    println!("seed {seed}: {new} stored, {duplicate} duplicates, {refused} refused: {reasons:#?}");
    // The generator must exercise both sides of the property.
    assert!(new > CASES / 3, "{new} stored of {CASES}");
    assert!(refused > CASES / 20, "{refused} refused of {CASES}");
    inbox.stop().await;
}
