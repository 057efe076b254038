//! The inbox routes: one `POST inbox.basePath + path` per HTTP source.
//!
//! The route reads the body under the cap, hands headers and bytes to the ingest port, and turns
//! the outcome into the documented status, body and headers. Everything between (credentials,
//! filter, correlation id, JSON, extraction, store) is the pipeline's job, so broker sources
//! share it.

use crate::encoding::{self, Decoded};
use crate::request_parts::header_pairs;
use crate::responses;
use queuebox_ports::ingest::{Ingest, IngestOutcome, Ingested, Received, Rejection};
use salvo::http::header::{ALLOW, HeaderName, HeaderValue, RETRY_AFTER};
use salvo::http::{Method, ParseError, ResBody, StatusCode};
use salvo::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The response header that echoes the correlation id.
const CORRELATION_ID: &str = "x-correlation-id";

/// One HTTP source's route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxRoute {
    /// The full request path: `inbox.basePath` followed by the source's `path`.
    pub path: String,
    /// The source name handed to the pipeline.
    pub source: String,
}

/// The inbox routes of the data port and the pipeline they feed.
pub struct InboxRoutes {
    /// One entry per HTTP source.
    pub routes: Vec<InboxRoute>,
    /// The ingest pipeline.
    pub ingest: Arc<dyn Ingest>,
}

/// The router of every inbox route.
///
/// Paths are compared exactly with the request path rather than given to the salvo path syntax,
/// so a source path holding `{`, `<` or `*` stays a literal path instead of becoming a pattern.
pub(crate) fn router(inbox: InboxRoutes, max_body_bytes: usize) -> Router {
    let by_path: Arc<HashMap<String, String>> = Arc::new(
        inbox
            .routes
            .into_iter()
            .map(|route| (route.path, route.source))
            .collect(),
    );
    let known = Arc::clone(&by_path);
    Router::with_path("{**rest}")
        // Every method reaches the handler, so another method than POST on a source path is a
        // 405 naming POST rather than a 404 that hides the route.
        .filter_fn(move |req, _| known.contains_key(req.uri().path()))
        .goal(InboxHandler {
            by_path,
            ingest: inbox.ingest,
            max_body_bytes,
        })
}

struct InboxHandler {
    by_path: Arc<HashMap<String, String>>,
    ingest: Arc<dyn Ingest>,
    max_body_bytes: usize,
}

#[salvo::async_trait]
impl Handler for InboxHandler {
    async fn handle(
        &self,
        req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        _ctrl: &mut FlowCtrl,
    ) {
        let Some(source) = self.by_path.get(req.uri().path()).cloned() else {
            responses::error(res, StatusCode::NOT_FOUND, responses::NOT_FOUND);
            return;
        };
        if req.method() != Method::POST {
            res.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
            responses::error(
                res,
                StatusCode::METHOD_NOT_ALLOWED,
                "Method not allowed: an inbox source accepts POST",
            );
            return;
        }
        // A declared length under the cap was let through by the body guard unread; the bytes
        // are counted here as they arrive, so a sender that lies about the length still stops
        // at the cap.
        let body = match req.payload_with_max_size(self.max_body_bytes).await {
            Ok(bytes) => bytes.to_vec(),
            Err(ParseError::PayloadTooLarge) => {
                responses::error(
                    res,
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &responses::too_large_message(self.max_body_bytes),
                );
                return;
            }
            Err(error) => {
                // The connection broke mid-body: whatever arrived is not a JSON document.
                tracing::info!(%source, %error, "inbox request body could not be read");
                responses::error(res, StatusCode::BAD_REQUEST, "Invalid JSON");
                return;
            }
        };
        let mut headers = header_pairs(req);
        let codings = encoding::codings(&headers);
        let body = if codings.is_empty() {
            body
        } else {
            match encoding::decode(&codings, body, self.max_body_bytes) {
                Decoded::Body(decoded) => {
                    // The stored row holds the decoded body: a relayed copy must not claim a
                    // coding its body no longer has.
                    headers
                        .retain(|(name, _)| !name.eq_ignore_ascii_case(encoding::CONTENT_ENCODING));
                    decoded
                }
                Decoded::TooLarge => {
                    responses::error(
                        res,
                        StatusCode::PAYLOAD_TOO_LARGE,
                        &responses::too_large_message(self.max_body_bytes),
                    );
                    return;
                }
                Decoded::Unsupported(coding) => {
                    responses::error(
                        res,
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        &format!(
                            "Unsupported Content-Encoding {coding:?}: the inbox decodes gzip and deflate"
                        ),
                    );
                    return;
                }
                Decoded::Corrupt { coding, cause } => {
                    responses::error(
                        res,
                        StatusCode::BAD_REQUEST,
                        &format!("Invalid {coding} body: {cause}"),
                    );
                    return;
                }
            }
        };
        let ingested = self
            .ingest
            .ingest(&source, Received::new(headers, body))
            .await;
        answer(res, ingested);
    }
}

