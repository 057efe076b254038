//! Rules that run before every data-port route: refuse while stopping, cap the body.

use crate::request_parts::declared_length;
use crate::responses;
use salvo::http::{ParseError, StatusCode};
use salvo::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// Caps the request body at `max_bytes`: a declared `Content-Length` over the cap is refused before
/// reading anything; an undeclared (chunked) body is read under the cap, counting bytes as they
/// arrive, and kept in the request for the route that needs it.
pub(crate) struct BodyLimit {
    pub(crate) max_bytes: usize,
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
        let too_large = match declared_length(req) {
            Some(length) => length > self.max_bytes as u64,
            None => matches!(
                req.payload_with_max_size(self.max_bytes).await,
                Err(ParseError::PayloadTooLarge)
            ),
        };
        if too_large {
            responses::error(
                res,
                StatusCode::PAYLOAD_TOO_LARGE,
                &responses::too_large_message(self.max_bytes),
            );
            ctrl.skip_rest();
        }
    }
}
