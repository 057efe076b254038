//! `/health/live`, `/health/ready` and `/health`.

use crate::responses;
use queuebox_ports::health::{
    ComponentHealth, ComponentStatus, HealthReport, OverallStatus, Readiness,
};
use salvo::http::StatusCode;
use salvo::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Liveness: answers from the process alone, so a slow dependency can never fail it.
pub(crate) struct Live;

#[salvo::async_trait]
impl Handler for Live {
    async fn handle(
        &self,
        _req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        _ctrl: &mut FlowCtrl,
    ) {
        let report = HealthReport {
            status: OverallStatus::Healthy,
            components: BTreeMap::from([(
                "process".to_owned(),
                ComponentHealth {
                    status: ComponentStatus::Up,
                    error: None,
                },
            )]),
        };
        responses::json(res, StatusCode::OK, &report);
    }
}

/// Readiness: every registered component, 503 when a deciding one is down.
pub(crate) struct Ready {
    pub(crate) readiness: Arc<dyn Readiness>,
}

#[salvo::async_trait]
impl Handler for Ready {
    async fn handle(
        &self,
        _req: &mut Request,
        _depot: &mut Depot,
        res: &mut Response,
        _ctrl: &mut FlowCtrl,
    ) {
        let report = self.readiness.readiness().await;
        let status = match report.status {
            OverallStatus::Healthy => StatusCode::OK,
            OverallStatus::Unhealthy => StatusCode::SERVICE_UNAVAILABLE,
        };
        responses::json(res, status, &report);
    }
}
