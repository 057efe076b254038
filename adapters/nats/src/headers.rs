//! The NATS headers of a published message, and the headers of a received one as the ingest
//! pipeline reads them.
//!
//! Outbound, in order (docs/reference/headers.md): the standard headers `x-message-id` (row id), `x-topic`,
//! `x-attempt` and `x-message-key` (absent when the row has none); then the destination's static
//! `headers`; then the row's `headers` column, a row header replacing a static one of the same
//! name in any letter case. A NATS header holds several values, so a static or row header spelled
//! like a standard one travels as a second value beside it, as docs/reference/headers.md warns. Beyond that page,
//! `Nats-Msg-Id` carries the row id, so JetStream's duplicate window drops the second copy of a
//! publish that was retried because its acknowledgement was lost; a static or row header of that
//! name is left out, since a second value would change which copy counts as the duplicate.

use async_nats::HeaderMap;
use async_nats::header::{HeaderName, HeaderValue};
use queuebox_ports::ingest::Received;
use queuebox_ports::publish::{OutboundMessage, PublishError, PublishErrorKind};
use std::str::FromStr;

/// The `x-message-id` header.
pub const X_MESSAGE_ID: &str = "x-message-id";
/// The `x-topic` header.
pub const X_TOPIC: &str = "x-topic";
/// The `x-attempt` header.
pub const X_ATTEMPT: &str = "x-attempt";
/// The `x-message-key` header.
pub const X_MESSAGE_KEY: &str = "x-message-key";
/// JetStream's deduplication header.
pub const NATS_MSG_ID: &str = "Nats-Msg-Id";

/// Why `name` cannot be a NATS header name, if it cannot.
pub(crate) fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if HeaderName::from_str(name).is_err() || name.contains(char::is_whitespace) {
        Some("a NATS header name is printable ASCII without ':' or spaces")
    } else {
        None
    }
}

fn invalid(what: String) -> PublishError {
    PublishError::new(PublishErrorKind::InvalidMessage, what)
}

fn push(map: &mut HeaderMap, name: &str, value: &str) -> Result<(), PublishError> {
    let shown: String = name.chars().take(64).collect();
    if let Some(problem) = name_problem(name) {
        return Err(invalid(format!(
            "header name `{shown}` cannot be a NATS header name ({problem})"
        )));
    }
    let header_name = HeaderName::from_str(name).map_err(|_| {
        invalid(format!(
            "header name `{shown}` cannot be a NATS header name"
        ))
    })?;
    let header_value = HeaderValue::from_str(value).map_err(|_| {
        invalid(format!(
            "the value of header `{shown}` holds a line break, which NATS headers cannot carry"
        ))
    })?;
    map.append(header_name, header_value);
    Ok(())
}

/// The headers of `message` on a destination with `static_headers`.
///
/// # Errors
/// [`PublishErrorKind::InvalidMessage`] for a header name NATS refuses or a value with a line
/// break.
pub(crate) fn outbound(
    message: &OutboundMessage,
    static_headers: &[(String, String)],
) -> Result<HeaderMap, PublishError> {
    let mut map = HeaderMap::new();
    push(&mut map, NATS_MSG_ID, &message.id)?;
    push(&mut map, X_MESSAGE_ID, &message.id)?;
    push(&mut map, X_TOPIC, &message.topic)?;
    push(&mut map, X_ATTEMPT, &message.attempt.to_string())?;
    if let Some(key) = message.key.as_deref().filter(|k| !k.is_empty()) {
        push(&mut map, X_MESSAGE_KEY, key)?;
    }
    let mut merged: Vec<(&str, &str)> = Vec::new();
    for (name, value) in static_headers.iter().chain(&message.headers) {
        if name.eq_ignore_ascii_case(NATS_MSG_ID) {
            continue;
        }
        merged.retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
        merged.push((name, value));
    }
    for (name, value) in merged {
        push(&mut map, name, value)?;
    }
    Ok(map)
}

