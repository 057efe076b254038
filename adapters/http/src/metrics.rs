//! `GET /metrics`: the Prometheus text exposition of whatever the installed recorder holds.

use salvo::http::header::{CONTENT_TYPE, HeaderValue};
use salvo::prelude::*;
use std::sync::Arc;

/// Produces the Prometheus text body. The binary wires it to the installed recorder; a scrape
/// never runs a database query.
pub type MetricsRender = Arc<dyn Fn() -> String + Send + Sync>;

/// The content type of the Prometheus text format, version 0.0.4.
const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub(crate) struct Metrics {
    pub(crate) render: MetricsRender,
}

#[salvo::async_trait]
impl Handler for Metrics {
    async fn handle(
        &self,
        _req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        _ctrl: &mut FlowCtrl,
    ) {
        let body = (self.render)();
        res.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static(PROMETHEUS_CONTENT_TYPE),
        );
        let _ = res.write_body(body);
    }
}
