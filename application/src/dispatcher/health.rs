//! The `outbox-poller` health component: down while the dispatcher cannot reach the database, and
//! once it has stopped.

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

/// Shared between the dispatcher loop (which reports) and the health registry (which asks).
#[derive(Debug)]
pub struct PollerHealth {
    state: Mutex<State>,
}

impl Default for PollerHealth {
    fn default() -> Self {
        Self {
            state: Mutex::new(State::Starting),
        }
    }
}

impl PollerHealth {
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

    pub(crate) fn stopped(&self) {
        self.set(State::Stopped);
    }
}

#[async_trait]
impl HealthCheck for PollerHealth {
    fn name(&self) -> &str {
        "outbox-poller"
    }

    async fn check(&self) -> Result<(), String> {
        let state = self
            .state
            .lock()
            .map(|s| s.clone())
            .unwrap_or(State::Failing("state unavailable".into()));
        match state {
            // Not failed yet is up: the component goes down only when claims fail or it stopped, so a
            // fresh start is ready without waiting for the first claim.
            State::Running | State::Starting => Ok(()),
            State::Failing(reason) => Err(format!("claims fail: {reason}")),
            State::Stopped => Err("the poller has stopped".into()),
        }
    }
}
