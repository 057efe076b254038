//! What every broker source must store for a message that brings no key of its own: the key
//! `sha256:<hex digest of the body>`, and for a body that is not JSON a dead row whose payload is
//! `{"raw": <the text>}` (or `{"base64": ...}` for bytes that are not UTF-8). Each broker's test
//! publishes [`UNKEYED`] its own way, then calls [`check_unkeyed_rows`].

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use std::time::Duration;

/// The bodies to publish without any key: a JSON document, text that is not JSON, and bytes that
/// are not UTF-8.
pub const UNKEYED: [&[u8]; 3] = [
    br#"{"check":"a key from the digest"}"#,
    b"plain text, not JSON",
    b"\xff\xfe not UTF-8",
];

/// A header value that is not UTF-8 (and holds a NUL), and how it is stored.
pub const BINARY_HEADER: (&[u8], &str) = (b"\xff\x00A", "base64:/wBB");

/// The key a broker source gives a message with no key of its own.
pub fn digest_key(body: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(body)))
}

/// Waits until `source` holds a row for each of [`UNKEYED`] under its digest key, checks their
/// states and payloads, and returns the stored headers of the JSON one, for the caller to check.
pub async fn check_unkeyed_rows(sql: &PgPool, source: &str, deadline: Duration) -> Value {
    let keys: Vec<String> = UNKEYED.iter().map(|body| digest_key(body)).collect();
    let rows: Vec<(String, String, Value, Value)> =
        crate::wait_until("a row for each unkeyed message", deadline, || async {
            let rows: Vec<(String, String, Value, Value)> = sqlx::query_as(
                "SELECT idempotency_key, state, payload, headers FROM inbox \
                 WHERE source = $1 AND idempotency_key = ANY($2)",
            )
            .bind(source)
            .bind(&keys)
            .fetch_all(sql)
            .await
            .expect("read the rows");
            (rows.len() == keys.len()).then_some(rows)
        })
        .await;
    let row = |key: &str| {
        rows.iter()
            .find(|row| row.0 == key)
            .unwrap_or_else(|| panic!("no row under {key}: {rows:?}"))
    };
    let document = row(&keys[0]);
    // Stored as received: pending, or already processed where the relay runs.
    assert_ne!(document.1, "dead", "{rows:?}");
    assert_eq!(document.2, json!({"check": "a key from the digest"}));
    let text = row(&keys[1]);
    assert_eq!(text.1, "dead", "{rows:?}");
    assert_eq!(text.2, json!({"raw": "plain text, not JSON"}), "{rows:?}");
    let binary = row(&keys[2]);
    assert_eq!(binary.1, "dead", "{rows:?}");
    assert_eq!(binary.2, json!({"base64": "//4gbm90IFVURi04"}), "{rows:?}");
    document.3.clone()
}
