//! The `inbox-relay` health component: down while the relay cannot reach the database, and once it
//! has stopped. A relay that has not finished its first claim yet is up: it is running and has seen
//! no fault, and the `database` component already answers for the database at start. Reporting it
//! down would turn readiness 503 for the first moments of every start.

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

/// Shared between the relay loop (which reports) and the health registry (which asks).
#[derive(Debug)]
pub struct RelayHealth {
    state: Mutex<State>,
}

impl Default for RelayHealth {
    fn default() -> Self {
        Self {
            state: Mutex::new(State::Starting),
        }
    }
}

impl RelayHealth {
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
impl HealthCheck for RelayHealth {
    fn name(&self) -> &str {
        "inbox-relay"
    }

    async fn check(&self) -> Result<(), String> {
        let state = self
            .state
            .lock()
            .map(|s| s.clone())
            .unwrap_or(State::Failing("state unavailable".into()));
        match state {
            State::Running | State::Starting => Ok(()),
            State::Failing(reason) => Err(format!("claims fail: {reason}")),
            State::Stopped => Err("the relay has stopped".into()),
        }
    }
}
