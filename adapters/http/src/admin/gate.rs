//! The checks every admin request passes before its route runs: the body cap, then the
//! credentials.

use crate::request_parts::{declared_length, header_pairs};
use crate::responses;
use queuebox_domain::inbox::auth::CredentialCheck;
use salvo::http::{ParseError, StatusCode};
use salvo::prelude::*;
use std::time::{SystemTime, UNIX_EPOCH};

/// How a route writes a failure: the replay route answers `{"error": ...}`, the transform test
/// `{"success": false, "error": ...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `{"error": message}`.
    Plain,
    /// `{"success": false, "error": message}`.
    Flagged,
}

impl Shape {
    /// Writes `message` as this shape's error body with `status`.
    pub(crate) fn fail(self, res: &mut Response, status: StatusCode, message: &str) {
        match self {
            Shape::Plain => responses::error(res, status, message),
            Shape::Flagged => responses::json(
                res,
                status,
                &serde_json::json!({ "success": false, "error": message }),
            ),
        }
    }
}

/// The body cap and the credential check shared by the admin routes.
pub(crate) struct Gate {
    pub(crate) auth: Option<CredentialCheck>,
    pub(crate) max_payload_bytes: usize,
}

impl Gate {
    /// The body of an admin request that is under the cap and carries valid credentials; `None`
    /// when the answer (413, 400 or 401 in `shape`) is already written.
    pub(crate) async fn admit(
        &self,
        req: &mut Request,
        res: &mut Response,
        shape: Shape,
    ) -> Option<Vec<u8>> {
        let too_large = || responses::too_large_message(self.max_payload_bytes);
        if declared_length(req).is_some_and(|length| length > self.max_payload_bytes as u64) {
            shape.fail(res, StatusCode::PAYLOAD_TOO_LARGE, &too_large());
            return None;
        }
        // Counted as the bytes arrive, so a chunked body or a lying length stops at the cap too.
        // On the data port the body guard may already have read the body under the larger inbox
        // cap, and salvo then hands back those bytes whatever cap is asked here: so the length is
        // checked again.
        let body = match req.payload_with_max_size(self.max_payload_bytes).await {
            Ok(bytes) if bytes.len() <= self.max_payload_bytes => bytes.to_vec(),
            Ok(_) | Err(ParseError::PayloadTooLarge) => {
                shape.fail(res, StatusCode::PAYLOAD_TOO_LARGE, &too_large());
                return None;
            }
            Err(error) => {
                shape.fail(
                    res,
                    StatusCode::BAD_REQUEST,
                    &format!("Invalid request: the body could not be read: {error}"),
                );
                return None;
            }
        };
        if let Some(check) = &self.auth
            && let Err(failure) = check.verify(&header_pairs(req), &body, now_unix_ms())
        {
            tracing::warn!(path = %req.uri().path(), reason = %failure, "admin request refused");
            shape.fail(res, StatusCode::UNAUTHORIZED, &failure.to_string());
            return None;
        }
        Some(body)
    }
}

/// The wall clock in Unix milliseconds, for the HMAC timestamp guard.
fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