/// Writes the documented answer of one outcome.
fn answer(res: &mut Response, ingested: Ingested) {
    if let Some(id) = &ingested.correlation_id
        && let Ok(value) = HeaderValue::from_str(id)
    {
        res.headers_mut()
            .insert(HeaderName::from_static(CORRELATION_ID), value);
    }
    match ingested.outcome {
        // An HTTP source never stores a dead row (its rejections answer 422), but a dead row is
        // durable all the same, so the answer would be the one of a stored message.
        IngestOutcome::Stored { id } | IngestOutcome::StoredDead { id, .. } => responses::json(
            res,
            StatusCode::ACCEPTED,
            &serde_json::json!({ "messageId": id.to_string() }),
        ),
        IngestOutcome::Filtered => responses::json(
            res,
            StatusCode::ACCEPTED,
            &serde_json::json!({ "status": "filtered" }),
        ),
        IngestOutcome::Duplicate => responses::json(
            res,
            StatusCode::OK,
            &serde_json::json!({ "status": "duplicate" }),
        ),
        IngestOutcome::Unauthorized { reason } => {
            responses::error(res, StatusCode::UNAUTHORIZED, &reason);
        }
        IngestOutcome::RateLimited { retry_after } => {
            res.status_code(StatusCode::TOO_MANY_REQUESTS);
            // The documented answer has no body; an explicit empty one keeps salvo from filling
            // in its HTML error page.
            res.body(ResBody::Once(Default::default()));
            res.headers_mut().insert(
                RETRY_AFTER,
                HeaderValue::from(retry_after_seconds(retry_after)),
            );
        }
        IngestOutcome::Rejected(rejection) => {
            let status = match rejection {
                Rejection::InvalidJson
                | Rejection::TooDeep { .. }
                | Rejection::NumberOutOfRange
                | Rejection::KeyNotFound { .. } => StatusCode::BAD_REQUEST,
                Rejection::TransformFailed { .. } | Rejection::Unstorable { .. } => {
                    StatusCode::UNPROCESSABLE_ENTITY
                }
                Rejection::StorageFailed => {
                    responses::retry_after(res, responses::STORAGE_RETRY_AFTER_SECONDS);
                    StatusCode::INTERNAL_SERVER_ERROR
                }
            };
            responses::error(res, status, &rejection.to_string());
        }
        IngestOutcome::UnknownSource => {
            responses::retry_after(res, responses::STORAGE_RETRY_AFTER_SECONDS);
            responses::error(res, StatusCode::INTERNAL_SERVER_ERROR, "Storage failed");
        }
    }
}

/// `Retry-After` in whole seconds, rounded up so a sender that waits exactly that long finds a
/// token, and at least 1.
fn retry_after_seconds(wait: Duration) -> u64 {
    let whole = wait.as_secs();
    let seconds = if wait.subsec_nanos() > 0 {
        whole + 1
    } else {
        whole
    };
    seconds.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_secs(30)), 30);
        assert_eq!(retry_after_seconds(Duration::from_millis(29_001)), 30);
    }
}
