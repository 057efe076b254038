//! The health component of a NATS source: `nats.<source name>`.

use async_trait::async_trait;
use queuebox_ports::health::HealthCheck;
use std::sync::{Arc, Mutex, PoisonError};

/// The health component `nats.<source name>` of one NATS source.
///
/// Up while the source consumes its stream; down, with a reason, before the first consumer is
/// set up, while the source is disconnected or reconnecting, while its stream is missing (the
/// reason names the stream), and after it stopped. The reason never holds a server URL or a
/// password. A check reads the last known state and answers at once.
///
/// Clones share the state; get one from [`NatsSource::health`](crate::NatsSource::health).
#[derive(Debug, Clone)]
pub struct NatsSourceHealth {
    name: Arc<str>,
    state: Arc<Mutex<Result<(), String>>>,
}

impl NatsSourceHealth {
    /// A component for source `source`, down until the consumer is set up.
    pub(crate) fn new(source: &str) -> Self {
        Self {
            name: Arc::from(format!("nats.{source}")),
            state: Arc::new(Mutex::new(Err("not consuming yet".to_owned()))),
        }
    }

    /// Marks the component up.
    pub(crate) fn up(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = Ok(());
    }

    /// Marks the component down with `reason` (already masked).
    pub(crate) fn down(&self, reason: impl Into<String>) {
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
impl HealthCheck for NatsSourceHealth {
    fn name(&self) -> &str {
        &self.name
    }

    async fn check(&self) -> Result<(), String> {
        self.state()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_component_is_named_after_the_source_and_follows_the_state() {
        let health = NatsSourceHealth::new("orders-stream");
        assert_eq!(health.name(), "nats.orders-stream");
        assert!(health.decides_readiness());
        assert!(health.check().await.is_err());
        let shared = health.clone();
        shared.up();
        assert_eq!(health.check().await, Ok(()));
        shared.down("stream `x` does not exist");
        assert_eq!(
            health.check().await,
            Err("stream `x` does not exist".to_owned())
        );
    }
}
