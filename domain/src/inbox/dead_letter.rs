//! How a broker message that cannot be stored as received is kept as a `dead` inbox row: the
//! broker acknowledges it (it must never come back forever), so the row has to hold it whole.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// What a key made from the body's digest starts with, so a reader can tell it from a key the
/// sender chose.
pub const DIGEST_KEY_PREFIX: &str = "sha256:";

/// The idempotency key of last resort of a broker message: [`DIGEST_KEY_PREFIX`] and the SHA-256
/// digest of `body` as lower-case hex (71 characters in all), the same for every redelivery of the
/// same bytes.
pub fn body_digest(body: &[u8]) -> String {
    format!("{DIGEST_KEY_PREFIX}{}", hex::encode(Sha256::digest(body)))
}

/// The payload of a dead row for the received `body`, as JSON text the table holds, and how it
/// was kept when not as received (for the row's `last_error`):
/// - a JSON document without U+0000: as received;
/// - other UTF-8 text without U+0000 (not JSON, or JSON holding `\u0000` escapes): an object
///   whose one member `raw` holds the text, character for character;
/// - anything else (bytes that are not UTF-8, a raw U+0000): `{"base64": "..."}` of the bytes,
///   because a JSON string cannot carry them.
///
/// Each form gives the received bytes back exactly.
pub fn dead_payload(body: &[u8]) -> (String, Option<&'static str>) {
    if let Ok(text) = std::str::from_utf8(body)
        && !text.contains('\0')
    {
        let storable_json = serde_json::from_str::<Value>(text)
            .is_ok_and(|document| super::limits::check_payload(&document).is_ok());
        if storable_json {
            return (text.to_owned(), None);
        }
        let wrapped = serde_json::json!({ "raw": text });
        return (
            wrapped.to_string(),
            Some("the received text in {\"raw\": ...}"),
        );
    }
    let wrapped = serde_json::json!({ "base64": STANDARD.encode(body) });
    (
        wrapped.to_string(),
        Some("base64 of the received bytes in {\"base64\": ...}"),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_storable_document_is_kept_as_received() {
        assert_eq!(
            dead_payload(br#"{"a": 1}"#),
            (r#"{"a": 1}"#.to_owned(), None)
        );
    }

    #[test]
    fn text_that_is_not_json_or_holds_an_escaped_nul_is_kept_under_raw() {
        let (payload, how) = dead_payload(b"not json");
        assert_eq!(payload, r#"{"raw":"not json"}"#);
        assert!(how.unwrap().contains("raw"));
        let (payload, _) = dead_payload(br#"{"a":"\u0000"}"#);
        let back: Value = serde_json::from_str(&payload).unwrap();
        assert_eq!(back["raw"], r#"{"a":"\u0000"}"#);
        assert!(!payload.contains("\\u0000") || payload.contains("\\\\u0000"));
    }

    #[test]
    fn bytes_that_are_not_utf8_or_hold_a_raw_nul_become_base64() {
        for body in [&b"\xff\xfe"[..], &b"a\0b"[..]] {
            let (payload, how) = dead_payload(body);
            let document: Value = serde_json::from_str(&payload).unwrap();
            let decoded = STANDARD
                .decode(document["base64"].as_str().unwrap())
                .unwrap();
            assert_eq!(decoded, body);
            assert!(how.unwrap().contains("base64"));
        }
    }

    #[test]
    fn the_digest_key_is_the_prefix_and_lower_case_hex() {
        assert_eq!(
            body_digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
