//! Health: checks that adapters and workers provide, and the readiness report inbound adapters serve.

use async_trait::async_trait;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The state of one component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ComponentStatus {
    /// Working.
    Up,
    /// Not working yet and not failing: still getting ready after the start. A component that
    /// decides readiness keeps the instance unready meanwhile, as only `up` counts.
    Starting,
    /// Failing, or did not answer within the check bound.
    Down,
}

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentState {
    /// Working.
    Up,
    /// Still getting ready; no failure seen yet.
    Starting,
    /// Failing, with a short reason.
    Down(String),
}

impl From<Result<(), String>> for ComponentState {
    fn from(outcome: Result<(), String>) -> Self {
        match outcome {
            Ok(()) => Self::Up,
            Err(reason) => Self::Down(reason),
        }
    }
}

/// One component's line in a health report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentHealth {
    /// Up, starting or down.
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
    /// The state the report shows. The default reads [`HealthCheck::check`] (`Ok` is up); a
    /// component with a starting phase overrides it to report [`ComponentState::Starting`].
    async fn state(&self) -> ComponentState {
        self.check().await.into()
    }
}

/// A component whose owner sets its state (up, or down with a reason) as things happen, and whose
/// check reads the last state at once: the component of a broker source (`rabbitmq.<source>`,
/// `kafka.<source>`, `nats.<source>`). Clones share the state, so the source keeps one and the
/// health registry another.
#[derive(Debug, Clone)]
pub struct SharedComponent {
    name: Arc<str>,
    state: Arc<Mutex<Result<(), String>>>,
}

impl SharedComponent {
    /// A component named `name`, down with `reason` until its owner marks it up.
    pub fn down_until_up(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            name: Arc::from(name.into()),
            state: Arc::new(Mutex::new(Err(reason.into()))),
        }
    }

    /// Marks the component up.
    pub fn up(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = Ok(());
    }

    /// Marks the component down with `reason`, which the caller has already redacted.
    pub fn down(&self, reason: impl Into<String>) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = Err(reason.into());
    }

    /// The current state, as [`HealthCheck::check`] reports it.
    pub fn state(&self) -> Result<(), String> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl HealthCheck for SharedComponent {
    fn name(&self) -> &str {
        &self.name
    }

    async fn check(&self) -> Result<(), String> {
        self.state()
    }
}

/// What the HTTP health routes call (implemented by the application's health registry).
#[async_trait]
pub trait Readiness: Send + Sync {
    /// Runs every check and builds the readiness report.
    async fn readiness(&self) -> HealthReport;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_component_reports_what_its_owner_last_set() {
        let health = SharedComponent::down_until_up("kafka.orders", "not checked yet");
        assert_eq!(health.name(), "kafka.orders");
        assert!(health.decides_readiness());
        assert_eq!(health.state(), Err("not checked yet".to_owned()));
        let shared = health.clone();
        shared.up();
        assert_eq!(health.state(), Ok(()));
        shared.down("topic `x` does not exist");
        assert_eq!(health.state(), Err("topic `x` does not exist".to_owned()));
    }
}
