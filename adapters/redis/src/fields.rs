//! The fields of a stream entry: what the destination writes for an outbox row, and how the
//! source reads an entry back as a received message.
//!
//! Written, in order: `x-message-id` (the row id), `x-topic`, `x-attempt`, `x-message-key`
//! (absent when the row has no key or an empty one), then the destination's static `headers` and
//! the row's `headers` column (a row header replacing a static one of the same name in any letter
//! case), then `payload` (the JSON text). A static or row header spelled like a standard field or
//! like `payload`, in any letter case, is left out: an entry's field names are read as a map, so a
//! second field of one name would hide the first.
//!
//! Read: the `payload` field is the body; every other field is a header, in entry order. An entry
//! without a `payload` field has an empty body, which the pipeline stores as a dead row.

use queuebox_ports::ingest::Received;
use queuebox_ports::publish::OutboundMessage;

/// The field that holds the row id.
pub const X_MESSAGE_ID: &str = "x-message-id";
/// The field that holds the row topic.
pub const X_TOPIC: &str = "x-topic";
/// The field that holds the number of failed deliveries before this one.
pub const X_ATTEMPT: &str = "x-attempt";
/// The field that holds the row key.
pub const X_MESSAGE_KEY: &str = "x-message-key";
/// The field that holds the payload.
pub const PAYLOAD: &str = "payload";

const RESERVED: [&str; 5] = [X_MESSAGE_ID, X_TOPIC, X_ATTEMPT, X_MESSAGE_KEY, PAYLOAD];

/// The fields of `message` on a destination with `static_headers`, in entry order.
pub(crate) fn outbound<'a>(
    message: &'a OutboundMessage,
    static_headers: &'a [(String, String)],
    attempt: &'a str,
) -> Vec<(&'a str, &'a str)> {
    let mut fields: Vec<(&str, &str)> = vec![
        (X_MESSAGE_ID, message.id.as_str()),
        (X_TOPIC, message.topic.as_str()),
        (X_ATTEMPT, attempt),
    ];
    if let Some(key) = message.key.as_deref().filter(|k| !k.is_empty()) {
        fields.push((X_MESSAGE_KEY, key));
    }
    let reserved = |name: &str| RESERVED.iter().any(|r| r.eq_ignore_ascii_case(name));
    for (name, value) in static_headers {
        let replaced = message
            .headers
            .iter()
            .any(|(row, _)| row.eq_ignore_ascii_case(name));
        if !replaced && !reserved(name) {
            fields.push((name.as_str(), value.as_str()));
        }
    }
    for (name, value) in &message.headers {
        if !reserved(name) {
            fields.push((name.as_str(), value.as_str()));
        }
    }
    fields.push((PAYLOAD, message.payload.as_str()));
    fields
}

/// An entry's `fields` (in entry order) as a received message; the entry id is the broker's
/// message id.
pub(crate) fn received(entry_id: &str, fields: Vec<(String, Vec<u8>)>) -> Received {
    let mut headers = Vec::with_capacity(fields.len());
    let mut body = Vec::new();
    for (name, value) in fields {
        if name == PAYLOAD {
            body = value;
        } else {
            headers.push((name, String::from_utf8_lossy(&value).into_owned()));
        }
    }
    Received {
        headers,
        body,
        message_id: Some(entry_id.to_owned()),
        record_key: None,
        correlation_id: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn standard_fields_come_first_and_a_row_header_replaces_a_static_one() {
        let message = OutboundMessage {
            id: "id-1".into(),
            topic: "order.created".into(),
            key: Some("k".into()),
            payload: "{}".into(),
            headers: vec![
                ("X-Tenant".into(), "row".into()),
                ("PAYLOAD".into(), "no".into()),
            ],
            ..OutboundMessage::default()
        };
        let statics = vec![
            ("x-tenant".to_owned(), "static".to_owned()),
            ("x-region".to_owned(), "eu".to_owned()),
            ("X-Message-Id".to_owned(), "forged".to_owned()),
        ];
        let fields = outbound(&message, &statics, "2");
        assert_eq!(
            fields,
            [
                ("x-message-id", "id-1"),
                ("x-topic", "order.created"),
                ("x-attempt", "2"),
                ("x-message-key", "k"),
                ("x-region", "eu"),
                ("X-Tenant", "row"),
                ("payload", "{}"),
            ]
        );
        let keyless = OutboundMessage {
            key: Some(String::new()),
            ..message
        };
        assert!(
            !outbound(&keyless, &[], "0")
                .iter()
                .any(|(n, _)| *n == X_MESSAGE_KEY)
        );
    }

    #[test]
    fn an_entry_reads_back_as_headers_and_a_body() {
        let entry = received(
            "1-0",
            vec![
                ("x-message-id".into(), b"id-1".to_vec()),
                ("payload".into(), br#"{"a":1}"#.to_vec()),
                ("x-tenant".into(), b"acme".to_vec()),
            ],
        );
        assert_eq!(entry.body, br#"{"a":1}"#);
        assert_eq!(
            entry.headers,
            [
                ("x-message-id".to_owned(), "id-1".to_owned()),
                ("x-tenant".to_owned(), "acme".to_owned())
            ]
        );
        assert_eq!(entry.message_id.as_deref(), Some("1-0"));
        assert!(received("2-0", vec![]).body.is_empty());
    }
}
