//! Turning an HTTP answer or a transport failure into a safe failure reason, and counting it.

use queuebox_domain::redact::Redactor;
use queuebox_ports::metrics::HTTP_PUBLISH_RESPONSES_TOTAL;
use queuebox_ports::publish::{PublishError, PublishErrorKind};
use reqwest::{Response, StatusCode, Url};
use std::error::Error as _;
use std::time::Duration;

/// The `status_class` label of a status: `1xx` to `5xx`, or `other`.
pub(crate) fn status_class(status: Option<StatusCode>) -> &'static str {
    match status.map(|s| s.as_u16() / 100) {
        Some(1) => "1xx",
        Some(2) => "2xx",
        Some(3) => "3xx",
        Some(4) => "4xx",
        Some(5) => "5xx",
        _ => "other",
    }
}

/// Counts one publish answer (`None`: no answer at all).
pub(crate) fn count_response(status: Option<StatusCode>) {
    metrics::counter!(HTTP_PUBLISH_RESPONSES_TOTAL, "status_class" => status_class(status))
        .increment(1);
}

/// Reads at most `limit` bytes of the body; a body that breaks off yields what arrived.
pub(crate) async fn read_body_prefix(mut response: Response, limit: usize) -> String {
    let mut body: Vec<u8> = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    // A cut inside a multi-byte character becomes a replacement character, never invalid text.
    String::from_utf8_lossy(&body[..body.len().min(limit)]).into_owned()
}

/// The failure of a non-2xx answer: the status and up to the limit of the redacted body.
pub(crate) async fn rejected(
    what: &str,
    response: Response,
    redactor: &Redactor,
    kind: PublishErrorKind,
) -> PublishError {
    let status = response.status();
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|value| value.to_str().ok())
        .map(|value| redactor.redact(value));
    // Read a little more than the limit so masking sees a secret whole before the cut.
    let body = read_body_prefix(response, redactor.max_bytes().saturating_mul(2).max(64)).await;
    let body = redactor.redact(body.trim());
    let mut reason = format!("{what} answered HTTP {status}");
    if status.is_redirection() {
        reason.push_str(" (redirects are not followed)");
        if let Some(location) = location {
            reason.push_str(&format!(" to {location}"));
        }
    }
    if !body.is_empty() {
        reason.push_str(": ");
        reason.push_str(&body);
    }
    PublishError::new(kind, reason)
}

/// The failure of a request that got no answer.
pub(crate) fn transport_failure(
    what: &str,
    url: &Url,
    timeout: Duration,
    error: &reqwest::Error,
    redactor: &Redactor,
) -> PublishError {
    let target = redactor.mask(&format!("{}{}", origin(url), url.path()));
    if error.is_timeout() {
        return PublishError::new(
            PublishErrorKind::Timeout,
            format!(
                "{what} at {target} gave no answer within {} ms",
                timeout.as_millis()
            ),
        );
    }
    // The chain of causes says what went wrong (refused, reset, DNS, TLS); reqwest's own text
    // would repeat the URL with its query.
    let mut causes = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    let detail = if causes.is_empty() {
        "request failed".to_owned()
    } else {
        causes.join(": ")
    };
    let (kind, text) = if error.is_connect() {
        (
            PublishErrorKind::Unreachable,
            format!("could not connect to {what} at {target}: {detail}"),
        )
    } else {
        (
            PublishErrorKind::Other,
            format!("request to {what} at {target} failed: {detail}"),
        )
    };
    PublishError::new(kind, redactor.redact(&text))
}

/// `scheme://host[:port]` of a URL.
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(status_class(StatusCode::from_u16(101).ok()), "1xx");
        assert_eq!(status_class(Some(StatusCode::ACCEPTED)), "2xx");
        assert_eq!(status_class(Some(StatusCode::FOUND)), "3xx");
        assert_eq!(status_class(Some(StatusCode::NOT_FOUND)), "4xx");
        assert_eq!(status_class(Some(StatusCode::BAD_GATEWAY)), "5xx");
        assert_eq!(status_class(None), "other");
        assert_eq!(status_class(StatusCode::from_u16(600).ok()), "other");
    }
}
