//! The `outbox-capture` health component. It is advisory: a capture fault shows in the readiness
//! body but never makes the instance unready, because delivery goes on through SQL.

use crate::telemetry::CaptureMetrics;
use async_trait::async_trait;
use queuebox_ports::health::HealthCheck;
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

    async fn check(&self) -> Result<(), String> {
        let status = self
            .status
            .lock()
            .map(|s| s.clone())
            .unwrap_or(Status::Retrying("state unavailable".into()));
        match status {
            Status::Starting | Status::Streaming | Status::Paused => Ok(()),
            Status::Retrying(reason) => Err(format!("capture is retrying: {reason}")),
            Status::Stopped(reason) => Err(format!(
                "capture stopped (delivery continues through SQL): {reason}"
            )),
        }
    }
}
