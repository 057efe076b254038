//! Small helpers that write the JSON bodies every route shares.

use salvo::http::StatusCode;
use salvo::http::header::{CONTENT_TYPE, HeaderValue};
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
