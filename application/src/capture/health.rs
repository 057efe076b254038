//! The `outbox-capture` health component. It is advisory: a capture fault shows in the readiness
//! body but never makes the instance unready, because delivery goes on through SQL.

use crate::telemetry::CaptureMetrics;
use async_trait::async_trait;
use queuebox_ports::health::{ComponentState, HealthCheck};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Status {
    Starting,
    Streaming,
    /// Not streaming while delivery works off a backlog; the owner lock is kept.
    Paused,
    Retrying(String),
    Stopped(String),
}

/// What the capture runner reports and the health registry reads.
pub struct CaptureHealth {
    status: Mutex<Status>,
    metrics: Arc<CaptureMetrics>,
}

impl CaptureHealth {
    pub(crate) fn new(metrics: Arc<CaptureMetrics>) -> Self {
        metrics.status("starting");
        Self {
            status: Mutex::new(Status::Starting),
            metrics,
        }
    }

    fn set(&self, status: Status, name: &str) {
        self.metrics.status(name);
        if let Ok(mut current) = self.status.lock() {
            *current = status;
        }
    }

    pub(crate) fn streaming(&self) {
        self.set(Status::Streaming, "streaming");
    }

    pub(crate) fn paused(&self) {
        self.set(Status::Paused, "paused");
    }

    pub(crate) fn retrying(&self, reason: String) {
        self.set(Status::Retrying(reason), "retrying");
    }

    pub(crate) fn stopped(&self, reason: String) {
        self.set(Status::Stopped(reason), "stopped");
    }
}

#[async_trait]
impl HealthCheck for CaptureHealth {
    fn name(&self) -> &str {
        "outbox-capture"
    }

    fn decides_readiness(&self) -> bool {
        false
    }

    /// `Ok` only while streaming or paused: a capture still starting has not shown it works.
    async fn check(&self) -> Result<(), String> {
        match self.state().await {
            ComponentState::Up => Ok(()),
            ComponentState::Starting => Err("capture is starting".to_owned()),
            ComponentState::Down(reason) => Err(reason),
        }
    }

    /// Starting until the first session streams (or pauses for a backlog), so a fault at the
    /// start is never first shown as `up`.
    async fn state(&self) -> ComponentState {
        let status = self
            .status
            .lock()
            .map(|s| s.clone())
            .unwrap_or(Status::Retrying("state unavailable".into()));
        match status {
            Status::Starting => ComponentState::Starting,
            Status::Streaming | Status::Paused => ComponentState::Up,
            Status::Retrying(reason) => {
                ComponentState::Down(format!("capture is retrying: {reason}"))
            }
            Status::Stopped(reason) => ComponentState::Down(format!(
                "capture stopped (delivery continues through SQL): {reason}"
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::health::HealthRegistry;
    use queuebox_ports::health::{ComponentStatus, OverallStatus, Readiness};

    #[tokio::test]
    async fn starting_is_its_own_state_and_never_makes_the_instance_unready() {
        let health = Arc::new(CaptureHealth::new(Arc::new(CaptureMetrics::default())));
        assert_eq!(health.state().await, ComponentState::Starting);
        let mut registry = HealthRegistry::default();
        registry.register(Arc::clone(&health) as Arc<dyn HealthCheck>);
        let report = registry.readiness().await;
        assert_eq!(report.status, OverallStatus::Healthy);
        let component = &report.components["outbox-capture"];
        assert_eq!(component.status, ComponentStatus::Starting);
        assert_eq!(
            serde_json::to_value(component).unwrap(),
            serde_json::json!({"status": "starting"})
        );

        health.streaming();
        let report = registry.readiness().await;
        assert_eq!(
            report.components["outbox-capture"].status,
            ComponentStatus::Up
        );
        health.paused();
        assert_eq!(health.state().await, ComponentState::Up);
        health.retrying("connection refused".into());
        let report = registry.readiness().await;
        assert_eq!(report.status, OverallStatus::Healthy, "advisory");
        assert_eq!(
            report.components["outbox-capture"].status,
            ComponentStatus::Down
        );
        health.stopped("slot missing".into());
        assert!(health.check().await.unwrap_err().contains("slot missing"));
    }
}
