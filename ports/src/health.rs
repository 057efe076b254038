//! Health: checks that adapters and workers provide, and the readiness report inbound adapters serve.

use async_trait::async_trait;
use serde::Serialize;
use std::collections::BTreeMap;

/// The state of one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ComponentStatus {
    /// Working.
    Up,
    /// Failing, or did not answer within the check bound.
    Down,
}

/// One component's line in a health report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentHealth {
    /// Up or down.
    pub status: ComponentStatus,
    /// Why the component is down; never holds a credential.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The overall state of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OverallStatus {
    /// Every deciding component is up.
    Healthy,
    /// At least one deciding component is down.
    Unhealthy,
}

/// The body of `/health/ready`, `/health` and `/health/live`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthReport {
    /// Healthy or unhealthy.
    pub status: OverallStatus,
    /// Every component by name, in name order.
    pub components: BTreeMap<String, ComponentHealth>,
}

/// A component that can report whether it works (the database, a worker, a broker consumer).
///
/// An adapter MUST answer quickly and MUST NOT put a credential into the error text. The caller
/// bounds each check in time and counts a check that does not answer as down.
#[async_trait]
pub trait HealthCheck: Send + Sync {
    /// The component name shown in the report, for example `database` or `outbox-poller`.
    fn name(&self) -> &str;
    /// Whether a failure of this component makes the instance not ready.
    fn decides_readiness(&self) -> bool {
        true
    }
    /// `Ok` when the component works, otherwise a short reason.
    async fn check(&self) -> Result<(), String>;
}

/// What the HTTP health routes call (implemented by the application's health registry).
#[async_trait]
pub trait Readiness: Send + Sync {
    /// Runs every check and builds the readiness report.
    async fn readiness(&self) -> HealthReport;
}
