//! The names a delivery template may read from a row, and a template compiled against them.
//!
//! Both the address templates and the routing key templates read the same row fields; they differ
//! only in what an unknown name does (stop the start, or render a default), so the compiled form
//! keeps unknown names as [`Piece::Unknown`] and lets each template kind decide.

use super::row::{RowFields, push_value};
use super::text::{Segment, Template};

/// A row field a template can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowPlaceholder {
    /// `{{ topic }}`: the `topic` column.
    Topic,
    /// `{{ key }}`: the `key` column.
    Key,
    /// `{{ aggregateType }}`: the `aggregate_type` column.
    AggregateType,
    /// `{{ payload.a.b }}` or `{{ data.a.b }}`: a payload field, outermost name first.
    Payload(Vec<String>),
}

impl RowPlaceholder {
    /// The field a placeholder name reads, or `None` for a name no row template knows. Names match
    /// in their exact letter case; a payload path needs at least one field and no empty step.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "topic" => return Some(Self::Topic),
            "key" => return Some(Self::Key),
            "aggregateType" => return Some(Self::AggregateType),
            _ => {}
        }
        let fields = ["payload.", "data."]
            .iter()
            .find_map(|prefix| name.strip_prefix(prefix))?;
        let path: Vec<String> = fields.split('.').map(str::to_owned).collect();
        path.iter()
            .all(|step| !step.is_empty())
            .then_some(Self::Payload(path))
    }

    /// Appends this field of `row` to `out`; false (and nothing appended) when the row holds no
    /// value for it.
    fn push(&self, row: &RowFields<'_>, out: &mut String) -> bool {
        let text = match self {
            Self::Topic => Some(row.topic()),
            Self::Key => row.key(),
            Self::AggregateType => row.aggregate_type(),
            Self::Payload(path) => {
                return row
                    .payload_field(path)
                    .map(|value| push_value(out, &value))
                    .is_some();
            }
        };
        text.map(|text| out.push_str(text)).is_some()
    }
}

/// One part of a compiled row template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    Literal(String),
    Field(RowPlaceholder),
    /// A name the template kind does not read; it renders the missing-field default.
    Unknown,
}

/// A template compiled against the row fields, with `accept` deciding which known fields this
/// template kind reads (the others become [`Piece::Unknown`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowTemplate {
    pieces: Vec<Piece>,
    /// The bytes of literal text, so a render allocates its output once in the common case.
    literal_len: usize,
}

impl RowTemplate {
    pub(crate) fn compile(template: &Template, accept: impl Fn(&RowPlaceholder) -> bool) -> Self {
        let pieces = template
            .segments()
            .iter()
            .map(|segment| match segment {
                Segment::Literal(text) => Piece::Literal(text.clone()),
                Segment::Placeholder(name) => RowPlaceholder::from_name(name)
                    .filter(&accept)
                    .map_or(Piece::Unknown, Piece::Field),
            })
            .collect::<Vec<_>>();
        let literal_len = pieces
            .iter()
            .map(|piece| match piece {
                Piece::Literal(text) => text.len(),
                _ => 0,
            })
            .sum();
        Self {
            pieces,
            literal_len,
        }
    }

    /// The text when the template has no placeholder at all: it renders the same for every row.
    pub(crate) fn as_literal(&self) -> Option<&str> {
        match self.pieces.as_slice() {
            [] => Some(""),
            [Piece::Literal(text)] => Some(text),
            _ => None,
        }
    }

    /// Renders for `row`; a field the row lacks and an unknown name both render `missing`.
    pub(crate) fn render(&self, row: &RowFields<'_>, missing: &str) -> String {
        // Room for the literals and a typical field or two.
        let mut out = String::with_capacity(self.literal_len + 32);
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => out.push_str(text),
                Piece::Field(field) => {
                    if !field.push(row, &mut out) {
                        out.push_str(missing);
                    }
                }
                Piece::Unknown => out.push_str(missing),
            }
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_a_row_template_reads() {
        assert_eq!(
            RowPlaceholder::from_name("topic"),
            Some(RowPlaceholder::Topic)
        );
        assert_eq!(RowPlaceholder::from_name("key"), Some(RowPlaceholder::Key));
        assert_eq!(
            RowPlaceholder::from_name("aggregateType"),
            Some(RowPlaceholder::AggregateType)
        );
        assert_eq!(
            RowPlaceholder::from_name("payload.a.b"),
            Some(RowPlaceholder::Payload(vec!["a".into(), "b".into()]))
        );
        assert_eq!(
            RowPlaceholder::from_name("data.region"),
            Some(RowPlaceholder::Payload(vec!["region".into()]))
        );
        for unknown in [
            "source",
            "region",
            "payload",
            "payload.",
            "data..x",
            "payload.a.",
            "aggregate_type",
            "Topic",
            "eventType",
        ] {
            assert_eq!(RowPlaceholder::from_name(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn unknown_and_refused_names_render_the_missing_text() {
        let template = Template::parse("{{ topic }}/{{ key }}/{{ region }}").unwrap();
        let only_topic = RowTemplate::compile(&template, |p| *p == RowPlaceholder::Topic);
        let row = RowFields::new("t", Some("k"), None, "{}");
        assert_eq!(only_topic.render(&row, "-"), "t/-/-");
        let all = RowTemplate::compile(&template, |_| true);
        assert_eq!(all.render(&row, "-"), "t/k/-");
    }

    #[test]
    fn a_template_without_placeholders_is_a_literal() {
        let compile = |text| RowTemplate::compile(&Template::parse(text).unwrap(), |_| true);
        assert_eq!(compile("orders").as_literal(), Some("orders"));
        assert_eq!(compile("").as_literal(), Some(""));
        assert_eq!(compile("a.{{ topic }}").as_literal(), None);
    }
}
