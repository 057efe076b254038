//! Broker addresses: the RabbitMQ `exchange`, the Kafka `topic`, the NATS `subject` and the Redis
//! `stream`.
//!
//! An address is a literal name, a template over the row fields, or (with `exchangeFrom`,
//! `topicFrom`, `subjectFrom`, `streamFrom`) the value of one row column taken as it is. A template name that
//! is not a row field would render the same broken address for every row, so it is refused when
//! the address is built, at start. An address that renders empty for one row fails that row's
//! publish with [`EmptyAddress`]: an empty exchange is the AMQP default exchange and an empty
//! topic or subject is refused by the broker, so publishing it would misroute or mislead.

use super::placeholder::{RowPlaceholder, RowTemplate};
use super::row::RowFields;
use super::text::{Template, TemplateError};
use serde::Serialize;
use std::borrow::Cow;
use std::fmt;
use thiserror::Error;

/// Which destination key holds the address, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressField {
    /// The RabbitMQ `exchange`.
    Exchange,
    /// The Kafka `topic`.
    Topic,
    /// The NATS `subject`.
    Subject,
    /// The Redis `stream` (the stream key).
    Stream,
}

impl AddressField {
    /// The configuration key.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressField::Exchange => "exchange",
            AddressField::Topic => "topic",
            AddressField::Subject => "subject",
            AddressField::Stream => "stream",
        }
    }
}

impl fmt::Display for AddressField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A row column that holds the address (`exchangeFrom`, `topicFrom`, `subjectFrom`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressColumn {
    /// `aggregate_type`.
    AggregateType,
    /// `topic`.
    Topic,
    /// `key`.
    Key,
}

impl AddressColumn {
    /// The column for a configured name: `aggregate_type`, `topic` or `key`, exactly so spelled.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "aggregate_type" => Some(Self::AggregateType),
            "topic" => Some(Self::Topic),
            "key" => Some(Self::Key),
            _ => None,
        }
    }

    /// The column name.
    pub fn as_str(self) -> &'static str {
        match self {
            AddressColumn::AggregateType => "aggregate_type",
            AddressColumn::Topic => "topic",
            AddressColumn::Key => "key",
        }
    }

    fn value<'a>(self, row: &RowFields<'a>) -> Option<&'a str> {
        match self {
            AddressColumn::AggregateType => row.aggregate_type(),
            AddressColumn::Topic => Some(row.topic()),
            AddressColumn::Key => row.key(),
        }
    }
}

/// Why an address cannot be built; reported at start.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum AddressTemplateError {
    /// The text is not a well-formed template.
    #[error("the {field} of destination {destination} is not a valid template: {source}")]
    Syntax {
        destination: String,
        field: AddressField,
        source: TemplateError,
    },
    /// A placeholder that is not a row field.
    #[error(
        "placeholder {{{{ {name} }}}} is not allowed in the {field} of destination {destination}; use topic, key, aggregateType, payload.<field> or data.<field>"
    )]
    UnknownPlaceholder {
        destination: String,
        field: AddressField,
        name: String,
    },
}

/// An address that rendered empty for one row; that row's publish fails with it.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("the {field} of destination {destination} is empty for this row ({origin})")]
pub struct EmptyAddress {
    /// The destination name.
    pub destination: String,
    /// Which key holds the address.
    pub field: AddressField,
    /// Where the address came from: the template text or the column name.
    pub origin: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Literal(String),
    Template(RowTemplate),
    Column(AddressColumn),
}

/// The address of one broker destination, built once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    destination: String,
    field: AddressField,
    text: String,
    origin: Origin,
}

