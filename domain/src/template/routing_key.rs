//! Key templates: the RabbitMQ routing key and the Kafka record key.
//!
//! Unlike an address, a key template never stops the start over a name: a placeholder it does not
//! know, and a field the row does not hold, both render the missing-field default. Only a
//! malformed template (an unclosed `{{`) is refused, because no row could ever render it as meant.

use super::placeholder::{RowPlaceholder, RowTemplate};
use super::row::RowFields;
use super::text::{Template, TemplateError};

/// A route `routingKeyTemplate` or a RabbitMQ destination `routingKeyTemplate`: every row field
/// renders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingKeyTemplate {
    text: String,
    compiled: RowTemplate,
}

impl RoutingKeyTemplate {
    /// The default of a RabbitMQ destination's `routingKeyTemplate`.
    pub const DESTINATION_DEFAULT: &'static str = "{{ topic }}";

    /// Compiles `text`.
    ///
    /// # Errors
    /// [`TemplateError`] when the text is malformed; an unknown name is not an error.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let template = Template::parse(text)?;
        Ok(Self {
            text: text.to_owned(),
            compiled: RowTemplate::compile(&template, |_| true),
        })
    }

    /// The key of `row`; an unknown name or a missing field renders `missing_default`.
    pub fn render(&self, row: &RowFields<'_>, missing_default: &str) -> String {
        self.compiled.render(row, missing_default)
    }

    /// The template text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// A Kafka destination `keyTemplate`: only `{{ key }}` and `{{ topic }}` render; any other name
/// renders empty, and an empty key means the record has no key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaKeyTemplate {
    text: String,
    compiled: RowTemplate,
}

impl KafkaKeyTemplate {
    /// The default of a Kafka destination's `keyTemplate`.
    pub const DEFAULT: &'static str = "{{ key }}";

    /// Compiles `text`.
    ///
    /// # Errors
    /// [`TemplateError`] when the text is malformed; an unknown name is not an error.
    pub fn parse(text: &str) -> Result<Self, TemplateError> {
        let template = Template::parse(text)?;
        let compiled = RowTemplate::compile(&template, |placeholder| {
            matches!(placeholder, RowPlaceholder::Key | RowPlaceholder::Topic)
        });
        Ok(Self {
            text: text.to_owned(),
            compiled,
        })
    }

    /// The record key of `row`, or `None` when it renders empty.
    pub fn render(&self, row: &RowFields<'_>) -> Option<String> {
        let key = self.compiled.render(row, "");
        (!key.is_empty()).then_some(key)
    }

    /// The template text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The six forms that docs/reference/transforms-and-templates.md pins, with `unknown` as the missing-field default. "any" in the
    /// page's table is a value the template does not read, so each row uses a deliberately
    /// unrelated one.
    #[test]
    fn the_six_pinned_forms() {
        let default = "unknown";
        let cases = [
            (
                "{{ topic }}",
                r#"{"region":"eu"}"#,
                "orders.created",
                "orders.created",
            ),
            (
                "{{topic}}",
                r#"{"region":"eu"}"#,
                "orders.created",
                "orders.created",
            ),
            (
                "{{ payload.region }}",
                r#"{"region":"eu"}"#,
                "any.topic",
                "eu",
            ),
            (
                "{{ data.customer.region }}",
                r#"{"customer":{"region":"de"}}"#,
                "any.topic",
                "de",
            ),
            (
                "{{ payload.missingField }}",
                r#"{"region":"eu"}"#,
                "any.topic",
                default,
            ),
            ("{{ region }}", r#"{"region":"eu"}"#, "any.topic", default),
        ];
        for (text, payload, topic, expected) in cases {
            let template = RoutingKeyTemplate::parse(text).unwrap();
            let row = RowFields::new(topic, None, None, payload);
            assert_eq!(template.render(&row, default), expected, "{text}");
        }
    }

    #[test]
    fn the_default_is_empty_unless_the_route_sets_one() {
        let template = RoutingKeyTemplate::parse("{{ payload.region }}.{{ topic }}").unwrap();
        let row = RowFields::new("orders.created", None, None, "{}");
        assert_eq!(template.render(&row, ""), ".orders.created");
        assert_eq!(template.render(&row, "none"), "none.orders.created");
    }

    #[test]
    fn row_columns_render_or_fall_back_to_the_default() {
        let template = RoutingKeyTemplate::parse("{{ aggregateType }}:{{ key }}").unwrap();
        let full = RowFields::new("t", Some("o-1"), Some("Order"), "{}");
        let bare = RowFields::new("t", None, None, "{}");
        assert_eq!(template.render(&full, "?"), "Order:o-1");
        assert_eq!(template.render(&bare, "?"), "?:?");
        assert_eq!(template.as_str(), "{{ aggregateType }}:{{ key }}");
    }

    #[test]
    fn only_malformed_text_is_refused() {
        assert!(RoutingKeyTemplate::parse("{{ topic").is_err());
        assert!(RoutingKeyTemplate::parse("{{ whatever }}").is_ok());
        assert!(KafkaKeyTemplate::parse("{{ }}").is_err());
        assert!(KafkaKeyTemplate::parse("{{ payload.id }}").is_ok());
    }

    #[test]
    fn the_kafka_key_template_renders_key_and_topic_only() {
        let row = RowFields::new("orders", Some("o-1"), Some("Order"), r#"{"id":"p"}"#);
        let keyless = RowFields::new("orders", None, Some("Order"), r#"{"id":"p"}"#);
        let cases = [
            ("{{ key }}", &row, Some("o-1")),
            ("{{key}}", &keyless, None),
            ("{{ topic }}/{{ key }}", &row, Some("orders/o-1")),
            ("{{ topic }}/{{ key }}", &keyless, Some("orders/")),
            ("{{ payload.id }}", &row, None),
            ("{{ aggregateType }}", &row, None),
            ("fixed", &keyless, Some("fixed")),
        ];
        for (text, row, expected) in cases {
            let template = KafkaKeyTemplate::parse(text).unwrap();
            assert_eq!(template.render(row).as_deref(), expected, "{text}");
        }
        assert_eq!(
            row.payload_reads(),
            0,
            "a Kafka key never reads the payload"
        );
    }

    #[test]
    fn the_destination_defaults_compile() {
        let row = RowFields::new("orders", Some("o-1"), None, "{}");
        let routing = RoutingKeyTemplate::parse(RoutingKeyTemplate::DESTINATION_DEFAULT).unwrap();
        assert_eq!(routing.render(&row, ""), "orders");
        let kafka = KafkaKeyTemplate::parse(KafkaKeyTemplate::DEFAULT).unwrap();
        assert_eq!(kafka.render(&row).as_deref(), Some("o-1"));
    }
}
