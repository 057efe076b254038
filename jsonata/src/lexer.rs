//! Tokeniser. Pull based: the parser asks for the next token and says whether a
//! `/` there would start a regular expression (prefix position) or divide.

use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Op(&'static str),
    Str(String),
    Num(f64),
    /// A field name; `quoted` for backtick names (never keywords).
    Name(String, bool),
    Var(String),
    Value(Lit),
    Regex(String, String),
    End,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    True,
    False,
    Null,
}

#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    /// Character offset just after the token (as the reference reports positions).
    pub pos: usize,
}

const OPS2: [&str; 10] = ["..", ":=", "!=", ">=", "<=", "**", "~>", "?:", "??", "**"];
const OPS1: &str = ".[]{}(),@#;:?+-*/%|=<>^&!~";

/// Rust strings cannot hold an unpaired UTF-16 surrogate (JavaScript strings
/// can). We map one to a code point in a private-use block so that it stays
/// distinguishable: the URL encoders reject it with D3140, as the reference does.
pub(crate) const LONE_SURROGATE_BASE: u32 = 0x10_F000;

fn lone_surrogate(unit: u32) -> u32 {
    LONE_SURROGATE_BASE + (unit - 0xD800)
}

pub(crate) fn is_lone_surrogate(c: char) -> bool {
    (LONE_SURROGATE_BASE..LONE_SURROGATE_BASE + 0x800).contains(&(c as u32))
}

pub(crate) struct Lexer {
    chars: Vec<char>,
    pub pos: usize,
}

fn is_op_char(c: char) -> bool {
    OPS1.contains(c)
}

impl Lexer {
    pub fn new(src: &str) -> Self {
        Lexer {
            chars: src.chars().collect(),
            pos: 0,
        }
    }

    fn peek(&self, off: usize) -> Option<char> {
        self.chars.get(self.pos + off).copied()
    }

