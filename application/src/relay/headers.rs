//! The headers of a relayed outbox row: the received inbox headers, then the relay's own four.

use queuebox_ports::inbox::RelayRow;

/// The inbox row id.
pub const X_INBOX_ID: &str = "x-inbox-id";
/// The source name.
pub const X_SOURCE: &str = "x-source";
/// The idempotency key of the inbox row.
pub const X_IDEMPOTENCY_KEY: &str = "x-idempotency-key";
/// The correlation id of the inbox row.
pub const X_CORRELATION_ID: &str = "X-Correlation-Id";

/// The inbox headers with every received header named like one of the relay's four removed (in any
/// letter case), then the four appended. A sender therefore cannot set them; a received
/// correlation header is dropped even when the row has no correlation id, for the same reason.
pub(crate) fn relay_headers(row: &RelayRow) -> Vec<(String, String)> {
    let own = [X_INBOX_ID, X_SOURCE, X_IDEMPOTENCY_KEY, X_CORRELATION_ID];
    let mut headers: Vec<(String, String)> = row
        .headers
        .iter()
        .filter(|(name, _)| !own.iter().any(|o| o.eq_ignore_ascii_case(name)))
        .cloned()
        .collect();
    headers.push((X_INBOX_ID.to_owned(), row.id.to_string()));
    headers.push((X_SOURCE.to_owned(), row.source.clone()));
    headers.push((X_IDEMPOTENCY_KEY.to_owned(), row.idempotency_key.clone()));
    if let Some(correlation) = row.correlation_id.as_deref().filter(|c| !c.is_empty()) {
        headers.push((X_CORRELATION_ID.to_owned(), correlation.to_owned()));
    }
    headers
}
