//! Rules that run before every data-port route: refuse while stopping, cap the body and the time
//! it takes to arrive.

use crate::request_parts::declared_length;
use crate::responses;
use salvo::http::{ParseError, StatusCode};
use salvo::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Answers 503 once shutdown has begun, so a sender retries elsewhere instead of losing a message.
pub(crate) struct RefuseWhileStopping {
    pub(crate) stopping: Arc<AtomicBool>,
}

#[salvo::async_trait]
impl Handler for RefuseWhileStopping {
    async fn handle(
        &self,
        _req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        ctrl: &mut FlowCtrl,
    ) {
        if self.stopping.load(Ordering::Acquire) {
            responses::retry_after(res, responses::STORAGE_RETRY_AFTER_SECONDS);
            responses::error(
                res,
                StatusCode::SERVICE_UNAVAILABLE,
                "QueueBox is shutting down",
            );
            ctrl.skip_rest();
        }
    }
}

/// Caps the request body at `max_bytes` and bounds the time it may take to arrive: a declared
/// `Content-Length` over the cap is refused before reading anything; otherwise the body is read
/// under the cap, counting bytes as they arrive, and kept in the request for the route that needs
/// it. A body that has not arrived whole within `read_timeout` is answered 408 and the connection
/// is closed, so a client that trickles bytes (slowloris) cannot hold a connection and a handler
/// for long.
pub(crate) struct BodyLimit {
    pub(crate) max_bytes: usize,
    pub(crate) read_timeout: Duration,
}

#[salvo::async_trait]
impl Handler for BodyLimit {
    async fn handle(
        &self,
        req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        ctrl: &mut FlowCtrl,
    ) {
        let declared_too_large =
            declared_length(req).is_some_and(|length| length > self.max_bytes as u64);
        let refusal = if declared_too_large {
            Some((
                StatusCode::PAYLOAD_TOO_LARGE,
                responses::too_large_message(self.max_bytes),
            ))
        } else {
            match tokio::time::timeout(self.read_timeout, req.payload_with_max_size(self.max_bytes))
                .await
            {
                Ok(Err(ParseError::PayloadTooLarge)) => Some((
                    StatusCode::PAYLOAD_TOO_LARGE,
                    responses::too_large_message(self.max_bytes),
                )),
                // A body that broke off is reported by the route that reads it.
                Ok(_) => None,
                Err(_elapsed) => Some((
                    StatusCode::REQUEST_TIMEOUT,
                    responses::slow_body_message(self.read_timeout),
                )),
            }
        };
        if let Some((status, message)) = refusal {
            if status == StatusCode::REQUEST_TIMEOUT {
                // The rest of the body may never come: do not wait for it to reuse the connection.
                res.headers_mut().insert(
                    salvo::http::header::CONNECTION,
                    salvo::http::HeaderValue::from_static("close"),
                );
            }
            responses::error(res, status, &message);
            ctrl.skip_rest();
        }
    }
}
