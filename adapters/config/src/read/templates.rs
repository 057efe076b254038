//! Checks of the `{{ ... }}` templates that the configuration holds.

use crate::reader::Reader;
use queuebox_domain::template::Template;

/// The placeholders an address template (`exchange`, Kafka `topic`, NATS `subject`) may read.
pub(crate) fn is_address_placeholder(name: &str) -> bool {
    matches!(name, "topic" | "key" | "aggregateType")
        || ["payload.", "data."].iter().any(|prefix| {
            name.strip_prefix(prefix)
                .is_some_and(|field| field.split('.').all(|part| !part.is_empty()))
        })
}

/// Checks an address template of destination `destination`; an unknown placeholder would render
/// an empty address on every row, so it stops the start.
pub(crate) fn check_address(
    r: &mut Reader,
    path: &str,
    field: &str,
    destination: &str,
    text: &str,
) {
    match Template::parse(text) {
        Err(error) => r.problem(path, format!("is not a valid template: {error}")),
        Ok(template) => {
            for name in template.placeholders() {
                if !is_address_placeholder(name) {
                    r.problem(
                        path,
                        format!(
                            "placeholder {{{{ {name} }}}} is not allowed in the {field} of destination {destination}; use topic, key, aggregateType, payload.<field> or data.<field>"
                        ),
                    );
                }
            }
        }
    }
}

/// Checks only the structure of a template whose unknown names render a default (routing keys,
/// the Kafka record key).
pub(crate) fn check_syntax(r: &mut Reader, path: &str, text: &str) {
    if let Err(error) = Template::parse(text) {
        r.problem(path, format!("is not a valid template: {error}"));
    }
}

/// Checks a source `topic` template; returns whether it reads `{{ eventType }}`.
pub(crate) fn check_source_topic(r: &mut Reader, path: &str, text: &str) -> bool {
    match Template::parse(text) {
        Err(error) => {
            r.problem(path, format!("is not a valid template: {error}"));
            false
        }
        Ok(template) => {
            for name in template.placeholders() {
                if !matches!(name, "source" | "eventType") {
                    r.problem(
                        path,
                        format!(
                            "placeholder {{{{ {name} }}}} is not allowed in a source topic; use source or eventType"
                        ),
                    );
                }
            }
            template.uses("eventType")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_placeholders() {
        for good in [
            "topic",
            "key",
            "aggregateType",
            "payload.region",
            "data.a.b",
        ] {
            assert!(is_address_placeholder(good), "{good}");
        }
        for bad in [
            "source",
            "payload",
            "payload.",
            "data..x",
            "aggregate_type",
            "Topic",
        ] {
            assert!(!is_address_placeholder(bad), "{bad}");
        }
    }
}