impl Address {
    /// Builds the address of `destination` from its `field` text and, when set, its address
    /// column (which wins over the text, though the text must still be a valid template).
    ///
    /// # Errors
    /// [`AddressTemplateError`] when the text is malformed or reads a name that is not a row field.
    pub fn new(
        destination: &str,
        field: AddressField,
        text: &str,
        column: Option<AddressColumn>,
    ) -> Result<Self, AddressTemplateError> {
        let template = Template::parse(text).map_err(|source| AddressTemplateError::Syntax {
            destination: destination.to_owned(),
            field,
            source,
        })?;
        if let Some(name) = template
            .placeholders()
            .find(|name| RowPlaceholder::from_name(name).is_none())
        {
            return Err(AddressTemplateError::UnknownPlaceholder {
                destination: destination.to_owned(),
                field,
                name: name.to_owned(),
            });
        }
        let compiled = RowTemplate::compile(&template, |_| true);
        let origin = match (column, compiled.as_literal()) {
            (Some(column), _) => Origin::Column(column),
            (None, Some(literal)) => Origin::Literal(literal.to_owned()),
            (None, None) => Origin::Template(compiled),
        };
        Ok(Self {
            destination: destination.to_owned(),
            field,
            text: text.to_owned(),
            origin,
        })
    }

    /// The destination name.
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// Which key holds the address.
    pub fn field(&self) -> AddressField {
        self.field
    }

    /// The address of `row`. A literal name and a column value are borrowed, not copied; a field
    /// the row lacks renders as an empty string.
    ///
    /// # Errors
    /// [`EmptyAddress`] when the address is empty for this row.
    pub fn render<'a>(&'a self, row: &RowFields<'a>) -> Result<Cow<'a, str>, EmptyAddress> {
        let address = match &self.origin {
            Origin::Literal(text) => Cow::Borrowed(text.as_str()),
            Origin::Column(column) => Cow::Borrowed(column.value(row).unwrap_or_default()),
            Origin::Template(template) => Cow::Owned(template.render(row, "")),
        };
        if address.is_empty() {
            return Err(self.empty());
        }
        Ok(address)
    }

