//! The health component of a background worker (the outbox dispatcher, the inbox relay, the retention
//! cleanup): down while its work fails and once it has stopped. A worker that has not finished its first claim is up: it runs
//! and has seen no fault, and the `database` component already answers for the database at start;
//! reporting it down would turn readiness 503 for the first moments of every start.

use async_trait::async_trait;
use queuebox_ports::health::HealthCheck;
use std::sync::Mutex;

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Starting,
    Running,
    Failing(String),
    Stopped,
}

/// Shared between a worker loop (which reports) and the health registry (which asks).
#[derive(Debug)]
pub struct WorkerHealth {
    name: &'static str,
    /// What failed, leading the reason of a failure: `claims fail` for a claiming worker.
    failing: &'static str,
    state: Mutex<State>,
}

impl WorkerHealth {
    /// A component named `name` (for example `outbox-poller`), up until told otherwise.
    pub fn new(name: &'static str) -> Self {
        Self::with_failure(name, "claims fail")
    }

    /// A component named `name` whose failures read `<failing>: <reason>`.
    pub fn with_failure(name: &'static str, failing: &'static str) -> Self {
        Self {
            name,
            failing,
            state: Mutex::new(State::Starting),
        }
    }

    fn set(&self, state: State) {
        if let Ok(mut current) = self.state.lock() {
            *current = state;
        }
    }

    pub(crate) fn claim_succeeded(&self) {
        self.set(State::Running);
    }

    pub(crate) fn claim_failed(&self, reason: String) {
        self.set(State::Failing(reason));
    }

    /// A periodic worker (the retention cleanup) finished a run without error.
    pub(crate) fn run_succeeded(&self) {
        self.set(State::Running);
    }

    /// A periodic worker's run failed.
    pub(crate) fn run_failed(&self, reason: String) {
        self.set(State::Failing(reason));
    }

    pub(crate) fn stopped(&self) {
        self.set(State::Stopped);
    }
}

#[async_trait]
impl HealthCheck for WorkerHealth {
    fn name(&self) -> &str {
        self.name
    }

    async fn check(&self) -> Result<(), String> {
        let state = self
            .state
            .lock()
            .map(|s| s.clone())
            .unwrap_or(State::Failing("state unavailable".into()));
        match state {
            State::Running | State::Starting => Ok(()),
            State::Failing(reason) => Err(format!("{}: {reason}", self.failing)),
            State::Stopped => Err(format!("{} has stopped", self.name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn up_from_the_start_down_on_failure_up_again_down_when_stopped() {
        let health = WorkerHealth::new("outbox-poller");
        assert_eq!(health.name(), "outbox-poller");
        assert!(health.check().await.is_ok());
        health.claim_failed("connection refused".into());
        assert_eq!(
            health.check().await,
            Err("claims fail: connection refused".into())
        );
        health.claim_succeeded();
        assert!(health.check().await.is_ok());
        health.stopped();
        assert_eq!(
            health.check().await,
            Err("outbox-poller has stopped".into())
        );
    }
}
