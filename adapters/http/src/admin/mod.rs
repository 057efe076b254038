//! The admin routes: `POST /admin/replay` (and `POST /admin/transform/test`), served only when
//! `admin.enabled`, on the management port when there is one.
//!
//! Every admin request goes through the same gate before its route sees it: the body is read
//! under `admin.maxPayloadBytes` (413), then the credentials of `admin.auth` are checked against
//! the headers and the raw bytes (401), so an HMAC signature covers exactly what was received. Each
//! route then reads only the fields it knows, so an unknown field is ignored.

mod gate;
mod replay;
mod request;

use gate::Gate;
use queuebox_domain::inbox::auth::CredentialCheck;
use queuebox_ports::replay::Replay;
use salvo::prelude::*;
use std::sync::Arc;

/// What the admin routes need.
pub struct AdminRoutes {
    /// The check of `admin.auth`; `None` only when `admin.insecure` allows the routes without one.
    pub auth: Option<CredentialCheck>,
    /// `admin.maxPayloadBytes`.
    pub max_payload_bytes: usize,
    /// The replay use case.
    pub replay: Arc<dyn Replay>,
}

/// The router of the admin routes.
pub(crate) fn router(admin: AdminRoutes) -> Router {
    let gate = Arc::new(Gate {
        auth: admin.auth,
        max_payload_bytes: admin.max_payload_bytes,
    });
    Router::with_path("admin").push(Router::with_path("replay").post(replay::ReplayRoute {
        gate,
        replay: admin.replay,
    }))
}
