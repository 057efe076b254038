//! The health registry: every component check, run together, each bounded in time.

use async_trait::async_trait;
use queuebox_ports::health::{
    ComponentHealth, ComponentState, ComponentStatus, HealthCheck, HealthReport, OverallStatus,
    Readiness,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The bound of one component check: a check slower than this counts as down, so a slow database
/// gives a 503 instead of a probe time-out.
pub const CHECK_BOUND: Duration = Duration::from_secs(3);

/// Holds the registered components and answers readiness.
pub struct HealthRegistry {
    checks: Vec<Arc<dyn HealthCheck>>,
    bound: Duration,
}

impl Default for HealthRegistry {
    fn default() -> Self {
        Self::new(CHECK_BOUND)
    }
}

impl HealthRegistry {
    /// An empty registry whose checks are each bounded by `bound`.
    pub fn new(bound: Duration) -> Self {
        Self {
            checks: Vec::new(),
            bound,
        }
    }

    /// Adds a component. Components appear in the report by name.
    pub fn register(&mut self, check: Arc<dyn HealthCheck>) {
        self.checks.push(check);
    }

    /// The registered component names, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.checks.iter().map(|c| c.name().to_owned()).collect()
    }
}

#[async_trait]
impl Readiness for HealthRegistry {
    async fn readiness(&self) -> HealthReport {
        let mut running = tokio::task::JoinSet::new();
        for (index, check) in self.checks.iter().enumerate() {
            let check = Arc::clone(check);
            let bound = self.bound;
            running.spawn(async move {
                let outcome = match tokio::time::timeout(bound, check.state()).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        ComponentState::Down(format!("no answer within {} ms", bound.as_millis()))
                    }
                };
                (index, outcome)
            });
        }
        let mut outcomes: Vec<Option<ComponentState>> = vec![None; self.checks.len()];
        while let Some(joined) = running.join_next().await {
            match joined {
                Ok((index, outcome)) => {
                    if let Some(slot) = outcomes.get_mut(index) {
                        *slot = Some(outcome);
                    }
                }
                Err(error) => tracing::error!(%error, "a health check task failed"),
            }
        }

        let mut status = OverallStatus::Healthy;
        let mut components = BTreeMap::new();
        for (check, outcome) in self.checks.iter().zip(outcomes) {
            // A check whose task died counts as down, like one that timed out.
            let outcome = outcome
                .unwrap_or_else(|| ComponentState::Down("the check did not complete".to_owned()));
            let health = match outcome {
                ComponentState::Up => ComponentHealth {
                    status: ComponentStatus::Up,
                    error: None,
                },
                ComponentState::Starting => {
                    // Only `up` makes a deciding component ready; an advisory one just shows it.
                    if check.decides_readiness() {
                        status = OverallStatus::Unhealthy;
                    }
                    ComponentHealth {
                        status: ComponentStatus::Starting,
                        error: None,
                    }
                }
                ComponentState::Down(reason) => {
                    if check.decides_readiness() {
                        status = OverallStatus::Unhealthy;
                    }
                    ComponentHealth {
                        status: ComponentStatus::Down,
                        error: Some(reason),
                    }
                }
            };
            components.insert(check.name().to_owned(), health);
        }
        HealthReport { status, components }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    struct Fixed {
        name: &'static str,
        up: bool,
        decides: bool,
        delay: Duration,
    }

    #[async_trait]
    impl HealthCheck for Fixed {
        fn name(&self) -> &str {
            self.name
        }
        fn decides_readiness(&self) -> bool {
            self.decides
        }
        async fn check(&self) -> Result<(), String> {
            tokio::time::sleep(self.delay).await;
            if self.up {
                Ok(())
            } else {
                Err("broken".into())
            }
        }
    }

    fn fixed(name: &'static str, up: bool, decides: bool, delay_ms: u64) -> Arc<dyn HealthCheck> {
        Arc::new(Fixed {
            name,
            up,
            decides,
            delay: Duration::from_millis(delay_ms),
        })
    }

    #[tokio::test]
    async fn all_up_is_healthy() {
        let mut registry = HealthRegistry::default();
        registry.register(fixed("database", true, true, 0));
        registry.register(fixed("outbox-poller", true, true, 0));
        let report = registry.readiness().await;
        assert_eq!(report.status, OverallStatus::Healthy);
        assert_eq!(report.components.len(), 2);
        assert_eq!(report.components["database"].status, ComponentStatus::Up);
    }

    #[tokio::test]
    async fn a_deciding_component_down_is_unhealthy() {
        let mut registry = HealthRegistry::default();
        registry.register(fixed("database", false, true, 0));
        let report = registry.readiness().await;
        assert_eq!(report.status, OverallStatus::Unhealthy);
        assert_eq!(
            report.components["database"].error.as_deref(),
            Some("broken")
        );
    }

    #[tokio::test]
    async fn an_advisory_component_down_stays_healthy() {
        let mut registry = HealthRegistry::default();
        registry.register(fixed("database", true, true, 0));
        registry.register(fixed("outbox-capture", false, false, 0));
        let report = registry.readiness().await;
        assert_eq!(report.status, OverallStatus::Healthy);
        assert_eq!(
            report.components["outbox-capture"].status,
            ComponentStatus::Down
        );
    }

    /// A component that reports it is still starting.
    struct Starting {
        name: &'static str,
        decides: bool,
    }

    #[async_trait]
    impl HealthCheck for Starting {
        fn name(&self) -> &str {
            self.name
        }
        fn decides_readiness(&self) -> bool {
            self.decides
        }
        async fn check(&self) -> Result<(), String> {
            Err("starting".into())
        }
        async fn state(&self) -> ComponentState {
            ComponentState::Starting
        }
    }

    #[tokio::test]
    async fn starting_shows_as_starting_and_only_a_deciding_one_holds_readiness() {
        let mut registry = HealthRegistry::default();
        registry.register(fixed("database", true, true, 0));
        registry.register(Arc::new(Starting {
            name: "outbox-capture",
            decides: false,
        }));
        let report = registry.readiness().await;
        assert_eq!(report.status, OverallStatus::Healthy);
        let capture = &report.components["outbox-capture"];
        assert_eq!(capture.status, ComponentStatus::Starting);
        assert_eq!(capture.error, None);
        assert_eq!(
            serde_json::to_string(capture).expect("serialise"),
            r#"{"status":"starting"}"#
        );

        registry.register(Arc::new(Starting {
            name: "other",
            decides: true,
        }));
        assert_eq!(registry.readiness().await.status, OverallStatus::Unhealthy);
    }

    #[tokio::test]
    async fn a_slow_check_counts_as_down_at_the_bound_and_checks_run_together() {
        let mut registry = HealthRegistry::new(Duration::from_millis(200));
        registry.register(fixed("database", true, true, 5_000));
        registry.register(fixed("outbox-poller", true, true, 150));
        let started = Instant::now();
        let report = registry.readiness().await;
        let took = started.elapsed();
        assert_eq!(report.status, OverallStatus::Unhealthy);
        assert_eq!(report.components["database"].status, ComponentStatus::Down);
        assert_eq!(
            report.components["outbox-poller"].status,
            ComponentStatus::Up
        );
        assert!(took < Duration::from_millis(1_000), "took {took:?}");
    }

    #[test]
    fn the_report_serialises_as_documented() {
        let report = HealthReport {
            status: OverallStatus::Healthy,
            components: BTreeMap::from([(
                "database".to_owned(),
                ComponentHealth {
                    status: ComponentStatus::Up,
                    error: None,
                },
            )]),
        };
        let text = serde_json::to_string(&report).expect("serialise");
        assert_eq!(
            text,
            r#"{"status":"healthy","components":{"database":{"status":"up"}}}"#
        );
    }
}
