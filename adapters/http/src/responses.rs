//! Small helpers that write the JSON bodies every route shares.

use salvo::http::StatusCode;
use salvo::http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use salvo::prelude::Response;
use serde::Serialize;

/// Writes `body` as JSON with `status`.
pub(crate) fn json<T: Serialize>(res: &mut Response, status: StatusCode, body: &T) {
    res.status_code(status);
    match serde_json::to_vec(body) {
        Ok(bytes) => {
            res.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            // Writing into a fresh response body cannot fail; a failure would only mean the
            // response was already sent, and then there is nobody left to tell.
            let _ = res.write_body(bytes);
        }
        Err(error) => {
            tracing::error!(%error, "could not serialise a response body");
            res.status_code(StatusCode::INTERNAL_SERVER_ERROR);
        }
    }
}

/// Writes `{"error": message}` with `status`.
pub(crate) fn error(res: &mut Response, status: StatusCode, message: &str) {
    json(res, status, &serde_json::json!({ "error": message }));
}

/// The body of a 413, shared by every route that limits its body.
pub(crate) fn too_large_message(max_bytes: usize) -> String {
    format!("Request body exceeds {max_bytes} bytes")
}

/// The error text of a 408: the body did not arrive within `server.requestReadTimeoutMs`.
pub(crate) fn slow_body_message(timeout: std::time::Duration) -> String {
    format!(
        "Request body not received within {} ms",
        timeout.as_millis()
    )
}

/// The body text of a 404.
pub(crate) const NOT_FOUND: &str = "Not found";

/// The `Retry-After` of a 500 for a failed store and of the 503 while stopping: long enough for a
/// pool to free a connection or a load balancer to move the sender to another replica.
pub(crate) const STORAGE_RETRY_AFTER_SECONDS: u64 = 5;

/// Sets `Retry-After` to `seconds`.
pub(crate) fn retry_after(res: &mut Response, seconds: u64) {
    res.headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds));
}
