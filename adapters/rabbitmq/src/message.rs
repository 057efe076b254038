//! The AMQP properties and headers of one published message.
//!
//! Properties: `message_id` is the row id, `content_type` is `application/json`, `delivery_mode`
//! is 2 (persistent) or 1 (transient). Headers, in this order of precedence:
//!
//! 1. the standard headers: `x-topic` (the row topic, a string) and `x-attempt` (the row attempt,
//!    a signed 32-bit integer). A RabbitMQ message carries no key header and no id header: the id
//!    travels in `message_id`, the key in the routing key template when the operator wants it.
//! 2. the static `headers` of the destination;
//! 3. the row's `headers` column.
//!
//! A row header replaces a static header of the same name in any letter case. The standard
//! headers are never replaced. An AMQP header table holds one value per name, so a row or static
//! header spelled exactly like a standard header is dropped (the standard value is what
//! consumers rely on); one that differs only in letter case is a different AMQP name and travels
//! beside the standard one.

use lapin::BasicProperties;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use queuebox_ports::publish::{OutboundMessage, PublishError, PublishErrorKind};

/// The `x-topic` header.
pub const X_TOPIC: &str = "x-topic";
/// The `x-attempt` header.
pub const X_ATTEMPT: &str = "x-attempt";
/// The `content_type` of every message.
pub const CONTENT_TYPE: &str = "application/json";

/// The longest AMQP short string: header names, exchange names, routing keys, `message_id`.
pub(crate) const MAX_SHORT_STRING: usize = 255;

/// True for the name of a standard header.
fn is_standard(name: &str) -> bool {
    name == X_TOPIC || name == X_ATTEMPT
}

/// Why a header name cannot travel in an AMQP header table, if it cannot.
pub(crate) fn header_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_SHORT_STRING {
        Some("it is longer than the 255 bytes AMQP allows")
    } else {
        None
    }
}

/// The merged static and row headers, standard names left out, in first-seen order.
pub(crate) fn merged_headers<'a>(
    static_headers: &'a [(String, String)],
    row_headers: &'a [(String, String)],
) -> Vec<(&'a str, &'a str)> {
    let mut merged: Vec<(&str, &str)> = Vec::new();
    for (name, value) in static_headers.iter().chain(row_headers) {
        if is_standard(name) {
            continue;
        }
        merged.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
        merged.push((name, value));
    }
    merged
}

/// The properties of `message`.
///
/// # Errors
/// [`PublishErrorKind::InvalidMessage`] when a row header name cannot be an AMQP header name or
/// the row id is longer than an AMQP short string.
pub(crate) fn properties(
    message: &OutboundMessage,
    static_headers: &[(String, String)],
    delivery_mode: u8,
) -> Result<BasicProperties, PublishError> {
    let mut table = FieldTable::default();
    table.insert(
        ShortString::from(X_TOPIC),
        AMQPValue::LongString(LongString::from(message.topic.as_str())),
    );
    table.insert(
        ShortString::from(X_ATTEMPT),
        AMQPValue::LongInt(message.attempt),
    );
    for (name, value) in merged_headers(static_headers, &message.headers) {
        let key = match header_name_problem(name) {
            None => ShortString::try_new(name).ok(),
            Some(_) => None,
        };
        let Some(key) = key else {
            let shown: String = name.chars().take(64).collect();
            return Err(PublishError::new(
                PublishErrorKind::InvalidMessage,
                format!(
                    "row header name `{shown}` cannot be an AMQP header name ({})",
                    header_name_problem(name).unwrap_or("it is not a short string")
                ),
            ));
        };
        table.insert(key, AMQPValue::LongString(LongString::from(value)));
    }
    let message_id = ShortString::try_new(message.id.as_str()).map_err(|_| {
        PublishError::new(
            PublishErrorKind::InvalidMessage,
            "the row id is longer than the 255 bytes an AMQP message_id holds",
        )
    })?;
    Ok(BasicProperties::default()
        .with_message_id(message_id)
        .with_content_type(ShortString::from(CONTENT_TYPE))
        .with_delivery_mode(delivery_mode)
        .with_headers(table))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn message(headers: &[(&str, &str)]) -> OutboundMessage {
        OutboundMessage {
            id: "11111111-1111-1111-1111-111111111111".to_owned(),
            topic: "order.created".to_owned(),
            key: Some("k-1".to_owned()),
            aggregate_type: None,
            payload: "{}".to_owned(),
            headers: pairs(headers),
            attempt: 4,
            ..OutboundMessage::default()
        }
    }

    fn header<'a>(properties: &'a BasicProperties, name: &str) -> Option<&'a AMQPValue> {
        properties
            .headers()
            .as_ref()
            .and_then(|table| table.inner().get(name))
    }

    fn text(value: Option<&AMQPValue>) -> Option<String> {
        match value {
            Some(AMQPValue::LongString(s)) => Some(String::from_utf8_lossy(s.as_bytes()).into()),
            _ => None,
        }
    }

    #[test]
    fn standard_properties_and_headers() {
        let properties = properties(&message(&[]), &[], 2).unwrap();
        assert_eq!(
            properties.message_id().as_ref().map(ShortString::as_str),
            Some("11111111-1111-1111-1111-111111111111")
        );
        assert_eq!(
            properties.content_type().as_ref().map(ShortString::as_str),
            Some("application/json")
        );
        assert_eq!(*properties.delivery_mode(), Some(2));
        assert_eq!(
            text(header(&properties, "x-topic")).as_deref(),
            Some("order.created")
        );
        assert_eq!(
            header(&properties, "x-attempt"),
            Some(&AMQPValue::LongInt(4))
        );
        assert_eq!(header(&properties, "x-message-key"), None);
        assert_eq!(header(&properties, "x-message-id"), None);
    }

    #[test]
    fn a_row_header_replaces_a_static_one_in_any_case_and_standard_names_stay() {
        let static_headers = pairs(&[("X-Team", "orders"), ("x-env", "prod"), ("x-topic", "s")]);
        let properties = properties(
            &message(&[
                ("x-team", "billing"),
                ("x-attempt", "99"),
                ("X-Topic", "row"),
            ]),
            &static_headers,
            1,
        )
        .unwrap();
        assert_eq!(*properties.delivery_mode(), Some(1));
        assert_eq!(
            text(header(&properties, "x-team")).as_deref(),
            Some("billing")
        );
        assert_eq!(header(&properties, "X-Team"), None);
        assert_eq!(text(header(&properties, "x-env")).as_deref(), Some("prod"));
        assert_eq!(
            text(header(&properties, "x-topic")).as_deref(),
            Some("order.created")
        );
        assert_eq!(
            header(&properties, "x-attempt"),
            Some(&AMQPValue::LongInt(4))
        );
        // A different spelling is a different AMQP name and travels beside the standard one.
        assert_eq!(text(header(&properties, "X-Topic")).as_deref(), Some("row"));
    }

    #[test]
    fn an_unusable_row_header_name_is_an_invalid_message() {
        let long = "h".repeat(256);
        for name in [long.as_str(), ""] {
            let error = properties(&message(&[(name, "v")]), &[], 2).unwrap_err();
            assert_eq!(error.kind, PublishErrorKind::InvalidMessage);
            assert!(
                error.reason.contains("AMQP header name"),
                "{}",
                error.reason
            );
        }
    }
}