    fn empty(&self) -> EmptyAddress {
        let origin = match &self.origin {
            Origin::Column(column) => format!("column {} is empty", column.as_str()),
            Origin::Literal(_) | Origin::Template(_) => format!("template `{}`", self.text),
        };
        EmptyAddress {
            destination: self.destination.clone(),
            field: self.field,
            origin,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PAYLOAD: &str = r#"{"region":"eu","customer":{"tier":"gold","tags":["a","b"]},"n":7}"#;

    fn render(text: &str, row: &RowFields<'_>) -> Result<String, EmptyAddress> {
        let address = Address::new("events", AddressField::Exchange, text, None)
            .unwrap_or_else(|e| panic!("{text}: {e}"));
        address.render(row).map(Cow::into_owned)
    }

    #[test]
    fn address_templates_render_row_fields() {
        let full = RowFields::new("orders.created", Some("o-1"), Some("Order"), PAYLOAD);
        let bare = RowFields::new("orders.created", None, None, PAYLOAD);
        let cases: &[(&str, &RowFields<'_>, &str)] = &[
            ("orders", &full, "orders"),
            ("{{ topic }}", &full, "orders.created"),
            ("{{topic}}", &full, "orders.created"),
            ("ev.{{ key }}", &full, "ev.o-1"),
            ("ev.{{ key }}", &bare, "ev."),
            ("events.{{ aggregateType }}", &full, "events.Order"),
            ("events.{{aggregateType}}", &bare, "events."),
            (
                "{{ payload.region }}.{{ topic }}",
                &full,
                "eu.orders.created",
            ),
            ("{{ data.customer.tier }}", &full, "gold"),
            ("x.{{ payload.n }}", &full, "x.7"),
            ("{{ payload.customer.tags }}", &full, r#"["a","b"]"#),
            (
                "c={{ data.customer }}",
                &full,
                r#"c={"tier":"gold","tags":["a","b"]}"#,
            ),
            ("m.{{ payload.missing }}", &full, "m."),
        ];
        for (text, row, expected) in cases {
            assert_eq!(render(text, row).as_deref(), Ok(*expected), "{text}");
        }
    }

    #[test]
    fn an_empty_address_fails_the_row_naming_destination_and_field() {
        let row = RowFields::new("t", None, None, "{}");
        for text in [
            "{{ key }}",
            "{{ aggregateType }}",
            "{{ payload.region }}",
            "",
        ] {
            let error = render(text, &row).unwrap_err();
            assert_eq!(error.destination, "events");
            assert_eq!(error.field, AddressField::Exchange);
            assert!(
                error
                    .to_string()
                    .starts_with("the exchange of destination events is empty"),
                "{error}"
            );
        }
    }

    #[test]
    fn unknown_placeholders_are_refused_naming_field_and_destination() {
        for (field, text, name) in [
            (AddressField::Exchange, "ev.{{ source }}", "source"),
            (AddressField::Topic, "{{ payload }}", "payload"),
            (AddressField::Subject, "orders.{{ region }}", "region"),
            (
                AddressField::Subject,
                "{{ aggregate_type }}",
                "aggregate_type",
            ),
        ] {
            let error = Address::new("d1", field, text, None).unwrap_err();
            assert_eq!(
                error,
                AddressTemplateError::UnknownPlaceholder {
                    destination: "d1".into(),
                    field,
                    name: name.into(),
                }
            );
            let message = error.to_string();
            assert!(
                message.contains(&format!("the {} of destination d1", field.as_str())),
                "{message}"
            );
        }
        let error = Address::new("d1", AddressField::Topic, "a.{{ topic", None).unwrap_err();
        assert!(
            matches!(error, AddressTemplateError::Syntax { .. }),
            "{error}"
        );
        assert!(
            error.to_string().contains("the topic of destination d1"),
            "{error}"
        );
    }

    #[test]
    fn a_column_wins_over_the_template_and_renders_no_template() {
        let row = RowFields::new("{{ topic }}", Some("k-1"), Some("Order"), PAYLOAD);
        let cases = [
            (AddressColumn::AggregateType, "Order"),
            (AddressColumn::Topic, "{{ topic }}"),
            (AddressColumn::Key, "k-1"),
        ];
        for (column, expected) in cases {
            let address = Address::new(
                "d",
                AddressField::Subject,
                "ignored.{{ topic }}",
                Some(column),
            )
            .unwrap();
            assert_eq!(address.render(&row).unwrap(), expected);
        }
        let keyless = RowFields::new("t", None, None, "{}");
        let address =
            Address::new("d", AddressField::Subject, "s", Some(AddressColumn::Key)).unwrap();
        let error = address.render(&keyless).unwrap_err();
        assert!(error.to_string().contains("column key is empty"), "{error}");
    }

    #[test]
    fn column_names_are_spelled_with_the_underscore() {
        for column in [
            AddressColumn::AggregateType,
            AddressColumn::Topic,
            AddressColumn::Key,
        ] {
            assert_eq!(AddressColumn::from_name(column.as_str()), Some(column));
        }
        assert_eq!(AddressColumn::from_name("aggregateType"), None);
        assert_eq!(AddressColumn::from_name("payload"), None);
    }

    #[test]
    fn literals_and_columns_borrow_and_only_payload_placeholders_parse_the_payload() {
        let row = RowFields::new("t", Some("k"), None, PAYLOAD);
        let literal = Address::new("d", AddressField::Topic, "orders", None).unwrap();
        assert!(matches!(literal.render(&row), Ok(Cow::Borrowed("orders"))));
        let keyed = Address::new("d", AddressField::Topic, "{{ topic }}.{{ key }}", None).unwrap();
        assert_eq!(keyed.render(&row).unwrap(), "t.k");
        assert_eq!(row.payload_reads(), 0);
        let by_payload = Address::new("d", AddressField::Topic, "{{ data.region }}", None).unwrap();
        assert_eq!(by_payload.render(&row).unwrap(), "eu");
        assert_eq!(row.payload_reads(), 1);
    }
}
