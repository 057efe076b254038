//! Regular expressions. JSONata uses JavaScript regex syntax; we compile it
//! with the `regex` crate, whose matching time is linear in the input (no
//! catastrophic backtracking). Look-around and back-references are not
//! supported and are reported as a compile error.

use crate::error::{Error, Result};

#[derive(Debug)]
pub(crate) struct JRegex {
    pub re: regex::Regex,
}

/// Upper bound on the compiled program size, so a hostile pattern cannot
/// allocate unbounded memory.
const SIZE_LIMIT: usize = 1 << 20;

impl JRegex {
    pub fn new(pattern: &str, flags: &str) -> Result<JRegex> {
        let mut prefix = String::new();
        for f in flags.chars() {
            match f {
                'i' => prefix.push('i'),
                'm' => prefix.push('m'),
                's' => prefix.push('s'),
                'g' | 'u' | 'y' => {}
                other => {
                    return Err(Error::new(
                        "S0302",
                        format!("Unsupported regular expression flag: {other}"),
                    ));
                }
            }
        }
        let translated = translate(pattern);
        let full = if prefix.is_empty() {
            translated
        } else {
            format!("(?{prefix}){translated}")
        };
        let re = regex::RegexBuilder::new(&full)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(SIZE_LIMIT)
            .nest_limit(100)
            .build()
            .map_err(|e| {
                Error::new(
                    "S0303",
                    format!("Invalid or unsupported regular expression /{pattern}/: {e}"),
                )
            })?;
        Ok(JRegex { re })
    }
}

/// Rewrite the JavaScript forms whose meaning differs in the `regex` crate
/// (which is Unicode-aware by default and has class set operations).
fn translate(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut chars = p.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('d') => out.push_str(if in_class { "0-9" } else { "[0-9]" }),
                Some('D') => out.push_str(if in_class { "\\D" } else { "[^0-9]" }),
                Some('w') => out.push_str(if in_class {
                    "0-9A-Za-z_"
                } else {
                    "[0-9A-Za-z_]"
                }),
                Some('W') => out.push_str(if in_class { "\\W" } else { "[^0-9A-Za-z_]" }),
                Some('/') => out.push('/'),
                // NUL, when no digit follows (`\1`... are back-references)
                Some('0') if !chars.peek().is_some_and(|d| d.is_ascii_digit()) => {
                    out.push_str("\\x00")
                }
                // control escapes: \cJ is U+000A
                Some('c') if chars.peek().is_some_and(|l| l.is_ascii_alphabetic()) => {
                    let l = chars.next().map_or(0, |l| l as u32 % 32);
                    out.push_str(&format!("\\x{l:02X}"));
                }
                // backspace inside a class
                Some('b') if in_class => out.push_str("\\x08"),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push_str("\\\\"),
            }
            continue;
        }
        if c == '[' && !in_class {
            let negated = chars.peek() == Some(&'^');
            if negated {
                chars.next();
            }
            // `[]` matches nothing and `[^]` any character
            if chars.peek() == Some(&']') {
                chars.next();
                out.push_str(if negated {
                    "[\\x00-\\x{10FFFF}]"
                } else {
                    "[^\\x00-\\x{10FFFF}]"
                });
                continue;
            }
            in_class = true;
            out.push('[');
            if negated {
                out.push('^');
            }
            continue;
        }
        if c == ']' && in_class {
            in_class = false;
        } else if in_class && matches!(c, '[' | '&' | '~') {
            // literal in JavaScript; nested classes and set operations here
            out.push('\\');
            out.push(c);
            continue;
        }
        out.push(c);
    }
    out
}
