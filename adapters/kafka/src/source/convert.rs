//! A Kafka record as the ingest pipeline receives it.
//!
//! Headers: each record header with a value becomes one `(name, value)` pair, in record order (a
//! repeated name once per value): the value itself when it is UTF-8 text, otherwise `base64:` and
//! the Base64 of its bytes (`header_text`), because the pipeline reads headers as text (attribute
//! headers, filters, stored headers). A header with no value is left out. The body is the record value as it is (no value reads as an empty body, which the
//! pipeline stores as a dead row). The record key, when it is UTF-8 text, is the third choice of
//! idempotency key and the last of aggregate id (docs/how-to/bridge-*.md); a binary key is not used.

use queuebox_domain::inbox::headers::header_text;
use queuebox_ports::ingest::Received;
use rdkafka::Message;
use rdkafka::message::{Headers, OwnedMessage};

/// The [`Received`] of `record`.
pub(crate) fn received(record: &OwnedMessage) -> Received {
    let mut headers = Vec::new();
    if let Some(record_headers) = record.headers() {
        for header in record_headers.iter() {
            let Some(value) = header.value else { continue };
            headers.push((header.key.to_owned(), header_text(value)));
        }
    }
    let record_key = record
        .key()
        .and_then(|key| std::str::from_utf8(key).ok())
        .filter(|key| !key.is_empty())
        .map(str::to_owned);
    Received {
        headers,
        body: record.payload().map(<[u8]>::to_vec).unwrap_or_default(),
        message_id: None,
        record_key,
        correlation_id: None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rdkafka::Timestamp;
    use rdkafka::message::{Header, OwnedHeaders};

    fn record(key: Option<&[u8]>, payload: Option<&[u8]>, headers: OwnedHeaders) -> OwnedMessage {
        OwnedMessage::new(
            payload.map(<[u8]>::to_vec),
            key.map(<[u8]>::to_vec),
            "orders".to_owned(),
            Timestamp::NotAvailable,
            0,
            7,
            Some(headers),
        )
    }

    #[test]
    fn headers_as_text_or_base64_key_and_body_are_kept() {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "x-idempotency-key",
                value: Some("k-1"),
            })
            .insert(Header {
                key: "x-tag",
                value: Some("a"),
            })
            .insert(Header {
                key: "x-tag",
                value: Some("b"),
            })
            .insert(Header {
                key: "x-binary",
                value: Some(&[0xff_u8, 0xfe][..]),
            })
            .insert::<str>(Header {
                key: "x-null",
                value: None,
            });
        let received = received(&record(Some(b"cust-1"), Some(br#"{"id":1}"#), headers));
        assert_eq!(
            received.headers,
            vec![
                ("x-idempotency-key".to_owned(), "k-1".to_owned()),
                ("x-tag".to_owned(), "a".to_owned()),
                ("x-tag".to_owned(), "b".to_owned()),
                ("x-binary".to_owned(), "base64://4=".to_owned()),
            ]
        );
        assert_eq!(received.record_key.as_deref(), Some("cust-1"));
        assert_eq!(received.body, br#"{"id":1}"#);
        assert_eq!(received.message_id, None);
    }

    #[test]
    fn no_value_is_an_empty_body_and_a_binary_key_is_no_key() {
        let received = received(&record(Some(&[0xc3, 0x28]), None, OwnedHeaders::new()));
        assert!(received.body.is_empty());
        assert_eq!(received.record_key, None);
        let empty_key = super::received(&record(Some(b""), Some(b"{}"), OwnedHeaders::new()));
        assert_eq!(empty_key.record_key, None);
    }
}
