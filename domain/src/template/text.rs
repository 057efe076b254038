//! The `{{ name }}` text format shared by every template kind.
//!
//! A template is literal text with placeholders between double braces. Whitespace just inside the
//! braces is optional, so `{{topic}}` and `{{ topic }}` are the same placeholder. Parsing is strict
//! about structure (an unclosed `{{` or an empty placeholder is an error) and says nothing about which
//! names are allowed: each caller decides that, because the allowed names differ per template kind.

use std::fmt;
use thiserror::Error;

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Text copied as it is.
    Literal(String),
    /// The trimmed name between `{{` and `}}`, for example `payload.region`.
    Placeholder(String),
}

/// Why a text is not a template.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum TemplateError {
    /// `{{` with no `}}` after it.
    #[error("`{{{{` at byte {offset} has no closing `}}}}`")]
    Unclosed {
        /// Byte offset of the opening braces.
        offset: usize,
    },
    /// `{{ }}` with no name inside.
    #[error("empty placeholder at byte {offset}")]
    Empty {
        /// Byte offset of the opening braces.
        offset: usize,
    },
    /// A name with whitespace or a brace inside, such as `{{ a b }}`.
    #[error("placeholder `{name}` at byte {offset} holds a space or a brace")]
    BadName {
        /// The text between the braces, trimmed.
        name: String,
        /// Byte offset of the opening braces.
        offset: usize,
    },
}

/// A parsed template. `Display` prints the original text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    text: String,
    segments: Vec<Segment>,
}

impl Template {
    /// Parses `text` into literal and placeholder segments.
    ///
    /// # Errors
    /// [`TemplateError`] when a `{{` is not closed or a placeholder has no usable name.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        let mut consumed = 0;
        while let Some(start) = rest.find("{{") {
            literal.push_str(&rest[..start]);
            let offset = consumed + start;
            let after_open = &rest[start + 2..];
            let Some(end) = after_open.find("}}") else {
                return Err(TemplateError::Unclosed { offset });
            };
            let name = after_open[..end].trim();
            if name.is_empty() {
                return Err(TemplateError::Empty { offset });
            }
            if name
                .chars()
                .any(|c| c.is_whitespace() || c == '{' || c == '}')
            {
                return Err(TemplateError::BadName {
                    name: name.to_owned(),
                    offset,
                });
            }
            if !literal.is_empty() {
                segments.push(Segment::Literal(std::mem::take(&mut literal)));
            }
            segments.push(Segment::Placeholder(name.to_owned()));
            let advance = start + 2 + end + 2;
            consumed += advance;
            rest = &rest[advance..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            segments.push(Segment::Literal(literal));
        }
        Ok(Self {
            text: text.to_owned(),
            segments,
        })
    }

    /// The segments in text order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The placeholder names in text order (repeats included).
    pub fn placeholders(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|segment| match segment {
            Segment::Placeholder(name) => Some(name.as_str()),
            Segment::Literal(_) => None,
        })
    }

    /// True when the template reads placeholder `name`.
    pub fn uses(&self, name: &str) -> bool {
        self.placeholders().any(|p| p == name)
    }

    /// The original text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Fills every placeholder with `lookup(name)`. A name that `lookup` does not know renders as
    /// an empty string; a caller with a missing-field default returns that default from `lookup`.
    pub fn render(&self, lookup: impl Fn(&str) -> Option<String>) -> String {
        let mut out = String::with_capacity(self.text.len());
        for segment in &self.segments {
            match segment {
                Segment::Literal(text) => out.push_str(text),
                Segment::Placeholder(name) => {
                    if let Some(value) = lookup(name) {
                        out.push_str(&value);
                    }
                }
            }
        }
        out
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        Template::parse(text)
            .map(|t| t.placeholders().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    #[test]
    fn inner_spaces_are_optional() {
        assert_eq!(names("{{topic}}"), vec!["topic"]);
        assert_eq!(names("{{ topic }}"), vec!["topic"]);
        assert_eq!(names("{{   topic\t}}"), vec!["topic"]);
    }

    #[test]
    fn literals_and_placeholders_keep_their_order() {
        let template = Template::parse("events.{{ aggregateType }}.{{payload.region}}!").unwrap();
        assert_eq!(
            template.segments(),
            &[
                Segment::Literal("events.".into()),
                Segment::Placeholder("aggregateType".into()),
                Segment::Literal(".".into()),
                Segment::Placeholder("payload.region".into()),
                Segment::Literal("!".into()),
            ]
        );
        assert_eq!(
            template.to_string(),
            "events.{{ aggregateType }}.{{payload.region}}!"
        );
        assert!(template.uses("aggregateType"));
        assert!(!template.uses("topic"));
    }

    #[test]
    fn a_text_without_braces_is_one_literal() {
        let template = Template::parse("orders").unwrap();
        assert_eq!(template.segments(), &[Segment::Literal("orders".into())]);
        assert_eq!(Template::parse("").unwrap().segments(), &[]);
        // A lone closing pair is plain text.
        assert_eq!(
            Template::parse("a}}b").unwrap().segments(),
            &[Segment::Literal("a}}b".into())]
        );
    }

    #[test]
    fn structural_errors() {
        assert_eq!(
            Template::parse("x.{{ topic"),
            Err(TemplateError::Unclosed { offset: 2 })
        );
        assert_eq!(
            Template::parse("{{ }}"),
            Err(TemplateError::Empty { offset: 0 })
        );
        assert!(matches!(
            Template::parse("{{ a b }}"),
            Err(TemplateError::BadName { .. })
        ));
        assert!(matches!(
            Template::parse("{{ {a} }}"),
            Err(TemplateError::BadName { .. })
        ));
    }

    #[test]
    fn render_fills_known_names_and_blanks_unknown_ones() {
        let template = Template::parse("{{ source }}.{{eventType}}.{{ nope }}").unwrap();
        let rendered = template.render(|name| match name {
            "source" => Some("stripe".to_owned()),
            "eventType" => Some("charge.paid".to_owned()),
            _ => None,
        });
        assert_eq!(rendered, "stripe.charge.paid.");
    }
}
