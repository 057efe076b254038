//! Topic globs of the routes (`topicPattern`).
//!
//! `*` matches a run of characters without a dot (one segment, possibly empty), `**` matches any
//! text including dots and the empty text, every other character matches itself, and the pattern
//! must cover the whole topic. Three or more stars in a row are refused, because the reader cannot
//! tell which meaning was wanted.
//!
//! Matching simulates the pattern as a small automaton over the topic: the set of pattern positions
//! alive after each character. That costs at most `topic length × pattern length` steps for any
//! pattern, so an adversarial `**a**a**a**b` cannot trigger the exponential backtracking of a naive
//! recursive matcher.

use std::fmt;
use thiserror::Error;

/// One compiled element of a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    /// A character that must appear as it is.
    Literal(char),
    /// `*`: any number of characters other than `.`.
    Segment,
    /// `**`: any number of any characters.
    Any,
}

/// Why a text is not a topic pattern.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum GlobError {
    /// The pattern is empty.
    #[error("a topic pattern must not be empty")]
    Empty,
    /// The pattern holds three or more stars in a row.
    #[error("topic pattern `{pattern}` holds `***` at byte {offset}; use `*` or `**`")]
    TooManyStars {
        /// The pattern as written.
        pattern: String,
        /// Byte offset of the first star of the run.
        offset: usize,
    },
}

/// A compiled topic pattern. `Display` prints the pattern as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPattern {
    text: String,
    nodes: Vec<Node>,
}

