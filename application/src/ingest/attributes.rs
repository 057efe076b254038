//! Where a received message's idempotency key, event type and aggregate id come from.
//!
//! An HTTP source reads them from the body alone. A broker source reads, in this order (docs/reference/headers.md), with the header names of `attributeHeaders`:
//! - idempotency key: its header, `idempotencyKeyPath`, the broker's own message id (the AMQP
//!   `messageId`, NATS's `Nats-Msg-Id`) or the Kafka record key, then the SHA-256 of the body,
//!   so a broker message always has one;
//! - event type: `eventTypePath`, then its header;
//! - aggregate id: `aggregateIdPath`, then its header, then the Kafka record key.
//!
//! At a broker source an empty value counts as none, so the next choice is taken.

use super::{AttributeHeaders, IngestKind, IngestSource};
use queuebox_domain::inbox::auth::CredentialCheck;
use queuebox_domain::inbox::dead_letter::body_digest;
use queuebox_domain::inbox::header_value;
use queuebox_ports::ingest::Received;
use serde_json::Value;

/// The three attributes of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Attributes {
    pub(super) idempotency_key: String,
    pub(super) event_type: Option<String>,
    pub(super) aggregate_id: Option<String>,
}

/// The attributes of `received` (whose body parsed as `document`); `None` when an HTTP source's
/// key path finds no value.
pub(super) fn extract(
    spec: &IngestSource,
    received: &Received,
    document: &Value,
) -> Option<Attributes> {
    let from_path = |path: &Option<queuebox_domain::jsonpath::JsonPath>| {
        path.as_ref()
            .and_then(|path| path.text(document))
            .and_then(non_empty)
    };
    let key_from_path = spec.idempotency_key_path.text(document);
    let IngestKind::Broker(headers) = &spec.kind else {
        // An HTTP source stores what its paths found, an empty text included.
        let text = |path: &Option<queuebox_domain::jsonpath::JsonPath>| {
            path.as_ref().and_then(|path| path.text(document))
        };
        // A provider signature check names the headers its scheme carries the key and the event
        // type in, when the source sets no path for them (domain::inbox::signatures).
        let (key_header, event_header) = provider_headers(spec);
        let header = |name: &str| {
            header_value(&received.headers, name).and_then(|v| non_empty(v.to_owned()))
        };
        let idempotency_key = match key_header {
            Some(name) => header(name)?,
            None => key_from_path?,
        };
        return Some(Attributes {
            idempotency_key,
            event_type: match event_header {
                Some(name) => header(name),
                None => text(&spec.event_type_path),
            },
            aggregate_id: text(&spec.aggregate_id_path),
        });
    };
    let header =
        |name: &str| header_value(&received.headers, name).and_then(|v| non_empty(v.to_owned()));
    Some(Attributes {
        idempotency_key: broker_key(headers, received, key_from_path),
        event_type: from_path(&spec.event_type_path).or_else(|| header(&headers.event_type)),
        aggregate_id: from_path(&spec.aggregate_id_path)
            .or_else(|| header(&headers.aggregate_id))
            .or_else(|| received.record_key.clone().and_then(non_empty)),
    })
}

/// The headers a provider signature check reads the idempotency key and the event type from.
pub(super) fn provider_headers(spec: &IngestSource) -> (Option<&str>, Option<&str>) {
    match &spec.auth {
        Some(CredentialCheck::Signature(check)) => (
            check.key_header.as_deref(),
            check.event_type_header.as_deref(),
        ),
        _ => (None, None),
    }
}

/// A broker message's idempotency key: its header, `from_path` (what `idempotencyKeyPath` found,
/// `None` when the body could not be read), the broker's message id, the Kafka record key, then
/// the SHA-256 of the body.
pub(super) fn broker_key(
    headers: &AttributeHeaders,
    received: &Received,
    from_path: Option<String>,
) -> String {
    header_value(&received.headers, &headers.idempotency_key)
        .and_then(|v| non_empty(v.to_owned()))
        .or_else(|| from_path.and_then(non_empty))
        .or_else(|| received.message_id.clone().and_then(non_empty))
        .or_else(|| received.record_key.clone().and_then(non_empty))
        .unwrap_or_else(|| body_digest(&received.body))
}

