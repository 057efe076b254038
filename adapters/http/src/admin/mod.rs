//! The admin routes: `POST /admin/transform/test` and `POST /admin/replay`, served only when
//! `admin.enabled`, on the management port when there is one.
//!
//! Every admin request goes through the same gate before its route sees it: the body is read
//! under `admin.maxPayloadBytes` (413), then the credentials of `admin.auth` are checked against
//! the headers and the raw bytes (401), so an HMAC signature covers exactly what was received. Each
//! route then reads only the fields it knows, so an unknown field is ignored.

mod gate;
mod replay;
mod request;
mod transform_test;

use crate::console::{self, Console, ConsoleRoutes};
use crate::metrics::MetricsRender;
use gate::Gate;
use queuebox_domain::inbox::auth::CredentialCheck;
use queuebox_ports::health::Readiness;
use queuebox_ports::replay::Replay;
use queuebox_ports::transform::Transformer;
use salvo::prelude::*;
use std::sync::Arc;
use std::time::Duration;

/// What the admin routes need.
pub struct AdminRoutes {
    /// The check of `admin.auth`; `None` only when `admin.insecure` allows the routes without one.
    pub auth: Option<CredentialCheck>,
    /// `admin.maxPayloadBytes`.
    pub max_payload_bytes: usize,
    /// The replay use case.
    pub replay: Arc<dyn Replay>,
    /// The JSONata implementation the transform test compiles the caller's expression with.
    pub transformer: Arc<dyn Transformer>,
    /// `admin.maxTransformTimeoutMs`: the largest timeout a caller of the transform test gets.
    pub max_transform_timeout: Duration,
    /// The operator console under `/console`, when `admin.console.enabled`.
    pub console: Option<ConsoleRoutes>,
}

/// The router of the admin routes, and of the console when it is on.
pub(crate) fn router(
    admin: AdminRoutes,
    readiness: &Arc<dyn Readiness>,
    metrics: &MetricsRender,
) -> Router {
    let console = admin.console.map(|routes| {
        console::router(Console {
            routes,
            auth: admin.auth.clone(),
            replay: Arc::clone(&admin.replay),
            readiness: Arc::clone(readiness),
            metrics: Arc::clone(metrics),
            sessions: Default::default(),
            failures: Default::default(),
        })
    });
    let gate = Arc::new(Gate {
        auth: admin.auth,
        max_payload_bytes: admin.max_payload_bytes,
    });
    let admin_router = Router::with_path("admin")
        .push(
            Router::with_path("transform/test").post(transform_test::TransformTestRoute {
                gate: Arc::clone(&gate),
                transformer: admin.transformer,
                max_timeout: admin.max_transform_timeout,
            }),
        )
        .push(Router::with_path("replay").post(replay::ReplayRoute {
            gate,
            replay: admin.replay,
        }));
    match console {
        Some(console) => Router::new().push(admin_router).push(console),
        None => admin_router,
    }
}