impl TopicPattern {
    /// Compiles `pattern` once, at start.
    ///
    /// # Errors
    /// [`GlobError::Empty`] for an empty pattern, [`GlobError::TooManyStars`] for `***`.
    pub fn compile(pattern: &str) -> Result<Self, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::Empty);
        }
        let mut nodes = Vec::with_capacity(pattern.len());
        let mut chars = pattern.char_indices().peekable();
        while let Some((offset, c)) = chars.next() {
            if c != '*' {
                nodes.push(Node::Literal(c));
                continue;
            }
            let mut stars = 1;
            while chars.next_if(|&(_, next)| next == '*').is_some() {
                stars += 1;
            }
            match stars {
                1 => nodes.push(Node::Segment),
                2 => nodes.push(Node::Any),
                _ => {
                    return Err(GlobError::TooManyStars {
                        pattern: pattern.to_owned(),
                        offset,
                    });
                }
            }
        }
        Ok(Self {
            text: pattern.to_owned(),
            nodes,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True when the pattern covers the whole `topic`.
    pub fn matches(&self, topic: &str) -> bool {
        let len = self.nodes.len();
        // alive[i]: the pattern prefix before node i has consumed exactly the topic read so far.
        let mut alive = vec![false; len + 1];
        let mut next = vec![false; len + 1];
        alive[0] = true;
        self.close(&mut alive);
        for c in topic.chars() {
            next.iter_mut().for_each(|slot| *slot = false);
            let mut any = false;
            for (i, node) in self.nodes.iter().enumerate() {
                if !alive[i] {
                    continue;
                }
                let target = match *node {
                    Node::Literal(expected) if expected == c => i + 1,
                    Node::Segment if c != '.' => i,
                    Node::Any => i,
                    _ => continue,
                };
                next[target] = true;
                any = true;
            }
            if !any {
                return false;
            }
            self.close(&mut next);
            std::mem::swap(&mut alive, &mut next);
        }
        alive[len]
    }

    /// Adds the positions reachable without reading a character: a star may match nothing.
    fn close(&self, alive: &mut [bool]) {
        for (i, node) in self.nodes.iter().enumerate() {
            if alive[i] && matches!(node, Node::Segment | Node::Any) {
                alive[i + 1] = true;
            }
        }
    }
}

impl fmt::Display for TopicPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> TopicPattern {
        match TopicPattern::compile(text) {
            Ok(p) => p,
            Err(e) => panic!("{text}: {e}"),
        }
    }

    fn check(text: &str, yes: &[&str], no: &[&str]) {
        let p = pattern(text);
        for topic in yes {
            assert!(p.matches(topic), "`{text}` should match `{topic}`");
        }
        for topic in no {
            assert!(!p.matches(topic), "`{text}` should not match `{topic}`");
        }
    }

    #[test]
    fn the_documented_table() {
        check(
            "order.*",
            &["order.created", "order.paid"],
            &["order", "order.item.added"],
        );
        check(
            "order.**",
            &["order.created", "order.item.added"],
            &["order"],
        );
        check("**", &["order", "a.b.c", "x", ""], &[]);
        check("order.created", &["order.created"], &["order.updated"]);
    }

    #[test]
    fn whole_topic_must_match() {
        check(
            "order",
            &["order"],
            &["order.created", "my.order", "orders"],
        );
        check("order.*", &[], &["order.created.x", "xorder.created"]);
    }

    #[test]
    fn single_star_stays_inside_a_segment() {
        check("*", &["order", ""], &["order.created"]);
        check(
            "*.created",
            &["order.created", ".created"],
            &["a.b.created"],
        );
        check(
            "order.*.added",
            &["order.item.added"],
            &["order.item.x.added"],
        );
        check("ord*", &["order", "ord"], &["order.created"]);
        check("a*b*c", &["abc", "axxbyyc"], &["ab.c", "a.bc"]);
        // The documented rule says one segment; an empty segment is still a segment.
        check("order.*", &["order."], &[]);
    }

    #[test]
    fn double_star_crosses_dots_and_may_be_empty() {
        check(
            "**.created",
            &["order.created", "a.b.c.created", ".created"],
            &["created"],
        );
        check(
            "order**",
            &["order", "orders", "order.created.x"],
            &["orde"],
        );
        check("a.**.z", &["a.b.z", "a.b.c.z", "a..z"], &["a.z"]);
        check("**x**", &["x", "a.x.b", "xx"], &["", "a.b"]);
    }

    #[test]
    fn other_characters_are_literal() {
        check("a+b", &["a+b"], &["aab", "ab"]);
        check("a-b.c?d", &["a-b.c?d"], &["a-b.cxd"]);
        check("a[b]", &["a[b]"], &["ab"]);
        check("ß.*", &["ß.ü"], &["s.u"]);
        check("Order.*", &["Order.created"], &["order.created"]);
    }

    #[test]
    fn refuses_triple_stars_and_empty() {
        assert_eq!(TopicPattern::compile(""), Err(GlobError::Empty));
        for bad in ["***", "a.***", "****", "a.*****.b"] {
            assert!(
                matches!(
                    TopicPattern::compile(bad),
                    Err(GlobError::TooManyStars { .. })
                ),
                "{bad}"
            );
        }
        let Err(GlobError::TooManyStars { offset, .. }) = TopicPattern::compile("ab.***") else {
            panic!("expected an error");
        };
        assert_eq!(offset, 3);
        // Separated stars are fine.
        assert!(TopicPattern::compile("*.**").is_ok());
        assert!(TopicPattern::compile("**.*").is_ok());
    }

    #[test]
    fn display_prints_the_pattern() {
        assert_eq!(pattern("order.*").to_string(), "order.*");
        assert_eq!(pattern("order.*").as_str(), "order.*");
    }

    #[test]
    fn adversarial_patterns_stay_fast() {
        // A backtracking matcher takes exponential time here; the automaton is linear per node.
        let p = pattern(&"**a".repeat(30));
        let topic = "a".repeat(5000);
        assert!(p.matches(&topic));
        let q = pattern(&format!("{}b", "**a".repeat(30)));
        let started = std::time::Instant::now();
        assert!(!q.matches(&topic));
        let p2 = pattern(&format!("{}b", "*a".repeat(30)));
        assert!(!p2.matches(&topic));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