fn non_empty(value: String) -> Option<String> {
    (!value.is_empty()).then_some(value)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use queuebox_domain::jsonpath::JsonPath;
    use queuebox_ports::inbox::Consumption;

    fn spec(kind: IngestKind) -> IngestSource {
        IngestSource {
            name: "s".into(),
            idempotency_key_path: JsonPath::parse("$.id").unwrap(),
            event_type_path: Some(JsonPath::parse("$.type").unwrap()),
            aggregate_id_path: Some(JsonPath::parse("$.agg").unwrap()),
            consumption: Consumption::Push,
            auth: None,
            filter: None,
            requests_per_minute: None,
            kind,
            transform: None,
        }
    }

    fn broker() -> IngestKind {
        IngestKind::Broker(AttributeHeaders::default())
    }

    fn message(headers: &[(&str, &str)], body: &str) -> (Received, Value) {
        let received = Received::new(
            headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            body.as_bytes().to_vec(),
        );
        let document = serde_json::from_str(body).unwrap();
        (received, document)
    }

    #[test]
    fn an_http_source_reads_the_body_alone() {
        let (received, document) = message(
            &[("x-idempotency-key", "h"), ("x-event-type", "t")],
            r#"{"id":"b","agg":""}"#,
        );
        let got = extract(&spec(IngestKind::Http), &received, &document).unwrap();
        assert_eq!(
            got,
            Attributes {
                idempotency_key: "b".into(),
                event_type: None,
                aggregate_id: Some(String::new()),
            }
        );
        let (received, document) = message(&[("x-idempotency-key", "h")], "{}");
        assert_eq!(extract(&spec(IngestKind::Http), &received, &document), None);
    }

    #[test]
    fn a_provider_check_reads_the_key_and_event_type_from_its_headers() {
        use queuebox_domain::inbox::signatures::{Scheme, SignatureCheck};
        use queuebox_domain::secret::Secret;
        let mut check =
            SignatureCheck::new(Scheme::Github, &[Secret::new("s")], 300).expect("valid secret");
        check.key_header = Some("X-GitHub-Delivery".into());
        check.event_type_header = Some("X-GitHub-Event".into());
        let mut s = spec(IngestKind::Http);
        s.auth = Some(CredentialCheck::Signature(check));
        let (received, document) = message(
            &[("x-github-delivery", "d-1"), ("X-GitHub-Event", "push")],
            r#"{"id":"body-id","type":"body-type"}"#,
        );
        let got = extract(&s, &received, &document).unwrap();
        assert_eq!(got.idempotency_key, "d-1");
        assert_eq!(got.event_type.as_deref(), Some("push"));
        // Without the header there is no key, whatever the body holds.
        let (received, document) = message(&[("X-GitHub-Event", "push")], r#"{"id":"body-id"}"#);
        assert_eq!(extract(&s, &received, &document), None);
    }

    #[test]
    fn a_broker_key_comes_from_header_then_path_then_message_id_then_record_key_then_digest() {
        let s = spec(broker());
        let (received, document) =
            message(&[("X-Idempotency-Key", "from-header")], r#"{"id":"p"}"#);
        assert_eq!(
            extract(&s, &received, &document).unwrap().idempotency_key,
            "from-header"
        );

        let (mut received, document) = message(&[("x-idempotency-key", "")], r#"{"id":"p"}"#);
        received.message_id = Some("m".into());
        assert_eq!(
            extract(&s, &received, &document).unwrap().idempotency_key,
            "p"
        );

        let (mut received, document) = message(&[], r#"{"other":1}"#);
        received.message_id = Some("m".into());
        received.record_key = Some("r".into());
        assert_eq!(
            extract(&s, &received, &document).unwrap().idempotency_key,
            "m"
        );

        received.message_id = Some(String::new());
        assert_eq!(
            extract(&s, &received, &document).unwrap().idempotency_key,
            "r"
        );

        received.record_key = None;
        assert_eq!(
            extract(&s, &received, &document).unwrap().idempotency_key,
            body_digest(br#"{"other":1}"#)
        );
    }

    #[test]
    fn event_type_and_aggregate_fall_back_to_headers_and_the_record_key() {
        let s = spec(broker());
        let (mut received, document) = message(
            &[("x-event-type", "from-header"), ("x-aggregate-id", "agg-h")],
            r#"{"id":"1"}"#,
        );
        received.record_key = Some("rk".into());
        let got = extract(&s, &received, &document).unwrap();
        assert_eq!(got.event_type.as_deref(), Some("from-header"));
        assert_eq!(got.aggregate_id.as_deref(), Some("agg-h"));

        let (mut received, document) = message(&[], r#"{"id":"1","type":"t","agg":"a"}"#);
        received.record_key = Some("rk".into());
        let got = extract(&s, &received, &document).unwrap();
        assert_eq!(got.event_type.as_deref(), Some("t"));
        assert_eq!(got.aggregate_id.as_deref(), Some("a"));

        let (mut received, document) = message(&[], r#"{"id":"1"}"#);
        received.record_key = Some("rk".into());
        assert_eq!(
            extract(&s, &received, &document)
                .unwrap()
                .aggregate_id
                .as_deref(),
            Some("rk")
        );
    }

    #[test]
    fn renamed_attribute_headers_are_read_in_the_same_order() {
        let s = spec(IngestKind::Broker(AttributeHeaders {
            idempotency_key: "id".into(),
            aggregate_id: "aggregateId".into(),
            event_type: "eventType".into(),
        }));
        let (received, document) = message(
            &[
                ("id", "k"),
                ("aggregateId", "a"),
                ("eventType", "e"),
                ("x-idempotency-key", "ignored"),
            ],
            "{}",
        );
        let got = extract(&s, &received, &document).unwrap();
        assert_eq!(
            got,
            Attributes {
                idempotency_key: "k".into(),
                event_type: Some("e".into()),
                aggregate_id: Some("a".into()),
            }
        );
    }
}