/// The [`Received`] of a message with `headers` and `payload`: one pair per header value (NATS
/// keeps no order between names), and `message_id` from `Nats-Msg-Id`, the third choice of
/// idempotency key (docs/how-to/bridge-*.md).
pub(crate) fn received(headers: Option<&HeaderMap>, payload: &[u8]) -> Received {
    let mut pairs = Vec::new();
    let mut message_id = None;
    if let Some(headers) = headers {
        for (name, values) in headers.iter() {
            let name = name.to_string();
            for value in values {
                if name.eq_ignore_ascii_case(NATS_MSG_ID) && message_id.is_none() {
                    message_id = Some(value.as_str().to_owned()).filter(|v| !v.is_empty());
                }
                pairs.push((name.clone(), value.as_str().to_owned()));
            }
        }
    }
    // A stable order (by name, values in arrival order) so stored rows do not depend on hashing.
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut received = Received::new(pairs, payload.to_vec());
    received.message_id = message_id;
    received
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

    fn message(key: Option<&str>, headers: &[(&str, &str)]) -> OutboundMessage {
        OutboundMessage {
            id: "11111111-1111-1111-1111-111111111111".to_owned(),
            topic: "order.created".to_owned(),
            key: key.map(str::to_owned),
            payload: "{}".to_owned(),
            headers: pairs(headers),
            attempt: 3,
            ..OutboundMessage::default()
        }
    }

    fn values(map: &HeaderMap, name: &str) -> Vec<String> {
        map.get_all(name).map(|v| v.as_str().to_owned()).collect()
    }

    #[test]
    fn standard_headers_and_the_dedup_id() {
        let map = outbound(&message(Some("k-1"), &[]), &[]).unwrap();
        let id = "11111111-1111-1111-1111-111111111111";
        assert_eq!(values(&map, "Nats-Msg-Id"), [id]);
        assert_eq!(values(&map, "x-message-id"), [id]);
        assert_eq!(values(&map, "x-topic"), ["order.created"]);
        assert_eq!(values(&map, "x-attempt"), ["3"]);
        assert_eq!(values(&map, "x-message-key"), ["k-1"]);
        for key in [None, Some("")] {
            let map = outbound(&message(key, &[]), &[]).unwrap();
            assert!(values(&map, "x-message-key").is_empty());
        }
    }

    #[test]
    fn row_headers_replace_static_ones_and_standard_names_get_a_second_value() {
        let map = outbound(
            &message(
                None,
                &[
                    ("x-team", "billing"),
                    ("x-topic", "row"),
                    ("nats-msg-id", "mine"),
                ],
            ),
            &pairs(&[
                ("X-Team", "orders"),
                ("x-env", "prod"),
                ("Nats-Msg-Id", "static"),
            ]),
        )
        .unwrap();
        assert_eq!(values(&map, "x-team"), ["billing"]);
        assert!(values(&map, "X-Team").is_empty());
        assert_eq!(values(&map, "x-env"), ["prod"]);
        assert_eq!(values(&map, "x-topic"), ["order.created", "row"]);
        assert_eq!(
            values(&map, "Nats-Msg-Id"),
            ["11111111-1111-1111-1111-111111111111"]
        );
    }

    #[test]
    fn unusable_names_and_values_are_invalid_messages() {
        for headers in [[("bad:name", "v")], [("", "v")], [("x-ok", "a\r\nb")]] {
            let error = outbound(&message(None, &headers), &[]).unwrap_err();
            assert_eq!(error.kind, PublishErrorKind::InvalidMessage, "{headers:?}");
        }
    }

    #[test]
    fn received_headers_become_pairs_and_the_msg_id_is_the_message_id() {
        let mut map = HeaderMap::new();
        map.append("x-tenant", "acme");
        map.append("x-list", "a");
        map.append("x-list", "b");
        map.append("Nats-Msg-Id", "evt-9");
        let received = received(Some(&map), b"{}");
        assert_eq!(received.message_id.as_deref(), Some("evt-9"));
        assert_eq!(
            received.headers,
            pairs(&[
                ("Nats-Msg-Id", "evt-9"),
                ("x-list", "a"),
                ("x-list", "b"),
                ("x-tenant", "acme")
            ])
        );
        assert_eq!(received.body, b"{}");
        let bare = super::received(None, b"x");
        assert_eq!(bare.message_id, None);
        assert!(bare.headers.is_empty());
    }
}
