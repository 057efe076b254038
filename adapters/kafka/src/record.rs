//! The record of one published message: its key and its headers.
//!
//! Headers, in this order: the standard `x-message-id` (the row id), `x-topic` (the row topic) and
//! `x-attempt` (the row attempt, as decimal text); then the static `headers` of the destination
//! and the row's `headers` column merged, a row header replacing a static header of the same name
//! in any letter case. Kafka headers may repeat a name, so a row or static header spelled like a
//! standard one travels beside it: the standard value is never removed (docs/reference/headers.md).

use queuebox_domain::template::routing_key::KafkaKeyTemplate;
use queuebox_domain::template::row::RowFields;
use queuebox_ports::publish::OutboundMessage;
use rdkafka::message::{Header, OwnedHeaders};

/// The `x-message-id` header.
pub const X_MESSAGE_ID: &str = "x-message-id";
/// The `x-topic` header.
pub const X_TOPIC: &str = "x-topic";
/// The `x-attempt` header.
pub const X_ATTEMPT: &str = "x-attempt";

/// The headers of the record of `message`.
pub(crate) fn record_headers(
    message: &OutboundMessage,
    static_headers: &[(String, String)],
) -> OwnedHeaders {
    let attempt = message.attempt.to_string();
    let mut merged: Vec<(&str, &str)> = Vec::new();
    for (name, value) in static_headers.iter().chain(&message.headers) {
        merged.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
        merged.push((name, value));
    }
    let mut headers = OwnedHeaders::new_with_capacity(3 + merged.len());
    for (key, value) in [
        (X_MESSAGE_ID, message.id.as_str()),
        (X_TOPIC, message.topic.as_str()),
        (X_ATTEMPT, attempt.as_str()),
    ]
    .into_iter()
    .chain(merged)
    {
        headers = headers.insert(Header {
            key,
            value: Some(value),
        });
    }
    headers
}

/// The record key of `message`: the matched route's rendered `routingKeyTemplate` when the route
/// sets one, else the destination's `keyTemplate`. An empty key means the record has none.
pub(crate) fn record_key(
    message: &OutboundMessage,
    template: &KafkaKeyTemplate,
    row: &RowFields<'_>,
) -> Option<String> {
    match &message.route_key {
        Some(key) => (!key.is_empty()).then(|| key.clone()),
        None => template.render(row),
    }
}

/// Why `topic` cannot be a Kafka topic name, if it cannot (the broker's own rule: 1 to 249
/// characters of ASCII letters, digits, `.`, `_` and `-`, and neither `.` nor `..`).
pub(crate) fn topic_name_problem(topic: &str) -> Option<&'static str> {
    if topic.is_empty() {
        Some("it is empty")
    } else if topic.len() > 249 {
        Some("it is longer than the 249 characters Kafka allows")
    } else if topic == "." || topic == ".." {
        Some("`.` and `..` are not topic names")
    } else if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        Some("Kafka allows only ASCII letters, digits, `.`, `_` and `-`")
    } else {
        None
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rdkafka::message::Headers;

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
            payload: "{}".to_owned(),
            headers: pairs(headers),
            attempt: 4,
            ..OutboundMessage::default()
        }
    }

    fn all(headers: &OwnedHeaders) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|h| {
                (
                    h.key.to_owned(),
                    String::from_utf8(h.value.unwrap_or_default().to_vec()).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn standard_headers_come_first_and_a_row_header_replaces_a_static_one() {
        let static_headers = pairs(&[("X-Team", "orders"), ("x-env", "prod")]);
        let headers = record_headers(
            &message(&[("x-team", "billing"), ("x-topic", "row")]),
            &static_headers,
        );
        assert_eq!(
            all(&headers),
            pairs(&[
                ("x-message-id", "11111111-1111-1111-1111-111111111111"),
                ("x-topic", "order.created"),
                ("x-attempt", "4"),
                ("x-env", "prod"),
                ("x-team", "billing"),
                ("x-topic", "row"),
            ])
        );
    }

    #[test]
    fn the_route_key_wins_and_empty_means_no_key() {
        let template = KafkaKeyTemplate::parse("{{ key }}").unwrap();
        let mut m = message(&[]);
        let row = RowFields::new("order.created", Some("k-1"), None, "{}");
        assert_eq!(record_key(&m, &template, &row).as_deref(), Some("k-1"));
        m.route_key = Some("eu".to_owned());
        assert_eq!(record_key(&m, &template, &row).as_deref(), Some("eu"));
        m.route_key = Some(String::new());
        assert_eq!(record_key(&m, &template, &row), None);
        m.route_key = None;
        let unkeyed = RowFields::new("order.created", None, None, "{}");
        assert_eq!(record_key(&m, &template, &unkeyed), None);
    }

    #[test]
    fn topic_names_follow_the_broker_rule() {
        assert_eq!(topic_name_problem("orders.v1_x-y"), None);
        assert!(topic_name_problem("").is_some());
        assert!(topic_name_problem("..").is_some());
        assert!(topic_name_problem("a b").is_some());
        assert!(topic_name_problem(&"a".repeat(250)).is_some());
    }
}