    fn skip_ws_and_comments(&mut self) -> Result<()> {
        loop {
            match self.peek(0) {
                Some(c) if c.is_whitespace() => self.pos += 1,
                Some('/') if self.peek(1) == Some('*') => {
                    let start = self.pos;
                    self.pos += 2;
                    loop {
                        match (self.peek(0), self.peek(1)) {
                            (Some('*'), Some('/')) => {
                                self.pos += 2;
                                break;
                            }
                            (Some(_), _) => self.pos += 1,
                            (None, _) => {
                                return Err(Error::at(
                                    "S0106",
                                    start,
                                    "Comment has no closing tag",
                                ));
                            }
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// Raw text of a function signature `<...>` starting at the current
    /// position (after optional whitespace); None if no signature follows.
    pub fn signature(&mut self) -> Result<Option<String>> {
        self.skip_ws_and_comments()?;
        if self.peek(0) != Some('<') {
            return Ok(None);
        }
        let start = self.pos;
        let mut depth = 0usize;
        while let Some(c) = self.peek(0) {
            self.pos += 1;
            if c == '<' {
                depth += 1;
            } else if c == '>' {
                depth -= 1;
                if depth == 0 {
                    let s: String = self.chars[start..self.pos].iter().collect();
                    return Ok(Some(s));
                }
            }
        }
        Err(Error::at("S0401", start, "Unterminated function signature"))
    }

    pub fn next(&mut self, prefix: bool) -> Result<Token> {
        self.skip_ws_and_comments()?;
        let Some(c) = self.peek(0) else {
            return Ok(Token {
                tok: Tok::End,
                pos: self.pos,
            });
        };
        if prefix && c == '/' {
            return self.regex();
        }
        // two-character operators first
        if let Some(c2) = self.peek(1) {
            let pair: String = [c, c2].iter().collect();
            if let Some(op) = OPS2.iter().find(|o| **o == pair) {
                self.pos += 2;
                return Ok(Token {
                    tok: Tok::Op(op),
                    pos: self.pos,
                });
            }
        }
        if c == '!' || c == '~' {
            return Err(
                Error::at("S0204", self.pos, format!("Unknown operator: {c}"))
                    .with_token(c.to_string()),
            );
        }
        if is_op_char(c) {
            self.pos += 1;
            let op = OPS1
                .find(c)
                .and_then(|i| OPS1.get(i..i + c.len_utf8()))
                .unwrap_or(".");
            return Ok(Token {
                tok: Tok::Op(op),
                pos: self.pos,
            });
        }
        if c == '"' || c == '\'' {
            return self.string(c);
        }
        if c.is_ascii_digit() {
            return self.number();
        }
        if c == '`' {
            let start = self.pos;
            self.pos += 1;
            let mut s = String::new();
            loop {
                match self.peek(0) {
                    Some('`') => {
                        self.pos += 1;
                        return Ok(Token {
                            tok: Tok::Name(s, true),
                            pos: self.pos,
                        });
                    }
                    Some(ch) => {
                        s.push(ch);
                        self.pos += 1;
                    }
                    None => {
                        return Err(Error::at(
                            "S0105",
                            start,
                            "Quoted property name must be terminated with a backquote (`)",
                        ));
                    }
                }
            }
        }
        // names, variables, keywords: run until whitespace or an operator char
        let start = self.pos;
        let mut s = String::new();
        while let Some(ch) = self.peek(0) {
            if ch.is_whitespace() || is_op_char(ch) || ch == '"' || ch == '\'' || ch == '`' {
                break;
            }
            s.push(ch);
            self.pos += 1;
        }
        let pos = self.pos;
        if let Some(v) = s.strip_prefix('$') {
            return Ok(Token {
                tok: Tok::Var(v.to_string()),
                pos,
            });
        }
        if s.is_empty() {
            return Err(Error::at("S0204", start, format!("Unknown operator: {c}")));
        }
        let tok = match s.as_str() {
            "and" => Tok::Op("and"),
            "or" => Tok::Op("or"),
            "in" => Tok::Op("in"),
            "true" => Tok::Value(Lit::True),
            "false" => Tok::Value(Lit::False),
            "null" => Tok::Value(Lit::Null),
            _ => Tok::Name(s, false),
        };
        Ok(Token { tok, pos })
    }

    fn string(&mut self, quote: char) -> Result<Token> {
        let start = self.pos;
        self.pos += 1;
        let mut s = String::new();
        loop {
            let Some(c) = self.peek(0) else {
                return Err(Error::at(
                    "S0101",
                    start,
                    "String literal must be terminated by a matching quote",
                ));
            };
            self.pos += 1;
            if c == quote {
                return Ok(Token {
                    tok: Tok::Str(s),
                    pos: self.pos,
                });
            }
            if c != '\\' {
                s.push(c);
                continue;
            }
            let Some(e) = self.peek(0) else {
                return Err(Error::at(
                    "S0101",
                    start,
                    "String literal must be terminated by a matching quote",
                ));
            };
            self.pos += 1;
            match e {
                '"' => s.push('"'),
                '\\' => s.push('\\'),
                '/' => s.push('/'),
                'b' => s.push('\u{8}'),
                'f' => s.push('\u{c}'),
                'n' => s.push('\n'),
                'r' => s.push('\r'),
                't' => s.push('\t'),
                'u' => {
                    let hi = self.hex4()?;
                    let code = if (0xD800..0xDC00).contains(&hi)
                        && self.peek(0) == Some('\\')
                        && self.peek(1) == Some('u')
                    {
                        let save = self.pos;
                        self.pos += 2;
                        let lo = self.hex4()?;
                        if (0xDC00..0xE000).contains(&lo) {
                            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                        } else {
                            self.pos = save;
                            lone_surrogate(hi)
                        }
                    } else if (0xD800..0xE000).contains(&hi) {
                        lone_surrogate(hi)
                    } else {
                        hi
                    };
                    s.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                }
                other => {
                    return Err(Error::at(
                        "S0103",
                        self.pos,
                        format!("Unsupported escape sequence: \\{other}"),
                    )
                    .with_token(other.to_string()));
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = self.peek(0).and_then(|c| c.to_digit(16));
            match d {
                Some(d) => {
                    v = v * 16 + d;
                    self.pos += 1;
                }
                None => {
                    return Err(Error::at(
                        "S0104",
                        self.pos,
                        "The escape sequence \\u must be followed by 4 hex digits",
                    ));
                }
            }
        }
        Ok(v)
    }

    fn number(&mut self) -> Result<Token> {
        let start = self.pos;
        let mut end = self.pos;
        let digits = |chars: &[char], mut i: usize| {
            while chars.get(i).is_some_and(|c| c.is_ascii_digit()) {
                i += 1;
            }
            i
        };
        if self.chars.get(end) == Some(&'0') {
            end += 1;
        } else {
            end = digits(&self.chars, end);
        }
        if self.chars.get(end) == Some(&'.')
            && self.chars.get(end + 1).is_some_and(|c| c.is_ascii_digit())
        {
            end = digits(&self.chars, end + 1);
        }
        if matches!(self.chars.get(end), Some('e') | Some('E')) {
            let mut e = end + 1;
            if matches!(self.chars.get(e), Some('+') | Some('-')) {
                e += 1;
            }
            if self.chars.get(e).is_some_and(|c| c.is_ascii_digit()) {
                end = digits(&self.chars, e);
            }
        }
        let text: String = self.chars[start..end].iter().collect();
        self.pos = end;
        let n: f64 = text.parse().unwrap_or(f64::NAN);
        if !n.is_finite() {
            return Err(
                Error::at("S0102", start, format!("Number out of range: {text}")).with_token(text),
            );
        }
        Ok(Token {
            tok: Tok::Num(n),
            pos: self.pos,
        })
    }

    fn regex(&mut self) -> Result<Token> {
        let start = self.pos;
        self.pos += 1;
        let mut pattern = String::new();
        let mut in_class = false;
        loop {
            let Some(c) = self.peek(0) else {
                return Err(Error::at(
                    "S0302",
                    start,
                    "No terminating / in regular expression",
                ));
            };
            self.pos += 1;
            if c == '\\' {
                pattern.push(c);
                if let Some(n) = self.peek(0) {
                    pattern.push(n);
                    self.pos += 1;
                }
                continue;
            }
            if c == '[' {
                in_class = true;
            } else if c == ']' {
                in_class = false;
            } else if c == '/' && !in_class {
                break;
            }
            pattern.push(c);
        }
        if pattern.is_empty() {
            return Err(Error::at(
                "S0301",
                self.pos,
                "Empty regular expressions are not allowed",
            ));
        }
        let mut flags = String::new();
        while let Some(c) = self.peek(0) {
            if c.is_ascii_alphabetic() {
                flags.push(c);
                self.pos += 1;
            } else {
                break;
            }
        }
        Ok(Token {
            tok: Tok::Regex(pattern, flags),
            pos: self.pos,
        })
    }
}
